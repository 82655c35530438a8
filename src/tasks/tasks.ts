// Tasks as the API shows them: queueing (single and batch), reading, listing, canceling.
import type { Selectable } from 'kysely';
import { iso, type Clock } from '../clock.js';
import type { Database, Tx } from '../db/database.js';
import type { TasksTable } from '../db/schema.js';
import { AppError, TaskError, notFound } from '../errors.js';
import { checkOutputSize, checkPixels } from '../imaging/pipeline.js';
import { newId } from '../ids.js';
import type { PlanLimits } from '../accounts/plans.js';
import { chargeBatchFiles, chargeTasks, checkQueuedTasks, lockAccount } from '../accounts/quota.js';
import { getLiveFile, type FileRecord } from '../files/files.js';
import { olderThan, pageOf } from '../http/pagination.js';
import type { Operation } from '../operations/types.js';
import { acceptsFormat } from '../files/kinds.js';

type TaskRow = Selectable<TasksTable>;

export const MAX_ATTEMPTS = 3;

const parse = <T>(text: string | null): T | undefined => (text === null ? undefined : (JSON.parse(text) as T));

export function taskToApi(task: TaskRow) {
  const outputFileIds = parse<string[]>(task.output_file_ids);
  return {
    taskId: task.id,
    type: task.type,
    status: task.status,
    progress: task.progress,
    ...(task.batch_id ? { batchId: task.batch_id } : {}),
    input: JSON.parse(task.input) as { fileId: string } | { fileIds: string[] },
    options: JSON.parse(task.options) as Record<string, unknown>,
    ...(task.output_file_id ? { outputFileId: task.output_file_id } : {}),
    ...(outputFileIds ? { outputFileIds } : {}),
    ...(task.status === 'completed' && task.result ? { result: JSON.parse(task.result) } : {}),
    ...(task.status === 'failed' && task.error_code ? { error: { code: task.error_code, message: task.error_message ?? '' } } : {}),
    attempts: task.attempts,
    createdAt: iso(task.created_at),
    ...(task.started_at !== null ? { startedAt: iso(task.started_at) } : {}),
    ...(task.completed_at !== null ? { completedAt: iso(task.completed_at) } : {}),
  };
}

export interface Submitter {
  accountId: string;
  limits: PlanLimits;
}

/** Loads the inputs (404/410), checks the kind accepts them (409) and the cross-field rules (400). */
async function resolveInputs(
  tx: Tx,
  op: Operation<any>,
  submitter: Submitter,
  fileIds: string[],
  options: Record<string, unknown>,
  now: number,
): Promise<FileRecord[]> {
  // Rules between options come first: validation outranks not found (API.md's order of errors).
  const optionErrors = op.check?.(options, [], submitter.limits) ?? [];
  if (optionErrors.length) throw new AppError('VALIDATION_ERROR', optionErrors.map((e) => `${e.field}: ${e.message}`).join('; '), { fields: optionErrors });
  const files: FileRecord[] = [];
  for (const fileId of fileIds) files.push(await getLiveFile(tx, submitter.accountId, fileId, now));
  for (const file of files) {
    if (!acceptsFormat(op.accepts, file.format)) {
      throw new AppError('INPUT_NOT_SUPPORTED', `${op.kind} does not accept ${file.format} files`, { fileId: file.id, format: file.format });
    }
  }
  const errors = op.check?.(options, files, submitter.limits) ?? [];
  if (errors.length) throw new AppError('VALIDATION_ERROR', errors.map((e) => `${e.field}: ${e.message}`).join('; '), { fields: errors });
  // Files the options name (a watermark's logo) must be the caller's live images too.
  for (const fileId of op.extraInputs?.(options) ?? []) {
    const file = await getLiveFile(tx, submitter.accountId, fileId, now);
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
function failsAtOnce(op: Operation<any>, options: Record<string, unknown>, file: FileRecord, limits: PlanLimits): TaskError | undefined {
  if (file.width === null || file.height === null) return undefined;
  try {
    const source = { width: file.width, height: file.height };
    checkPixels(source, limits, 'The image');
    if (file.pages !== null && ANIMATED_FORMATS.has(file.format) && file.pages > limits.maxFrames) {
      throw new TaskError('IMAGE_TOO_LARGE', `The animation has ${file.pages} frames; the plan allows ${limits.maxFrames}`);
    }
    const planned = op.outputSize?.(options, source);
    if (planned) checkOutputSize(planned, limits, op.capsOutputSide ?? false);
    return undefined;
  } catch (err) {
    if (err instanceof TaskError) return err;
    throw err;
  }
}

const ANIMATED_FORMATS = new Set(['gif', 'webp']);

function taskRow(
  submitter: Submitter,
  op: Operation<any>,
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
    input: JSON.stringify(input),
    options: JSON.stringify(options),
    output_file_id: null,
    output_file_ids: null,
    result: null,
    error_code: failure?.code ?? null,
    error_message: failure?.message ?? null,
    progress: 0,
    attempts: 0,
    max_attempts: MAX_ATTEMPTS,
    charged: 1,
    run_at: now,
    lease_owner: null,
    lease_expires_at: null,
    created_at: now,
    started_at: null,
    completed_at: failure ? now : null,
  };
}

async function insertTasks(tx: Tx, rows: { task: TaskRow; fileIds: string[] }[]): Promise<void> {
  await tx.insertInto('tasks').values(rows.map((r) => r.task)).execute();
  const inputs = rows.flatMap((r) => r.fileIds.map((fileId, position) => ({ task_id: r.task.id, file_id: fileId, position })));
  if (inputs.length) await tx.insertInto('task_inputs').values(inputs).execute();
}

/** Queues one task; the quota is charged in the same transaction. */
export async function submitTask(
  database: Database,
  tx: Tx,
  clock: Clock,
  op: Operation<any>,
  submitter: Submitter,
  body: Record<string, unknown>,
) {
  const now = clock.now();
  const { fileId, fileIds, ...options } = body as { fileId?: string; fileIds?: string[] } & Record<string, unknown>;
  const ids = op.multiInput ? fileIds! : [fileId!];
  const files = await resolveInputs(tx, op, submitter, ids, options, now);
  // Several inputs, one task: the first input past a limit fails it.
  const failure = files.reduce<TaskError | undefined>((found, file) => found ?? failsAtOnce(op, options, file, submitter.limits), undefined);
  const task = taskRow(submitter, op, op.multiInput ? { fileIds: ids } : { fileId: ids[0]! }, options, now, null, failure);
  await lockAccount(database, tx, submitter.accountId);
  await checkQueuedTasks(tx, submitter.accountId, submitter.limits, 1);
  await chargeTasks(tx, submitter.accountId, submitter.limits, 1, now);
  await insertTasks(tx, [{ task, fileIds: [...ids, ...(op.extraInputs?.(options) ?? [])] }]);
  return { taskId: task.id, status: task.status, type: task.type, createdAt: iso(now) };
}

/** Queues one task per file, all or nothing. */
export async function submitBatch(
  database: Database,
  tx: Tx,
  clock: Clock,
  op: Operation<any>,
  submitter: Submitter,
  body: Record<string, unknown>,
) {
  const now = clock.now();
  const { fileIds, ...options } = body as { fileIds: string[] } & Record<string, unknown>;
  if (fileIds.length > submitter.limits.batchSize) {
    throw new AppError('BATCH_TOO_LARGE', `A batch may hold ${submitter.limits.batchSize} files on this plan; this one has ${fileIds.length}`, {
      limit: submitter.limits.batchSize,
      requested: fileIds.length,
    });
  }
  const files = await resolveInputs(tx, op, submitter, fileIds, options, now);
  const batchId = newId('batch');
  const extra = op.extraInputs?.(options) ?? [];
  const rows = files.map((file, index) => ({
    task: taskRow(submitter, op, { fileId: file.id }, options, now, { id: batchId, index }, failsAtOnce(op, options, file, submitter.limits)),
    fileIds: [file.id, ...extra],
  }));
  await lockAccount(database, tx, submitter.accountId);
  await checkQueuedTasks(tx, submitter.accountId, submitter.limits, rows.length);
  await chargeBatchFiles(tx, submitter.accountId, submitter.limits, rows.length, now);
  await chargeTasks(tx, submitter.accountId, submitter.limits, rows.length, now);
  await tx.insertInto('batches').values({ id: batchId, account_id: submitter.accountId, type: op.kind, size: rows.length, created_at: now }).execute();
  await insertTasks(tx, rows);
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

export const isFinished = (status: string): boolean => status === 'completed' || status === 'failed' || status === 'canceled';

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
 */
export async function cancelTasks(database: Database, clock: Clock, accountId: string, taskIds: string[]): Promise<number> {
  if (!taskIds.length) return 0;
  const result = await database.db
    .updateTable('tasks')
    .set({ status: 'canceled', completed_at: clock.now(), lease_owner: null, lease_expires_at: null })
    .where('account_id', '=', accountId)
    .where('id', 'in', taskIds)
    .where('status', 'in', ['queued', 'processing'])
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

export async function cancelTask(database: Database, clock: Clock, accountId: string, taskId: string): Promise<TaskRow> {
  await getTask(database, accountId, taskId);
  if (!(await cancelTasks(database, clock, accountId, [taskId]))) {
    const task = await getTask(database, accountId, taskId);
    throw new AppError('TASK_NOT_CANCELABLE', `The task has already finished (${task.status})`, { status: task.status });
  }
  return getTask(database, accountId, taskId);
}

export async function getBatch(database: Database, accountId: string, batchId: string) {
  const batch = await database.db.selectFrom('batches').selectAll().where('id', '=', batchId).where('account_id', '=', accountId).executeTakeFirst();
  if (!batch) throw notFound('Batch');
  const tasks = await database.db.selectFrom('tasks').selectAll().where('batch_id', '=', batchId).orderBy('batch_index').execute();
  const counts = { queued: 0, processing: 0, completed: 0, failed: 0, canceled: 0 };
  for (const task of tasks) counts[task.status]++;
  return { batchId: batch.id, type: batch.type, createdAt: iso(batch.created_at), counts, tasks: tasks.map(taskToApi) };
}
