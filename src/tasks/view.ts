// Tasks and batches as the API shows them: GET /api/tasks/{id}, GET /api/batches/{id}, and the
// webhook events that carry the same objects.
import type { Selectable } from 'kysely';
import { iso } from '../clock.js';
import { TASK_STATUSES, type BatchesTable, type TasksTable, type TaskStatus } from '../db/schema.js';

type TaskRow = Selectable<TasksTable>;

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
    ...(task.status === 'failed' && task.error_code ? { error: taskErrorToApi(task) } : {}),
    attempts: task.attempts,
    createdAt: iso(task.created_at),
    ...(task.started_at !== null ? { startedAt: iso(task.started_at) } : {}),
    ...(task.completed_at !== null ? { completedAt: iso(task.completed_at) } : {}),
  };
}

/** A failed task's `error`: code, message and, when the failure has them, `details`. */
export function taskErrorToApi(task: Pick<TaskRow, 'error_code' | 'error_message' | 'error_details'>) {
  const details = parse<Record<string, unknown>>(task.error_details);
  return { code: task.error_code!, message: task.error_message ?? '', ...(details ? { details } : {}) };
}

export const BATCH_STATUSES = ['queued', 'processing', 'completed', 'partial', 'failed', 'canceled'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];

/**
 * A batch's overall status from its tasks' counts: `queued` while no task has left the queue;
 * `processing` while any is queued or processing and at least one has left it; once every task
 * has finished, `completed`, `failed` or `canceled` when they all ended the same way, else `partial`.
 */
export function batchStatus(counts: Record<TaskStatus, number>, total: number): BatchStatus {
  if (counts.queued === total) return 'queued';
  if (counts.queued + counts.processing > 0) return 'processing';
  for (const status of ['completed', 'failed', 'canceled'] as const) if (counts[status] === total) return status;
  return 'partial';
}

/** A batch with its tasks (in batch order), how many are in each state, its overall status and when it finished. */
export function batchToApi(batch: Selectable<BatchesTable>, tasks: TaskRow[]) {
  const counts = Object.fromEntries(TASK_STATUSES.map((status) => [status, 0])) as Record<TaskStatus, number>;
  for (const task of tasks) counts[task.status]++;
  const status = batchStatus(counts, tasks.length);
  const finished = status !== 'queued' && status !== 'processing';
  // The last task's finish; a finished task always has completed_at.
  const completedAt = finished ? Math.max(...tasks.map((task) => task.completed_at ?? batch.created_at)) : null;
  return {
    batchId: batch.id,
    type: batch.type,
    status,
    createdAt: iso(batch.created_at),
    completedAt: completedAt === null ? null : iso(completedAt),
    counts,
    tasks: tasks.map(taskToApi),
  };
}
