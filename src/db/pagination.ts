// Opaque cursors for newest-first lists: the last row's time and id. A list orders by
// (time desc, id desc), filters with `olderThan(cursor, …)`, fetches limit + 1 rows and hands
// them to `pageOf`. The query string's `limit` and `cursor` are in src/http/pagination.ts.
import { sql, type Expression, type SqlBool } from 'kysely';
import { AppError } from '../errors.js';

function encodeCursor(time: number, id: string): string {
  return Buffer.from(`${time}:${id}`).toString('base64url');
}

function decodeCursor(cursor: string | undefined): { time: number; id: string } | undefined {
  if (!cursor) return undefined;
  const text = Buffer.from(cursor, 'base64url').toString();
  const match = /^(\d+):([A-Za-z0-9_-]+)$/.exec(text);
  if (!match)
    throw new AppError('VALIDATION_ERROR', 'cursor is not a cursor this API returned', { fields: [{ field: 'cursor', message: 'invalid cursor' }] });
  return { time: Number(match[1]), id: match[2]! };
}

/** The condition for rows after the cursor's row, or undefined on the first page. */
export function olderThan(cursor: string | undefined, timeColumn: string, idColumn: string): Expression<SqlBool> | undefined {
  const after = decodeCursor(cursor);
  if (!after) return undefined;
  const time = sql.ref(timeColumn);
  return sql<SqlBool>`(${time} < ${after.time} OR (${time} = ${after.time} AND ${sql.ref(idColumn)} < ${after.id}))`;
}

/** One page of `limit + 1` fetched rows, and the cursor of the next page (null at the end). */
export function pageOf<R extends { created_at: number; id: string }>(rows: R[], limit: number): { page: R[]; nextCursor: string | null } {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return { page, nextCursor: rows.length > limit && last ? encodeCursor(last.created_at, last.id) : null };
}
