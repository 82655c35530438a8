// The dashboard's tables (files, tasks, keys, the operator's accounts, failures and invitations):
// one table component, and one hook for the API's newest-first, cursor-paged lists
// (`?limit=&cursor=`, answering `nextCursor`).
import { useState, type ReactNode } from 'react';
import { api } from './api';
import { useAsync } from './components';

export interface Column<T> {
  /** Without one, `label` is the header, for screen readers only (a thumbnail or an actions column). */
  header?: ReactNode;
  /** The column's name where `header` is not plain text or is absent; default "Actions". */
  label?: string;
  cell: (row: T) => ReactNode;
  className?: string;
  /** The cell's tooltip, e.g. the exact time behind a relative one. */
  title?: (row: T) => string | undefined;
}

export function DataTable<T>(props: {
  rows: T[];
  columns: Column<T>[];
  rowKey: (row: T) => string;
  /** data-* attributes of a row, to find it by its id. */
  rowAttributes?: (row: T) => Record<`data-${string}`, string>;
  testId?: string;
  /** Shown instead of the table when there are no rows (without it the empty table shows). */
  empty?: ReactNode;
  loading?: boolean;
  /** Tighter rows, for a table inside a card of other things. */
  compact?: boolean;
  /** The list could not be loaded: no "empty" text then (the error says what happened). */
  error?: unknown;
  /** The table's name for screen readers. */
  caption?: string;
}) {
  if (props.rows.length === 0 && props.error) return null;
  if (props.empty !== undefined && props.rows.length === 0) {
    return (
      <p className={props.loading ? 'muted' : 'muted state'} data-testid={props.testId} data-empty="">
        {props.loading ? 'Loading…' : props.empty}
      </p>
    );
  }
  const names = props.columns.map((column) => column.label ?? (typeof column.header === 'string' ? column.header : 'Actions'));
  // On a phone the rows become cards, each cell labelled with its column's name (styles.css).
  return (
    <div className="table-wrap">
      <table className={props.compact ? 'table compact cards' : 'table cards'} data-testid={props.testId}>
        {props.caption && <caption className="sr-only">{props.caption}</caption>}
        <thead>
          <tr>
            {props.columns.map((column, i) => (
              <th key={i} scope="col" className={column.className === 'select' ? 'select' : undefined}>
                {column.header ?? <span className="sr-only">{names[i]}</span>}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((row) => (
            <tr key={props.rowKey(row)} {...props.rowAttributes?.(row)}>
              {props.columns.map((column, i) => (
                <td key={i} className={column.className} title={column.title?.(row)} data-label={column.header === undefined ? undefined : names[i]}>
                  <div className="cell">{column.cell(row)}</div>
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * One page of `path`'s list: GET `path?<query>&cursor=…`, query entries that are empty left out.
 * Keeps the cursors of the pages behind for "Newer"; `reset` goes back to the first page (call it
 * when a filter changes).
 */
export function usePagedList<R extends { nextCursor: string | null }>(path: string, query: Record<string, string | undefined>) {
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const cursor = cursors[cursors.length - 1];
  const params = Object.entries({ ...query, cursor })
    .filter((entry): entry is [string, string] => !!entry[1])
    .map(([name, value]) => `${name}=${encodeURIComponent(value)}`)
    .join('&');
  const list = useAsync((signal) => api.get<R>(`${path}?${params}`, { signal }), [path, params]);
  return {
    ...list,
    page: cursors.length,
    hasNext: !!list.data?.nextCursor,
    next: () => {
      const nextCursor = list.data?.nextCursor;
      if (nextCursor) setCursors((s) => [...s, nextCursor]);
    },
    previous: () => setCursors((s) => (s.length > 1 ? s.slice(0, -1) : s)),
    reset: () => setCursors([undefined]),
  };
}

export function Pager({ list }: { list: { page: number; hasNext: boolean; next: () => void; previous: () => void } }) {
  return (
    <div className="pager">
      <button type="button" className="secondary" disabled={list.page <= 1} onClick={list.previous}>
        ← Newer
      </button>
      <span className="muted">page {list.page}</span>
      <button type="button" className="secondary" disabled={!list.hasNext} onClick={list.next}>
        Older →
      </button>
    </div>
  );
}
