// Direct upload: POST /api/upload/presign and POST /api/upload/confirm (API key, under /api),
// and PUT /uploads/{uploadId} (no API key, outside /api): where local storage receives the
// bytes of a presigned URL. With S3 storage the client PUTs to S3 and that route does not exist.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { PresignRequest } from '../../files/direct-upload.js';
import type { Services } from '../../services.js';
import { fingerprint, readIdempotencyKey, withIdempotency } from '../idempotency.js';
import { errors, fileSchema, idempotencyHeader, ok } from '../schemas.js';

const tags = ['Files'];
const security = [{ apiKey: [] }];

const presignedSchema = {
  type: 'object',
  properties: {
    uploadId: { type: 'string', example: 'upl_2b1x0cJ4o3c2Q4m8y7GkZ8pD' },
    url: { type: 'string', format: 'uri', description: 'PUT the bytes here, without your API key.' },
    method: { type: 'string', enum: ['PUT'] },
    headers: { type: 'object', additionalProperties: { type: 'string' }, description: 'Send these headers with the PUT, exactly.' },
    expiresAt: { type: 'string', format: 'date-time', description: 'The URL works until then.' },
  },
} as const;

export function uploadRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock, uploads } = services;

  app.post(
    '/upload/presign',
    {
      schema: {
        tags,
        security,
        summary: 'Start a direct upload',
        description:
          'Reserves `size` bytes of your storage and answers a short-lived URL (default 15 minutes) to PUT exactly that many bytes to, ' +
          'with the headers to send. With S3 storage it is a presigned S3 URL; otherwise it points at this service (`/uploads/{uploadId}?…`). ' +
          'Then confirm with POST /api/upload/confirm. A PUT after `expiresAt` is refused (403 UPLOAD_URL_EXPIRED), a changed URL ' +
          '(403 UPLOAD_SIGNATURE_INVALID), a body of another length (400 UPLOAD_SIZE_MISMATCH); nothing is stored then. ' +
          'An upload not confirmed within an hour after `expiresAt` is abandoned and its reservation released.',
        headers: idempotencyHeader,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['filename', 'size'],
          properties: {
            filename: { type: 'string', minLength: 1, maxLength: 1024, description: 'Kept as the file\'s name (without any path).' },
            size: { type: 'integer', minimum: 1, description: 'The exact length of the file in bytes.' },
            contentType: {
              type: 'string',
              maxLength: 255,
              pattern: '^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$',
              description: 'Sent with the PUT (it is then one of `headers`); the type is still sniffed from the bytes at confirm.',
            },
          },
        },
        response: { 201: ok(presignedSchema, 'The upload URL'), ...errors(400, 401, 403, 409, 413, 429) },
      },
    },
    async (request: FastifyRequest<{ Body: PresignRequest }>, reply) => {
      const response = await withIdempotency(
        database,
        {
          accountId: request.account.id,
          key: readIdempotencyKey(request.headers['idempotency-key']),
          fingerprint: fingerprint('upload/presign', request.body),
          now: clock.now(),
        },
        async (tx) => ({ statusCode: 201, body: { success: true, data: await uploads.presign(tx, request.account.id, request.limits, request.body) } }),
      );
      return reply.code(response.statusCode as 201).send(response.body);
    },
  );

  app.post(
    '/upload/confirm',
    {
      schema: {
        tags,
        security,
        summary: 'Confirm a direct upload',
        description:
          'Checks that the bytes arrived, sniffs their type and applies the plan\'s limits exactly as an upload does, and answers the file. ' +
          'The reservation becomes the file\'s storage. Confirming again answers the same file. ' +
          '409 UPLOAD_NOT_RECEIVED before the PUT; 410 UPLOAD_EXPIRED once the upload has expired.',
        headers: idempotencyHeader,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['uploadId'],
          properties: { uploadId: { type: 'string', maxLength: 100, description: 'As presign answered it.' } },
        },
        response: { 201: ok(fileSchema, 'The stored file'), ...errors(400, 401, 403, 404, 409, 410, 413, 415, 429) },
      },
    },
    async (request: FastifyRequest<{ Body: { uploadId: string } }>, reply) => {
      const response = await uploads.confirm(request.account.id, request.limits, request.body.uploadId, {
        key: readIdempotencyKey(request.headers['idempotency-key']),
        fingerprint: fingerprint('upload/confirm', request.body),
      });
      return reply.code(response.statusCode as 201).send(response.body);
    },
  );
}

/** PUT /uploads/{uploadId}: the body is never parsed or buffered, only streamed to storage. */
export async function uploadReceiverRoutes(app: FastifyInstance, services: Services): Promise<void> {
  if (!services.uploads.receivesUploads) return;
  await app.register(async (scope) => {
    // Any content type, passed through untouched: the handler streams request.raw itself.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, _payload, done) => done(null));
    scope.put(
      '/uploads/:uploadId',
      {
        schema: {
          tags: ['Files'],
          summary: 'Receive a direct upload (local storage)',
          description:
            'The URL that POST /api/upload/presign answered, used exactly as given, with the headers it named and no API key. ' +
            'Its query (`expires`, `size`, `signature`) is signed; the body must be exactly `size` bytes. Refusals store nothing: ' +
            '403 UPLOAD_SIGNATURE_INVALID (the URL was changed), 403 UPLOAD_URL_EXPIRED, 400 UPLOAD_SIZE_MISMATCH, ' +
            '409 UPLOAD_ALREADY_CONFIRMED. A repeated PUT before the confirm replaces the bytes.',
          consumes: ['application/octet-stream'],
          response: {
            200: ok({ type: 'object', properties: { uploadId: { type: 'string' }, size: { type: 'integer' } } }, 'Stored; now confirm'),
            ...errors(400, 403, 404, 409),
          },
        },
      },
      async (request: FastifyRequest<{ Params: { uploadId: string }; Querystring: Record<string, unknown> }>, reply) => {
        try {
          const received = await services.uploads.receive(request.params.uploadId, request.query, request.raw);
          return reply.send({ success: true, data: received });
        } catch (err) {
          // The rest of a refused body is not read: the connection closes after the answer.
          reply.header('connection', 'close');
          throw err;
        }
      },
    );
  });
}
