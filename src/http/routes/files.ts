// Files: upload (multipart, streamed), download (streamed, HEAD, Range), preview, list, delete.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { deleteFile, getLiveFile, listFiles, type FileRecord } from '../../files/files.js';
import { fileTooLarge, safeFilename } from '../../files/identify.js';
import { recordUpload, storeUpload } from '../../files/upload.js';
import { FileInfos } from '../../files/info.js';
import { IMAGE_FORMATS, isPopplerDocument, MEDIA_TYPES } from '../../imaging/formats.js';
import { PREVIEW_MEDIA_TYPES, Previews } from '../../imaging/preview.js';
import { pdfPageCounter } from '../../documents/pdf.js';
import { previewFfmpeg, previewPoppler } from '../../programs/preview.js';
import type { Services } from '../../services.js';
import { withIdempotency } from '../../db/idempotency.js';
import { fingerprint, readIdempotencyKey } from '../idempotency.js';
import { paginationQuery } from '../pagination.js';
import { bodyAbandoned, bodyReceived } from '../request-body.js';
import { fileToApi, sendStoredFile } from '../resources.js';
import { API_READ, API_SECURITY, API_WRITE, IDEMPOTENT, VALIDATED, apiResponses, bytes, documentAs, jsonData, noContent } from '../openapi.js';
import { idParam, idempotencyHeader, ref } from '../schemas.js';
import { noneMatch, rangeApplies } from '../conditional.js';

const tags = ['Files'];
/** More than the boundaries and part headers of one file part take (busboy caps a part's headers far below). */
const MULTIPART_OVERHEAD_BYTES = 1024 * 1024;

export function fileRoutes(app: FastifyInstance, services: Services): void {
  const { database, storage, clock } = services;
  const poppler = previewPoppler(services.config, services.sandbox);
  const pdfPages = pdfPageCounter(poppler);
  const previews = new Previews({
    storage,
    poppler,
    ffmpeg: previewFfmpeg(services.config, services.sandbox),
    concurrency: services.config.previewConcurrency,
    queueLength: services.config.previewQueue,
    events: services.metrics.previews,
  });
  const infos = new FileInfos(database.db, previews);

  app.post(
    '/upload',
    {
      schema: {
        operationId: 'uploadFile',
        tags,
        security: API_SECURITY,
        summary: 'Upload a file',
        description:
          'multipart/form-data with exactly one part named `file`. Streamed to storage; the type is sniffed from the bytes. ' +
          'Images are not decoded here: a file whose pixels are broken fails its task with INVALID_IMAGE. ' +
          'A body that stalls (no bytes for 30 s, `BODY_STALL_SECONDS`) or is still arriving after `REQUEST_TIMEOUT_SECONDS` (default 600) ' +
          'is answered 408 REQUEST_TIMEOUT; a full disk or object store 507 INSUFFICIENT_STORAGE. A client that disconnects, a timed-out ' +
          'body and a failed write leave nothing behind: no file, no temporary bytes, no charge.',
        consumes: ['multipart/form-data'],
        headers: idempotencyHeader,
        response: apiResponses({ 201: jsonData('The stored file', 'FileMetadata', undefined, { headers: ['Location'] }) }, [
          ...API_WRITE,
          ...IDEMPOTENT,
          'PAYLOAD_TOO_LARGE',
          'REQUEST_TIMEOUT',
          'FILE_TOO_LARGE',
          'UNSUPPORTED_MEDIA_TYPE',
          'STORAGE_LIMIT_EXCEEDED',
        ]),
      },
      // The multipart body is streamed by the handler, not validated by Fastify: documented only.
      config: documentAs({ body: { content: { 'multipart/form-data': { schema: ref('FileUpload') } } } }),
    },
    async (request, reply) => {
      if (!request.isMultipart()) {
        throw new AppError('VALIDATION_ERROR', 'Send the file as multipart/form-data with one part named "file"', {
          fields: [{ field: 'file', message: 'is required' }],
        });
      }
      // A body declared larger than the file limit and a part's headers: refused before reading it.
      const declared = Number(request.headers['content-length']);
      if (declared > request.limits.maxFileBytes + MULTIPART_OVERHEAD_BYTES) throw fileTooLarge(request.limits.maxFileBytes);
      const idempotencyKey = readIdempotencyKey(request.headers['idempotency-key']);
      // Gone while the hooks ran (authentication reads the database): the multipart parser would
      // wait for ever on a request that has closed already.
      if (bodyAbandoned(request, reply)) return;
      const parts = request.parts({ limits: { fileSize: request.limits.maxFileBytes + 1, parts: 2, fields: 1, files: 2 } });
      let upload: Awaited<ReturnType<typeof storeUpload>> | undefined;
      try {
        for await (const part of parts) {
          if (upload || part.type !== 'file' || part.fieldname !== 'file') {
            if (part.type === 'file') part.file.resume();
            throw new AppError('VALIDATION_ERROR', 'Send exactly one part, named "file"', {
              fields: [
                { field: part.fieldname, message: upload ? 'only one part is allowed' : 'unknown part; the file goes in a part named "file"' },
              ],
            });
          }
          // A part the parser gave up on before this handler came to it (the whole body, buffered
          // while the hooks ran, ends before the part's closing boundary) is destroyed, never
          // ended, and without an error a pipe would see: reading it would wait for ever.
          if (part.file.destroyed && !part.file.readableEnded) {
            throw new AppError('VALIDATION_ERROR', 'Malformed multipart body: the part ends before its closing boundary');
          }
          // The bytes' hash only for an Idempotency-Key's fingerprint: nothing else reads it.
          upload = await storeUpload(storage, part.file, part.filename, request.limits, pdfPages, { sha256: idempotencyKey !== undefined });
        }
        // The parts can end with the connection (a client gone before its closing boundary):
        // only a body that arrived whole is an upload.
        if (!bodyReceived(request)) throw new AppError('VALIDATION_ERROR', 'The request body ended before it was complete');
        if (!upload) throw new AppError('VALIDATION_ERROR', 'No part named "file"', { fields: [{ field: 'file', message: 'is required' }] });
        // A client that closed once its body was sent reads no answer: nothing is recorded or charged.
        if (bodyAbandoned(request, reply)) {
          await storage.delete(upload.key);
          return;
        }
        const stored = upload;
        const response = await withIdempotency(
          database,
          {
            accountId: request.account.id,
            key: idempotencyKey,
            fingerprint: idempotencyKey === undefined ? '' : fingerprint('upload', { sha256: stored.sha256, name: stored.filename }),
            now: clock.now(),
            // One statement (recordUpload: the file's row and its charge): no transaction without a key.
            alone: true,
          },
          async (tx) => ({
            statusCode: 201,
            body: { success: true, data: fileToApi(await recordUpload(database, tx, clock, request.account.id, request.limits, stored)) },
          }),
        );
        if (response.replayed) await storage.delete(stored.key);
        return sendStoredFile(reply, response);
      } catch (err) {
        if (upload) await storage.delete(upload.key).catch(() => {});
        if (bodyAbandoned(request, reply)) return;
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
      operationId: 'downloadFile',
      tags,
      security: API_SECURITY,
      summary: 'Download a file',
      description:
        'The bytes, streamed, as `Content-Type` of their real format, an attachment with a safe file name. Supports HEAD, a single ' +
        "`Range` (206; a range past the end is 416; ignored under an `If-Range` that is not the file's ETag) and `If-None-Match` (304). Served with `X-Content-Type-Options: nosniff` and " +
        '`Content-Security-Policy: sandbox`.',
      params: idParam('fileId', 'file'),
      headers: {
        type: 'object',
        properties: {
          range: { type: 'string', description: 'One byte range, e.g. `bytes=0-1023`, `bytes=1024-` or `bytes=-500`; several ranges are ignored.' },
          'if-none-match': { type: 'string', description: 'The ETag you hold: 304 when the bytes are the same.' },
          'if-range': { type: 'string', description: 'With `Range`: the ETag you hold; another (or a date) gets the whole file, 200.' },
        },
      },
      response: apiResponses(
        {
          200: bytes("The file's bytes", MEDIA_TYPES, { headers: ['ETag', 'Content-Disposition', 'Content-Length', 'Accept-Ranges'] }),
          206: bytes('The requested range', MEDIA_TYPES, {
            headers: ['ETag', 'Content-Disposition', 'Content-Length', 'Accept-Ranges', 'Content-Range'],
          }),
          304: noContent('Not modified: the ETag matches', { headers: ['ETag', 'Content-Disposition', 'Accept-Ranges'] }),
        },
        [...API_READ, ...VALIDATED, 'NOT_FOUND', 'FILE_EXPIRED', 'RANGE_NOT_SATISFIABLE'],
      ),
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
      'content-disposition': contentDisposition(file.filename, file.format),
      etag,
      'accept-ranges': 'bytes',
      'x-content-type-options': 'nosniff',
      'content-security-policy': 'sandbox',
      'cache-control': 'private, max-age=0, must-revalidate',
    });
    if (noneMatch(request.headers['if-none-match'], etag)) return reply.code(304).send();
    const ifRange = request.headers['if-range'];
    const range = rangeApplies(typeof ifRange === 'string' ? ifRange : undefined, etag) ? parseRange(request.headers.range, size) : null;
    if (range === 'unsatisfiable') {
      throw new AppError('RANGE_NOT_SATISFIABLE', `The file has ${size} bytes`, { size }, { 'content-range': `bytes */${size}` });
    }
    if (range) {
      reply
        .code(206)
        .header('content-range', `bytes ${range.start}-${range.end}/${size}`)
        .header('content-length', range.end - range.start + 1);
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
        operationId: 'previewFile',
        tags,
        security: API_SECURITY,
        summary: 'Preview an image or PDF',
        description:
          'An inline PNG (with alpha) or JPEG no larger than 1024 px, or the asked box (at most 2048 px; a side not given is 2048). ' +
          'SVG is rasterised without loading anything it references; a PDF shows its first page. Other files (presentations, ZIPs, ' +
          "HEIC, BMP): 415 PREVIEW_UNAVAILABLE, and so is an image over the plan's pixel or frame limits (`details.reason` " +
          '`IMAGE_TOO_LARGE`). Previews are made once and kept until the file goes. Each API process renders `PREVIEW_CONCURRENCY` ' +
          'previews at once with `PREVIEW_QUEUE` more waiting; past that 503 SERVICE_UNAVAILABLE with `Retry-After`.',
        params: idParam('fileId', 'file'),
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            width: { type: 'integer', minimum: 1, maximum: 2048, description: 'Largest width in pixels.' },
            height: { type: 'integer', minimum: 1, maximum: 2048, description: 'Largest height in pixels.' },
          },
        },
        response: apiResponses({ 200: bytes('The preview image', PREVIEW_MEDIA_TYPES, { headers: ['Content-Disposition'] }) }, [
          ...API_READ,
          ...VALIDATED,
          'NOT_FOUND',
          'FILE_EXPIRED',
          'PREVIEW_UNAVAILABLE',
          'SERVICE_UNAVAILABLE',
        ]),
      },
    },
    async (request: FastifyRequest<{ Params: { fileId: string }; Querystring: { width?: number; height?: number } }>, reply) => {
      const file = await getLiveFile(database.db, request.account.id, request.params.fileId, clock.now());
      if (!IMAGE_FORMATS.has(file.format) && !isPopplerDocument(file.format))
        throw new AppError('PREVIEW_UNAVAILABLE', `No preview for ${file.format} files`);
      const preview = await previews.preview(file, request.limits, request.query);
      return reply
        .type(preview.mimeType)
        .headers({ 'x-content-type-options': 'nosniff', 'cache-control': 'private, max-age=300', 'content-disposition': 'inline' })
        .send(preview.data);
    },
  );

  app.get(
    '/files/:fileId/info',
    {
      schema: {
        operationId: 'getFileInfo',
        tags,
        security: API_SECURITY,
        summary: "An image's info: size, EXIF, GPS, palette, placeholders, perceptual hash",
        description:
          'Format, upright size, frames, alpha, colour space and orientation from the header; the EXIF tags and GPS position; ' +
          'a palette of up to 8 colours (most frequent first) and the dominant one; BlurHash and ThumbHash placeholders; and a 64-bit ' +
          'perceptual hash to find near-duplicates (count the differing bits). Computed on first ask from a small copy of the image ' +
          "(within the plan's pixel limits, on libvips' threads) and kept until the file goes: asking again is a read. Documents " +
          '(PDFs, presentations, ZIPs) and images past the pixel limits or that cannot be decoded: 415 INFO_UNAVAILABLE. While every ' +
          'preview slot is busy: 503 SERVICE_UNAVAILABLE with `Retry-After`.',
        params: idParam('fileId', 'file'),
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            faces: {
              type: 'string',
              enum: ['0', '1', 'true', 'false'],
              description:
                'With 1 (or true), `faces` lists every face the detector finds (the model faces and redact use), in the upright ' +
                "image's pixels, best score first; found once and kept with the rest.",
            },
          },
        },
        response: apiResponses({ 200: jsonData("The image's info", 'FileInfo') }, [
          ...API_READ,
          ...VALIDATED,
          'NOT_FOUND',
          'FILE_EXPIRED',
          'INFO_UNAVAILABLE',
          'SERVICE_UNAVAILABLE',
        ]),
      },
    },
    async (request: FastifyRequest<{ Params: { fileId: string }; Querystring: { faces?: string } }>) => {
      const now = clock.now();
      const file = await getLiveFile(database.db, request.account.id, request.params.fileId, now);
      const withFaces = request.query.faces === '1' || request.query.faces === 'true';
      if (withFaces) return { success: true, data: await infos.infoWithFaces(file, request.limits, now) };
      const { faces: _kept, ...info } = await infos.info(file, request.limits, now);
      return { success: true, data: info };
    },
  );

  app.get(
    '/files',
    {
      schema: {
        operationId: 'listFiles',
        tags,
        security: API_SECURITY,
        summary: 'List files',
        description: 'Live files, newest first. `q` keeps those whose filename contains the text (case-insensitive).',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            ...paginationQuery,
            q: { type: 'string', minLength: 1, maxLength: 255, description: 'Only files whose filename contains this text, ignoring case.' },
          },
        },
        response: apiResponses({ 200: jsonData('A page of files', 'FileList') }, [...API_READ, ...VALIDATED]),
      },
    },
    async (request: FastifyRequest<{ Querystring: { limit: number; cursor?: string; q?: string } }>) => {
      const { limit, cursor, q } = request.query;
      const { files, nextCursor } = await listFiles(database, request.account.id, clock.now(), limit, cursor, q);
      return { success: true, data: { files: files.map(fileToApi), nextCursor } };
    },
  );

  app.get(
    '/files/:fileId',
    {
      schema: {
        operationId: 'getFile',
        tags,
        security: API_SECURITY,
        summary: "A file's metadata",
        params: idParam('fileId', 'file'),
        response: apiResponses({ 200: jsonData('The file', 'FileMetadata') }, [...API_READ, ...VALIDATED, 'NOT_FOUND', 'FILE_EXPIRED']),
      },
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
        operationId: 'deleteFile',
        tags,
        security: API_SECURITY,
        summary: 'Delete a file',
        description: 'Deletes the bytes at once and frees the storage. A file an unfinished task reads is refused with 409 FILE_IN_USE.',
        params: idParam('fileId', 'file'),
        response: apiResponses({ 204: noContent('Deleted') }, [...API_WRITE, ...VALIDATED, 'NOT_FOUND', 'FILE_EXPIRED', 'FILE_IN_USE']),
      },
    },
    async (request: FastifyRequest<{ Params: { fileId: string } }>, reply) => {
      await deleteFile(database, storage, clock, request.account.id, request.params.fileId);
      // Its delivery-URL renders go with it (their cache keys named it, so none is served after).
      await services.delivery.cache.purgeSource(request.account.id, `file:${request.params.fileId}`);
      return reply.code(204).send();
    },
  );
}

/**
 * `attachment` with an ASCII fallback and the UTF-8 name in filename* (RFC 6266). The name is
 * cleaned again here, so a row stored before names were cleaned as they are now is safe too.
 */
function contentDisposition(filename: string, format: string): string {
  const name = safeFilename(filename, format);
  const ascii = name.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** One byte range (RFC 9110); several ranges or a malformed header are ignored (full body). */
function parseRange(header: string | undefined, size: number): { start: number; end: number } | 'unsatisfiable' | null {
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
