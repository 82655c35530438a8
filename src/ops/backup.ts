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
// PostgreSQL is backed up with pg_dump (README, "Backups and upgrades"): `backup` refuses it.
//
// Restore goes into an empty target only: no rows in the database, no objects in DATA_DIR. It
// checks every checksum of the backup before writing anything, and the counts after.
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.js';
import { migrate, openDatabase, type Database } from '../db/database.js';
import { backupSqliteFile, countAllRows, holdsRows, readRows, TABLE_NAMES, upsertRows, type TableName } from '../db/dump.js';
import { schemaState } from '../db/migrations.js';
import { LocalStorage } from '../storage/local.js';
import { copyObject, eachLimited, hashFile, hashObject, OpsError, openStorage, referencedObjects, type ObjectEntry } from './objects.js';

export const MANIFEST = 'manifest.json';
const DATABASE_FILE = 'imgapi.db';
const OBJECTS_DIR = 'objects';
const SIGNING_KEY = 'upload-signing.key';
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
function localKeys(root: string): string[] {
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
      'the database is PostgreSQL: back it up with pg_dump (README, "Backups and upgrades"); `imgapi backup` takes SQLite installs whole',
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

export function readManifest(dir: string): BackupManifest {
  const file = path.join(dir, MANIFEST);
  if (!fs.existsSync(file)) throw new OpsError(`${dir} holds no ${MANIFEST}: not a backup, or one that did not finish`);
  const manifest = JSON.parse(fs.readFileSync(file, 'utf8')) as BackupManifest;
  if (manifest.format !== 'imgapi-backup' || manifest.version !== 1)
    throw new OpsError(`${file} is not an imgapi backup manifest this version reads`);
  return manifest;
}

export interface RestoreReport {
  counts: Record<TableName, number>;
  objects: number;
  bytes: number;
}

/**
 * Restores a backup into the configured database and storage, which must be empty (with S3
 * storage, the bucket must hold the backup's objects: they are checked, not copied).
 */
export async function restore(config: Config, dir: string, log: OpsLog = () => {}): Promise<RestoreReport> {
  const manifest = readManifest(dir);
  fs.mkdirSync(config.dataDir, { recursive: true });
  const storage = openStorage(config.storage);
  try {
    // The target must be empty.
    let target: Database | undefined;
    if (config.database.dialect === 'sqlite') {
      if (fs.existsSync(config.database.file) && fs.statSync(config.database.file).size > 0)
        throw new OpsError(`${config.database.file} exists: restore needs an empty target (move it aside, or point DATABASE_URL elsewhere)`);
    } else {
      target = await openDatabase(config.database);
      const table = await holdsRows(target);
      if (table) {
        await target.close();
        throw new OpsError(`the target database is not empty (table ${table} has rows): restore needs an empty database`);
      }
    }
    try {
      if (config.storage.kind === 'local') {
        const present = localKeys(config.storage.root);
        if (present.length > 0)
          throw new OpsError(`${config.storage.root} holds ${present.length} object(s): restore needs an empty DATA_DIR (move them aside)`);
      }
      if (manifest.storage.kind === 's3' && config.storage.kind !== 's3')
        throw new OpsError(
          `this backup's objects are in the S3 bucket ${manifest.storage.bucket}: restore with STORAGE=s3 and that bucket (or a copy of it)`,
        );

      // 1. The backup itself: every checksum, before anything is written.
      const databaseFile = path.join(dir, manifest.database.file);
      const sum = await hashFile(databaseFile);
      if (sum.sha256 !== manifest.database.sha256)
        throw new OpsError(`${databaseFile} does not match its checksum in the manifest: the backup is damaged`);
      for (const [name, expected] of Object.entries(manifest.files))
        if ((await hashFile(path.join(dir, name))).sha256 !== expected.sha256)
          throw new OpsError(`${name} does not match its checksum: the backup is damaged`);
      const from = manifest.storage.kind === 'local' ? new LocalStorage(path.join(dir, manifest.storage.directory)) : storage;
      const bad: string[] = [];
      let done = 0;
      await eachLimited(manifest.objects, 8, async (object) => {
        const found = await hashObject(from, object.key);
        if (!found || found.sha256 !== object.sha256 || found.size !== object.size) bad.push(object.key);
        if (++done % 500 === 0) log(`checked ${done}/${manifest.objects.length} objects`);
      });
      if (bad.length > 0)
        throw new OpsError(
          `${bad.length} object(s) are missing or do not match their checksum (${bad.slice(0, 5).join(', ')}${bad.length > 5 ? ', …' : ''}): the backup is damaged`,
        );
      if (manifest.storage.kind === 'local') fs.rmSync(path.join(dir, manifest.storage.directory, '.tmp'), { recursive: true, force: true });
      log(`backup checked: database and ${manifest.objects.length} objects match the manifest`);

      // 2. Objects (local backups), checked again as they land.
      if (manifest.storage.kind === 'local') {
        await eachLimited(manifest.objects, 8, async (object) => {
          const copied = await copyObject(from, storage, object.key);
          if (!copied || copied.sha256 !== object.sha256) throw new OpsError(`${object.key} changed while it was restored`);
        });
      }
      for (const name of Object.keys(manifest.files)) {
        const there = path.join(config.dataDir, name);
        if (!fs.existsSync(there)) {
          fs.copyFileSync(path.join(dir, name), there);
          fs.chmodSync(there, 0o600);
        }
      }

      // 3. The database, last: until it is there, the target serves nothing.
      let counts: Record<TableName, number>;
      if (config.database.dialect === 'sqlite') {
        fs.mkdirSync(path.dirname(config.database.file), { recursive: true });
        const tmp = `${config.database.file}.restoring`;
        fs.copyFileSync(databaseFile, tmp);
        fs.renameSync(tmp, config.database.file);
        const restored = await openDatabase(config.database);
        try {
          counts = await countAllRows(restored.db);
        } finally {
          await restored.close();
        }
      } else {
        // Into PostgreSQL: the snapshot brought to this version's schema, then its rows copied.
        const work = fs.mkdtempSync(path.join(config.dataDir, '.restore-'));
        try {
          fs.copyFileSync(databaseFile, path.join(work, DATABASE_FILE));
          const snapshot = await openDatabase({ dialect: 'sqlite', file: path.join(work, DATABASE_FILE) });
          try {
            await migrate(snapshot);
            await migrate(target!);
            for (const table of TABLE_NAMES) for await (const rows of readRows(snapshot.db, table)) await upsertRows(target!.db, table, rows);
            counts = await countAllRows(target!.db);
          } finally {
            await snapshot.close();
          }
        } finally {
          fs.rmSync(work, { recursive: true, force: true });
        }
      }
      const wrong = (Object.keys(manifest.counts) as TableName[]).filter((t) => manifest.counts[t] !== counts[t]);
      if (wrong.length > 0)
        throw new OpsError(
          `restored row counts differ from the manifest: ${wrong.map((t) => `${t} ${counts[t]} (manifest ${manifest.counts[t]})`).join(', ')}`,
        );
      const bytes = manifest.objects.reduce((s, o) => s + o.size, 0);
      log(`restored ${Object.values(counts).reduce((a, b) => a + b, 0)} rows and ${manifest.objects.length} objects (${bytes} bytes)`);
      return { counts, objects: manifest.objects.length, bytes };
    } finally {
      await target?.close();
    }
  } finally {
    storage.close?.();
  }
}
