// Kysely over SQLite (the embedded default) or PostgreSQL. Dialect differences live here and
// nowhere else: the rest of the code asks `database.skipLocked` and the like.
import Sqlite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, type MigrationProvider, type Transaction } from 'kysely';
import pg from 'pg';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError, type DatabaseConfig } from '../config.js';
import { migrations } from './migrations.js';
import type { DB } from './schema.js';

// int8 columns (our millisecond times and byte counts) come back as numbers, not strings.
pg.types.setTypeParser(20, (value) => Number.parseInt(value, 10));

export type Tx = Transaction<DB>;

export interface Database {
  db: Kysely<DB>;
  dialect: 'sqlite' | 'postgres';
  /** PostgreSQL claims with FOR UPDATE SKIP LOCKED; SQLite has one writer and needs none. */
  skipLocked: boolean;
  /** A connection string for LISTEN/NOTIFY, where the dialect has it. */
  postgresUrl?: string;
  /** Runs `fn` in a transaction, retrying when SQLite reports a busy database or snapshot. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export async function openDatabase(config: DatabaseConfig, options: { poolSize?: number } = {}): Promise<Database> {
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
    const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: handle }) });
    return {
      db,
      dialect: 'sqlite',
      skipLocked: false,
      transaction: (fn) => retryBusy(() => db.transaction().execute(fn)),
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
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    dialect: 'postgres',
    skipLocked: true,
    postgresUrl: config.url,
    transaction: (fn) => db.transaction().execute(fn),
    close: () => db.destroy(),
  };
}

async function retryBusy<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const code = (err as { code?: string }).code ?? '';
      if (!code.startsWith('SQLITE_BUSY') || attempt >= 20) throw err;
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 20 * (attempt + 1)));
    }
  }
}

const provider: MigrationProvider = { getMigrations: async () => migrations };

/** Brings the schema up to date. Safe when several processes start at once. */
export async function migrate(database: Database): Promise<void> {
  const migrator = new Migrator({ db: database.db, provider });
  // Two processes may race to create Kysely's own bookkeeping tables; the loser retries.
  for (let attempt = 0; ; attempt++) {
    const { error } = await migrator.migrateToLatest();
    if (!error) return;
    if (attempt >= 5) throw error;
    await new Promise((r) => setTimeout(r, 100 * (attempt + 1)));
  }
}

/** Unique-constraint violation, in either dialect. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string };
  return e?.code === '23505' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}
