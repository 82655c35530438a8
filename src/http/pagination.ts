// The query string of a paged list (`limit`, `cursor`); the cursors themselves are read and
// written beside the queries, in src/db/pagination.ts.
export const paginationQuery = {
  limit: { type: 'integer', minimum: 1, maximum: 100, default: 20, description: 'Page size (1–100, default 20).' },
  cursor: { type: 'string', maxLength: 200, description: 'The `nextCursor` of the previous page.' },
} as const;
