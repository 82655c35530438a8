// Files: upload (multipart, streamed), download (streamed, HEAD, Range), preview, list, delete.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { deleteFile, getLiveFile, listFiles, fileToApi, type FileRecord } from '../../files/files.js';
import { recordUpload, storeUpload } from '../../files/upload.js';
import { IMAGE_FORMATS } from '../../files/kinds.js';
import { decodeForPreview } from '../../imaging/preview.js';
import { previewPdf, previewPoppler } from '../../documents/preview.js';
import type { Services } from '../../services.js';
import { fingerprint, readIdempotencyKey, withIdempotency } from '../idempotency.js';
import { paginationQuery } from '../pagination.js';
import { errors, fileSchema, idParam, idempotencyHeader, ok } from '../schemas.js';

const tags = ['Files'];
const security = [{ apiKey: [] }];

export function fileRoutes(app: FastifyInstance, services: Services): void {
  const { database, storage, clock } = services;
  const poppler = previewPoppler(services.config);

  app.post(
    '/upload',
    {
      schema: {
        tags,
        security,
        summary: 'Upload a file',
        description:
          'multipart/form-data with exactly one part named `file`. Streamed to storage; the type is sniffed from the bytes. ' +
          'Images are not decoded here: a file whose pixels are broken fails its task with INVALID_IMAGE.',
        consumes: ['multipart/form-data'],
        headers: idempotencyHeader,
        response: { 201: ok(fileSchema, 'The stored file'), ...errors(400, 401, 403, 409, 413, 415, 429) },
      },
    },
    async (request, reply) => {
      if (!request.isMultipart()) {
        throw new AppError('VALIDATION_ERROR', 'Send the file as multipart/form-data with one part named "file"', {
          fields: [{ field: 'file', message: 'is required' }],
        });
      }
      const idempotencyKey = readIdempotencyKey(request.headers['idempotency-key']);
      const parts = request.parts({ limits: { fileSize: request.limits.maxFileBytes + 1, parts: 2, fields: 1, files: 2 } });
      let upload: Awaited<ReturnType<typeof storeUpload>> | undefined;
      try {
        for await (const part of parts) {
          if (upload || part.type !== 'file' || part.fieldname !== 'file') {
            if (part.type === 'file') part.file.resume();
            throw new AppError('VALIDATION_ERROR', 'Send exactly one part, named "file"', {
              fields: [{ field: part.fieldname, message: upload ? 'only one part is allowed' : 'unknown part; the file goes in a part named "file"' }],
            });
          }
          upload = await storeUpload(storage, part.file, part.filename, request.limits);
        }
        if (!upload) throw new AppError('VALIDATION_ERROR', 'No part named "file"', { fields: [{ field: 'file', message: 'is required' }] });
        const stored = upload;
        const response = await withIdempotency(
          database,
          { accountId: request.account.id, key: idempotencyKey, fingerprint: fingerprint('upload', { sha256: stored.sha256, name: stored.filename }), now: clock.now() },
          async (tx) => ({ statusCode: 201, body: { success: true, data: await recordUpload(tx, clock, request.account.id, request.limits, stored) } }),
        );
        if (response.replayed) await storage.delete(stored.key);
        return reply.code(response.statusCode as 201).send(response.body);
      } catch (err) {
        if (upload) await storage.delete(upload.key).catch(() => {});
        throw err;
      }
    },
  );

  // GET and HEAD as one route: Fastify's generated HEAD route would overwrite Content-Length with 0.
  app.route({
    method: ['GET', 'HEAD'],
    url: '/download/:fileId',
    exposeHeadRoute: false,
    schema: {
      tags,
      security,
      summary: 'Download a file',
      description: 'The bytes, streamed. Supports HEAD, a single `Range` (206) and `If-None-Match` (304).',
      params: idParam('fileId', 'file'),
      response: { 200: { description: 'The file\'s bytes', content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } }, 206: { description: 'The requested range', content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } }, ...errors(401, 404, 410, 416) },
    },
    handler: async (request: FastifyRequest<{ Params: { fileId: string } }>, reply) => {
      const file = await getLiveFile(database.db, request.account.id, request.params.fileId, clock.now());
      return sendFile(request, reply, file);
    },
  });

  async function sendFile(request: FastifyRequest, reply: FastifyReply, file: FileRecord) {
    const size = Number(file.size);
    const etag = `"${file.etag}"`;
    reply.headers({
      'content-type': file.mime_type,
      'content-disposition': contentDisposition(file.filename),
      etag,
      'accept-ranges': 'bytes',
      'x-content-type-options': 'nosniff',
      'content-security-policy': 'sandbox',
      'cache-control': 'private, max-age=0, must-revalidate',
    });
    if (request.headers['if-none-match'] === etag) return reply.code(304).send();
    const range = parseRange(request.headers.range, size);
    if (range === 'unsatisfiable') {
      reply.header('content-range', `bytes */${size}`);
      throw new AppError('RANGE_NOT_SATISFIABLE', `The file has ${size} bytes`, { size });
    }
    if (range) {
      reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${size}`).header('content-length', range.end - range.start + 1);
    } else {
      reply.header('content-length', size);
    }
    if (request.method === 'HEAD') return reply.send();
    return reply.send(await storage.get(file.storage_key, range ?? undefined));
  }

  app.get(
    '/preview/:fileId',
    {
      schema: {
        tags,
        security,
        summary: 'Preview an image or PDF',
        description:
          'An inline PNG (with alpha) or JPEG no larger than 1024 px, or the asked box (at most 2048 px). SVG is rasterised; ' +
          'a PDF shows its first page. Other files (presentations, ZIPs): 415 PREVIEW_UNAVAILABLE.',
        params: idParam('fileId', 'file'),
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { width: { type: 'integer', minimum: 1, maximum: 2048 }, height: { type: 'integer', minimum: 1, maximum: 2048 } },
        },
        response: { 200: { description: 'The preview image', content: { 'image/png': { schema: { type: 'string', format: 'binary' } }, 'image/jpeg': { schema: { type: 'string', format: 'binary' } } } }, ...errors(400, 401, 404, 410, 415) },
      },
    },
    async (request: FastifyRequest<{ Params: { fileId: string }; Querystring: { width?: number; height?: number } }>, reply) => {
      const file = await getLiveFile(database.db, request.account.id, request.params.fileId, clock.now());
      if (!IMAGE_FORMATS.has(file.format) && file.format !== 'pdf') throw new AppError('PREVIEW_UNAVAILABLE', `No preview for ${file.format} files`);
      const { width, height } = request.query;
      const box = width || height ? { width, height } : { width: 1024, height: 1024 };
      let preview;
      if (file.format === 'pdf') {
        preview = await previewPdf(poppler, storage, file.storage_key, request.limits.maxPixels, box);
      } else {
        const path = storage.localPath ? storage.localPath(file.storage_key) : await streamToBuffer(await storage.get(file.storage_key));
        preview = await decodeForPreview(path, file.format, request.limits.maxPixels, box);
      }
      return reply
        .type(preview.mimeType)
        .headers({ 'x-content-type-options': 'nosniff', 'cache-control': 'private, max-age=300', 'content-disposition': 'inline' })
        .send(preview.data);
    },
  );

  app.get(
    '/files',
    {
      schema: {
        tags,
        security,
        summary: 'List files',
        description: 'Live files, newest first.',
        querystring: { type: 'object', additionalProperties: false, properties: paginationQuery },
        response: { 200: ok({ type: 'object', properties: { files: { type: 'array', items: fileSchema }, nextCursor: { type: ['string', 'null'] } } }), ...errors(400, 401) },
      },
    },
    async (request: FastifyRequest<{ Querystring: { limit: number; cursor?: string } }>) => ({
      success: true,
      data: await listFiles(database, request.account.id, clock.now(), request.query.limit, request.query.cursor),
    }),
  );

  app.get(
    '/files/:fileId',
    {
      schema: { tags, security, summary: 'A file\'s metadata', params: idParam('fileId', 'file'), response: { 200: ok(fileSchema), ...errors(401, 404, 410) } },
    },
    async (request: FastifyRequest<{ Params: { fileId: string } }>) => ({
      success: true,
      data: fileToApi(await getLiveFile(database.db, request.account.id, request.params.fileId, clock.now())),
    }),
  );

  app.delete(
    '/files/:fileId',
    {
      schema: {
        tags,
        security,
        summary: 'Delete a file',
        description: 'Deletes the bytes at once and frees the storage. A file an unfinished task reads is refused with 409 FILE_IN_USE.',
        params: idParam('fileId', 'file'),
        response: { 204: { description: 'Deleted', type: 'null' }, ...errors(401, 404, 409, 410) },
      },
    },
    async (request: FastifyRequest<{ Params: { fileId: string } }>, reply) => {
      await deleteFile(database, storage, clock, request.account.id, request.params.fileId);
      return reply.code(204).send();
    },
  );
}

/** `attachment` with an ASCII fallback and the exact UTF-8 name in filename* (RFC 6266). */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

/** One byte range (RFC 9110); several ranges or a malformed header are ignored (full body). */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | 'unsatisfiable' | null {
  if (!header) return null;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === '' && match[2] === '')) return null;
  let start: number;
  let end: number;
  if (match[1] === '') {
    const suffix = Number(match[2]);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(match[1]);
    end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
    if (match[2] !== '' && Number(match[2]) < start) return null;
  }
  if (start >= size || size === 0) return 'unsatisfiable';
  return { start, end };
}

async function streamToBuffer(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
