// POST /api/process/{kind} and /api/process/batch/{kind}, derived from the operations registry:
// a kind has routes exactly when it is registered, and its schema is the module's own.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Services } from '../../services.js';
import { OPERATIONS } from '../../operations/registry.js';
import type { Operation } from '../../operations/types.js';
import { submitBatch, submitTask } from '../../tasks/tasks.js';
import { fingerprint, readIdempotencyKey, withIdempotency } from '../idempotency.js';
import { errors, idempotencyHeader, ok } from '../schemas.js';

const security = [{ apiKey: [] }];
const fileIdSchema = { type: 'string', maxLength: 100, description: 'An uploaded or output file of yours.' };

/** The JSON Schema of a single job's body: the input(s) plus the kind's options. */
export function singleBodySchema(op: Operation<any>) {
  const input = op.multiInput
    ? { fileIds: { type: 'array', items: fileIdSchema, minItems: op.multiInput.min, maxItems: op.multiInput.max } }
    : { fileId: fileIdSchema };
  return {
    type: 'object',
    additionalProperties: false,
    required: [...Object.keys(input), ...(op.options.required ?? [])],
    properties: { ...input, ...op.options.properties },
  };
}

export function batchBodySchema(op: Operation<any>) {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['fileIds', ...(op.options.required ?? [])],
    properties: {
      fileIds: { type: 'array', items: fileIdSchema, minItems: 1, description: 'One task per file, in order (at most the plan\'s batchSize).' },
      ...op.options.properties,
    },
  };
}

const queuedTask = {
  type: 'object',
  properties: {
    taskId: { type: 'string' },
    status: { type: 'string', enum: ['queued'] },
    type: { type: 'string' },
    createdAt: { type: 'string', format: 'date-time' },
  },
};

const queuedBatch = {
  type: 'object',
  properties: {
    batchId: { type: 'string' },
    type: { type: 'string' },
    tasks: {
      type: 'array',
      items: { type: 'object', properties: { taskId: { type: 'string' }, fileId: { type: 'string' }, status: { type: 'string' } } },
    },
  },
};

export function jobRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock } = services;

  for (const op of OPERATIONS) {
    app.post(
      `/process/${op.kind}`,
      {
        schema: {
          tags: ['Jobs'],
          security,
          summary: op.summary,
          description: `${op.description}\n\nAnswers 202 with the queued task and \`Location: /api/tasks/{taskId}\`.`,
          headers: idempotencyHeader,
          body: singleBodySchema(op),
          response: { 202: ok(queuedTask, 'The task is queued'), ...errors(400, 401, 403, 404, 409, 410, 429) },
        },
      },
      async (request: FastifyRequest<{ Body: Record<string, unknown> }>, reply) => {
        const response = await withIdempotency(
          database,
          {
            accountId: request.account.id,
            key: readIdempotencyKey(request.headers['idempotency-key']),
            fingerprint: fingerprint(`process/${op.kind}`, request.body),
            now: clock.now(),
          },
          async (tx) => ({
            statusCode: 202,
            body: { success: true, data: await submitTask(database, tx, clock, op, { accountId: request.account.id, limits: request.limits }, request.body) },
          }),
        );
        const data = (response.body as { data: { taskId: string } }).data;
        services.events.queued();
        return reply.code(response.statusCode).header('location', `/api/tasks/${data.taskId}`).send(response.body);
      },
    );

    if (!op.batch) continue;
    app.post(
      `/process/batch/${op.kind}`,
      {
        schema: {
          tags: ['Batches'],
          security,
          summary: `${op.summary} — batch`,
          description: `One ${op.kind} task per file, with shared options. All or nothing: one unknown file or bad option queues nothing.`,
          headers: idempotencyHeader,
          body: batchBodySchema(op),
          response: { 202: ok(queuedBatch, 'The tasks are queued'), ...errors(400, 401, 403, 404, 409, 410, 429) },
        },
      },
      async (request: FastifyRequest<{ Body: Record<string, unknown> }>, reply) => {
        const response = await withIdempotency(
          database,
          {
            accountId: request.account.id,
            key: readIdempotencyKey(request.headers['idempotency-key']),
            fingerprint: fingerprint(`process/batch/${op.kind}`, request.body),
            now: clock.now(),
          },
          async (tx) => ({
            statusCode: 202,
            body: { success: true, data: await submitBatch(database, tx, clock, op, { accountId: request.account.id, limits: request.limits }, request.body) },
          }),
        );
        const data = (response.body as { data: { batchId: string } }).data;
        services.events.queued();
        return reply.code(response.statusCode).header('location', `/api/batches/${data.batchId}`).send(response.body);
      },
    );
  }
}
