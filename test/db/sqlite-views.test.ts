// SQLite's writing views (migration 0014: charged_files, task_completions, queued_tasks) copy a
// row into its table column by column in their INSTEAD OF triggers: a column a later migration
// adds to files or tasks must be added to them too, or the views would drop its value unseen.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { migrate, openDatabase, type Database } from '../../src/db/database.js';
import { tempDir } from '../helpers.js';

/** Each view's trigger and the table whose every column it must write. */
const WRITES = [
  { trigger: 'charged_files_insert', table: 'files' },
  { trigger: 'task_completions_insert', table: 'files' },
  { trigger: 'queued_tasks_insert', table: 'tasks' },
];

describe('SQLite writing views', () => {
  const dir = tempDir();
  let database: Database;
  before(async () => {
    database = await openDatabase({ dialect: 'sqlite', file: path.join(dir, 'views.db') });
    await migrate(database);
  });
  after(async () => {
    await database?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  for (const { trigger, table } of WRITES) {
    it(`${trigger} writes every column of ${table}`, async () => {
      const text = (await sql<{ sql: string }>`select sql from sqlite_master where type = 'trigger' and name = ${trigger}`.execute(database.db))
        .rows[0]?.sql;
      assert.ok(text, `the trigger ${trigger} exists`);
      const columns = (await sql<{ name: string }>`select name from pragma_table_info(${table})`.execute(database.db)).rows.map((r) => r.name);
      const missing = columns.filter((column) => !new RegExp(`\\b${column}\\b`).test(text));
      assert.deepEqual(missing, [], `${trigger} leaves out ${missing.join(', ')} of ${table}: add them in a new migration`);
    });
  }
});
