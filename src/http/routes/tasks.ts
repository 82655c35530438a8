// Tasks and batches: read (with long-poll), list, cancel; a finished batch's outputs as one ZIP.
import crypto from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import yazl from 'yazl';
import type { Services } from '../../services.js';
import { isFinished, TASK_STATUSES } from '../../db/schema.js';
import { cancelTask, cancelTasks, finishedBatch, getBatch, getTask, listTasks, taskToApi, type BatchArchiveEntry } from '../../tasks/tasks.js';
import { safeFilename } from '../../files/identify.js';
import { LongPolls } from '../../tasks/long-poll.js';
import { paginationQuery } from '../pagination.js';
import { API_READ, API_SECURITY, API_WRITE, VALIDATED, apiResponses, bytes, jsonData } from '../openapi.js';
import { CANCELED_TASK_EXAMPLE, idParam } from '../schemas.js';

const tags = ['Tasks'];
export function taskRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock, events, storage } = services;
  const longPolls = new LongPolls(database, events, (err) => services.logger.warn({ err }, 'long-poll recheck failed'));

  app.get(
    '/tasks/:taskId',
    {
      schema: {
        operationId: 'getTask',
        tags,
        security: API_SECURITY,
        summary: 'Get a task',
        description: 'With `?wait=N` (1–30 s) the answer comes as soon as the task finishes, or after N seconds.',
        params: idParam('taskId', 'task'),
        querystring: waitQuery('Seconds to wait for the task to finish.'),
        response: apiResponses({ 200: jsonData('The task', 'Task') }, [...API_READ, ...VALIDATED, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { taskId: string }; Querystring: { wait?: number } }>) => {
      const { taskId } = request.params;
      let task = await getTask(database, request.account.id, taskId);
      if (request.query.wait && !isFinished(task.status)) {
        const deadline = Date.now() + request.query.wait * 1000;
        const closed = new AbortController();
        request.raw.once('close', () => closed.abort());
        // Woken by the finish itself (this process, NOTIFY, or LongPolls' shared recheck): the
        // task is read again only then, or at the deadline.
        while (!isFinished(task.status) && Date.now() < deadline && !closed.signal.aborted) {
          await longPolls.wait(taskId, deadline - Date.now(), closed.signal);
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
        operationId: 'listTasks',
        tags,
        security: API_SECURITY,
        summary: 'List tasks',
        description: 'Newest first, optionally filtered by status or batch.',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            status: { type: 'string', enum: [...TASK_STATUSES] },
            batchId: { type: 'string', maxLength: 100 },
            ...paginationQuery,
          },
        },
        response: apiResponses({ 200: jsonData('A page of tasks', 'TaskList') }, [...API_READ, ...VALIDATED]),
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
        operationId: 'cancelTask',
        tags,
        security: API_SECURITY,
        summary: 'Cancel a task',
        description: 'A queued task is canceled at once; a running one stops at its next step and its output is discarded. A finished task: 409.',
        params: idParam('taskId', 'task'),
        response: apiResponses({ 200: jsonData('The task, now canceled', 'Task', CANCELED_TASK_EXAMPLE) }, [
          ...API_WRITE,
          ...VALIDATED,
          'NOT_FOUND',
          'TASK_NOT_CANCELABLE',
        ]),
      },
    },
    async (request: FastifyRequest<{ Params: { taskId: string } }>) => {
      const task = await cancelTask(database, clock, request.account.id, request.params.taskId);
      events.finished(task.id);
      // Its webhook events, if the account has endpoints for them, are due now.
      events.deliveries();
      return { success: true, data: taskToApi(task) };
    },
  );

  app.get(
    '/batches/:batchId',
    {
      schema: {
        operationId: 'getBatch',
        tags: ['Batches'],
        security: API_SECURITY,
        summary: 'Get a batch',
        description:
          'With `?wait=N` (1–30 s) the answer comes as soon as every task of the batch has finished (`completedAt` set), or after N ' +
          'seconds: one request instead of one per task.',
        params: idParam('batchId', 'batch'),
        querystring: waitQuery('Seconds to wait for every task of the batch to finish.'),
        response: apiResponses({ 200: jsonData('The batch and its tasks', 'Batch') }, [...API_READ, ...VALIDATED, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { batchId: string }; Querystring: { wait?: number } }>) => {
      const { batchId } = request.params;
      let batch = await getBatch(database, request.account.id, batchId);
      if (request.query.wait) {
        const deadline = Date.now() + request.query.wait * 1000;
        const closed = new AbortController();
        request.raw.once('close', () => closed.abort());
        // As a task's long-poll, woken by any unfinished task's finish; read again only then, or at the deadline.
        let open = batch.tasks.filter((t) => !isFinished(t.status)).map((t) => t.taskId);
        while (open.length && Date.now() < deadline && !closed.signal.aborted) {
          await longPolls.waitAny(open, deadline - Date.now(), closed.signal);
          batch = await getBatch(database, request.account.id, batchId);
          open = batch.tasks.filter((t) => !isFinished(t.status)).map((t) => t.taskId);
        }
      }
      return { success: true, data: batch };
    },
  );

  app.get(
    '/batches/:batchId/download',
    {
      schema: {
        operationId: 'downloadBatch',
        tags: ['Batches'],
        security: API_SECURITY,
        summary: "Download a finished batch's outputs as one ZIP",
        description:
          "A ZIP, streamed, of every completed output in batch order, named `NNN-<output name>` (NNN counts from 001; the output's own " +
          'name, `<input stem>.<tag>.<ext>`, as `GET /api/download` gives it), plus ' +
          "`manifest.json`: each task's `taskId`, `input` (`fileId`, `filename`), `status`, the `file` it became in the ZIP, and " +
          '`error` for a failed task (an output already expired or deleted is listed with `expired: true`). 409 `BATCH_NOT_FINISHED` ' +
          'while a task is queued or processing.\n\n' +
          'Every entry is stored (images are compressed already) and dated by its output, so the ZIP is the same bytes for as long ' +
          'as its outputs are the same: its `Content-Length` is known before it is sent, and its `ETag` names those bytes.',
        params: idParam('batchId', 'batch'),
        response: apiResponses({ 200: bytes('The ZIP', ['application/zip'], { headers: ['Content-Disposition', 'ETag', 'Content-Length'] }) }, [
          ...API_READ,
          ...VALIDATED,
          'NOT_FOUND',
          'BATCH_NOT_FINISHED',
        ]),
      },
    },
    async (request: FastifyRequest<{ Params: { batchId: string } }>, reply) => {
      const { batch, entries } = await finishedBatch(database, request.account.id, request.params.batchId, clock.now());
      const zip = new yazl.ZipFile();
      const output = zip.outputStream as Readable;
      // yazl reports a failed read of an entry on the ZipFile, not on its output stream.
      zip.on('error', (err: Error) => output.destroy(err));
      // What the bytes depend on: each output (its id, size and date) and the manifest.
      const identity = crypto.createHash('sha256');
      const manifest = entries.map((entry) => {
        const name = entry.output ? archiveName(entry) : undefined;
        const file = entry.output;
        if (file && name) {
          identity.update(`${name}\0${file.id}\0${file.size}\0${file.created_at}\0`);
          // Images are compressed already: stored, and each object opened only when its turn comes.
          zip.addReadStreamLazy(name, { compress: false, size: Number(file.size), mtime: new Date(file.created_at) }, (done) => {
            // An object that cannot be read ends the ZIP stream with the error.
            storage.get(file.storage_key).then(
              (stream) => done(null, stream),
              (err: Error) => output.destroy(err),
            );
          });
        }
        const { task, input } = entry;
        return {
          taskId: task.id,
          input: {
            fileId: input?.id ?? (JSON.parse(task.input) as { fileId: string }).fileId,
            filename: input ? safeFilename(input.filename, input.format) : null,
          },
          status: task.status,
          ...(name ? { file: name } : {}),
          ...(task.status === 'completed' && !name ? { expired: true } : {}),
          ...(task.error_code ? { error: { code: task.error_code, message: task.error_message ?? '' } } : {}),
        };
      });
      const manifestBytes = Buffer.from(JSON.stringify({ batchId: batch.id, type: batch.type, tasks: manifest }, null, 2));
      identity.update(manifestBytes);
      // Stored and dated by the batch's last finish, so every entry's size is known: yazl computes the ZIP's length.
      const finishedAt = Math.max(batch.created_at, ...entries.map((entry) => entry.task.completed_at ?? 0));
      zip.addBuffer(manifestBytes, 'manifest.json', { compress: false, mtime: new Date(finishedAt) });
      // yazl's callback is given the total (-1 when it cannot be known); its types omit the argument.
      const length = await new Promise<number>((resolve) => zip.end(undefined, resolve as unknown as () => void));
      reply
        .header('content-type', 'application/zip')
        .header('content-disposition', `attachment; filename="${batch.id}.zip"`)
        .header('etag', `"${identity.digest('hex').slice(0, 32)}"`)
        .header('x-content-type-options', 'nosniff');
      if (length >= 0) reply.header('content-length', length);
      return reply.send(output);
    },
  );

  app.delete(
    '/batches/:batchId',
    {
      schema: {
        operationId: 'cancelBatch',
        tags: ['Batches'],
        security: API_SECURITY,
        summary: 'Cancel a batch',
        description: 'Cancels every task of the batch that has not finished; answers with the batch.',
        params: idParam('batchId', 'batch'),
        response: apiResponses({ 200: jsonData('The batch, its unfinished tasks canceled', 'Batch') }, [...API_WRITE, ...VALIDATED, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { batchId: string } }>) => {
      const batch = await getBatch(database, request.account.id, request.params.batchId);
      const open = batch.tasks.filter((t) => !isFinished(t.status)).map((t) => t.taskId);
      await cancelTasks(database, clock, request.account.id, open);
      for (const id of open) events.finished(id);
      if (open.length) events.deliveries();
      return { success: true, data: await getBatch(database, request.account.id, request.params.batchId) };
    },
  );
}

/** `?wait=N`: the long-poll both a task and a batch offer. */
function waitQuery(description: string) {
  return { type: 'object', additionalProperties: false, properties: { wait: { type: 'integer', minimum: 1, maximum: 30, description } } } as const;
}

/** `NNN-<output's name>` (the one naming rule's `<input stem>.<tag>.<ext>`): NNN the task's place in the batch, from 001. */
function archiveName({ task, output }: BatchArchiveEntry): string {
  const place = String((task.batch_index ?? 0) + 1).padStart(3, '0');
  return `${place}-${safeFilename(output!.filename, output!.format)}`;
}
