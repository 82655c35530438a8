// Upgrades keep every row: a database made by the first released schema (the checked-in
// test/fixtures/first-release.sql, built by scripts/upgrade-fixture.ts with the migrations as
// they stood then) is migrated by today's code on each dialect, and every row of every table
// it had is there afterwards with the same values. A database a newer version migrated is
// refused at start. And backup/copy-to cover every table the schema has.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'kysely';
import { DIALECTS, REPO_ROOT, freshDatabase, tempDir } from '../helpers.js';
import { FIXTURE_KEY, FIXTURE_PASSWORD } from '../../scripts/upgrade-fixture.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { migrate, openDatabase, type Database } from '../../src/db/database.js';
import { TABLE_NAMES, TABLES, uncoveredTables } from '../../src/db/dump.js';
import { migrations, schemaState } from '../../src/db/migrations.js';
import { authenticateApiKey, findAccountByEmail, verifyPassword } from '../../src/accounts/accounts.js';
import { listFiles } from '../../src/files/files.js';
import { systemClock } from '../../src/clock.js';

const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'first-release.sql');
const statements = fs
  .readFileSync(FIXTURE, 'utf8')
  .split('\n')
  .filter((line) => line.trim() && !line.startsWith('--'));

type Rows = Record<string, Record<string, unknown>[]>;

/** Every row of the given tables, in primary-key order. */
async function allRows(database: Database, tables: string[]): Promise<Rows> {
  const rows: Rows = {};
  for (const table of tables) {
    const key = (TABLES as Record<string, readonly string[]>)[table]!;
    rows[table] = (
      await sql<Record<string, unknown>>`select * from ${sql.table(table)} order by ${sql.join(key.map((k) => sql.ref(k)))}`.execute(database.db)
    ).rows;
  }
  return rows;
}

async function openFresh(dialect: (typeof DIALECTS)[number]) {
  const dir = tempDir('imgapi-upgrade-');
  const fresh = await freshDatabase(dialect, dir);
  const database = await openDatabase(loadConfig({ DATA_DIR: dir, DATABASE_URL: fresh.url }).database);
  return {
    database,
    async close() {
      await database.close();
      await fresh.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

for (const dialect of DIALECTS) {
  describe(`upgrade from the first release (${dialect})`, () => {
    const opened: { close(): Promise<void> }[] = [];
    after(async () => {
      for (const o of opened) await o.close();
    });

    it('migrates the first release database to the current schema and every row survives', async () => {
      const fresh = await openFresh(dialect);
      opened.push(fresh);
      const { database } = fresh;
      for (const statement of statements) await sql.raw(statement).execute(database.db);

      const before = await schemaState(database.db);
      assert.deepEqual(before.applied, ['0001_initial']);
      const oldTables = (await database.db.introspection.getTables()).map((t) => t.name);
      const old = await allRows(database, oldTables);
      for (const table of oldTables) assert.ok(old[table]!.length > 0, `the fixture has rows in ${table}`);

      await migrate(database);
      const state = await schemaState(database.db);
      assert.deepEqual(state.pending, [], 'every migration ran');
      assert.deepEqual(state.applied, Object.keys(migrations));

      const now = await allRows(database, oldTables);
      let compared = 0;
      for (const table of oldTables) {
        assert.equal(now[table]!.length, old[table]!.length, `${table}: as many rows after as before`);
        old[table]!.forEach((row, i) => {
          const after = now[table]![i]!;
          for (const [column, value] of Object.entries(row)) {
            assert.deepEqual(after[column], value, `${table} row ${i} column ${column}`);
            compared++;
          }
        });
      }
      assert.ok(compared > 100, `compared ${compared} values`);
      // Columns added since take their defaults on the old rows.
      assert.deepEqual(
        now.accounts!.map((a) => Number(a.last_served_at)),
        [0, 0],
      );
      assert.deepEqual(
        now.tasks!.map((t) => [Number(t.lost_leases), t.error_details]),
        [
          [0, null],
          [0, null],
          [0, null],
        ],
      );

      // And today's code reads them: the key signs in, the password checks, the files list.
      const clock = systemClock;
      const account = await authenticateApiKey(database, clock, FIXTURE_KEY);
      assert.equal(account?.email, 'alice@example.com');
      assert.ok(await verifyPassword(FIXTURE_PASSWORD, (await findAccountByEmail(database, 'alice@example.com'))!.password_hash));
      const files = await listFiles(database, 'acc_fixtureA', Date.UTC(2026, 10, 22), 10);
      assert.deepEqual(files.files.map((f) => f.id).sort(), ['file_fixtureIn', 'file_fixtureOut']);
    });

    it('puts the AI tasks a database already holds in the AI lane (esrgan upscales and pipelines with such a step)', async () => {
      const fresh = await openFresh(dialect);
      opened.push(fresh);
      const { database } = fresh;
      for (const statement of statements) await sql.raw(statement).execute(database.db);
      const model = await sql<Record<string, unknown>>`select * from tasks order by id`.execute(database.db);
      const tasks = {
        task_esrgan: { type: 'upscale', options: { factor: 2, model: 'esrgan' } },
        task_lanczos: { type: 'upscale', options: { factor: 2, model: 'lanczos' } },
        task_aiPipeline: {
          type: 'pipeline',
          options: {
            steps: [
              { kind: 'crop', width: 9 },
              { kind: 'upscale', factor: 2, model: 'esrgan' },
            ],
          },
        },
        task_pipeline: { type: 'pipeline', options: { steps: [{ kind: 'watermark', text: 'esrgan' }] } },
      };
      for (const [id, task] of Object.entries(tasks)) {
        const row = { ...model.rows[0]!, id, type: task.type, options: JSON.stringify(task.options), status: 'queued' };
        await sql`insert into tasks (${sql.join(Object.keys(row).map((k) => sql.ref(k)))}) values (${sql.join(Object.values(row))})`.execute(
          database.db,
        );
      }
      await migrate(database);
      const lanes = await sql<{
        id: string;
        lane: string;
      }>`select id, lane from tasks where id in ('task_esrgan', 'task_lanczos', 'task_aiPipeline', 'task_pipeline') order by id`.execute(database.db);
      assert.deepEqual(
        lanes.rows.map((r) => [r.id, r.lane]),
        [
          ['task_aiPipeline', 'ai'],
          ['task_esrgan', 'ai'],
          ['task_lanczos', 'image'],
          ['task_pipeline', 'image'],
        ],
      );
    });

    it('refuses a database that a newer version migrated, saying so', async () => {
      const fresh = await openFresh(dialect);
      opened.push(fresh);
      await migrate(fresh.database);
      await sql`insert into kysely_migration (name, timestamp) values ('9999_from_the_future', '2030-01-01T00:00:00.000Z')`.execute(
        fresh.database.db,
      );
      await assert.rejects(
        migrate(fresh.database),
        (err: Error) =>
          err instanceof ConfigError && /migrated by a newer version of imgapi/.test(err.message) && /9999_from_the_future/.test(err.message),
      );
    });
  });
}

describe('backup and copy-to cover every table', () => {
  it('TABLES names exactly the tables of src/db/schema.ts and of a migrated database', async () => {
    const text = fs.readFileSync(path.join(REPO_ROOT, 'src', 'db', 'schema.ts'), 'utf8');
    const body = /export interface DB \{([^}]*)\}/.exec(text)?.[1] ?? '';
    const declared = [...body.matchAll(/^\s*(\w+):/gm)].map((m) => m[1]!);
    assert.ok(declared.length >= 15, declared.join(', '));
    assert.deepEqual([...TABLE_NAMES].sort(), [...declared].sort(), 'a table added to the schema must be added to TABLES in src/db/dump.ts');

    const dir = tempDir('imgapi-tables-');
    const database = await openDatabase({ dialect: 'sqlite', file: path.join(dir, 'x.db') });
    try {
      await migrate(database);
      assert.deepEqual(await uncoveredTables(database), []);
      // A table a migration adds and nobody lists is caught at the copy, not lost.
      await sql`create table forgotten (id text primary key)`.execute(database.db);
      assert.deepEqual(await uncoveredTables(database), ['forgotten']);
    } finally {
      await database.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
