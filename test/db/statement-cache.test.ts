// SQLite's prepared statements are kept by SQL text (src/db/database.ts): the same query run
// again answers as before, with other parameters; a stream left half-way does not spoil its
// statement for the next run; past the cache's bound, queries still run; and a statement
// prepared before a migration changes its table sees the new schema.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openDatabase, type Database } from '../../src/db/database.js';
import { tempDir } from '../helpers.js';

describe('SQLite statement cache', () => {
  const dir = tempDir();
  let database: Database;
  before(async () => {
    database = await openDatabase({ dialect: 'sqlite', file: path.join(dir, 'cache.db') });
    await sql`create table t (id integer primary key, name text)`.execute(database.db);
    for (let i = 1; i <= 5; i++) await sql`insert into t (id, name) values (${i}, ${`n${i}`})`.execute(database.db);
  });
  after(async () => {
    await database?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const byId = (id: number) => sql<{ name: string }>`select name from t where id = ${id}`.execute(database.db);

  it('runs the same SQL again with other parameters', async () => {
    for (let i = 1; i <= 5; i++) assert.deepEqual((await byId(i)).rows, [{ name: `n${i}` }]);
    for (let i = 5; i >= 1; i--) assert.deepEqual((await byId(i)).rows, [{ name: `n${i}` }]);
  });

  it('runs a statement again after a stream of it was left half-way', async () => {
    const query = database.db
      .selectFrom('t' as never)
      .select(sql<string>`name`.as('name'))
      .orderBy(sql`id`);
    for await (const row of query.stream()) {
      assert.equal((row as { name: string }).name, 'n1');
      break;
    }
    assert.deepEqual(
      (await query.execute()).map((row) => (row as { name: string }).name),
      ['n1', 'n2', 'n3', 'n4', 'n5'],
    );
  });

  it('keeps answering past its bound of distinct statements', async () => {
    for (let i = 0; i < 700; i++) {
      const { rows } = await sql<{ v: number }>`select ${sql.lit(i)} + id as v from t where id = ${1}`.execute(database.db);
      assert.equal(rows[0]!.v, i + 1);
    }
    assert.deepEqual((await byId(2)).rows, [{ name: 'n2' }]);
  });

  it('sees a column added after the statement was first prepared', async () => {
    const all = () => sql<Record<string, unknown>>`select * from t where id = ${1}`.execute(database.db);
    assert.deepEqual(Object.keys((await all()).rows[0]!), ['id', 'name']);
    await sql`alter table t add column extra text default 'x'`.execute(database.db);
    assert.deepEqual((await all()).rows[0], { id: 1, name: 'n1', extra: 'x' });
  });
});
