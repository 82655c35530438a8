// Tasks and batches: read (with long-poll), list, cancel.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Services } from '../../services.js';
import { cancelTask, cancelTasks, getBatch, getTask, isFinished, listTasks, taskToApi } from '../../tasks/tasks.js';
import { paginationQuery } from '../pagination.js';
import { errors, idParam, ok, taskSchema } from '../schemas.js';

const tags = ['Tasks'];
const security = [{ apiKey: [] }];
/** Long-polls re-read the task this often, for finishes seen only by another process. */
const WAIT_RECHECK_MS = 1000;

const batchSchema = {
  type: 'object',
  properties: {
    batchId: { type: 'string' },
    type: { type: 'string' },
    createdAt: { type: 'string', format: 'date-time' },
    counts: {
      type: 'object',
      properties: { queued: { type: 'integer' }, processing: { type: 'integer' }, completed: { type: 'integer' }, failed: { type: 'integer' }, canceled: { type: 'integer' } },
    },
    tasks: { type: 'array', items: taskSchema },
  },
};

export function taskRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock, events } = services;

  app.get(
    '/tasks/:taskId',
    {
      schema: {
        tags,
        security,
        summary: 'Get a task',
        description: 'With `?wait=N` (1–30 s) the answer comes as soon as the task finishes, or after N seconds.',
        params: idParam('taskId', 'task'),
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { wait: { type: 'integer', minimum: 1, maximum: 30, description: 'Seconds to wait for the task to finish.' } },
        },
        response: { 200: ok(taskSchema), ...errors(400, 401, 404) },
      },
    },
    async (request: FastifyRequest<{ Params: { taskId: string }; Querystring: { wait?: number } }>) => {
      const { taskId } = request.params;
      let task = await getTask(database, request.account.id, taskId);
      if (request.query.wait && !isFinished(task.status)) {
        const deadline = Date.now() + request.query.wait * 1000;
        const closed = new AbortController();
        request.raw.once('close', () => closed.abort());
        while (!isFinished(task.status) && Date.now() < deadline && !closed.signal.aborted) {
          await events.waitForFinish(taskId, Math.min(WAIT_RECHECK_MS, deadline - Date.now()), closed.signal);
          task = await getTask(database, request.account.id, taskId);
        }
      }
      return { success: true, data: taskToApi(task) };
    },
  );

  app.get(
    '/tasks',
    {
      schema: {
        tags,
        security,
        summary: 'List tasks',
        description: 'Newest first, optionally filtered by status or batch.',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            status: { type: 'string', enum: ['queued', 'processing', 'completed', 'failed', 'canceled'] },
            batchId: { type: 'string', maxLength: 100 },
            ...paginationQuery,
          },
        },
        response: { 200: ok({ type: 'object', properties: { tasks: { type: 'array', items: taskSchema }, nextCursor: { type: ['string', 'null'] } } }), ...errors(400, 401) },
      },
    },
    async (request: FastifyRequest<{ Querystring: { status?: string; batchId?: string; limit: number; cursor?: string } }>) => ({
      success: true,
      data: await listTasks(database, request.account.id, request.query),
    }),
  );

  app.delete(
    '/tasks/:taskId',
    {
      schema: {
        tags,
        security,
        summary: 'Cancel a task',
        description: 'A queued task is canceled at once; a running one stops at its next step and its output is discarded. A finished task: 409.',
        params: idParam('taskId', 'task'),
        response: { 200: ok(taskSchema), ...errors(401, 404, 409) },
      },
    },
    async (request: FastifyRequest<{ Params: { taskId: string } }>) => {
      const task = await cancelTask(database, clock, request.account.id, request.params.taskId);
      events.finished(task.id);
      return { success: true, data: taskToApi(task) };
    },
  );

  app.get(
    '/batches/:batchId',
    {
      schema: { tags: ['Batches'], security, summary: 'Get a batch', params: idParam('batchId', 'batch'), response: { 200: ok(batchSchema), ...errors(401, 404) } },
    },
    async (request: FastifyRequest<{ Params: { batchId: string } }>) => ({
      success: true,
      data: await getBatch(database, request.account.id, request.params.batchId),
    }),
  );

  app.delete(
    '/batches/:batchId',
    {
      schema: {
        tags: ['Batches'],
        security,
        summary: 'Cancel a batch',
        description: 'Cancels every task of the batch that has not finished; answers with the batch.',
        params: idParam('batchId', 'batch'),
        response: { 200: ok(batchSchema), ...errors(401, 404) },
      },
    },
    async (request: FastifyRequest<{ Params: { batchId: string } }>) => {
      const batch = await getBatch(database, request.account.id, request.params.batchId);
      const open = batch.tasks.filter((t) => !isFinished(t.status)).map((t) => t.taskId);
      await cancelTasks(database, clock, request.account.id, open);
      for (const id of open) events.finished(id);
      return { success: true, data: await getBatch(database, request.account.id, request.params.batchId) };
    },
  );
}
