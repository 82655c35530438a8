// POST /api/process/{kind} and /api/process/batch/{kind}, derived from the operations registry:
// a kind has routes exactly when it is registered, and its schema is the module's own.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../services.js';
import { canonicalFormat } from '../../imaging/formats.js';
import { OPERATIONS } from '../../operations/registry.js';
import { resultNote } from '../../operations/reference.js';
import type { AnyOperation } from '../../operations/types.js';
import { laneOfRequest, submitBatch, submitTask } from '../../tasks/tasks.js';
import { queuedMessage } from '../../queue/events.js';
import { withIdempotency } from '../../db/idempotency.js';
import { fingerprint, readIdempotencyKey } from '../idempotency.js';
import { API_SECURITY, API_WRITE, IDEMPOTENT, JSON_BODY, apiResponses, documentAs, jsonData, type ApiErrorCode } from '../openapi.js';
import { EXAMPLE_IDS, QUEUED_TASK_EXAMPLE, batchBodySchema, idempotencyHeader, kindName, ref, singleBodySchema } from '../schemas.js';

/** What queueing can answer besides the request's own faults: the contract's order, input to quota. */
const QUEUEING: readonly ApiErrorCode[] = [
  'NOT_FOUND',
  'FILE_EXPIRED',
  'INPUT_NOT_SUPPORTED',
  'STORAGE_LIMIT_EXCEEDED',
  'TOO_MANY_QUEUED_TASKS',
  'MONTHLY_QUOTA_EXCEEDED',
];

/** The body with `format` by its own name (`jpg` → `jpeg`): the task's options and result say the canonical one. */
const canonical = (body: Record<string, unknown>): Record<string, unknown> =>
  typeof body.format === 'string' ? { ...body, format: canonicalFormat(body.format) } : body;

export function jobRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock } = services;

  /**
   * A POST that queues work: idempotent, submitted in one transaction, workers woken, 202 with
   * the new resource's Location.
   */
  const queueingHandler =
    (
      op: AnyOperation,
      route: string,
      submit: typeof submitTask | typeof submitBatch,
      location: (data: { taskId?: string; batchId?: string }) => string,
    ) =>
    async (request: FastifyRequest<{ Body: Record<string, unknown> }>, reply: FastifyReply) => {
      const lane = laneOfRequest(op, canonical(request.body));
      // Other processes' workers are woken by the statement that inserts the tasks, at the commit.
      const wake = services.events.carried(queuedMessage(lane));
      const response = await withIdempotency(
        database,
        {
          accountId: request.account.id,
          key: readIdempotencyKey(request.headers['idempotency-key']),
          fingerprint: fingerprint(route, request.body),
          now: clock.now(),
          // A single task: one read, one write (submitTask); a batch takes a transaction.
          alone: submit === submitTask,
        },
        async (tx, alone) => ({
          statusCode: 202,
          body: {
            success: true,
            data: await submit(
              { database, tx, clock, op, submitter: { accountId: request.account.id, limits: request.limits }, wake, alone },
              canonical(request.body),
            ),
          },
        }),
      );
      services.events.queued(lane, { published: wake !== undefined });
      const data = (response.body as { data: { taskId?: string; batchId?: string } }).data;
      return reply.code(response.statusCode).header('location', location(data)).send(response.body);
    };

  for (const op of OPERATIONS) {
    const name = kindName(op.kind);
    app.post(
      `/process/${op.kind}`,
      {
        schema: {
          operationId: `process${name}`,
          tags: ['Jobs'],
          security: API_SECURITY,
          summary: op.summary,
          description: `${op.description}${resultNote(op)}\n\nAnswers 202 with the queued task and \`Location: /api/tasks/{taskId}\`.`,
          headers: idempotencyHeader,
          body: singleBodySchema(op),
          response: apiResponses(
            {
              202: jsonData(
                'The task is queued (or failed at once: a limit the stored header shows is passed)',
                'QueuedTask',
                { ...QUEUED_TASK_EXAMPLE, type: op.kind },
                { headers: ['Location'] },
              ),
            },
            [...API_WRITE, ...JSON_BODY, ...IDEMPOTENT, ...QUEUEING],
          ),
        },
        config: documentAs({ body: ref(`${name}Request`) }),
      },
      queueingHandler(op, `process/${op.kind}`, submitTask, (data) => `/api/tasks/${data.taskId}`),
    );

    if (!op.batch) continue;
    app.post(
      `/process/batch/${op.kind}`,
      {
        schema: {
          operationId: `batch${name}`,
          tags: ['Batches'],
          security: API_SECURITY,
          summary: `${op.summary} — batch`,
          description:
            `One ${op.kind} task per file, with shared options. All or nothing: one unknown file or bad option queues nothing.\n\n` +
            'Answers 202 with the tasks and `Location: /api/batches/{batchId}`.',
          headers: idempotencyHeader,
          body: batchBodySchema(op),
          response: apiResponses(
            {
              202: jsonData(
                'The tasks are queued',
                'QueuedBatch',
                { batchId: EXAMPLE_IDS.batch, type: op.kind, tasks: [{ taskId: EXAMPLE_IDS.task, fileId: EXAMPLE_IDS.file, status: 'queued' }] },
                { headers: ['Location'] },
              ),
            },
            [...API_WRITE, ...JSON_BODY, ...IDEMPOTENT, 'BATCH_TOO_LARGE', ...QUEUEING, 'DAILY_BATCH_QUOTA_EXCEEDED'],
          ),
        },
        config: documentAs({ body: ref(`${name}BatchRequest`) }),
      },
      queueingHandler(op, `process/batch/${op.kind}`, submitBatch, (data) => `/api/batches/${data.batchId}`),
    );
  }
}
