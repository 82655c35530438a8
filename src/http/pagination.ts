// Opaque cursors for newest-first lists: the last row's time and id.
import { AppError } from '../errors.js';

export function encodeCursor(time: number, id: string): string {
  return Buffer.from(`${time}:${id}`).toString('base64url');
}

export function decodeCursor(cursor: string | undefined): { time: number; id: string } | undefined {
  if (!cursor) return undefined;
  const text = Buffer.from(cursor, 'base64url').toString();
  const match = /^(\d+):([A-Za-z0-9_-]+)$/.exec(text);
  if (!match) throw new AppError('VALIDATION_ERROR', 'cursor is not a cursor this API returned', { fields: [{ field: 'cursor', message: 'invalid cursor' }] });
  return { time: Number(match[1]), id: match[2]! };
}

export const paginationQuery = {
  limit: { type: 'integer', minimum: 1, maximum: 100, default: 20, description: 'Page size (1–100, default 20).' },
  cursor: { type: 'string', maxLength: 200, description: 'The `nextCursor` of the previous page.' },
} as const;
