// `imgapi copy-to`: the whole service — every table, every stored object — from the current
// configuration to another database (and object store), e.g. from the embedded SQLite and
// DATA_DIR to PostgreSQL and S3. The source is only read, in one snapshot. Objects go first,
// then rows (so the target never has a file whose bytes are missing), then both are checked:
// counts of every table, and every object's SHA-256 read back from the target.
//
// Run again after an interruption, it goes on where it stopped: an object already at the
// target with the source's size is not copied again (stores write whole objects or nothing),
// rows are upserted, and rows the target has that the source no longer has are removed. The
// check at the end re-reads everything, so what a previous run left is checked as well.
import type { Database } from '../db/database.js';
import { migrate } from '../db/database.js';
import {
  assertTablesCovered,
  countAllRows,
  countRows,
  deleteRowsNotIn,
  readKeys,
  readRows,
  readSnapshot,
  TABLE_NAMES,
  upsertRows,
  type TableName,
} from '../db/dump.js';
import { schemaState } from '../db/migrations.js';
import type { ObjectStorage } from '../storage/storage.js';
import { copyObject, eachLimited, hashObject, OpsError, referencedObjects, type ObjectEntry } from './objects.js';

interface CopyEnd {
  database: Database;
  storage: ObjectStorage;
}

export type CopyProgress =
  | { phase: 'objects'; done: number; total: number; copied: number }
  | { phase: 'rows'; table: TableName; rows: number }
  | { phase: 'verify'; done: number; total: number };

export interface CopyOptions {
  source: CopyEnd;
  /** `storage` undefined: the objects stay where they are (the target uses the same store). */
  target: { database: Database; storage?: ObjectStorage };
  /** Objects copied or read at once. */
  concurrency?: number;
  /** Told of each step; an exception it throws stops the copy there (as an interruption would). */
  onProgress?: (progress: CopyProgress) => void;
}

export interface CopyReport {
  counts: Record<TableName, number>;
  objects: number;
  bytes: number;
  /** Objects written by this run (the others were at the target already). */
  copied: number;
  /** Rows removed from the target because the source no longer has them. */
  removed: number;
}

export async function copyTo(options: CopyOptions): Promise<CopyReport> {
  const { source, target } = options;
  const progress = options.onProgress ?? (() => {});
  const concurrency = options.concurrency ?? 8;

  const state = await schemaState(source.database.db);
  if (state.unknown.length > 0)
    throw new OpsError(`the source database was migrated by a newer imgapi (${state.unknown.join(', ')}): run that version`);
  if (state.pending.length > 0)
    throw new OpsError(`the source database is behind this version (${state.pending.join(', ')} not run): run \`imgapi migrate\` on it first`);
  await assertTablesCovered(source.database);
  // Brings the target to this version's schema (and refuses one a newer version migrated).
  await migrate(target.database);
  await assertTablesCovered(target.database);

  return readSnapshot(source.database, async (snapshot) => {
    // A target that holds accounts the source lacks is somebody else's database, not an earlier
    // run of this copy: refuse rather than merge into it.
    const sourceAccounts = await readKeys(snapshot, 'accounts');
    const foreign = [...(await readKeys(target.database.db, 'accounts'))].filter((key) => !sourceAccounts.has(key));
    if (foreign.length > 0)
      throw new OpsError(
        `the target database holds ${foreign.length} account(s) that the source does not have (${JSON.parse(foreign[0]!)[0]}…): copy-to needs an empty target or one an earlier copy-to from this source filled`,
      );

    // 1. Objects.
    const objects = await referencedObjects(snapshot);
    const hashes = new Map<string, ObjectEntry>();
    const missing: string[] = [];
    let copied = 0;
    let done = 0;
    if (target.storage) {
      const to = target.storage;
      await eachLimited(objects, concurrency, async (object) => {
        const there = object.optional ? null : await to.head(object.key);
        if (!there || there.size !== object.size) {
          const entry = await copyObject(source.storage, to, object.key);
          if (entry) {
            hashes.set(object.key, entry);
            copied++;
          } else if (!object.optional) missing.push(object.key);
        }
        progress({ phase: 'objects', done: ++done, total: objects.length, copied });
      });
    }

    // 2. Rows, parents first; then what the target has that the source no longer has, children first.
    for (const table of TABLE_NAMES) {
      let rows = 0;
      for await (const page of readRows(snapshot, table)) {
        await upsertRows(target.database.db, table, page);
        rows += page.length;
        progress({ phase: 'rows', table, rows });
      }
    }
    const counts = await countAllRows(snapshot);
    let removed = 0;
    for (const table of [...TABLE_NAMES].reverse()) {
      if ((await countRows(target.database.db, table)) !== counts[table])
        removed += await deleteRowsNotIn(target.database.db, table, await readKeys(snapshot, table));
    }

    // 3. Check: every table's count, every object's bytes.
    const landed = await countAllRows(target.database.db);
    const wrong = TABLE_NAMES.filter((table) => landed[table] !== counts[table]);
    if (wrong.length > 0)
      throw new OpsError(
        `row counts differ after the copy: ${wrong.map((t) => `${t} ${counts[t]} in the source, ${landed[t]} in the target`).join('; ')}`,
      );
    const to = target.storage ?? source.storage;
    const differ: string[] = [];
    let bytes = 0;
    let present = 0;
    done = 0;
    await eachLimited(objects, concurrency, async (object) => {
      const expected = target.storage
        ? (hashes.get(object.key) ?? (await hashObject(source.storage, object.key)))
        : await source.storage.head(object.key);
      if (!expected) {
        if (!object.optional && !missing.includes(object.key)) missing.push(object.key);
      } else {
        const found = target.storage ? await hashObject(to, object.key) : expected;
        if (!found || found.size !== expected.size || ('sha256' in expected && 'sha256' in found && found.sha256 !== expected.sha256))
          differ.push(object.key);
        else {
          bytes += found.size;
          present++;
        }
      }
      progress({ phase: 'verify', done: ++done, total: objects.length });
    });
    if (missing.length > 0)
      throw new OpsError(
        `${missing.length} object(s) that live files refer to are missing from the source store (${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}); ` +
          'if the service was running, a file deleted meanwhile explains it: run copy-to again with the service stopped',
      );
    if (differ.length > 0)
      throw new OpsError(
        `${differ.length} object(s) differ between source and target after the copy (${differ.slice(0, 5).join(', ')}): run copy-to again`,
      );
    return { counts, objects: present, bytes, copied, removed };
  });
}
