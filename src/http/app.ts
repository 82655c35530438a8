// The HTTP server: wires the services into the Fastify app, its hooks and its routes. No
// module-level singletons: everything the routes need arrives through `services`. Only the
// command line (src/main.ts) starts it; nothing else outside http/ imports from here.
import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import multipart from '@fastify/multipart';
import { newId } from '../ids.js';
import type { Services } from '../services.js';
import { apiKeyAuth } from './auth.js';
import { frameworkErrors, registerApiNotFound, registerErrorHandling } from './errors.js';
import { registerOpenApi } from './openapi.js';
import { refuseUnexpectedBodies, refuseUnknownQueries, registerValidation } from './validation.js';
import { clientErrorHandler, registerBodyTimeouts, serverTimeouts } from './request-body.js';
import { refuseBadHost } from './framing.js';
import { accountRoutes } from './routes/account.js';
import { fileRoutes } from './routes/files.js';
import { jobRoutes } from './routes/jobs.js';
import { opsRoutes } from './routes/ops.js';
import { taskRoutes } from './routes/tasks.js';
import { webhookRoutes } from './routes/webhooks.js';
import { deliveryApiRoutes } from './routes/delivery-api.js';
import { deliveryRoutes, memoryHits } from './routes/delivery.js';
import { uploadReceiverRoutes, uploadRoutes } from './routes/uploads.js';
import { dashboardRoutes } from './routes/dashboard/index.js';

/**
 * One access-log line per request, when it has been answered, instead of Fastify's two
 * ("incoming request", then "request completed"): the request (the `req` serializer keeps a
 * presigned URL's query out, and no header), its status and time, under the request's reqId.
 * Fastify's other lines (stream and serializer errors) stay as they are.
 */
class OneLineAccessLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const line = { req: request, res: { statusCode: reply.statusCode }, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else reply.log.info(line, 'request completed');
  }
}

export async function buildApp(services: Services): Promise<FastifyInstance> {
  const timeouts = serverTimeouts(services.config);
  const app = Fastify({
    loggerInstance: services.logger as FastifyBaseLogger,
    genReqId: () => newId('req'),
    requestIdHeader: false,
    logController: new OneLineAccessLog(),
    frameworkErrors,
    bodyLimit: 1024 * 1024,
    ajv: { customOptions: { removeAdditional: false } },
    // Behind a reverse proxy (TRUST_PROXY), the client address (login throttling) comes from X-Forwarded-For.
    trustProxy: services.config.trustProxy,
    // Bodies are timed by registerBodyTimeouts; Node's own limits are the backstop. The Host
    // rule is refuseBadHost's (below), which answers in the envelope.
    ...timeouts,
    http: { ...timeouts.http, requireHostHeader: false },
    clientErrorHandler,
  });

  // JSON (and multipart where a route takes it) only: a text/plain body is 415 as any other type
  // is, not a string the schema then refuses. Every scope registered below inherits this.
  app.removeContentTypeParser('text/plain');

  // A client that half-closes once its request is sent (simple HTTP clients, `curl -T -` with
  // some proxies, a raw socket's end()) still reads the answer: Node's default ends the
  // connection at the client's FIN, so an upload would be stored with its 201 lost. The socket
  // closes after the answer to the last request instead.
  (app.server as typeof app.server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    services.metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    services.metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });

  registerBodyTimeouts(app, services.config);
  registerValidation(app);
  registerErrorHandling(app);

  await registerOpenApi(app);

  opsRoutes(app, services);

  await app.register(
    async (api) => {
      await api.register(multipart, { limits: { fieldNameSize: 100, headerPairs: 100 } });
      api.addHook('onRequest', apiKeyAuth(services));
      refuseUnknownQueries(api);
      refuseUnexpectedBodies(api);
      registerApiNotFound(api);
      fileRoutes(api, services);
      uploadRoutes(api, services);
      jobRoutes(api, services);
      taskRoutes(api, services);
      accountRoutes(api, services);
      webhookRoutes(api, services);
      deliveryApiRoutes(api, services);
    },
    { prefix: '/api' },
  );
  // Delivery URLs: outside /api, authorised by the URL's signature alone.
  deliveryRoutes(app, services);
  // Direct uploads' PUT (local storage): outside /api, authorised by the URL's signature alone.
  await uploadReceiverRoutes(app, services);

  // The dashboard: pages and static files at /, sessions at /auth/*, its own routes at /dashboard-api/*.
  await dashboardRoutes(app, services);

  inFrontOfFastify(app, [refuseBadHost, memoryHits(services)]);
  return app;
}

type FrontHandler = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * Handlers that see each request before Fastify does, in order, on `app.server`: the first that
 * answers (true) ends it; when none does, Fastify gets it untouched. For what must hold before
 * any route (the Host rule) and what is answered cheaper without Fastify's request handling
 * (cached delivery hits).
 */
function inFrontOfFastify(app: FastifyInstance, handlers: FrontHandler[]): void {
  const server = app.server;
  const listeners = server.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  if (listeners.length !== 1) throw new Error(`expected Fastify's one request listener, found ${listeners.length}`);
  const [fastify] = listeners as [(req: IncomingMessage, res: ServerResponse) => void];
  server.removeListener('request', fastify);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    for (const handler of handlers) if (handler(req, res)) return;
    fastify.call(server, req, res);
  });
}
