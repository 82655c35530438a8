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

/** A batch with its tasks (in batch order) and how many are in each state. */
export function batchToApi(batch: Selectable<BatchesTable>, tasks: TaskRow[]) {
  const counts = Object.fromEntries(TASK_STATUSES.map((status) => [status, 0])) as Record<TaskStatus, number>;
  for (const task of tasks) counts[task.status]++;
  return { batchId: batch.id, type: batch.type, createdAt: iso(batch.created_at), counts, tasks: tasks.map(taskToApi) };
}
