// Rows as the API answers with them. Each one's type is read from its schema (schemas.ts), so
// what a response holds and what the OpenAPI document says of it cannot disagree.
import type { FromSchema } from 'json-schema-to-ts';
import type { FastifyReply } from 'fastify';
import { iso } from '../clock.js';
import type { FileRecord } from '../files/files.js';
import { safeFilename } from '../files/identify.js';
import type { FILE_SCHEMA } from './schemas.js';

export type ApiFile = FromSchema<typeof FILE_SCHEMA>;

export function fileToApi(file: FileRecord): ApiFile {
  return {
    fileId: file.id,
    // Names stored by versions before the sanitiser are cleaned on the way out as well.
    filename: safeFilename(file.filename, file.format),
    mimeType: file.mime_type,
    // Only a format this service sniffed or wrote is ever stored.
    format: file.format as ApiFile['format'],
    size: Number(file.size),
    ...(file.width !== null ? { width: file.width } : {}),
    ...(file.height !== null ? { height: file.height } : {}),
    ...(file.pages !== null ? { pages: file.pages } : {}),
    origin: file.origin,
    ...(file.task_id !== null ? { taskId: file.task_id } : {}),
    createdAt: iso(file.created_at),
    expiresAt: iso(file.expires_at),
  };
}

/** An upload's or a confirm's 201 (or its idempotent replay), with `Location` naming the stored file. */
export function sendStoredFile(reply: FastifyReply, response: { statusCode: number; body: unknown }): FastifyReply {
  const { fileId } = (response.body as { data: ApiFile }).data;
  return reply.code(response.statusCode).header('location', `/api/files/${fileId}`).send(response.body);
}
