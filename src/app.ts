// Wires the services into the Fastify app. No module-level singletons: everything the routes
// need arrives through `services`.
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import multipart from '@fastify/multipart';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { newId } from './ids.js';
import type { Services } from './services.js';
import { apiKeyAuth } from './http/auth.js';
import { frameworkErrors, registerErrorHandling } from './http/errors.js';
import { registerValidation } from './http/validation.js';
import { accountRoutes } from './http/routes/account.js';
import { fileRoutes } from './http/routes/files.js';
import { jobRoutes } from './http/routes/jobs.js';
import { opsRoutes } from './http/routes/ops.js';
import { taskRoutes } from './http/routes/tasks.js';
import { uploadReceiverRoutes, uploadRoutes } from './http/routes/uploads.js';
import { dashboardRoutes } from './http/routes/dashboard/index.js';

export const API_DESCRIPTION = `Upload images and presentations, start asynchronous jobs, poll the task, download the output.

Every \`/api/*\` request carries \`x-api-key\` (the dashboard's own calls use its session cookie instead, and send its CSRF token in \`x-csrf-token\` on state-changing ones). Successes answer \`{"success": true, "data": …}\`; failures answer
\`{"success": false, "error": {"code", "message", "details?", "requestId"}}\` and every response carries \`x-request-id\`.
JSON bodies are taken exactly as sent: unknown fields are rejected with 400 VALIDATION_ERROR naming each field.
Every POST accepts \`Idempotency-Key\`.

## Decisions where the contract is silent

- **Idempotency** stores successful responses only: a refused request (a validation error, a quota
  error) may be retried with the same key once its cause is fixed. A concurrent repeat waits for the
  first and replays it.
- **Limits known when queueing.** When the stored header already shows that the input, or the output
  the options decide (resize, upscale, crop, rotate), passes the plan's pixel limit or the 16,384 px
  side cap, the task is created already \`failed\` with \`IMAGE_TOO_LARGE\` (it counts as queued).
- **Deleting a file an unfinished task reads** is refused with 409 \`FILE_IN_USE\`; cancel the task first.
- **Crop rectangles** outside the image (by its stored header) are 400 \`VALIDATION_ERROR\` naming the field.
- **Uploads** report \`width\`/\`height\` as displayed (EXIF orientation applied) and \`pages\` for
  animations and multi-page files. AVIF image sequences without a still image, JPEG 2000, lossless JPEG
  and PDF are 415 \`UNSUPPORTED_MEDIA_TYPE\`.
- **Rate limits** count fixed one-second windows per API key (or dashboard session).
- **Output encoders**: JPEG uses mozjpeg; \`compress\` writes PNG as a quantised palette unless
  \`lossless\`; GIF has no quality, so \`quality\` scales its palette size; \`lossless\` with a JPEG output
  is a 400 naming \`lossless\`.
- **Animations** keep their frames and timing in GIF and WebP outputs (encoders may merge identical
  consecutive frames, adding their delays); other outputs take the first frame.`;

export async function buildApp(services: Services): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: services.logger as FastifyBaseLogger,
    genReqId: () => newId('req'),
    requestIdHeader: false,
    frameworkErrors,
    bodyLimit: 1024 * 1024,
    ajv: { customOptions: { removeAdditional: false } },
    // Behind a reverse proxy (TRUST_PROXY), the client address (login throttling) comes from X-Forwarded-For.
    trustProxy: services.config.trustProxy,
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    services.metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    services.metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });

  registerValidation(app);
  registerErrorHandling(app);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'imgapi', version: '1.0.0', description: API_DESCRIPTION },
      servers: [{ url: services.config.publicUrl }],
      components: { securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' } } },
      tags: [
        { name: 'Files', description: 'Upload, download, preview, list and delete files' },
        { name: 'Jobs', description: 'Start one task' },
        { name: 'Batches', description: 'One task per file, with shared options' },
        { name: 'Tasks', description: 'Follow and cancel tasks' },
        { name: 'Account', description: 'Plan, limits and usage' },
        { name: 'Operations', description: 'Health, readiness and metrics' },
      ],
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  opsRoutes(app, services);

  await app.register(
    async (api) => {
      await api.register(multipart, { limits: { fieldNameSize: 100, headerPairs: 100 } });
      api.addHook('onRequest', apiKeyAuth(services));
      fileRoutes(api, services);
      uploadRoutes(api, services);
      jobRoutes(api, services);
      taskRoutes(api, services);
      accountRoutes(api, services);
    },
    { prefix: '/api' },
  );
  // Direct uploads' PUT (local storage): outside /api, authorised by the URL's signature alone.
  await uploadReceiverRoutes(app, services);

  // The dashboard: pages and static files at /, sessions at /auth/*, its own routes at /dashboard-api/*.
  await dashboardRoutes(app, services);

  return app;
}
