// Kysely over SQLite (the embedded default) or PostgreSQL. Dialect differences live here and
// nowhere else: the rest of the code asks `database.skipLocked`, `database.lockRow` and the like.
// The order in which transactions take their locks is written at the top of
// src/accounts/quota.ts.
import Sqlite from 'better-sqlite3';
import {
  Kysely,
  Migrator,
  PostgresDialect,
  SqliteDialect,
  sql,
  type LogEvent,
  type MigrationProvider,
  type RawBuilder,
  type SelectQueryBuilder,
  type SqliteDatabase,
  type Transaction,
} from 'kysely';
import { jsonArrayFrom as postgresJsonArray } from 'kysely/helpers/postgres';
import { jsonArrayFrom as sqliteJsonArray } from 'kysely/helpers/sqlite';
import pg from 'pg';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, type DatabaseConfig } from '../config.js';
import { migrations, refuseNewerSchema } from './migrations.js';
import type { DB } from './schema.js';

// int8 columns (our millisecond times and byte counts) come back as numbers, not strings.
pg.types.setTypeParser(20, (value) => Number.parseInt(value, 10));

export type Tx = Transaction<DB>;

/** Tables whose rows transactions lock by id (see the lock order in src/accounts/quota.ts). */
type LockableTable = 'accounts' | 'tasks' | 'batches';

export interface Database {
  db: Kysely<DB>;
  dialect: 'sqlite' | 'postgres';
  /** PostgreSQL claims with FOR UPDATE SKIP LOCKED; SQLite has one writer and needs none. */
  skipLocked: boolean;
  /** PostgreSQL locks rows it reads with FOR … UPDATE; SQLite has one writer and needs none. */
  rowLocks: boolean;
  /**
   * PostgreSQL's WITH may hold INSERT, UPDATE and DELETE (data-modifying CTEs): two tables
   * written by one statement, which needs no transaction around it. SQLite's may not.
   */
  writingCtes: boolean;
  /** A connection string for LISTEN/NOTIFY, where the dialect has it. */
  postgresUrl?: string;
  /**
   * Runs `fn` in a transaction, and runs it again (a bounded number of times, after a short
   * random pause) when the database gives up on it for a reason that is nobody's fault: SQLite's
   * busy database or stale snapshot, PostgreSQL's serialization failure (40001) or deadlock
   * (40P01). `fn` may therefore run more than once: it must do nothing outside the database.
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /**
   * Holds the write lock of one row until the transaction ends, so what the transaction reads
   * of that row's dependants stays true until it commits (PostgreSQL: `SELECT … FOR NO KEY
   * UPDATE`, which still lets other transactions insert rows referencing it). SQLite has one
   * writer: its transactions are serializable already (a stale snapshot is retried), so this
   * does nothing there.
   */
  lockRow(tx: Tx, table: LockableTable, id: string): Promise<void>;
  /**
   * A subquery's rows as one JSON array (PostgreSQL's json_agg, SQLite's json_group_array over
   * its explicit selections), in its order: a statement returns its rows with their children.
   * Read the value back with `jsonRows`.
   */
  jsonArrayFrom<O>(query: SelectQueryBuilder<DB, keyof DB, O>): RawBuilder<O[]>;
  /** Answers when the database does (readiness); throws what the driver says when it does not. */
  check(): Promise<void>;
  /**
   * Statements sent through `db` so far, a transaction's BEGIN and COMMIT included (the bench
   * counts them per job: bench/scenarios/job-statements.ts).
   */
  statementCount(): number;
  /** Calls `listener` with each statement's SQL as it is sent, until the returned function is called (the bench lists them). */
  watchStatements(listener: (sql: string) => void): () => void;
  close(): Promise<void>;
}

const answers = async (db: Kysely<DB>): Promise<void> => {
  await sql`select 1`.execute(db);
};

export async function openDatabase(config: DatabaseConfig, options: { poolSize?: number } = {}): Promise<Database> {
  // Kysely calls `log` once per statement it sends (its drivers send BEGIN and COMMIT as statements too).
  let statements = 0;
  const listeners = new Set<(sql: string) => void>();
  const log = (event: LogEvent) => {
    statements++;
    for (const listener of listeners) listener(event.query.sql);
  };
  const statementCount = () => statements;
  const watchStatements = (listener: (sql: string) => void) => {
    listeners.add(listener);
    return () => void listeners.delete(listener);
  };
  if (config.dialect === 'sqlite') {
    let handle: Sqlite.Database;
    try {
      fs.mkdirSync(path.dirname(config.file), { recursive: true });
      handle = new Sqlite(config.file, { timeout: 10_000 });
    } catch (err) {
      throw new ConfigError([`DATABASE_URL: cannot open SQLite file "${config.file}" (${(err as Error).message})`]);
    }
    handle.pragma('journal_mode = WAL');
    handle.pragma('synchronous = NORMAL');
    handle.pragma('busy_timeout = 10000');
    handle.pragma('foreign_keys = ON');
    const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: cachingStatements(handle) }), log });
    return {
      db,
      dialect: 'sqlite',
      skipLocked: false,
      rowLocks: false,
      writingCtes: false,
      transaction: (fn) => retrying(() => db.transaction().execute(fn), isSqliteBusy, 20),
      lockRow: async () => {},
      jsonArrayFrom: (query) => sqliteJsonArray(query) as RawBuilder<never[]>,
      check: () => answers(db),
      statementCount,
      watchStatements,
      close: () => db.destroy(),
    };
  }

  const pool = new pg.Pool({ connectionString: config.url, max: options.poolSize ?? 10, connectionTimeoutMillis: 10_000 });
  pool.on('error', () => {
    // An idle client lost its connection; the pool replaces it on the next checkout.
  });
  try {
    const client = await pool.connect();
    client.release();
  } catch (err) {
    await pool.end().catch(() => {});
    throw new ConfigError([`DATABASE_URL: cannot connect to PostgreSQL (${(err as Error).message})`]);
  }
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }), log });
  return {
    db,
    dialect: 'postgres',
    skipLocked: true,
    rowLocks: true,
    writingCtes: true,
    postgresUrl: config.url,
    transaction: (fn) => retrying(() => db.transaction().execute(fn), isPostgresConflict, 5),
    lockRow: async (tx, table, id) => {
      await tx.selectFrom(table).select('id').where('id', '=', id).forNoKeyUpdate().execute();
    },
    jsonArrayFrom: (query) => postgresJsonArray(query) as RawBuilder<never[]>,
    check: () => answers(db),
    statementCount,
    watchStatements,
    close: () => db.destroy(),
  };
}

/** Prepared statements kept per connection: Kysely's queries come in a few hundred shapes. */
const STATEMENT_CACHE_SIZE = 500;

/**
 * The connection as Kysely's SQLite dialect sees it, with `prepare` answered from a bounded LRU
 * cache keyed by the SQL text: Kysely prepares every query it runs, and compiling the SQL again
 * each time cost as much as running it. A statement still busy (an iteration left open) is not
 * shared: that caller gets a fresh one. SQLite re-prepares a cached statement by itself when
 * the schema changes (migrations).
 */
function cachingStatements(handle: Sqlite.Database): SqliteDatabase {
  const cache = new Map<string, Sqlite.Statement>();
  return {
    close: () => {
      cache.clear();
      handle.close();
    },
    prepare(text: string) {
      const cached = cache.get(text);
      if (cached && !cached.busy) {
        // Most recently used last: Map keeps insertion order.
        cache.delete(text);
        cache.set(text, cached);
        return cached;
      }
      const statement = handle.prepare(text);
      if (!cached) {
        cache.set(text, statement);
        if (cache.size > STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value!);
      }
      return statement;
    },
  };
}

const errorCode = (err: unknown): string => String((err as { code?: unknown } | undefined)?.code ?? '');
/** Another process holds SQLite's write lock, or wrote since this transaction's snapshot. */
const isSqliteBusy = (err: unknown): boolean => errorCode(err).startsWith('SQLITE_BUSY');
/**
 * serialization_failure or deadlock_detected: PostgreSQL rolled this transaction back so that
 * another could go on. The lock order makes deadlocks rare; the retry makes them harmless.
 */
const isPostgresConflict = (err: unknown): boolean => errorCode(err) === '40001' || errorCode(err) === '40P01';

async function retrying<T>(fn: () => Promise<T>, retryable: (err: unknown) => boolean, retries: number): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!retryable(err) || attempt >= retries) throw err;
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * (attempt + 1)));
    }
  }
}

const provider: MigrationProvider = { getMigrations: async () => migrations };

/** Brings the schema up to date. Safe when several processes start at once. */
export async function migrate(database: Database): Promise<void> {
  await refuseNewerSchema(database.db);
  const migrator = new Migrator({ db: database.db, provider });
  // Two processes may race to create Kysely's own bookkeeping tables; the loser retries.
  for (let attempt = 0; ; attempt++) {
    const { error } = await migrator.migrateToLatest();
    if (!error) return;
    if (attempt >= 5) throw error;
    await new Promise((r) => setTimeout(r, 100 * (attempt + 1)));
  }
}

/** A `Database.jsonArrayFrom` value as read back: PostgreSQL's driver parses JSON, SQLite's hands back the text. */
export const jsonRows = <O>(value: O[] | string | null | undefined): O[] => (typeof value === 'string' ? (JSON.parse(value) as O[]) : (value ?? []));

/** Unique-constraint violation, in either dialect. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string };
  return e?.code === '23505' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}
