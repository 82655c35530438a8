// The error envelope. Every failure leaves as {success:false, error:{code, message, details?,
// requestId}}; internal detail goes to the log under the same request id.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, fieldsInvalid, isStorageFull, type ErrorCode } from '../errors.js';
import { targetPath } from './framing.js';

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** One entry per bad field, named as the client wrote it (`quality`, `fileIds[2]`, `limit`). */
function fieldErrors(errors: AjvError[], context: string | undefined): { field: string; message: string }[] {
  return errors.map((e) => {
    const path = e.instancePath
      .split('/')
      .filter(Boolean)
      .map((part, i) => (/^\d+$/.test(part) ? `[${part}]` : i === 0 ? part : `.${part}`))
      .join('');
    if (e.keyword === 'additionalProperties') {
      const name = String(e.params.additionalProperty);
      return { field: path ? `${path}.${name}` : name, message: `unknown field${context === 'querystring' ? ' (query parameter)' : ''}` };
    }
    if (e.keyword === 'required') {
      const name = String(e.params.missingProperty);
      return { field: path ? `${path}.${name}` : name, message: 'is required' };
    }
    if (e.keyword === 'discriminator') {
      // A list item chosen by a field (a pipeline step's `kind`): that field is missing or names no alternative.
      const tag = String(e.params.tag);
      return { field: path ? `${path}.${tag}` : tag, message: e.params.error === 'tag' ? 'is required (a string)' : 'names no known alternative' };
    }
    if (e.keyword === 'enum') {
      return { field: path || context || 'body', message: `must be one of ${(e.params.allowedValues as unknown[]).join(', ')}` };
    }
    return { field: path || context || 'body', message: e.message ?? 'is invalid' };
  });
}

function envelope(request: FastifyRequest, code: string, message: string, details?: Record<string, unknown>) {
  return { success: false, error: { code, message, ...(details ? { details } : {}), requestId: request.id } };
}

/**
 * Headers describing a resource's bytes. A handler may set them before it fails (a download whose
 * range cannot be served); the error is not that resource, so they go (API.md: error responses
 * never carry the headers of the resource they failed to serve). An error's own headers stay.
 */
const RESOURCE_HEADERS = ['content-disposition', 'etag', 'last-modified', 'accept-ranges', 'content-range', 'content-length'];

function sendError(request: FastifyRequest, reply: FastifyReply, error: AppError): FastifyReply {
  for (const name of RESOURCE_HEADERS) reply.removeHeader(name);
  if (error.headers) reply.headers(error.headers);
  return reply
    .code(error.status)
    .type('application/json')
    .send(envelope(request, error.code, error.message, error.details));
}

/** Fastify's and its plugins' own 4xx errors, translated into the contract's codes. */
function fromFrameworkError(error: FastifyError, request: FastifyRequest): AppError | undefined {
  const code = error.code ?? '';
  const status = error.statusCode ?? 500;
  // A body that is not multipart on the upload route is a missing `file` part, not an unreadable image.
  const consumes = (request.routeOptions.schema as { consumes?: string[] } | undefined)?.consumes;
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' && consumes?.includes('multipart/form-data')) {
    return new AppError('VALIDATION_ERROR', 'Send the file as multipart/form-data with one part named "file"', {
      fields: [{ field: 'file', message: 'is required' }],
    });
  }
  const table: Record<string, [ErrorCode, string]> = {
    FST_ERR_CTP_INVALID_MEDIA_TYPE: ['UNSUPPORTED_MEDIA_TYPE', 'This endpoint takes application/json'],
    FST_ERR_CTP_EMPTY_JSON_BODY: ['VALIDATION_ERROR', 'The JSON body is empty'],
    // Fastify's parser also refuses valid JSON with a __proto__ or constructor.prototype key, and says no more.
    FST_ERR_CTP_INVALID_JSON_BODY: ['VALIDATION_ERROR', 'The body is not valid JSON, or has a __proto__ or constructor.prototype key'],
    FST_ERR_CTP_BODY_TOO_LARGE: ['PAYLOAD_TOO_LARGE', 'The request body is too large'],
    FST_INVALID_MULTIPART_CONTENT_TYPE: ['VALIDATION_ERROR', 'Send the file as multipart/form-data with one part named "file"'],
    FST_REQ_FILE_TOO_LARGE: ['FILE_TOO_LARGE', 'The file is larger than the plan allows'],
    FST_PARTS_LIMIT: ['VALIDATION_ERROR', 'Send exactly one part, named "file"'],
    FST_FILES_LIMIT: ['VALIDATION_ERROR', 'Send exactly one part, named "file"'],
    FST_FIELDS_LIMIT: ['VALIDATION_ERROR', 'Send exactly one part, named "file"'],
    FST_PROTO_VIOLATION: ['VALIDATION_ERROR', 'Invalid multipart field name'],
  };
  const known = table[code];
  if (known) return new AppError(known[0], known[1]);
  if (error instanceof SyntaxError || (status === 400 && /JSON/i.test(error.message)))
    return new AppError('VALIDATION_ERROR', 'The body is not valid JSON');
  // The multipart parser's own errors carry no status (a missing boundary, a body that ends
  // before its closing one): on a route that takes multipart they are the body's fault.
  if ((status === 400 || (error.statusCode === undefined && consumes?.includes('multipart/form-data'))) && /multipart|boundary/i.test(error.message))
    return new AppError('VALIDATION_ERROR', `Malformed multipart body: ${error.message}`);
  if (status === 413) return new AppError('PAYLOAD_TOO_LARGE', 'The request body is too large');
  if (status === 415) return new AppError('UNSUPPORTED_MEDIA_TYPE', error.message);
  if (status >= 400 && status < 500) return new AppError('VALIDATION_ERROR', error.message);
  return undefined;
}

/**
 * Errors Fastify answers before routing (a malformed URL, a path parameter past maxParamLength):
 * no hook runs for them, so the request id header is set here. Passed as `frameworkErrors`.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id);
  const message = error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'A path parameter is too long' : 'The URL is malformed';
  void sendError(request, reply, new AppError('VALIDATION_ERROR', message));
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof AppError) return sendError(request, reply, error);
    if (error.validation) {
      return sendError(request, reply, fieldsInvalid(fieldErrors(error.validation as unknown as AjvError[], error.validationContext)));
    }
    const translated = fromFrameworkError(error, request);
    if (translated) return sendError(request, reply, translated);
    if (isStorageFull(error)) {
      // The operator must act; the client may retry later. What failed left nothing behind.
      request.log.error({ err: error }, 'storage is full');
      return sendError(request, reply, new AppError('INSUFFICIENT_STORAGE', 'The service has no storage space left; try again later'));
    }
    request.log.error({ err: error }, 'unhandled error');
    return sendError(request, reply, new AppError('INTERNAL_ERROR', 'An internal error occurred; quote the request id when reporting it'));
  });

  // Outside /api (delivery URLs, health, metrics, the dashboard's pages and assets) as inside it:
  // a path that exists with other methods is 405 with Allow, not 404.
  const allowedMethods = learnRoutes(app);
  app.setNotFoundHandler((request, reply) => {
    const allowed = allowedMethods(requestPath(request));
    if (allowed.length > 0) return sendError(request, reply, methodNotAllowed(request, allowed));
    const page = notFoundPages.get(app);
    if (page && (request.method === 'GET' || request.method === 'HEAD') && (request.headers.accept ?? '').includes('text/html'))
      return page(request, reply);
    return sendError(request, reply, new AppError('NOT_FOUND', `No route ${request.method} ${requestPath(request)}`));
  });
}

const notFoundPages = new WeakMap<FastifyInstance, (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>>();

/**
 * What a browser navigating to an unknown path gets instead of the JSON 404 (outside /api, which
 * keeps its own): the dashboard's page, answered with status 404, which shows its "not found".
 */
export function setNotFoundPage(app: FastifyInstance, page: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>): void {
  notFoundPages.set(app, page);
}

/**
 * The /api scope's answer when no route matched. Its onRequest hooks run first, so
 * authentication comes first for every path under /api, known or not (an unknown path without a
 * key is 401). Then a path that exists with other methods is 405 METHOD_NOT_ALLOWED with Allow,
 * anything else 404. Call before the scope's routes are added: it learns them as they are.
 */
export function registerApiNotFound(api: FastifyInstance): void {
  const allowedMethods = learnRoutes(api);
  api.setNotFoundHandler((request, reply) => {
    const path = requestPath(request);
    const allowed = allowedMethods(path);
    if (allowed.length === 0) return sendError(request, reply, new AppError('NOT_FOUND', `No route ${request.method} ${path}`));
    return sendError(request, reply, methodNotAllowed(request, allowed));
  });
}

/**
 * The methods the scope's routes take for a path (HEAD wherever GET is), learnt as the routes
 * are added: register it before them.
 */
function learnRoutes(scope: FastifyInstance): (path: string) => string[] {
  const routes: { pattern: RegExp; methods: string[] }[] = [];
  scope.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    routes.push({ pattern: pathPattern(route.url ?? route.path), methods: methods.includes('GET') ? [...methods, 'HEAD'] : methods });
  });
  return (path) => [...new Set(routes.filter((route) => route.pattern.test(path)).flatMap((route) => route.methods))];
}

/** The request's path, without its query, whatever the target's form (framing.ts). */
const requestPath = (request: FastifyRequest): string => targetPath(request.url).split('?')[0]!;

const methodNotAllowed = (request: FastifyRequest, allowed: string[]) =>
  new AppError(
    'METHOD_NOT_ALLOWED',
    `${requestPath(request)} does not take ${request.method}; it takes ${allowed.join(', ')}`,
    { allowed },
    { allow: allowed.join(', ') },
  );

/** A route's URL (`/api/files/:fileId`) as a pattern for request paths: a parameter is one segment. */
function pathPattern(url: string): RegExp {
  const escaped = url
    .split(/(:[A-Za-z0-9_]+|\*)/)
    .map((part) => (part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${escaped}$`);
}
