// POST /api/process/{kind} and /api/process/batch/{kind}, derived from the operations registry:
// a kind has routes exactly when it is registered, and its schema is the module's own.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
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

  /**
   * A POST that queues work: idempotent, submitted in one transaction, workers woken, 202 with
   * the new resource's Location.
   */
  const queueingHandler =
    (op: Operation<any>, route: string, submit: typeof submitTask | typeof submitBatch, location: (data: { taskId?: string; batchId?: string }) => string) =>
    async (request: FastifyRequest<{ Body: Record<string, unknown> }>, reply: FastifyReply) => {
      const response = await withIdempotency(
        database,
        {
          accountId: request.account.id,
          key: readIdempotencyKey(request.headers['idempotency-key']),
          fingerprint: fingerprint(route, request.body),
          now: clock.now(),
        },
        async (tx) => ({
          statusCode: 202,
          body: { success: true, data: await submit(database, tx, clock, op, { accountId: request.account.id, limits: request.limits }, request.body) },
        }),
      );
      services.events.queued();
      const data = (response.body as { data: { taskId?: string; batchId?: string } }).data;
      return reply.code(response.statusCode).header('location', location(data)).send(response.body);
    };

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
      queueingHandler(op, `process/${op.kind}`, submitTask, (data) => `/api/tasks/${data.taskId}`),
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
      queueingHandler(op, `process/batch/${op.kind}`, submitBatch, (data) => `/api/batches/${data.batchId}`),
    );
  }
}
