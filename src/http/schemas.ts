// Shared OpenAPI/JSON-Schema pieces: the envelopes and the resources the API returns.
import { ERROR_STATUS } from '../errors.js';

export const errorEnvelope = {
  type: 'object',
  required: ['success', 'error'],
  properties: {
    success: { type: 'boolean', const: false },
    error: {
      type: 'object',
      required: ['code', 'message', 'requestId'],
      properties: {
        code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
        message: { type: 'string' },
        details: { type: 'object', additionalProperties: true },
        requestId: { type: 'string' },
      },
    },
  },
} as const;

export const ok = (data: object, description = 'Success') => ({
  description,
  type: 'object',
  required: ['success', 'data'],
  properties: { success: { type: 'boolean', const: true }, data },
});

export const errors = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((status) => [status, { description: describeStatus(status), ...errorEnvelope }]));

function describeStatus(status: number): string {
  const codes = Object.entries(ERROR_STATUS)
    .filter(([, s]) => s === status)
    .map(([code]) => code);
  return codes.join(', ');
}

export const fileSchema = {
  type: 'object',
  properties: {
    fileId: { type: 'string', example: 'file_Q2x4bXcT6yq0bUj2m1q5rDkA' },
    filename: { type: 'string' },
    mimeType: { type: 'string' },
    format: { type: 'string' },
    size: { type: 'integer' },
    width: { type: 'integer' },
    height: { type: 'integer' },
    pages: { type: 'integer', description: 'Frames of an animation or pages of a document, when more than one.' },
    origin: { type: 'string', enum: ['upload', 'output'] },
    taskId: { type: 'string', description: 'For outputs: the task that made it.' },
    createdAt: { type: 'string', format: 'date-time' },
    expiresAt: { type: 'string', format: 'date-time' },
  },
} as const;

export const taskSchema = {
  type: 'object',
  properties: {
    taskId: { type: 'string' },
    type: { type: 'string' },
    status: { type: 'string', enum: ['queued', 'processing', 'completed', 'failed', 'canceled'] },
    progress: { type: 'integer', minimum: 0, maximum: 100 },
    batchId: { type: 'string' },
    input: { type: 'object', additionalProperties: true },
    options: { type: 'object', additionalProperties: true },
    outputFileId: { type: 'string' },
    outputFileIds: { type: 'array', items: { type: 'string' } },
    result: {
      type: 'object',
      properties: { format: { type: 'string' }, size: { type: 'integer' }, width: { type: 'integer' }, height: { type: 'integer' }, pages: { type: 'integer' } },
      additionalProperties: true,
    },
    error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } } },
    attempts: { type: 'integer' },
    createdAt: { type: 'string', format: 'date-time' },
    startedAt: { type: 'string', format: 'date-time' },
    completedAt: { type: 'string', format: 'date-time' },
  },
} as const;

export const idParam = (name: string, prefix: string) => ({
  type: 'object',
  required: [name],
  additionalProperties: false,
  properties: { [name]: { type: 'string', maxLength: 100, description: `An id starting ${prefix}_` } },
});

export const idempotencyHeader = {
  type: 'object',
  properties: {
    'idempotency-key': {
      type: 'string',
      minLength: 1,
      maxLength: 255,
      description: 'A repeat with the same key and body within 24 hours returns the first response and does nothing again.',
    },
  },
} as const;
