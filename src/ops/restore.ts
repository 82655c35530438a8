// `imgapi restore <dir>`: a backup (src/ops/backup.ts) into an empty target, all or nothing.
//
// Nothing in the backup is trusted. Before anything is written, the backup's tree is walked
// with lstat (a link, device, FIFO or socket anywhere is refused, naming it) and manifest.json is
// checked whole against a strict schema (unknown fields, another version, object keys this
// service does not write, file names it does not keep: refused). The objects are read from the
// backup's own objects/ folder, never from a directory the manifest names. Then every file is
// copied, opened without following links, into a staging directory inside the target, hashed
// on the way and compared with the manifest; the staged database is checked (SQLite's own
// check, its migrations, the row count of every table, the objects its rows refer to). Only
// then does anything move into place: the objects and the signing key (linked, never over a
// name already there), the database last — a rename (SQLite) or the commit of the one
// transaction that loaded its rows (PostgreSQL). A failure before that point undoes every
// placement: the target is as it was, so a retry after fixing the backup succeeds. Restore
// deletes nothing but its staging directory and what it placed itself, and never writes into
// the backup.
import fs from 'node:fs';
import path from 'node:path';
import Ajv, { type ErrorObject } from 'ajv';
import type { Config } from '../config.js';
import { migrate, openDatabase, type Database } from '../db/database.js';
import { sha256Hex } from '../ids.js';
import {
  countAllRows,
  countRows,
  holdsRows,
  readRows,
  sqliteQuickCheck,
  sqliteSingleFile,
  TABLE_NAMES,
  upsertRows,
  type TableName,
} from '../db/dump.js';
import { schemaState } from '../db/migrations.js';
import { FILE_OBJECT_KEY, type ObjectStorage } from '../storage/storage.js';
import { DATABASE_FILE, localKeys, MANIFEST, OBJECTS_DIR, SIGNING_KEY, type BackupManifest, type OpsLog } from './backup.js';
import { eachLimited, hashObject, hashStream, OpsError, openStorage, referencedObjects, type ObjectEntry } from './objects.js';

/** A manifest larger than this is not one backup wrote (a million objects take ~150 MB). */
const MAX_MANIFEST_BYTES = 512 * 1024 * 1024;

const size = { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER };
const sha256 = { type: 'string', pattern: '^[0-9a-f]{64}$' };
const checksum = { type: 'object', additionalProperties: false, required: ['size', 'sha256'], properties: { size, sha256 } };
const counts = { ...size, maximum: 2 ** 48 };
const MANIFEST_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['format', 'version', 'createdAt', 'schema', 'database', 'counts', 'storage', 'objects', 'files'],
  properties: {
    format: { const: 'imgapi-backup' },
    version: { const: 1 },
    createdAt: { type: 'string', maxLength: 64 },
    schema: { type: 'array', maxItems: 10_000, items: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,200}$' } },
    database: {
      type: 'object',
      additionalProperties: false,
      required: ['dialect', 'file', 'size', 'sha256'],
      properties: { dialect: { const: 'sqlite' }, file: { const: DATABASE_FILE }, size, sha256 },
    },
    counts: { type: 'object', additionalProperties: false, properties: Object.fromEntries(TABLE_NAMES.map((table) => [table, counts])) },
    storage: {
      type: 'object',
      discriminator: { propertyName: 'kind' },
      required: ['kind'],
      properties: { kind: { enum: ['local', 's3'] } },
      oneOf: [
        {
          type: 'object',
          additionalProperties: false,
          required: ['kind', 'directory', 'count', 'bytes'],
          // Always the backup's own objects/ folder: restore reads nowhere else.
          properties: { kind: { const: 'local' }, directory: { const: OBJECTS_DIR }, count: counts, bytes: size },
        },
        {
          type: 'object',
          additionalProperties: false,
          required: ['kind', 'bucket', 'endpoint', 'region', 'count', 'bytes'],
          properties: {
            kind: { const: 's3' },
            bucket: { type: 'string', minLength: 1, maxLength: 255 },
            endpoint: { type: ['string', 'null'], maxLength: 2048 },
            region: { type: 'string', maxLength: 100 },
            count: counts,
            bytes: size,
          },
        },
      ],
    },
    objects: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['key', 'size', 'sha256'],
        properties: { key: { type: 'string', maxLength: 200, pattern: FILE_OBJECT_KEY.source }, size, sha256 },
      },
    },
    files: {
      type: 'object',
      additionalProperties: false,
      properties: { [SIGNING_KEY]: { ...checksum, properties: { size: { ...size, maximum: 4096 }, sha256 } } },
    },
  },
};

const validateManifest = new Ajv.default({
  allErrors: false,
  strict: true,
  strictNumbers: true,
  allowUnionTypes: true,
  discriminator: true,
}).compile<BackupManifest>(MANIFEST_SCHEMA);

/** A value from the backup, quoted for a message: control characters escaped, long ones cut. */
const quote = (value: unknown): string => {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}…"` : text;
};

/** The error's place in the manifest, said ("objects[3].key" for "/objects/3/key"), and the value there. */
function schemaProblem(error: ErrorObject, manifest: unknown): string {
  const parts = error.instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'));
  const field = parts.reduce((name, part) => (/^\d+$/.test(part) ? `${name}[${part}]` : name ? `${name}.${part}` : part), '');
  const value = parts.reduce<unknown>((at, part) => (at as Record<string, unknown> | undefined)?.[part], manifest);
  const where = `${MANIFEST} ${field || 'top level'}`;
  if (error.keyword === 'additionalProperties')
    return `${where} has an unknown field ${quote((error.params as { additionalProperty: string }).additionalProperty)}`;
  if (error.keyword === 'required') return `${where} lacks the field ${quote((error.params as { missingProperty: string }).missingProperty)}`;
  if (/^objects\[\d+\]\.key$/.test(field) && typeof value === 'string')
    return `${where} ${quote(value)} is not a key this service stores a file's bytes under`;
  if (error.keyword === 'const') return `${where} is ${quote(value)}, not ${quote((error.params as { allowedValue: unknown }).allowedValue)}`;
  return `${where} ${error.message ?? 'is not valid'}`;
}

/** The entry's problem as one line: a backup holds only regular files, one link each, and directories. */
const notOwnFile = (name: string, what: string): OpsError =>
  new OpsError(`backup entry ${quote(name)} ${what}: a backup holds only regular files and directories, and restore follows no links`);

function kindProblem(stat: fs.Stats): string | undefined {
  if (stat.isSymbolicLink()) return 'is a symbolic link';
  if (stat.isDirectory()) return undefined;
  if (!stat.isFile()) return 'is a device, FIFO or socket';
  if (stat.nlink > 1) return `has ${stat.nlink} hard links (copy the backup without them, e.g. \`cp -r\`, and restore the copy)`;
  return undefined;
}

/** Folders deeper than a backup makes (objects/outputs/task_…/0 is three down). */
const MAX_DEPTH = 8;

/** Refuses, naming it, the first entry of the backup that is not a directory or a file of its own. */
function inspectTree(root: string): void {
  const walk = (relative: string, depth: number) => {
    if (depth > MAX_DEPTH) throw new OpsError(`backup entry ${quote(relative)} is nested deeper than any backup's folders`);
    for (const entry of fs.readdirSync(path.join(root, relative))) {
      const name = relative ? `${relative}/${entry}` : entry;
      const stat = fs.lstatSync(path.join(root, name));
      const problem = kindProblem(stat);
      if (problem) throw notOwnFile(name, problem);
      if (stat.isDirectory()) walk(name, depth + 1);
    }
  };
  walk('', 0);
}

/**
 * Opens a file of the backup for reading, refusing a link (O_NOFOLLOW), a FIFO (O_NONBLOCK: no
 * wait for a writer), anything but a regular file, and a file with other names.
 */
async function openEntry(root: string, name: string): Promise<fs.promises.FileHandle> {
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(path.join(root, name), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new OpsError(`backup entry ${quote(name)} is missing: the backup is incomplete`);
    if (code === 'ELOOP') throw notOwnFile(name, 'is a symbolic link');
    throw new OpsError(`backup entry ${quote(name)} cannot be read (${code ?? 'error'})`);
  }
  const problem = kindProblem(await handle.stat());
  if (problem) {
    await handle.close();
    throw notOwnFile(name, problem);
  }
  return handle;
}

/** The backup folder the operator named, as a real path (it may itself be a link: the operator gave it). */
function backupRoot(dir: string): string {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(dir);
  } catch {
    throw new OpsError(`${dir} does not exist`);
  }
  if (!stat.isDirectory()) throw new OpsError(`${dir} is not a directory`);
  return fs.realpathSync(dir);
}

/** The backup's manifest, checked whole: every field, every name, every sum that can be checked without reading the rest. */
export async function readManifest(dir: string): Promise<BackupManifest> {
  const root = backupRoot(dir);
  if (!exists(path.join(root, MANIFEST))) throw new OpsError(`${dir} holds no ${MANIFEST}: not a backup, or one that did not finish`);
  const handle = await openEntry(root, MANIFEST);
  let parsed: unknown;
  try {
    if ((await handle.stat()).size > MAX_MANIFEST_BYTES) throw new OpsError(`${MANIFEST} is larger than any backup writes`);
    parsed = JSON.parse(await handle.readFile('utf8'));
  } catch (err) {
    if (err instanceof OpsError) throw err;
    throw new OpsError(`${MANIFEST} is not JSON: the backup is damaged`);
  } finally {
    await handle.close();
  }
  const header = parsed as Partial<BackupManifest> | null;
  if (typeof header !== 'object' || header === null || Array.isArray(header) || header.format !== 'imgapi-backup')
    throw new OpsError(`${MANIFEST} is not an imgapi backup manifest`);
  if (header.version !== 1)
    throw new OpsError(`${MANIFEST} version is ${quote(header.version)}; this imgapi reads version 1: restore with the imgapi that made the backup`);
  if (!validateManifest(parsed)) throw new OpsError(schemaProblem(validateManifest.errors![0]!, parsed));

  const manifest = parsed;
  const seen = new Set<string>();
  for (const object of manifest.objects) {
    if (seen.has(object.key)) throw new OpsError(`${MANIFEST} objects lists ${quote(object.key)} twice`);
    seen.add(object.key);
  }
  const bytes = manifest.objects.reduce((sum, o) => sum + o.size, 0);
  if (manifest.storage.count !== manifest.objects.length || manifest.storage.bytes !== bytes)
    throw new OpsError(
      `${MANIFEST} storage says ${manifest.storage.count} objects of ${manifest.storage.bytes} bytes, its objects list ${manifest.objects.length} of ${bytes}: the backup is damaged`,
    );
  return manifest;
}

/** Whether there is an entry at `file`, a link to nowhere included. */
const exists = (file: string): boolean => fs.lstatSync(file, { throwIfNoEntry: false }) !== undefined;

/** Copies a file of the backup to `to` (a new file), hashing it on the way; refuses one that differs from the manifest. */
async function copyEntry(
  root: string,
  name: string,
  expected: { size: number; sha256: string },
  to: string | undefined,
  mode = 0o644,
): Promise<void> {
  const handle = await openEntry(root, name);
  let found;
  try {
    if (to) fs.mkdirSync(path.dirname(to), { recursive: true });
    found = await hashStream(handle.createReadStream({ autoClose: false }), to ? fs.createWriteStream(to, { flags: 'wx', mode }) : undefined);
  } finally {
    await handle.close();
  }
  if (found.size !== expected.size)
    throw new OpsError(
      `backup entry ${quote(name)} does not match its checksum in the manifest (${found.size} bytes, not ${expected.size}): the backup is damaged`,
    );
  if (found.sha256 !== expected.sha256)
    throw new OpsError(`backup entry ${quote(name)} does not match its checksum in the manifest: the backup is damaged`);
}

/** `name` under `base`, refused if it would resolve anywhere else (names are checked before; this is the last word). */
function inside(base: string, name: string): string {
  const resolved = path.resolve(base, name);
  if (!resolved.startsWith(path.resolve(base) + path.sep)) throw new OpsError(`${quote(name)} would be written outside its directory`);
  return resolved;
}

/** What restore has put in the target, undone in reverse order when a later step fails. */
class Placements {
  private readonly undo: (() => Promise<void> | void)[] = [];

  /** Puts `from` at `to`, which must not exist (a link: never over another name; a copy where links are not allowed). */
  place(from: string, to: string): void {
    const made = fs.mkdirSync(path.dirname(to), { recursive: true });
    if (made) this.undo.push(() => removeEmptyDirs(path.dirname(to), made));
    try {
      fs.linkSync(from, to);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') throw new OpsError(`${to} already exists: restore needs an empty target`);
      if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EXDEV') throw err;
      fs.copyFileSync(from, to, fs.constants.COPYFILE_EXCL);
    }
    this.undo.push(() => fs.rmSync(to, { force: true }));
  }

  /** Moves whatever is at `to` into `aside` (put back if a later step fails), then places `from` there. */
  replace(from: string, to: string, aside: string): void {
    if (exists(to)) {
      fs.renameSync(to, aside);
      this.undo.push(() => fs.renameSync(aside, to));
    }
    this.place(from, to);
  }

  /** An object written to a store (S3), deleted if a later step fails. */
  stored(storage: ObjectStorage, key: string): void {
    this.undo.push(() => storage.delete(key));
  }

  async rollBack(): Promise<void> {
    for (const step of this.undo.reverse()) await Promise.resolve(step()).catch(() => {});
  }
}

/** Removes `leaf` and its parents up to and including `top` while they are empty. */
function removeEmptyDirs(leaf: string, top: string): void {
  for (let dir = leaf; ; dir = path.dirname(dir)) {
    try {
      fs.rmdirSync(dir);
    } catch {
      return;
    }
    if (dir === top || dir === path.dirname(dir)) return;
  }
}

/** Refuses a target that is not empty; answers the PostgreSQL target, opened. Writes nothing. */
async function openEmptyTarget(config: Config, manifest: BackupManifest): Promise<Database | undefined> {
  if (manifest.storage.kind === 's3' && config.storage.kind !== 's3')
    throw new OpsError(
      `this backup's objects are in the S3 bucket ${manifest.storage.bucket}: restore with STORAGE=s3 and that bucket (or a copy of it)`,
    );
  if (config.database.dialect === 'sqlite') {
    const there = fs.lstatSync(config.database.file, { throwIfNoEntry: false });
    if (there && (!there.isFile() || there.size > 0))
      throw new OpsError(`${config.database.file} exists: restore needs an empty target (move it aside, or point DATABASE_URL elsewhere)`);
  }
  if (config.storage.kind === 'local') {
    const present = localKeys(config.storage.root);
    if (present.length > 0)
      throw new OpsError(`${config.storage.root} holds ${present.length} object(s): restore needs an empty DATA_DIR (move them aside)`);
  }
  if (config.database.dialect === 'sqlite') return undefined;
  const target = await openDatabase(config.database);
  const table = await holdsRows(target).catch(async (err: unknown) => {
    await target.close();
    throw err;
  });
  if (table) {
    await target.close();
    throw new OpsError(`the target database is not empty (table ${table} has rows): restore needs an empty database`);
  }
  return target;
}

/** The staged database file, opened, if SQLite finds it whole. */
async function openSound(file: string): Promise<Database> {
  let snapshot: Database | undefined;
  try {
    snapshot = await openDatabase({ dialect: 'sqlite', file });
    const verdict = await sqliteQuickCheck(snapshot);
    if (verdict !== 'ok') throw Object.assign(new Error(verdict), { code: 'SQLITE_CORRUPT' });
    return snapshot;
  } catch (err) {
    await snapshot?.close().catch(() => {});
    const reason = (err as { code?: string }).code ?? 'not a database';
    throw new OpsError(`backup entry ${DATABASE_FILE} is not a sound SQLite database (${reason}): the backup is damaged`);
  }
}

/** The staged database file, opened and checked against the manifest; brought to this version's schema. */
async function openSnapshot(file: string, manifest: BackupManifest): Promise<Database> {
  const snapshot = await openSound(file);
  try {
    const state = await schemaState(snapshot.db);
    if (state.unknown.length > 0)
      throw new OpsError(`${DATABASE_FILE} was migrated by a newer imgapi (${state.unknown.join(', ')}): restore with that version`);
    if (JSON.stringify(state.applied) !== JSON.stringify(manifest.schema))
      throw new OpsError(`${MANIFEST} schema differs from the migrations ${DATABASE_FILE} has run: the backup is damaged`);
    // Every table the backup has, counted as the manifest says (before migrations add any).
    const tables = new Set((await snapshot.db.introspection.getTables()).map((t) => t.name));
    for (const table of TABLE_NAMES) {
      const expected = manifest.counts[table];
      if (!tables.has(table)) {
        if (expected)
          throw new OpsError(`${MANIFEST} counts ${expected} rows in ${table}, a table ${DATABASE_FILE} does not have: the backup is damaged`);
        continue;
      }
      if (expected === undefined) throw new OpsError(`${MANIFEST} counts has no entry for ${table}, which ${DATABASE_FILE} holds`);
      const found = await countRows(snapshot.db, table);
      if (found !== expected)
        throw new OpsError(`${DATABASE_FILE} holds ${found} rows in ${table}, ${MANIFEST} counts ${expected}: the backup is damaged`);
    }
    await migrate(snapshot);
    // The objects the rows need are the manifest's, and the manifest lists no other.
    const listed = new Map(manifest.objects.map((o) => [o.key, o]));
    const wanted = new Set<string>();
    for (const object of await referencedObjects(snapshot.db)) {
      wanted.add(object.key);
      const entry = listed.get(object.key);
      if (object.optional) continue;
      if (!entry)
        throw new OpsError(`${DATABASE_FILE} refers to the object ${quote(object.key)}, which ${MANIFEST} does not list: the backup is incomplete`);
      if (entry.size !== object.size)
        throw new OpsError(`${DATABASE_FILE} gives ${quote(object.key)} ${object.size} bytes, ${MANIFEST} ${entry.size}: the backup is damaged`);
    }
    for (const key of listed.keys())
      if (!wanted.has(key)) throw new OpsError(`${MANIFEST} lists the object ${quote(key)}, which no row of ${DATABASE_FILE} refers to`);
    return snapshot;
  } catch (err) {
    await snapshot.close();
    throw err;
  }
}

export interface RestoreReport {
  counts: Record<TableName, number>;
  objects: number;
  bytes: number;
}

/**
 * Restores a backup into the configured database and storage, which must be empty (with S3
 * storage and a backup whose objects are in S3, the bucket must hold them: they are checked,
 * not copied). All or nothing: see the top of this file.
 */
export async function restore(config: Config, dir: string, log: OpsLog = () => {}): Promise<RestoreReport> {
  const root = backupRoot(dir);
  inspectTree(root);
  const manifest = await readManifest(dir);
  const target = await openEmptyTarget(config, manifest);
  const storage = config.storage.kind === 's3' ? openStorage(config.storage) : undefined;
  const staging: string[] = [];
  const stageIn = (parent: string) => {
    fs.mkdirSync(parent, { recursive: true });
    const stage = fs.mkdtempSync(path.join(parent, '.restore-'));
    staging.push(stage);
    return stage;
  };
  const placed = new Placements();
  try {
    // 1. Every file of the backup, copied into staging and checked against the manifest.
    const stage = stageIn(config.dataDir);
    const databaseDir = config.database.dialect === 'sqlite' ? path.dirname(config.database.file) : config.dataDir;
    const stagedDatabase = path.join(path.resolve(databaseDir) === path.resolve(config.dataDir) ? stage : stageIn(databaseDir), DATABASE_FILE);
    await copyEntry(root, DATABASE_FILE, manifest.database, stagedDatabase);
    for (const [name, expected] of Object.entries(manifest.files)) await copyEntry(root, name, expected, inside(stage, name), 0o600);
    const stagedObjects = path.join(stage, OBJECTS_DIR);
    let done = 0;
    await eachLimited(manifest.objects, 8, async (object) => {
      const name = `${OBJECTS_DIR}/${object.key}`;
      if (manifest.storage.kind === 'local') await copyEntry(root, name, object, storage ? undefined : inside(stagedObjects, object.key));
      else {
        const found = await hashObject(storage!, object.key);
        if (!found) throw new OpsError(`the object ${quote(object.key)} is missing from the bucket`);
        if (found.size !== object.size || found.sha256 !== object.sha256)
          throw new OpsError(`the object ${quote(object.key)} in the bucket does not match its checksum in the manifest`);
      }
      if (++done % 500 === 0) log(`checked ${done}/${manifest.objects.length} objects`);
    });
    log(`backup checked: database and ${manifest.objects.length} objects match the manifest`);

    // 2. The staged database, checked; 3. everything into place, the database last.
    const placeFiles = async () => {
      if (manifest.storage.kind === 'local' && storage) await upload(root, manifest.objects, storage, placed);
      else if (manifest.storage.kind === 'local' && config.storage.kind === 'local')
        for (const object of manifest.objects) placed.place(inside(stagedObjects, object.key), inside(config.storage.root, object.key));
      // The backup's signing key, over one the empty target has: it signed nothing restored,
      // and the backed-up service's upload URLs must go on working (docs/operations.md, "Backups and upgrades").
      const key = manifest.files[SIGNING_KEY];
      const there = path.join(config.dataDir, SIGNING_KEY);
      const present = fs.lstatSync(there, { throwIfNoEntry: false });
      if (key && !(present?.isFile() && sha256Hex(fs.readFileSync(there)) === key.sha256)) {
        placed.replace(path.join(stage, SIGNING_KEY), there, path.join(stage, `replaced-${SIGNING_KEY}`));
        if (present)
          log(`${SIGNING_KEY}: the target's key was replaced by the backup's (the restored service signs upload URLs as the backed-up one did)`);
      }
    };
    const snapshot = await openSnapshot(stagedDatabase, manifest);
    let counts: Record<TableName, number>;
    try {
      counts = await countAllRows(snapshot.db);
      if (target) await loadRows(snapshot, target, counts, placeFiles);
      // One file to move: the write-ahead log folded into it.
      else await sqliteSingleFile(snapshot);
    } finally {
      await snapshot.close();
    }
    if (config.database.dialect === 'sqlite') {
      await placeFiles();
      fs.renameSync(stagedDatabase, config.database.file);
    }
    const bytes = manifest.objects.reduce((s, o) => s + o.size, 0);
    log(`restored ${Object.values(counts).reduce((a, b) => a + b, 0)} rows and ${manifest.objects.length} objects (${bytes} bytes)`);
    return { counts, objects: manifest.objects.length, bytes };
  } catch (err) {
    await placed.rollBack();
    throw err;
  } finally {
    for (const stage of staging) fs.rmSync(stage, { recursive: true, force: true });
    storage?.close?.();
    await target?.close();
  }
}

/**
 * Every row of the snapshot into PostgreSQL: its schema first (what `imgapi migrate` would do to
 * the empty database), then the rows in one transaction, counted there; `place` puts the files
 * in place before the commit, which is the last step.
 */
async function loadRows(snapshot: Database, target: Database, counts: Record<TableName, number>, place: () => Promise<void>): Promise<void> {
  await migrate(target);
  await target.db.transaction().execute(async (tx) => {
    for (const table of TABLE_NAMES) for await (const rows of readRows(snapshot.db, table)) await upsertRows(tx, table, rows);
    const landed = await countAllRows(tx);
    const wrong = TABLE_NAMES.filter((table) => landed[table] !== counts[table]);
    if (wrong.length > 0) throw new OpsError(`restored row counts differ: ${wrong.map((t) => `${t} ${landed[t]} (backup ${counts[t]})`).join(', ')}`);
    await place();
  });
}

/**
 * A local backup's objects into a bucket: refused if the bucket holds any of them already (it
 * is somebody's), then each written and read back; every one written is deleted if a later
 * step fails.
 */
async function upload(root: string, objects: ObjectEntry[], storage: ObjectStorage, placed: Placements): Promise<void> {
  const taken: string[] = [];
  await eachLimited(objects, 8, async (object) => {
    if (await storage.head(object.key)) taken.push(object.key);
  });
  if (taken.length > 0)
    throw new OpsError(
      `the bucket already holds ${taken.length} of the backup's objects (${taken.slice(0, 3).join(', ')}…): restore needs a bucket without them`,
    );
  await eachLimited(objects, 8, async (object) => {
    const name = `${OBJECTS_DIR}/${object.key}`;
    const handle = await openEntry(root, name);
    try {
      placed.stored(storage, object.key);
      await storage.put(object.key, handle.createReadStream({ autoClose: false }));
    } finally {
      await handle.close();
    }
    const found = await hashObject(storage, object.key);
    if (!found || found.size !== object.size || found.sha256 !== object.sha256)
      throw new OpsError(`backup entry ${quote(name)} changed while it was restored, or the bucket stored other bytes`);
  });
}
