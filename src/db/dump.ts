// The whole database, table by table, for the operator's commands that move or keep all of it:
// `imgapi backup` and `restore` (src/ops/backup.ts, restore.ts) and `imgapi copy-to` (src/ops/copy.ts).
// These copy rows verbatim, whatever module owns them, so they name tables through TABLES
// instead of literals (test/architecture.test.ts lets this file do so).
//
// TABLES must name every table of the schema: TypeScript refuses a table of `DB` left out,
// `uncoveredTables` refuses one that a migration created and `DB` does not list, and
// test/ops/tables.test.ts checks both against src/db/schema.ts and a migrated database.
import Sqlite from 'better-sqlite3';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from './database.js';
import type { DB } from './schema.js';

/**
 * Every table and its primary key, parents before the tables that reference them (rows are
 * inserted in this order and deleted in the reverse one).
 */
export const TABLES = {
  accounts: ['id'],
  account_lanes: ['account_id', 'lane'],
  api_keys: ['id'],
  sessions: ['id'],
  auth_throttle: ['subject'],
  setup_tokens: ['token_hash'],
  invites: ['id'],
  rate_limits: ['subject'],
  periodic_runs: ['name'],
  batches: ['id'],
  uploads: ['id'],
  files: ['id'],
  file_info: ['file_id'],
  tasks: ['id'],
  task_inputs: ['task_id', 'position'],
  usage_counters: ['account_id', 'period'],
  idempotency_keys: ['account_id', 'key'],
  webhooks: ['id'],
  webhook_deliveries: ['id'],
  signing_keys: ['id'],
  presets: ['account_id', 'name'],
  origins: ['id'],
  origin_objects: ['origin_id', 'path'],
  render_cache: ['key'],
} as const satisfies { [T in keyof DB]: readonly [keyof DB[T] & string, ...(keyof DB[T] & string)[]] };

export type TableName = keyof typeof TABLES;
export const TABLE_NAMES = Object.keys(TABLES) as TableName[];

export type Row = Record<string, unknown>;
/** A read transaction (or the database itself, for a source nobody else writes). */
type Reader = Kysely<DB> | Transaction<DB>;
/** The tables as rows of any columns: what a copy that names tables through a variable can type. */
type Loose = Kysely<Record<string, Row>>;
const loose = (db: Reader): Loose => db as unknown as Loose;

/** The tables the database holds that TABLES does not name (Kysely's own excepted): copying would lose them. */
export async function uncoveredTables(database: Database): Promise<string[]> {
  const tables = await database.db.introspection.getTables();
  // Views hold no rows of their own (SQLite's charged_files is files).
  return tables
    .filter((t) => !t.isView)
    .map((t) => t.name)
    .filter((name) => !(name in TABLES));
}

/** Refuses, naming them, tables the copier would leave behind. */
export async function assertTablesCovered(database: Database): Promise<void> {
  const uncovered = await uncoveredTables(database);
  if (uncovered.length > 0)
    throw new Error(`the database has table(s) ${uncovered.join(', ')} that backup and copy-to do not cover: add them to TABLES in src/db/dump.ts`);
}

export async function countRows(db: Reader, table: TableName): Promise<number> {
  const row = await loose(db)
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function countAllRows(db: Reader): Promise<Record<TableName, number>> {
  const counts = {} as Record<TableName, number>;
  for (const table of TABLE_NAMES) counts[table] = await countRows(db, table);
  return counts;
}

const keyOf = (table: TableName, row: Row): unknown[] => TABLES[table].map((column) => row[column]);

/**
 * Every row of `table` in primary-key order, `pageSize` at a time (keyset pagination, so a
 * large table costs the same per page from the first to the last).
 */
export async function* readRows(db: Reader, table: TableName, pageSize = 500): AsyncGenerator<Row[]> {
  const key: readonly string[] = TABLES[table];
  let after: unknown[] | undefined;
  for (;;) {
    let query = loose(db).selectFrom(table).selectAll();
    if (after) {
      const last = after;
      query =
        key.length === 1
          ? query.where(key[0]!, '>', last[0])
          : query.where((eb) => eb(eb.refTuple(key[0]!, key[1]!), '>', eb.tuple(last[0], last[1])));
    }
    for (const column of key) query = query.orderBy(column);
    const rows = (await query.limit(pageSize).execute()) as Row[];
    if (rows.length > 0) yield rows;
    if (rows.length < pageSize) return;
    after = keyOf(table, rows[rows.length - 1]!);
  }
}

/** Inserts rows, or updates the ones whose primary key is there already: a copy run again converges. */
export async function upsertRows(db: Kysely<DB>, table: TableName, rows: Row[]): Promise<void> {
  if (rows.length === 0) return;
  const key: readonly string[] = TABLES[table];
  const columns = Object.keys(rows[0]!).filter((c) => !key.includes(c));
  // Both dialects bound the parameters of one statement: SQLite at 32,766, PostgreSQL at 65,535.
  const perStatement = Math.max(1, Math.floor(8000 / Object.keys(rows[0]!).length));
  for (let i = 0; i < rows.length; i += perStatement) {
    await loose(db)
      .insertInto(table)
      .values(rows.slice(i, i + perStatement))
      .onConflict((oc) =>
        oc.columns(key as string[]).doUpdateSet((eb) => Object.fromEntries(columns.map((column) => [column, eb.ref(`excluded.${column}`)]))),
      )
      .execute();
  }
}

/** The primary keys of every row of `table`, each as one string. */
export async function readKeys(db: Reader, table: TableName): Promise<Set<string>> {
  const keys = new Set<string>();
  for await (const rows of readRows(db, table, 2000)) for (const row of rows) keys.add(JSON.stringify(keyOf(table, row)));
  return keys;
}

/**
 * Deletes the rows of `table` whose key `keep` lacks (rows a source no longer has since an
 * earlier copy); answers how many went.
 */
export async function deleteRowsNotIn(db: Kysely<DB>, table: TableName, keep: Set<string>): Promise<number> {
  const key: readonly string[] = TABLES[table];
  const gone: unknown[][] = [];
  for await (const rows of readRows(db, table, 2000))
    for (const row of rows) if (!keep.has(JSON.stringify(keyOf(table, row)))) gone.push(keyOf(table, row));
  for (const values of gone) {
    let query = loose(db).deleteFrom(table);
    key.forEach((column, i) => (query = query.where(column, '=', values[i])));
    await query.execute();
  }
  return gone.length;
}

/**
 * Runs `fn` in a read-only transaction that sees one instant of the database while others go
 * on writing: PostgreSQL's REPEATABLE READ snapshot, SQLite's read transaction over the WAL
 * (held from its first read to its end).
 */
export async function readSnapshot<T>(database: Database, fn: (tx: Transaction<DB>) => Promise<T>): Promise<T> {
  if (database.dialect === 'postgres') return database.db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(fn);
  return database.db.transaction().execute(async (tx) => {
    // Start the snapshot now, not at fn's first query.
    await sql`select count(*) from sqlite_master`.execute(tx);
    return fn(tx);
  });
}

/**
 * A consistent copy of a SQLite database file made while other connections write to it
 * (SQLite's online backup API, through a connection of its own).
 */
export async function backupSqliteFile(file: string, destination: string): Promise<void> {
  const handle = new Sqlite(file, { readonly: true, fileMustExist: true, timeout: 10_000 });
  try {
    // All pages in one step: a backup taken in small steps starts over whenever another
    // connection writes in between, which a busy service may do forever. One step reads one
    // snapshot (WAL: writers go on meanwhile).
    await handle.backup(destination, { progress: () => 0x7fffffff });
  } finally {
    handle.close();
  }
}

/** Whether the database holds any row of any table (an empty target, or not). */
export async function holdsRows(database: Database): Promise<TableName | undefined> {
  const present = new Set((await database.db.introspection.getTables()).map((t) => t.name));
  for (const table of TABLE_NAMES) if (present.has(table) && (await countRows(database.db, table)) > 0) return table;
  return undefined;
}

/** SQLite's own check of a database file (`pragma quick_check`): "ok", or what it found wrong. */
export async function sqliteQuickCheck(database: Database): Promise<string> {
  const check = await sql<Record<string, string>>`pragma quick_check`.execute(database.db);
  return check.rows.map((row) => Object.values(row)[0]).join('; ');
}

/** Folds a SQLite database's write-ahead log into its file, which then stands alone (to be moved). */
export async function sqliteSingleFile(database: Database): Promise<void> {
  await sql`pragma journal_mode = DELETE`.execute(database.db);
}
