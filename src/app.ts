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

export const API_DESCRIPTION = `Upload images and presentations, start asynchronous jobs, poll the task, download the output.

Every \`/api/*\` request carries \`x-api-key\`. Successes answer \`{"success": true, "data": …}\`; failures answer
\`{"success": false, "error": {"code", "message", "details?", "requestId"}}\` and every response carries \`x-request-id\`.
JSON bodies are taken exactly as sent: unknown fields are rejected with 400 VALIDATION_ERROR naming each field.
Every POST accepts \`Idempotency-Key\`.`;

export async function buildApp(services: Services): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: services.logger as FastifyBaseLogger,
    genReqId: () => newId('req'),
    requestIdHeader: false,
    frameworkErrors,
    bodyLimit: 1024 * 1024,
    ajv: { customOptions: { removeAdditional: false } },
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
      jobRoutes(api, services);
      taskRoutes(api, services);
      accountRoutes(api, services);
    },
    { prefix: '/api' },
  );

  return app;
}
