// `imgapi backup <dir>` and `imgapi restore <dir>`.
//
// A backup is one instant of the service, taken while it runs and accepts writes: the SQLite
// database copied by SQLite's online backup API, and the objects that copy's rows refer to —
// copied into the backup with local storage, listed with their SHA-256 with S3 storage (the
// objects stay in the bucket). manifest.json, written last, holds the counts of every table,
// the database file's checksum and every object's. Objects never change once a row refers to
// them, so copying them after the snapshot is consistent; one that went missing meanwhile (its
// file deleted after the snapshot) makes the backup start over from a new snapshot, reusing
// the objects it already copied.
//
// PostgreSQL is backed up with pg_dump (docs/operations.md, "Backups and upgrades"): `backup` refuses it.
//
// `imgapi restore` (src/ops/restore.ts) reads this format and trusts none of it.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.js';
import { openDatabase } from '../db/database.js';
import { backupSqliteFile, countAllRows, type TableName } from '../db/dump.js';
import { schemaState } from '../db/migrations.js';
import { LocalStorage } from '../storage/local.js';
import { copyObject, eachLimited, hashFile, hashObject, OpsError, openStorage, referencedObjects, type ObjectEntry } from './objects.js';

export const MANIFEST = 'manifest.json';
export const DATABASE_FILE = 'imgapi.db';
/** Where a backup keeps its objects (local storage); restore reads them from here, whatever the manifest says. */
export const OBJECTS_DIR = 'objects';
export const SIGNING_KEY = 'upload-signing.key';
/** Snapshots taken before giving up on objects that keep disappearing. */
const ROUNDS = 3;

export interface BackupManifest {
  format: 'imgapi-backup';
  version: 1;
  createdAt: string;
  /** The migrations the database had run. */
  schema: string[];
  database: { dialect: 'sqlite'; file: string; size: number; sha256: string };
  counts: Record<TableName, number>;
  storage:
    | { kind: 'local'; directory: string; count: number; bytes: number }
    | { kind: 's3'; bucket: string; endpoint: string | null; region: string; count: number; bytes: number };
  objects: ObjectEntry[];
  /** DATA_DIR files kept beside the database (the local-storage upload signing key). */
  files: Record<string, { size: number; sha256: string }>;
}

export interface OpsLog {
  (line: string): void;
}

const isEmptyDir = (dir: string): boolean => !fs.existsSync(dir) || fs.readdirSync(dir).length === 0;

/** Every object under a local storage root (its .tmp excepted), as keys. */
export function localKeys(root: string): string[] {
  const keys: string[] = [];
  const walk = (dir: string, prefix: string) => {
    if (!fs.existsSync(dir)) return;
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!prefix && entry.name === '.tmp') continue;
      if (entry.isDirectory()) walk(path.join(dir, entry.name), `${prefix}${entry.name}/`);
      else keys.push(`${prefix}${entry.name}`);
    }
  };
  walk(root, '');
  return keys;
}

export async function backup(config: Config, dir: string, log: OpsLog = () => {}): Promise<BackupManifest> {
  if (config.database.dialect !== 'sqlite')
    throw new OpsError(
      'the database is PostgreSQL: back it up with pg_dump (docs/operations.md, "Backups and upgrades"); `imgapi backup` takes SQLite installs whole',
    );
  if (!fs.existsSync(config.database.file)) throw new OpsError(`no database at ${config.database.file}: nothing to back up`);
  if (!isEmptyDir(dir)) throw new OpsError(`${dir} is not empty: back up into a new or empty directory`);
  fs.mkdirSync(dir, { recursive: true });
  const storage = openStorage(config.storage);
  const partial = path.join(dir, `${DATABASE_FILE}.partial`);
  // Objects copied in an earlier round, still good for the next: a referenced object never changes.
  const kept = new Map<string, ObjectEntry>();
  const into = config.storage.kind === 'local' ? new LocalStorage(path.join(dir, OBJECTS_DIR)) : undefined;
  try {
    for (let round = 1; ; round++) {
      fs.rmSync(partial, { force: true });
      await backupSqliteFile(config.database.file, partial);
      const snapshot = await openDatabase({ dialect: 'sqlite', file: partial });
      let schema: string[];
      let counts: Record<TableName, number>;
      let referenced;
      try {
        schema = (await schemaState(snapshot.db)).applied;
        counts = await countAllRows(snapshot.db);
        referenced = await referencedObjects(snapshot.db);
      } finally {
        await snapshot.close();
      }
      log(
        `database snapshot: ${Object.entries(counts)
          .map(([t, n]) => `${t} ${n}`)
          .join(', ')}`,
      );

      const objects: ObjectEntry[] = [];
      const missing: string[] = [];
      let done = 0;
      await eachLimited(referenced, 8, async (object) => {
        const reuse = object.optional ? undefined : kept.get(object.key);
        const entry = reuse ?? (into ? await copyObject(storage, into, object.key) : await hashObject(storage, object.key));
        if (entry) objects.push(entry);
        else if (!object.optional) missing.push(object.key);
        if (++done % 500 === 0) log(`objects: ${done}/${referenced.length}`);
      });
      for (const entry of objects) kept.set(entry.key, entry);
      if (missing.length > 0) {
        if (round < ROUNDS) {
          log(`${missing.length} object(s) were deleted after the snapshot: taking a new one`);
          continue;
        }
        throw new OpsError(
          `${missing.length} object(s) that live files refer to are missing from storage (${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''})`,
        );
      }

      // Objects of earlier rounds that this snapshot no longer refers to.
      const wanted = new Set(objects.map((o) => o.key));
      if (into) for (const key of localKeys(path.join(dir, OBJECTS_DIR))) if (!wanted.has(key)) await into.delete(key);
      fs.rmSync(path.join(dir, OBJECTS_DIR, '.tmp'), { recursive: true, force: true });

      const files: BackupManifest['files'] = {};
      const signingKey = path.join(config.dataDir, SIGNING_KEY);
      if (fs.existsSync(signingKey)) {
        fs.copyFileSync(signingKey, path.join(dir, SIGNING_KEY));
        fs.chmodSync(path.join(dir, SIGNING_KEY), 0o600);
        files[SIGNING_KEY] = await hashFile(path.join(dir, SIGNING_KEY));
      }
      fs.renameSync(partial, path.join(dir, DATABASE_FILE));
      objects.sort((a, b) => (a.key < b.key ? -1 : 1));
      const bytes = objects.reduce((sum, o) => sum + o.size, 0);
      const manifest: BackupManifest = {
        format: 'imgapi-backup',
        version: 1,
        createdAt: new Date().toISOString(),
        schema,
        database: { dialect: 'sqlite', file: DATABASE_FILE, ...(await hashFile(path.join(dir, DATABASE_FILE))) },
        counts,
        storage:
          config.storage.kind === 'local'
            ? { kind: 'local', directory: OBJECTS_DIR, count: objects.length, bytes }
            : {
                kind: 's3',
                bucket: config.storage.bucket,
                endpoint: config.storage.endpoint ?? null,
                region: config.storage.region,
                count: objects.length,
                bytes,
              },
        objects,
        files,
      };
      // Last, under a temporary name: a directory without manifest.json is not a backup.
      fs.writeFileSync(path.join(dir, `${MANIFEST}.tmp`), `${JSON.stringify(manifest, null, 2)}\n`);
      fs.renameSync(path.join(dir, `${MANIFEST}.tmp`), path.join(dir, MANIFEST));
      log(`backup complete: ${objects.length} objects, ${bytes} bytes, in ${dir}`);
      return manifest;
    }
  } finally {
    storage.close?.();
  }
}
