// The kinds for the playground's forms, straight from the operations registry: each kind's
// request body as the API validates it (the same schema builders as the job routes), so the
// dashboard never restates an option by hand.
import type { FastifyInstance } from 'fastify';
import { OPERATIONS } from '../../../operations/registry.js';
import type { AnyOperation } from '../../../operations/types.js';
import type { Services } from '../../../services.js';
import { batchBodySchema, singleBodySchema } from '../../schemas.js';
import { optionRules } from './option-rules.js';

export function operationsRoutes(app: FastifyInstance, services: Services): void {
  const operations = OPERATIONS.map((op) => ({
    kind: op.kind,
    summary: op.summary,
    description: op.description,
    accepts: op.accepts,
    multiInput: op.multiInput ?? null,
    batch: op.batch,
    body: singleBodySchema(op),
    batchBody: op.batch ? batchBodySchema(op) : null,
    /** Options that exclude or need each other, as the kind's own checks decide (option-rules.ts). */
    rules: optionRules(op, services.plans.max),
    /** Whether the output is its input re-encoded (the playground shows what it saved): see `reencodes`. */
    reencodes: reencodes(op),
  }));
  app.get('/operations', { schema: { hide: true, tags: ['Dashboard'] } }, async (request) => ({
    success: true,
    data: {
      operations,
      limits: {
        batchSize: request.limits.batchSize,
        maxFileBytes: request.limits.maxFileBytes,
        maxAiUpscalePixels: request.limits.maxAiUpscalePixels,
      },
    },
  }));
}

/**
 * A kind whose whole work is the encoding — one image in, no transform of its own (no step) and
 * its size kept (no `sizes`), so the output holds the input's pixels (compress, convert): its
 * point is the output's bytes. Of a resize or a rotate, "82 % smaller" says nothing.
 */
const reencodes = (op: AnyOperation): boolean => op.accepts === 'image' && !op.multiInput && !op.step && !op.sizes;
