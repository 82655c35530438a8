// Direct upload: POST /api/upload/presign and POST /api/upload/confirm (API key, under /api),
// and PUT /uploads/{uploadId} (no API key, outside /api): where local storage receives the
// bytes of a presigned URL. With S3 storage the client PUTs to S3 and that route does not exist.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { PresignRequest } from '../../files/direct-upload.js';
import type { Services } from '../../services.js';
import { withIdempotency } from '../../db/idempotency.js';
import { fingerprint, readIdempotencyKey } from '../idempotency.js';
import { bodyAbandoned } from '../request-body.js';
import { fileToApi, sendStoredFile } from '../resources.js';
import {
  API_SECURITY,
  API_WRITE,
  NO_SECURITY,
  IDEMPOTENT,
  JSON_BODY,
  VALIDATED,
  apiResponses,
  documentAs,
  jsonData,
  publicResponses,
} from '../openapi.js';
import { COMPONENT_SCHEMAS, idParam, idempotencyHeader, ref } from '../schemas.js';

const tags = ['Files'];

export function uploadRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock, uploads } = services;

  app.post(
    '/upload/presign',
    {
      schema: {
        operationId: 'presignUpload',
        tags,
        security: API_SECURITY,
        summary: 'Start a direct upload',
        description:
          'Reserves `size` bytes of your storage and answers a short-lived URL (default 15 minutes) to PUT exactly that many bytes to, ' +
          'with the headers to send. With S3 storage it is a presigned S3 URL; otherwise it points at this service (`/uploads/{uploadId}?…`). ' +
          'Then confirm with POST /api/upload/confirm. A PUT after `expiresAt` is refused (403 UPLOAD_URL_EXPIRED), a changed URL ' +
          '(403 UPLOAD_SIGNATURE_INVALID), a body of another length (400 UPLOAD_SIZE_MISMATCH); nothing is stored then. ' +
          'An upload not confirmed within an hour after `expiresAt` is abandoned and its reservation released.',
        headers: idempotencyHeader,
        body: COMPONENT_SCHEMAS.PresignRequest,
        response: apiResponses({ 201: jsonData('The upload URL', 'PresignedUpload') }, [
          ...API_WRITE,
          ...JSON_BODY,
          ...IDEMPOTENT,
          'FILE_TOO_LARGE',
          'STORAGE_LIMIT_EXCEEDED',
        ]),
      },
      config: documentAs({ body: ref('PresignRequest') }),
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
        async (tx) => ({
          statusCode: 201,
          body: { success: true, data: await uploads.presign(tx, request.account.id, request.limits, request.body) },
        }),
      );
      return reply.code(response.statusCode as 201).send(response.body);
    },
  );

  app.post(
    '/upload/confirm',
    {
      schema: {
        operationId: 'confirmUpload',
        tags,
        security: API_SECURITY,
        summary: 'Confirm a direct upload',
        description:
          "Checks that the bytes arrived, sniffs their type and applies the plan's limits exactly as an upload does, and answers the file. " +
          "The reservation becomes the file's storage. Confirming again answers the same file. " +
          '409 UPLOAD_NOT_RECEIVED before the PUT; 410 UPLOAD_EXPIRED once the upload has expired.',
        headers: idempotencyHeader,
        body: COMPONENT_SCHEMAS.ConfirmRequest,
        response: apiResponses(
          { 201: jsonData('The stored file (the same one again when confirmed before)', 'FileMetadata', undefined, { headers: ['Location'] }) },
          [
            ...API_WRITE,
            ...JSON_BODY,
            ...IDEMPOTENT,
            'NOT_FOUND',
            'UPLOAD_EXPIRED',
            'UPLOAD_NOT_RECEIVED',
            'UPLOAD_SIZE_MISMATCH',
            'FILE_TOO_LARGE',
            'STORAGE_LIMIT_EXCEEDED',
          ],
        ),
      },
      config: documentAs({ body: ref('ConfirmRequest') }),
    },
    async (request: FastifyRequest<{ Body: { uploadId: string } }>, reply) => {
      const scope = {
        accountId: request.account.id,
        key: readIdempotencyKey(request.headers['idempotency-key']),
        fingerprint: fingerprint('upload/confirm', request.body),
        now: clock.now(),
      };
      // The file is recorded in the transaction that stores the idempotent response.
      const response = await uploads.confirm(request.account.id, request.limits, request.body.uploadId, (record) =>
        withIdempotency(database, scope, async (tx) => ({ statusCode: 201, body: { success: true, data: fileToApi(await record(tx)) } })),
      );
      return sendStoredFile(reply, response);
    },
  );
}

/** The presigned URL's query, as presign wrote it: an HMAC over the upload, its expiry and its size. */
const SIGNED_QUERY = {
  type: 'object',
  required: ['expires', 'size', 'signature'],
  additionalProperties: false,
  properties: {
    expires: { type: 'integer', description: 'When the URL expires, in Unix seconds.' },
    size: { type: 'integer', minimum: 1, description: 'The exact length of the body in bytes.' },
    signature: { type: 'string', description: "The URL's signature." },
  },
};

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
          operationId: 'putUpload',
          tags: ['Files'],
          security: NO_SECURITY,
          summary: 'Receive a direct upload (local storage)',
          description:
            'The URL that POST /api/upload/presign answered, used exactly as given, with the headers it named and no API key. ' +
            'Its query (`expires`, `size`, `signature`) is signed; the body must be exactly `size` bytes. Refusals store nothing: ' +
            '403 UPLOAD_SIGNATURE_INVALID (the URL was changed), 403 UPLOAD_URL_EXPIRED, 400 UPLOAD_SIZE_MISMATCH, ' +
            '409 UPLOAD_ALREADY_CONFIRMED, 408 REQUEST_TIMEOUT (a body that stalls for `BODY_STALL_SECONDS` or is still arriving after ' +
            "`REQUEST_TIMEOUT_SECONDS`), 507 INSUFFICIENT_STORAGE (the service's disk is full). A repeated PUT before the confirm replaces the bytes.",
          params: idParam('uploadId', 'upl'),
          response: publicResponses({ 200: jsonData('Stored; now confirm', 'ReceivedUpload') }, [
            ...VALIDATED,
            'UPLOAD_SIZE_MISMATCH',
            'UPLOAD_SIGNATURE_INVALID',
            'UPLOAD_URL_EXPIRED',
            'NOT_FOUND',
            'REQUEST_TIMEOUT',
            'UPLOAD_ALREADY_CONFIRMED',
            'INSUFFICIENT_STORAGE',
          ]),
        },
        // The body is streamed by the handler and the query is checked against its signature there:
        // both documented only, so a changed URL is 403 UPLOAD_SIGNATURE_INVALID, never a 400.
        config: documentAs({
          body: { content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
          querystring: SIGNED_QUERY,
        }),
      },
      async (request: FastifyRequest<{ Params: { uploadId: string }; Querystring: Record<string, unknown> }>, reply) => {
        try {
          const received = await services.uploads.receive(request.params.uploadId, request.query, request.raw);
          return reply.send({ success: true, data: received });
        } catch (err) {
          if (bodyAbandoned(request, reply)) return;
          // What becomes of the body's unread rest is decided for every route (request-body.ts).
          throw err;
        }
      },
    );
  });
}
