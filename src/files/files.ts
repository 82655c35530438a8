// File records: what the API says about a stored object, and who may see it.
import { sql, type Expression, type ExpressionBuilder, type Kysely, type RawBuilder, type Selectable, type SqlBool } from 'kysely';
import { iso, type Clock } from '../clock.js';
import type { Database, Tx } from '../db/database.js';
import { ACTIVE_STATUSES, type DB, type FilesTable, type SqliteViews } from '../db/schema.js';
import { AppError, notFound } from '../errors.js';
import { chargingStorage, lockAccount, releaseStorage, storageFits } from '../accounts/quota.js';
import type { ObjectStorage } from '../storage/storage.js';
import { forgetPreviews } from '../imaging/preview.js';
import { forgetInfo } from './info.js';
import { olderThan, pageOf } from '../db/pagination.js';

export type FileRecord = Selectable<FilesTable>;

/** Every column of a file's row, by name (SQLite's json_object takes them one by one). */
const FILE_COLUMNS = [
  'id',
  'account_id',
  'origin',
  'storage_key',
  'filename',
  'mime_type',
  'format',
  'size',
  'width',
  'height',
  'pages',
  'etag',
  'task_id',
  'output_index',
  'created_at',
  'expires_at',
  'deleted_at',
] as const satisfies readonly (keyof FileRecord)[];
// A column added to FilesTable and not listed above fails to compile here.
const allFileColumns: Record<Exclude<keyof FileRecord, (typeof FILE_COLUMNS)[number]>, never> = {};
void allFileColumns;

/**
 * The files the task of the enclosing statement over `tasks` reads, in order (deleted ones too),
 * as one JSON array (read it back with `jsonRows`): the claim hands them to the worker with the
 * task instead of a read of its own.
 */
export function inputFilesOfTask(database: Database, eb: ExpressionBuilder<DB, 'tasks'>): RawBuilder<FileRecord[]> {
  const query = eb
    .selectFrom('task_inputs')
    .innerJoin('files', 'files.id', 'task_inputs.file_id')
    .select(FILE_COLUMNS.map((column) => `files.${column}` as const))
    .whereRef('task_inputs.task_id', '=', 'tasks.id')
    .orderBy('task_inputs.position');
  return database.jsonArrayFrom(query) as RawBuilder<FileRecord[]>;
}

/** The caller's file, readable now: 404 for another account's or a deleted one, 410 when expired. */
export async function getLiveFile(db: Kysely<DB>, accountId: string, fileId: string, now: number): Promise<FileRecord> {
  const file = await db.selectFrom('files').selectAll().where('id', '=', fileId).where('account_id', '=', accountId).executeTakeFirst();
  return liveFile(file, now);
}

/**
 * The account's files of `fileIds` (whatever their state) as one JSON array, for a statement of
 * another module (read it back with `jsonRows`): queuing work reads its inputs with the
 * statement that locks the account. `liveFile` then judges each as getLiveFile does.
 */
export function filesOfAccount(
  database: Database,
  eb: ExpressionBuilder<DB, never>,
  accountId: string,
  fileIds: readonly string[],
): RawBuilder<FileRecord[]> {
  const query = eb
    .selectFrom('files')
    .select(FILE_COLUMNS.map((column) => `files.${column}` as const))
    .where('files.id', 'in', [...fileIds])
    .where('files.account_id', '=', accountId);
  return database.jsonArrayFrom(query) as RawBuilder<FileRecord[]>;
}

/**
 * PostgreSQL, for a statement that queues work alone (after a read without a lock): every one of
 * `fileIds` is still the account's and live. The rows are share-locked, and so read as they are
 * now, not as the statement's snapshot had them: a deletion committed since is seen.
 */
export function filesStillLive(accountId: string, fileIds: readonly string[], now: number): RawBuilder<SqlBool> {
  const distinct = [...new Set(fileIds)];
  return sql<SqlBool>`(SELECT count(*) FROM (SELECT 1 FROM files AS f WHERE f.id IN (${sql.join(distinct)}) AND f.account_id = ${accountId}
    AND f.deleted_at IS NULL AND f.expires_at > ${now} FOR SHARE) AS live) = ${distinct.length}`;
}

/** getLiveFile's answer for a file read already (undefined: none of the caller's has the id). */
export function liveFile(file: FileRecord | undefined, now: number): FileRecord {
  if (!file) throw notFound('File');
  if (file.expires_at <= now)
    throw new AppError('FILE_EXPIRED', 'The file has expired and its bytes were deleted', { expiredAt: iso(file.expires_at) });
  if (file.deleted_at !== null) throw notFound('File');
  return file;
}

/**
 * "The file is still live" as a condition for another module's statement (the render cache's
 * store keeps a delivery render only while its file exists). On PostgreSQL the file's row is
 * share-locked by it: a deletion in progress is waited for and then seen.
 */
export function fileIsLive(database: Database, accountId: string, fileId: string, now: number): RawBuilder<boolean> {
  const lock = database.rowLocks ? sql` for share` : sql``;
  return sql<boolean>`exists (select 1 from files where id = ${fileId} and account_id = ${accountId} and deleted_at is null and expires_at > ${now}${lock})`;
}

export async function listFiles(database: Database, accountId: string, now: number, limit: number, cursor?: string, nameContains?: string) {
  const after = olderThan(cursor, 'created_at', 'id');
  // Case-insensitive on both dialects; %, _ and \ in the text match themselves.
  const pattern = nameContains ? `%${nameContains.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%` : undefined;
  const rows = await database.db
    .selectFrom('files')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null)
    .where('expires_at', '>', now)
    .$if(after !== undefined, (qb) => qb.where(after!))
    .$if(pattern !== undefined, (qb) => qb.where(sql<boolean>`lower(filename) like ${pattern!} escape '\\'`))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit + 1)
    .execute();
  const { page, nextCursor } = pageOf(rows, limit);
  return { files: page, nextCursor };
}

/** An output a worker stored under its task's key, to be recorded as a file of the account. */
export interface StoredOutput {
  fileId: string;
  storageKey: string;
  filename: string;
  mimeType: string;
  format: string;
  size: number;
  etag: string;
  width?: number;
  height?: number;
  pages?: number;
}

/** The terms a task's outputs are recorded on: when, how long they live, the account's storage limit. */
interface OutputTerms {
  now: number;
  retentionMs: number;
  storageLimit: number;
}

/** A task's outputs as rows of `files`, and their bytes together. */
function outputRows(task: { id: string; accountId: string }, outputs: StoredOutput[], terms: OutputTerms) {
  const rows: FileRecord[] = outputs.map((o, index) => ({
    id: o.fileId,
    account_id: task.accountId,
    origin: 'output' as const,
    storage_key: o.storageKey,
    filename: o.filename,
    mime_type: o.mimeType,
    format: o.format,
    size: o.size,
    width: o.width ?? null,
    height: o.height ?? null,
    pages: o.pages ?? null,
    etag: o.etag,
    task_id: task.id,
    output_index: index,
    created_at: terms.now,
    expires_at: terms.now + terms.retentionMs,
    deleted_at: null,
  }));
  return { rows, bytes: outputs.reduce((sum, o) => sum + o.size, 0) };
}

/**
 * `recordOutputs` for a statement of the queue's that completes the task: the rows and their
 * bytes (SQLite's task_completions takes them, migration 0014), or two CTEs (PostgreSQL, `Database.writingCtes`): `charge`
 * adds the bytes to the account's storage (its returned row: they fit) where `when` holds, and
 * `insert` writes the rows, typed as the table's (json_populate_recordset), only from the row of
 * the CTE named `charged` (`charge`): refused, nothing is written.
 */
export function recordingOutputs(database: Database, task: { id: string; accountId: string }, outputs: StoredOutput[], terms: OutputTerms) {
  const { rows, bytes } = outputRows(task, outputs, terms);
  return {
    rows,
    bytes,
    storageLimit: terms.storageLimit,
    charge: (when: Expression<SqlBool> = sql<SqlBool>`true`) => chargingStorage(database.db, task.accountId, terms.storageLimit, bytes).where(when),
    insert: (charged: string) => insertingFilesFrom(database.db, rows, charged),
  };
}

/** PostgreSQL: the INSERT of `rows`, typed as the table's (json_populate_recordset), for each row of the statement's CTE `from`. */
const insertingFilesFrom = (db: Tx | Kysely<DB>, rows: FileRecord[], from: string) =>
  db
    .insertInto('files')
    .columns(FILE_COLUMNS)
    .expression(
      sql`SELECT ${sql.join(FILE_COLUMNS.map((column) => sql.ref(`r.${column}`)))} FROM ${sql.table(from)}, json_populate_recordset(NULL::files, ${JSON.stringify(rows)}) AS r`,
    )
    .returning('id');
export type OutputsRecording = ReturnType<typeof recordingOutputs>;

/**
 * Inserts `rows` (new files of `accountId`) and charges their bytes to its storage, in one
 * statement, or writes nothing when they would take it past `limit`; answers whether they were
 * written. PostgreSQL: the charge as a CTE (`recordingOutputs`' shape). SQLite: through the view
 * charged_files, whose trigger charges each row (migration 0014), under `storageFits`.
 */
export async function insertChargedFiles(
  database: Database,
  db: Tx | Kysely<DB>,
  accountId: string,
  rows: FileRecord[],
  limit: number,
): Promise<boolean> {
  if (!rows.length) return true;
  const bytes = rows.reduce((sum, row) => sum + Number(row.size), 0);
  const inserted = database.writingCtes
    ? await db
        .with('charged', () => chargingStorage(db, accountId, limit, bytes))
        .with('inserted', () => insertingFilesFrom(db, rows, 'charged'))
        .selectFrom('inserted')
        .select('inserted.id')
        .execute()
    : await db
        .withTables<SqliteViews>()
        .insertInto('charged_files')
        .columns(FILE_COLUMNS)
        .expression(
          sql`SELECT ${sql.join(FILE_COLUMNS.map((column) => sql`value ->> ${column}`))} FROM json_each(${JSON.stringify(rows)}) WHERE ${storageFits(accountId, limit, bytes)}`,
        )
        .returning('id')
        .execute();
  return inserted.length === rows.length;
}

/**
 * Records a task's outputs as the account's files, in the transaction that completes the task
 * and under the account's lock it holds (the lock order in quota.ts): their bytes are charged
 * to the account's storage, or, when they would take it past `storageLimit`, nothing is
 * recorded and the refusal is answered (the task fails STORAGE_LIMIT_EXCEEDED). The charge and
 * the rows are one statement (`insertChargedFiles`).
 */
export async function recordOutputs(
  database: Database,
  tx: Tx,
  task: { id: string; accountId: string },
  outputs: StoredOutput[],
  terms: OutputTerms,
): Promise<{ code: string; message: string } | undefined> {
  const { rows, bytes } = outputRows(task, outputs, terms);
  if (await insertChargedFiles(database, tx, task.accountId, rows, terms.storageLimit)) return undefined;
  return {
    code: 'STORAGE_LIMIT_EXCEEDED',
    message: `The output (${bytes} bytes) would take the account past its storage limit of ${terms.storageLimit} bytes; nothing was kept`,
  };
}

/** A queued or running task that reads the file (which must keep it), if any. */
async function unfinishedReader(db: Kysely<DB>, fileId: string): Promise<string | undefined> {
  const task = await db
    .selectFrom('task_inputs')
    .innerJoin('tasks', 'tasks.id', 'task_inputs.task_id')
    .select('tasks.id')
    .where('task_inputs.file_id', '=', fileId)
    .where('tasks.status', 'in', ACTIVE_STATUSES)
    .executeTakeFirst();
  return task?.id;
}

/**
 * Deletes a file at once and frees its storage. A file that an unfinished task still reads is
 * refused (409 FILE_IN_USE): cancel the task first.
 */
export async function deleteFile(database: Database, storage: ObjectStorage, clock: Clock, accountId: string, fileId: string): Promise<void> {
  const file = await getLiveFile(database.db, accountId, fileId, clock.now());
  const { reader } = await removeFile(database, storage, file, clock.now());
  if (reader) throw new AppError('FILE_IN_USE', 'An unfinished task reads this file; cancel it or wait for it to finish', { taskId: reader });
}

/**
 * Removes a live file: the record first, under the account's lock (the lock order in
 * quota.ts, so no task can be queued on it meanwhile) and only while no unfinished task reads
 * it, freeing its storage; then the bytes. A crash between the two leaves bytes that nothing
 * charges. Answers whether this call removed it, or the task that keeps it.
 */
async function removeFile(
  database: Database,
  storage: ObjectStorage,
  file: Pick<FileRecord, 'id' | 'account_id' | 'storage_key' | 'size'>,
  now: number,
): Promise<{ removed: boolean; reader?: string }> {
  const outcome = await database.transaction(async (tx) => {
    await lockAccount(database, tx, file.account_id);
    const reader = await unfinishedReader(tx, file.id);
    if (reader) return { removed: false, reader };
    const result = await tx
      .updateTable('files')
      .set({ deleted_at: now })
      .where('id', '=', file.id)
      .where('deleted_at', 'is', null)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) return { removed: false };
    await forgetInfo(tx, file.id);
    await releaseStorage(tx, file.account_id, Number(file.size));
    return { removed: true };
  });
  if (outcome.removed) {
    await storage.delete(file.storage_key);
    await forgetPreviews(storage, file.id);
  }
  return outcome;
}

const SWEEP_BATCH = 500;

/**
 * The retention sweep: removes expired files, their bytes and their storage charge. Files that
 * a queued or running task reads are kept until it ends. Returns how many files were swept.
 */
export async function sweepExpiredFiles(database: Database, storage: ObjectStorage, now: number): Promise<number> {
  let swept = 0;
  for (;;) {
    const expired = await database.db
      .selectFrom('files')
      .select(['id', 'account_id', 'storage_key', 'size'])
      .where('deleted_at', 'is', null)
      .where('expires_at', '<=', now)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('task_inputs')
              .innerJoin('tasks', 'tasks.id', 'task_inputs.task_id')
              .select('tasks.id')
              .whereRef('task_inputs.file_id', '=', 'files.id')
              .where('tasks.status', 'in', ACTIVE_STATUSES),
          ),
        ),
      )
      .limit(SWEEP_BATCH)
      .execute();
    // A task queued since the query above keeps its file: removeFile checks again under the lock.
    for (const file of expired) if ((await removeFile(database, storage, file, now)).removed) swept++;
    if (expired.length < SWEEP_BATCH) return swept;
  }
}
