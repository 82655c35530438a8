// Tasks as the API shows them: queueing (single and batch), reading, listing, canceling.
import type { Selectable } from 'kysely';
import { iso, type Clock } from '../clock.js';
import { jsonRows, type Database, type Tx } from '../db/database.js';
import { ACTIVE_STATUSES, isFinished, type DB, type SqliteViews, type TaskLane, type TasksTable } from '../db/schema.js';
import { AppError, TaskError, fieldsInvalid, notFound } from '../errors.js';
import { isAnimation } from '../imaging/formats.js';
import { checkOutputSize, checkSource, outputFrames } from '../imaging/limits.js';
import { newId } from '../ids.js';
import type { PlanLimits } from '../accounts/plans.js';
import {
  chargeBatchFiles,
  chargeTasks,
  chargingTasks,
  checkQueuedTasks,
  checkStorage,
  lockAccount,
  lockAccountForWork,
  markingAccountForWork,
  monthlyQuotaExceeded,
  periods,
  stillFits,
} from '../accounts/quota.js';
import { sql, type QueryCreator, type SqlBool } from 'kysely';
import { filesOfAccount, filesStillLive, liveFile, type FileRecord } from '../files/files.js';
import { olderThan, pageOf } from '../db/pagination.js';
import type { AnyOperation } from '../operations/types.js';
import { acceptsFormat } from '../files/kinds.js';
import { batchToApi, taskErrorToApi, taskToApi } from './view.js';
import { recordTasksEnded } from './ended.js';
import type { CarriedMessage } from '../queue/events.js';

type TaskRow = Selectable<TasksTable>;

export const MAX_ATTEMPTS = 3;

export { taskToApi };

interface Submitter {
  accountId: string;
  limits: PlanLimits;
}

/** What queueing work needs besides the request's body: the kind, who asks, and the transaction. */
export interface Submission {
  database: Database;
  tx: Tx;
  clock: Clock;
  op: AnyOperation;
  submitter: Submitter;
  /** The workers' wake-up, carried by the statement that inserts the tasks (`QueueEvents.carried`). */
  wake?: CarriedMessage;
  /**
   * `tx` is the database's handle, not a transaction (submitTask only): a charged task is read
   * for, then written in one statement that checks again what was read (SQLite: the view
   * queued_tasks, migration 0014; PostgreSQL: insertChargedTask alone), or submitTask opens a
   * transaction itself.
   */
  alone?: boolean;
}

/**
 * The work's inputs and the files its options name (a watermark's logo), read with the
 * statement that locks the account (lockAccountForWork), by id.
 */
async function lockAccountWithInputs(database: Database, tx: Tx, accountId: string, fileIds: readonly string[], unlocked = false) {
  const work = await lockAccountForWork(database, tx, accountId, (eb) => filesOfAccount(database, eb, accountId, fileIds), { unlocked });
  return { work, found: new Map(jsonRows(work.also).map((file) => [file.id, file])) };
}

/** Judges the inputs (404/410), checks the kind accepts them (409) and the cross-field rules (400). */
function resolveInputs(
  op: AnyOperation,
  submitter: Submitter,
  fileIds: string[],
  options: Record<string, unknown>,
  now: number,
  found: ReadonlyMap<string, FileRecord>,
): FileRecord[] {
  // Rules between options come first: validation outranks not found (API.md's order of errors).
  const optionErrors = op.check?.(options, [], submitter.limits) ?? [];
  if (optionErrors.length) throw fieldsInvalid(optionErrors);
  const files = fileIds.map((fileId) => liveFile(found.get(fileId), now));
  for (const file of files) {
    if (!acceptsFormat(op.accepts, file.format)) {
      throw new AppError('INPUT_NOT_SUPPORTED', `${op.kind} does not accept ${file.format} files`, { fileId: file.id, format: file.format });
    }
  }
  const errors = op.check?.(options, files, submitter.limits) ?? [];
  if (errors.length) throw fieldsInvalid(errors);
  // Files the options name (a watermark's logo) must be the caller's live images too.
  for (const fileId of op.extraInputs?.(options) ?? []) {
    const file = liveFile(found.get(fileId), now);
    if (!acceptsFormat('image', file.format)) {
      throw new AppError('INPUT_NOT_SUPPORTED', `${file.format} files cannot be used here`, { fileId: file.id, format: file.format });
    }
  }
  return files;
}

/**
 * Limits that the stored header and the options already decide: an input or a computed output
 * past the plan's pixel limit fails the task at once, before any worker decodes a pixel.
 */
function failsAtOnce(op: AnyOperation, options: Record<string, unknown>, file: FileRecord, limits: PlanLimits): TaskError | undefined {
  if (file.width === null || file.height === null) return undefined;
  try {
    const source = { width: file.width, height: file.height };
    // Only GIF and WebP frames are frames (TIFF pages are not). A header read from the first
    // bytes of a large file may count fewer frames than it has: the worker checks them all again.
    const frames = file.pages !== null && isAnimation(file.format) ? file.pages : 1;
    checkSource({ ...source, frames }, limits);
    const format = typeof options.format === 'string' ? options.format : file.format;
    // A pipeline's every step result; another kind's output, as far as the options decide them.
    for (const size of op.sizes?.(options, source) ?? []) checkOutputSize(size, limits, size.capped, outputFrames(frames, format));
    return undefined;
  } catch (err) {
    if (err instanceof TaskError) return err;
    throw err;
  }
}

/** The lane a task of `op` with these options runs in (`options` without its input ids). */
const laneOf = (op: AnyOperation, options: Record<string, unknown>): TaskLane => op.lane?.(options) ?? 'image';

/** The lane the tasks a queueing request's body asks for run in: the workers to wake. */
export function laneOfRequest(op: AnyOperation, body: Record<string, unknown>): TaskLane {
  const { fileId: _fileId, fileIds: _fileIds, ...options } = body;
  return laneOf(op, options);
}

function taskRow(
  submitter: Submitter,
  op: AnyOperation,
  input: { fileId: string } | { fileIds: string[] },
  options: Record<string, unknown>,
  now: number,
  batch: { id: string; index: number } | null,
  failure?: TaskError,
): TaskRow {
  return {
    id: newId('task'),
    account_id: submitter.accountId,
    batch_id: batch?.id ?? null,
    batch_index: batch?.index ?? null,
    type: op.kind,
    status: failure ? 'failed' : 'queued',
    priority: submitter.limits.priority,
    lane: laneOf(op, options),
    input: JSON.stringify(input),
    options: JSON.stringify(options),
    output_file_id: null,
    output_file_ids: null,
    result: null,
    error_code: failure?.code ?? null,
    error_message: failure?.message ?? null,
    error_details: failure?.details ? JSON.stringify(failure.details) : null,
    progress: 0,
    attempts: 0,
    max_attempts: MAX_ATTEMPTS,
    lost_leases: 0,
    // A task failed at submission never ran: no worker wrote anything for it.
    outputs_swept: failure ? 1 : 0,
    // A task failed when queued is charged nothing (API.md): it never reaches a worker.
    charged: failure ? 0 : 1,
    run_at: now,
    lease_owner: null,
    lease_expires_at: null,
    created_at: now,
    started_at: null,
    claimed_at: null,
    completed_at: failure ? now : null,
  };
}

async function insertTasks(database: Database, tx: Tx, rows: { task: TaskRow; fileIds: string[] }[], wake?: CarriedMessage): Promise<void> {
  await tx
    .insertInto('tasks')
    .values(rows.map((r) => r.task))
    .$if(wake !== undefined, (qb) => qb.returning(wake!.as('woke')))
    .execute();
  const inputs = rows.flatMap((r) => r.fileIds.map((fileId, position) => ({ task_id: r.task.id, file_id: fileId, position })));
  if (inputs.length) await tx.insertInto('task_inputs').values(inputs).execute();
  // A task failed when queued (a limit the header already shows) has ended: its webhook events.
  const failed = rows.filter((r) => r.task.status === 'failed');
  if (failed.length)
    await recordTasksEnded(
      database,
      tx,
      failed[0]!.task.account_id,
      failed.map((r) => r.task.id),
      failed[0]!.task.created_at,
    );
}

/**
 * PostgreSQL (`Database.writingCtes`): charges the month's quota for one task and inserts it
 * with its inputs in one statement, the rows written only when the charge fit (else
 * MONTHLY_QUOTA_EXCEEDED, and the caller's transaction undoes the day's count). Rows go in as
 * JSON typed by the tables' own row types (json_populate_recordset).
 *
 * `alone` (no transaction; what the caller read was read without the lock): the same statement
 * first takes the account's lock (quota.markingAccountForWork) and writes only while what was
 * read still holds (quota.stillFits, files.filesStillLive); answers false, having written
 * nothing but the lock's mark, when it does not or the charge does not fit.
 */
async function insertChargedTask(
  tx: Tx,
  submitter: Submitter,
  row: { task: TaskRow; fileIds: string[] },
  now: number,
  wake?: CarriedMessage,
  alone = false,
): Promise<boolean> {
  const { accountId, limits } = submitter;
  const fitting = alone
    ? sql<SqlBool>`EXISTS (SELECT 1 FROM marked WHERE ${stillFits('marked', accountId, limits, 1)} AND ${filesStillLive(accountId, row.fileIds, now)})`
    : undefined;
  const charging = chargingTasks(tx, accountId, limits, 1, now, fitting);
  if (!charging) {
    if (alone) return false;
    throw await monthlyQuotaExceeded(tx, accountId, limits, 1, now);
  }
  const fits = sql<boolean>`(SELECT count(*) FROM charged) = 2`;
  const inputs = row.fileIds.map((fileId, position) => ({ task_id: row.task.id, file_id: fileId, position }));
  const columns = Object.keys(row.task) as (keyof TaskRow)[];
  // The account's lock first (the lock order of quota.ts), read by the charge's condition.
  const marked: QueryCreator<DB> = alone
    ? (tx.with(
        (cte) => cte('marked').materialized(),
        (qb) => markingAccountForWork(qb, accountId),
      ) as unknown as QueryCreator<DB>)
    : tx;
  const inserted = await marked
    .with('charged', () => charging)
    .with('inputs', (qb) =>
      qb
        .insertInto('task_inputs')
        .columns(['task_id', 'file_id', 'position'])
        .expression(
          sql`SELECT r.task_id, r.file_id, r.position FROM json_populate_recordset(NULL::task_inputs, ${JSON.stringify(inputs)}) AS r WHERE ${fits}`,
        ),
    )
    .insertInto('tasks')
    .columns(columns)
    .expression(
      sql`SELECT ${sql.join(columns.map((column) => sql.ref(`r.${column}`)))} FROM json_populate_recordset(NULL::tasks, ${JSON.stringify([row.task])}) AS r WHERE ${fits}`,
    )
    .returning('id')
    .$if(wake !== undefined, (qb) => qb.returning(wake!.as('woke')))
    .execute();
  if (inserted.length) return true;
  if (alone) return false;
  throw await monthlyQuotaExceeded(tx, accountId, limits, 1, now);
}

/**
 * SQLite (`Submission.alone`): the task charged one task and inserted with its inputs in one
 * statement, a row of the view queued_tasks (migration 0014) whose trigger checks again, as it
 * writes, what the caller read (storage not full, room among the queued and running tasks, the
 * month's quota, every input live) and writes nothing otherwise: false.
 */
async function insertQueuedTask(database: Database, submitter: Submitter, row: { task: TaskRow; fileIds: string[] }, now: number): Promise<boolean> {
  const { limits } = submitter;
  try {
    await database.db
      .withTables<SqliteViews>()
      .insertInto('queued_tasks')
      .values({
        ...row.task,
        input_files: JSON.stringify(row.fileIds),
        month_period: periods.monthlyTasks(now),
        day_period: periods.dailyTasks(now),
        monthly_tasks: limits.monthlyTasks,
        max_queued_tasks: limits.maxQueuedTasks,
        storage_limit: limits.storageBytes,
      })
      .execute();
    return true;
  } catch (err) {
    if ((err as Error).message === QUEUEING_REFUSED) return false;
    throw err;
  }
}

/** What SQLite's queued_tasks trigger answers when it writes nothing (migration 0014). */
const QUEUEING_REFUSED = 'queueing refused';

/**
 * Queues one task; the quota is charged in the same transaction. The account is locked first
 * (the lock order in quota.ts): a file deleted or expiring meanwhile cannot become its input,
 * and the storage and quota checks stay true until the task is committed. Alone (no
 * transaction), what it reads without the lock is checked again by the statement that writes
 * (SQLite `insertQueuedTask`, PostgreSQL `insertChargedTask`); when that refuses, or the task
 * fails at once (its webhook events), it runs in a transaction.
 */
export async function submitTask(submission: Submission, body: Record<string, unknown>): Promise<SubmittedTask> {
  const { database, tx, clock, op, submitter, wake, alone } = submission;
  const now = clock.now();
  const { fileId, fileIds, ...options } = body as { fileId?: string; fileIds?: string[] } & Record<string, unknown>;
  const ids = op.multiInput ? multipleInputs(fileId, fileIds) : [fileId!];
  const { work, found } = await lockAccountWithInputs(database, tx, submitter.accountId, [...ids, ...(op.extraInputs?.(options) ?? [])], alone);
  const files = resolveInputs(op, submitter, ids, options, now, found);
  // Several inputs, one task: the first input past a limit fails it.
  const failure = files.reduce<TaskError | undefined>((found, file) => found ?? failsAtOnce(op, options, file, submitter.limits), undefined);
  const task = taskRow(submitter, op, op.multiInput ? { fileIds: ids } : { fileId: ids[0]! }, options, now, null, failure);
  // API.md's order of errors: storage before quota.
  checkStorage(work, submitter.limits);
  const charged = task.charged;
  checkQueuedTasks(work, submitter.limits, charged);
  const row = { task, fileIds: [...ids, ...(op.extraInputs?.(options) ?? [])] };
  if (alone) {
    const queued = charged
      ? database.writingCtes
        ? await insertChargedTask(tx, submitter, row, now, wake, true)
        : await insertQueuedTask(database, submitter, row, now)
      : false;
    if (!queued) return database.transaction((tx) => submitTask({ ...submission, tx, alone: false }, body));
  } else if (charged && database.writingCtes) await insertChargedTask(tx, submitter, row, now, wake);
  else {
    if (charged) await chargeTasks(tx, submitter.accountId, submitter.limits, charged, now);
    await insertTasks(database, tx, [row], wake);
  }
  return { taskId: task.id, status: task.status, type: task.type, createdAt: iso(now), ...(task.error_code ? { error: taskErrorToApi(task) } : {}) };
}

interface SubmittedTask {
  taskId: string;
  status: TaskRow['status'];
  type: string;
  createdAt: string;
  error?: ReturnType<typeof taskErrorToApi>;
}

/** A several-input kind takes `fileIds`, or `fileId` for one input: exactly one of them. */
function multipleInputs(fileId: string | undefined, fileIds: string[] | undefined): string[] {
  if ((fileId === undefined) === (fileIds === undefined)) {
    const field = fileIds === undefined ? 'fileIds' : 'fileId';
    throw new AppError('VALIDATION_ERROR', `${field}: give exactly one of fileIds, fileId`, {
      fields: [{ field, message: 'give exactly one of fileIds, fileId' }],
    });
  }
  return fileIds ?? [fileId!];
}

/** Queues one task per file, all or nothing; locks as submitTask does. */
export async function submitBatch({ database, tx, clock, op, submitter, wake }: Submission, body: Record<string, unknown>) {
  const now = clock.now();
  const { fileIds, ...options } = body as { fileIds: string[] } & Record<string, unknown>;
  if (fileIds.length > submitter.limits.batchSize) {
    throw new AppError('BATCH_TOO_LARGE', `A batch may hold ${submitter.limits.batchSize} files on this plan; this one has ${fileIds.length}`, {
      limit: submitter.limits.batchSize,
      requested: fileIds.length,
    });
  }
  const { work, found } = await lockAccountWithInputs(database, tx, submitter.accountId, [...fileIds, ...(op.extraInputs?.(options) ?? [])]);
  const files = resolveInputs(op, submitter, fileIds, options, now, found);
  const batchId = newId('batch');
  const extra = op.extraInputs?.(options) ?? [];
  const rows = files.map((file, index) => ({
    task: taskRow(submitter, op, { fileId: file.id }, options, now, { id: batchId, index }, failsAtOnce(op, options, file, submitter.limits)),
    fileIds: [file.id, ...extra],
  }));
  checkStorage(work, submitter.limits);
  // Tasks failed when queued are charged nothing, neither as tasks nor as batch files.
  const charged = rows.reduce((sum, { task }) => sum + task.charged, 0);
  checkQueuedTasks(work, submitter.limits, charged);
  if (charged) {
    await chargeBatchFiles(tx, submitter.accountId, submitter.limits, charged, now);
    await chargeTasks(tx, submitter.accountId, submitter.limits, charged, now);
  }
  await tx
    .insertInto('batches')
    .values({ id: batchId, account_id: submitter.accountId, type: op.kind, size: rows.length, created_at: now })
    .execute();
  await insertTasks(database, tx, rows, wake);
  return {
    batchId,
    type: op.kind,
    tasks: rows.map(({ task }, i) => ({ taskId: task.id, fileId: fileIds[i]!, status: task.status })),
  };
}

export async function getTask(database: Database, accountId: string, taskId: string): Promise<TaskRow> {
  const task = await database.db.selectFrom('tasks').selectAll().where('id', '=', taskId).where('account_id', '=', accountId).executeTakeFirst();
  if (!task) throw notFound('Task');
  return task;
}

/** Those of `taskIds` that have finished (completed, failed or canceled), in one statement. */
export async function finishedTaskIds(database: Database, taskIds: readonly string[]): Promise<string[]> {
  if (taskIds.length === 0) return [];
  const rows = await database.db
    .selectFrom('tasks')
    .select('id')
    .where('id', 'in', [...taskIds])
    .where('status', 'not in', [...ACTIVE_STATUSES])
    .execute();
  return rows.map((row) => row.id);
}

/**
 * The files a task reads, in order: its inputs, then the files its options name (a watermark's
 * logo). Deleted ones too: the worker fails the task INPUT_MISSING for them.
 */
export async function taskInputFiles(database: Database, taskId: string): Promise<FileRecord[]> {
  return database.db
    .selectFrom('task_inputs')
    .innerJoin('files', 'files.id', 'task_inputs.file_id')
    .selectAll('files')
    .where('task_inputs.task_id', '=', taskId)
    .orderBy('task_inputs.position')
    .execute();
}

export async function listTasks(
  database: Database,
  accountId: string,
  filter: { status?: string; batchId?: string; limit: number; cursor?: string },
) {
  const after = olderThan(filter.cursor, 'created_at', 'id');
  const rows = await database.db
    .selectFrom('tasks')
    .selectAll()
    .where('account_id', '=', accountId)
    .$if(filter.status !== undefined, (qb) => qb.where('status', '=', filter.status as TaskRow['status']))
    .$if(filter.batchId !== undefined, (qb) => qb.where('batch_id', '=', filter.batchId!))
    .$if(after !== undefined, (qb) => qb.where(after!))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .execute();
  const { page, nextCursor } = pageOf(rows, filter.limit);
  return { tasks: page.map(taskToApi), nextCursor };
}

/**
 * Cancels queued or running tasks. A running task's worker notices at its next heartbeat and
 * discards its output; the completion is refused because the task is no longer processing.
 * Under the account's lock (the lock order in quota.ts), so it never waits on a completion in
 * a circle.
 */
export async function cancelTasks(database: Database, clock: Clock, accountId: string, taskIds: string[]): Promise<number> {
  if (!taskIds.length) return 0;
  return database.transaction(async (tx) => {
    await lockAccount(database, tx, accountId);
    const now = clock.now();
    const canceled = await tx
      .updateTable('tasks')
      .set({ status: 'canceled', completed_at: now, lease_owner: null, lease_expires_at: null })
      .where('account_id', '=', accountId)
      .where('id', 'in', taskIds)
      .where('status', 'in', ACTIVE_STATUSES)
      .returning('id')
      .execute();
    // Their webhook events, in the same transaction: an ended task's event is never lost.
    await recordTasksEnded(
      database,
      tx,
      accountId,
      canceled.map((row) => row.id),
      now,
    );
    return canceled.length;
  });
}

export async function cancelTask(database: Database, clock: Clock, accountId: string, taskId: string): Promise<TaskRow> {
  await getTask(database, accountId, taskId);
  if (!(await cancelTasks(database, clock, accountId, [taskId]))) {
    const task = await getTask(database, accountId, taskId);
    throw new AppError('TASK_NOT_CANCELABLE', `The task has already finished (${task.status})`, { status: task.status });
  }
  return getTask(database, accountId, taskId);
}

/** A task of a finished batch, for its ZIP: its first input and its output while that lives. */
export interface BatchArchiveEntry {
  task: TaskRow;
  input: FileRecord | undefined;
  output: FileRecord | undefined;
}

/**
 * The caller's batch with every task finished, each with its input and live output, in batch
 * order; 409 BATCH_NOT_FINISHED while a task is queued or processing.
 */
export async function finishedBatch(database: Database, accountId: string, batchId: string, now: number) {
  const batch = await database.db.selectFrom('batches').selectAll().where('id', '=', batchId).where('account_id', '=', accountId).executeTakeFirst();
  if (!batch) throw notFound('Batch');
  const tasks = await database.db.selectFrom('tasks').selectAll().where('batch_id', '=', batchId).orderBy('batch_index').execute();
  const unfinished = tasks.filter((task) => !isFinished(task.status)).length;
  if (unfinished) {
    throw new AppError('BATCH_NOT_FINISHED', `${unfinished} task(s) of the batch are still queued or processing`, { unfinished });
  }
  const inputOf = (task: TaskRow) => (JSON.parse(task.input) as { fileId: string }).fileId;
  const ids = tasks.flatMap((task) => [inputOf(task), ...(task.output_file_id ? [task.output_file_id] : [])]);
  const files = ids.length
    ? await database.db.selectFrom('files').selectAll().where('id', 'in', ids).where('account_id', '=', accountId).execute()
    : [];
  const byId = new Map(files.map((file) => [file.id, file]));
  const live = (file: FileRecord | undefined) => (file && file.deleted_at === null && file.expires_at > now ? file : undefined);
  const entries: BatchArchiveEntry[] = tasks.map((task) => ({
    task,
    input: byId.get(inputOf(task)),
    output: task.output_file_id ? live(byId.get(task.output_file_id)) : undefined,
  }));
  return { batch, entries };
}

export async function getBatch(database: Database, accountId: string, batchId: string) {
  const batch = await database.db.selectFrom('batches').selectAll().where('id', '=', batchId).where('account_id', '=', accountId).executeTakeFirst();
  if (!batch) throw notFound('Batch');
  const tasks = await database.db.selectFrom('tasks').selectAll().where('batch_id', '=', batchId).orderBy('batch_index').execute();
  return batchToApi(batch, tasks);
}

/** Up to `limit` tasks that ended without outputs (failed, canceled) and were not swept yet. */
export async function unsweptEndedWithoutOutputs(database: Database, limit: number): Promise<string[]> {
  const rows = await database.db
    .selectFrom('tasks')
    .select('id')
    .where('outputs_swept', '=', 0)
    .where('status', 'in', ['failed', 'canceled'])
    .limit(limit)
    .execute();
  return rows.map((row) => row.id);
}

/** Marks tasks as swept of their output objects. */
export async function markOutputsSwept(database: Database, taskIds: string[]): Promise<void> {
  if (taskIds.length) await database.db.updateTable('tasks').set({ outputs_swept: 1 }).where('id', 'in', taskIds).execute();
}
