// The error envelope. Every failure leaves as {success:false, error:{code, message, details?,
// requestId}}; internal detail goes to the log under the same request id.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, type ErrorCode } from '../errors.js';

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** One entry per bad field, named as the client wrote it (`quality`, `fileIds[2]`, `limit`). */
export function fieldErrors(errors: AjvError[], context: string | undefined): { field: string; message: string }[] {
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
    if (e.keyword === 'enum') {
      return { field: path || context || 'body', message: `must be one of ${(e.params.allowedValues as unknown[]).join(', ')}` };
    }
    return { field: path || context || 'body', message: e.message ?? 'is invalid' };
  });
}

function envelope(request: FastifyRequest, code: string, message: string, details?: Record<string, unknown>) {
  return { success: false, error: { code, message, ...(details ? { details } : {}), requestId: request.id } };
}

export function sendError(request: FastifyRequest, reply: FastifyReply, error: AppError): FastifyReply {
  if (error.headers) reply.headers(error.headers);
  return reply.code(error.status).type('application/json').send(envelope(request, error.code, error.message, error.details));
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
    FST_ERR_CTP_INVALID_JSON_BODY: ['VALIDATION_ERROR', 'The body is not valid JSON'],
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
  if (error instanceof SyntaxError || (status === 400 && /JSON/i.test(error.message))) return new AppError('VALIDATION_ERROR', 'The body is not valid JSON');
  if (status === 400 && /multipart|boundary/i.test(error.message)) return new AppError('VALIDATION_ERROR', `Malformed multipart body: ${error.message}`);
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
      const fields = fieldErrors(error.validation as unknown as AjvError[], error.validationContext);
      const message = fields.map((f) => `${f.field}: ${f.message}`).join('; ');
      return sendError(request, reply, new AppError('VALIDATION_ERROR', message, { fields }));
    }
    const translated = fromFrameworkError(error, request);
    if (translated) return sendError(request, reply, translated);
    request.log.error({ err: error }, 'unhandled error');
    return sendError(request, reply, new AppError('INTERNAL_ERROR', 'An internal error occurred; quote the request id when reporting it'));
  });

  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, new AppError('NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}`)),
  );
}
