// Builds test/fixtures/first-release.sql: a database as the first released schema made it,
// with rows in every table that schema had, as plain SQL that both SQLite and PostgreSQL run.
// test/ops/upgrade.test.ts loads it, migrates it with today's code and checks every row.
//
//   node --import tsx scripts/upgrade-fixture.ts
//
// There is no release tag; the first commit that shipped a schema is FIRST_RELEASE (its
// migration 0001_initial, unchanged since, as every landed migration is). Every later migration
// runs over the fixture: the columns added to accounts and tasks, and the tables added since.
// The migrations are taken from git as they stood then, never from the working tree.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Sqlite from 'better-sqlite3';
import { Kysely, Migrator, SqliteDialect, type Migration } from 'kysely';

export const FIRST_RELEASE = 'ba30e9d';
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'test', 'fixtures', 'first-release.sql');
/** One of the fixture's API keys, in clear: the test signs in with it after the upgrade. */
export const FIXTURE_KEY = 'ik_firstReleaseFixtureKey0000000000000000000';
/** alice@example.com's password, in clear, for the same reason. */
export const FIXTURE_PASSWORD = 'first-release-password';

/** The first release's password hash (scrypt N=16384 r=8 p=1, 32 bytes), with a fixed salt so the fixture is reproducible. */
function passwordHash(password: string): string {
  const salt = Buffer.alloc(16, 7);
  const hash = crypto.scryptSync(password, salt, 32, { N: 16384, r: 8, p: 1 });
  return `scrypt$16384$8$1$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

const sha256 = (text: string) => crypto.createHash('sha256').update(text).digest('hex');

async function main() {
  // The migrations module of the first release, where it can import kysely from node_modules.
  const dir = path.join(ROOT, 'node_modules', '.cache', 'imgapi-upgrade-fixture');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'migrations.ts');
  fs.writeFileSync(file, execFileSync('git', ['show', `${FIRST_RELEASE}:src/db/migrations.ts`], { cwd: ROOT }));
  const { migrations } = (await import(pathToFileURL(file).href)) as { migrations: Record<string, Migration> };

  const handle = new Sqlite(':memory:');
  const db = new Kysely<Record<string, Record<string, unknown>>>({ dialect: new SqliteDialect({ database: handle }) });
  const { error } = await new Migrator({ db, provider: { getMigrations: async () => migrations } }).migrateToLatest();
  if (error) throw error;

  const t0 = Date.UTC(2026, 10, 21, 23, 30);
  const day = 86_400_000;
  const rows: Record<string, Record<string, unknown>[]> = {
    accounts: [
      {
        id: 'acc_fixtureA',
        email: 'alice@example.com',
        password_hash: passwordHash(FIXTURE_PASSWORD),
        plan: 'pro',
        is_admin: 1,
        storage_used: 3000,
        created_at: t0,
      },
      { id: 'acc_fixtureB', email: 'bob@example.com', password_hash: null, plan: 'max', is_admin: 0, storage_used: 0, created_at: t0 + 1 },
    ],
    api_keys: [
      {
        id: 'key_fixtureA',
        account_id: 'acc_fixtureA',
        name: 'ci',
        prefix: FIXTURE_KEY.slice(0, 11),
        key_hash: sha256(FIXTURE_KEY),
        created_at: t0,
        last_used_at: t0 + 5000,
        revoked_at: null,
      },
      {
        id: 'key_fixtureB',
        account_id: 'acc_fixtureB',
        name: "o'old key",
        prefix: 'ik_revoked',
        key_hash: sha256('ik_revoked-key'),
        created_at: t0,
        last_used_at: null,
        revoked_at: t0 + day,
      },
    ],
    files: [
      {
        id: 'file_fixtureIn',
        account_id: 'acc_fixtureA',
        origin: 'upload',
        storage_key: 'uploads/file_fixtureIn',
        filename: 'photo.jpg',
        mime_type: 'image/jpeg',
        format: 'jpeg',
        size: 2000,
        width: 64,
        height: 48,
        pages: 1,
        etag: 'aa11',
        task_id: null,
        output_index: null,
        created_at: t0 + 10,
        expires_at: t0 + 10 + day,
        deleted_at: null,
      },
      {
        id: 'file_fixtureOut',
        account_id: 'acc_fixtureA',
        origin: 'output',
        storage_key: 'outputs/task_fixtureDone/0',
        filename: 'photo.webp',
        mime_type: 'image/webp',
        format: 'webp',
        size: 1000,
        width: 64,
        height: 48,
        pages: 1,
        etag: 'bb22',
        task_id: 'task_fixtureDone',
        output_index: 0,
        created_at: t0 + 20,
        expires_at: t0 + 20 + day,
        deleted_at: null,
      },
      {
        id: 'file_fixtureGone',
        account_id: 'acc_fixtureB',
        origin: 'upload',
        storage_key: 'uploads/file_fixtureGone',
        filename: 'old.png',
        mime_type: 'image/png',
        format: 'png',
        size: 500,
        width: null,
        height: null,
        pages: null,
        etag: 'cc33',
        task_id: null,
        output_index: null,
        created_at: t0 + 30,
        expires_at: t0 + 30 + day,
        deleted_at: t0 + 40,
      },
    ],
    batches: [{ id: 'batch_fixture', account_id: 'acc_fixtureA', type: 'convert', size: 2, created_at: t0 + 15 }],
    tasks: [
      {
        id: 'task_fixtureDone',
        account_id: 'acc_fixtureA',
        batch_id: 'batch_fixture',
        batch_index: 0,
        type: 'convert',
        status: 'completed',
        priority: 1,
        input: JSON.stringify({ fileId: 'file_fixtureIn' }),
        options: JSON.stringify({ format: 'webp', quality: 80 }),
        output_file_id: 'file_fixtureOut',
        output_file_ids: JSON.stringify(['file_fixtureOut']),
        result: JSON.stringify({ format: 'webp', width: 64, height: 48, size: 1000 }),
        error_code: null,
        error_message: null,
        progress: 100,
        attempts: 1,
        max_attempts: 3,
        charged: 1,
        run_at: t0 + 15,
        lease_owner: null,
        lease_expires_at: null,
        created_at: t0 + 15,
        started_at: t0 + 16,
        completed_at: t0 + 20,
      },
      {
        id: 'task_fixtureFailed',
        account_id: 'acc_fixtureA',
        batch_id: 'batch_fixture',
        batch_index: 1,
        type: 'convert',
        status: 'failed',
        priority: 1,
        input: JSON.stringify({ fileId: 'file_fixtureIn' }),
        options: JSON.stringify({ format: 'avif' }),
        output_file_id: null,
        output_file_ids: null,
        result: null,
        error_code: 'PROCESSING_FAILED',
        error_message: 'the encoder said “no”',
        progress: 0,
        attempts: 3,
        max_attempts: 3,
        charged: 0,
        run_at: t0 + 15,
        lease_owner: null,
        lease_expires_at: null,
        created_at: t0 + 15,
        started_at: t0 + 16,
        completed_at: t0 + 25,
      },
      {
        id: 'task_fixtureQueued',
        account_id: 'acc_fixtureB',
        batch_id: null,
        batch_index: null,
        type: 'compress',
        status: 'queued',
        priority: 2,
        input: JSON.stringify({ fileId: 'file_fixtureIn' }),
        options: JSON.stringify({ quality: 60 }),
        output_file_id: null,
        output_file_ids: null,
        result: null,
        error_code: null,
        error_message: null,
        progress: 0,
        attempts: 0,
        max_attempts: 3,
        charged: 1,
        run_at: t0 + 50,
        lease_owner: null,
        lease_expires_at: null,
        created_at: t0 + 50,
        started_at: null,
        completed_at: null,
      },
    ],
    task_inputs: [
      { task_id: 'task_fixtureDone', file_id: 'file_fixtureIn', position: 0 },
      { task_id: 'task_fixtureFailed', file_id: 'file_fixtureIn', position: 0 },
      { task_id: 'task_fixtureQueued', file_id: 'file_fixtureIn', position: 0 },
    ],
    usage_counters: [
      { account_id: 'acc_fixtureA', period: '2026-11', used: 2 },
      { account_id: 'acc_fixtureB', period: '2026-11', used: 1 },
    ],
    idempotency_keys: [
      {
        account_id: 'acc_fixtureA',
        key: 'retry-1',
        fingerprint: 'f1',
        status_code: 202,
        response: JSON.stringify({ success: true, data: { taskId: 'task_fixtureDone' } }),
        created_at: t0 + 15,
      },
    ],
  };

  const tables = handle.prepare("select name from sqlite_master where type = 'table' and name not like 'sqlite_%' order by rowid").all() as {
    name: string;
  }[];
  for (const { name } of tables)
    if (!name.startsWith('kysely_') && !rows[name]) throw new Error(`the fixture has no rows for table ${name}: add some`);
  for (const [table, list] of Object.entries(rows)) await db.insertInto(table).values(list).execute();

  const literal = (value: unknown): string =>
    value === null ? 'NULL' : typeof value === 'number' ? String(value) : `'${String(value).replaceAll("'", "''")}'`;
  const lines = [
    `-- A database made by imgapi's first released schema (commit ${FIRST_RELEASE}, migration 0001_initial),`,
    '-- with rows in every table. Written by scripts/upgrade-fixture.ts; read by test/ops/upgrade.test.ts.',
    '-- One statement per line; both SQLite and PostgreSQL run it as it is.',
  ];
  const ddl = handle.prepare("select sql from sqlite_master where sql is not null and name not like 'sqlite_%' order by rowid").all() as {
    sql: string;
  }[];
  for (const { sql } of ddl) lines.push(`${sql.replace(/\s+/g, ' ')};`);
  for (const { name } of tables) {
    for (const row of handle.prepare(`select * from "${name}" order by rowid`).all() as Record<string, unknown>[]) {
      const columns = Object.keys(row);
      // Kysely's own bookkeeping: the time a migration ran is not the fixture's business.
      if (name === 'kysely_migration') row.timestamp = new Date(t0).toISOString();
      lines.push(`insert into "${name}" (${columns.map((c) => `"${c}"`).join(', ')}) values (${columns.map((c) => literal(row[c])).join(', ')});`);
    }
  }
  fs.mkdirSync(path.dirname(OUT), { recursive: true });
  fs.writeFileSync(OUT, `${lines.join('\n')}\n`);
  await db.destroy();
  fs.rmSync(dir, { recursive: true, force: true });
  console.error(`wrote ${path.relative(ROOT, OUT)} (${lines.length} lines)`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
