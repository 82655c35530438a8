// `imgapi backup` while the service runs and takes uploads and jobs, then `imgapi restore` into a
// new directory and a server on it: every file of the backup is there byte for byte, every
// account logs in and its key works. Restore refuses a target that is not empty and a backup
// whose checksums do not match; backup refuses PostgreSQL (pg_dump's job). The SQLite backup
// also restores into an empty PostgreSQL database.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, DIALECTS, freshDatabase, startServer, tempDir, type TestServer } from '../helpers.js';
import { serveOn, listAll } from './serve.js';
import { loadConfig } from '../../src/config.js';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { backup } from '../../src/ops/backup.js';
import { readManifest, restore } from '../../src/ops/restore.js';
import { hashFile, OpsError } from '../../src/ops/objects.js';

const PASSWORD = 'a-long-enough-password';

const png = (seed: number) =>
  sharp({ create: { width: 24 + (seed % 40), height: 16 + (seed % 30), channels: 3, background: { r: (seed * 37) % 256, g: 80, b: 160 } } })
    .png()
    .toBuffer();

describe('backup and restore (SQLite, local storage)', () => {
  let source: TestServer;
  const accounts: { email: string; key: string }[] = [];
  const scratch = tempDir('imgapi-backup-');

  before(async () => {
    source = await startServer({ dialect: 'sqlite', workers: 2 });
    for (const [i, plan] of (['pro', 'max', 'pro'] as const).entries()) {
      const email = `owner${i}@example.com`;
      const account = await createAccount(source.services.database, source.services.clock, { email, plan, password: PASSWORD });
      accounts.push({ email, key: (await createApiKey(source.services.database, source.services.clock, account.id, 'backup-test')).key });
    }
  });

  after(async () => {
    await source?.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('backs up while uploads and jobs run; the restored copy serves every file and account', async () => {
    // Some finished work before the backup starts.
    for (const [i, { key }] of accounts.entries()) {
      const client = new Client(source.url, key);
      const fileId = await client.uploadOk(await png(i), `before-${i}.png`);
      const task = await client.post('/api/process/convert', { fileId, format: 'webp' });
      assert.equal((await client.waitForTask(task.body.data.taskId)).status, 'completed');
    }

    // Uploads and jobs keep arriving while the backup runs.
    let running = true;
    let writes = 0;
    const load = accounts.map(async ({ key }, lane) => {
      const client = new Client(source.url, key);
      for (let n = 0; running; n++) {
        const fileId = await client.uploadOk(await png(100 * lane + n), `during-${lane}-${n}.png`);
        const queued = await client.post('/api/process/resize', { fileId, width: 12, format: 'jpeg' });
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        writes++;
      }
    });
    while (writes < 3) await new Promise((r) => setTimeout(r, 20));
    const dir = path.join(scratch, 'backup');
    const logged: string[] = [];
    // (How many land while it runs depends on the machine; the test asserts no count of them,
    // only that what the snapshot holds is whole.)
    const manifest = await backup(source.config, dir, (line) => logged.push(line));
    running = false;
    await Promise.all(load);
    assert.ok(
      logged.some((line) => line.startsWith('backup complete')),
      logged.join('\n'),
    );

    // The manifest describes what is in the directory.
    assert.deepEqual(await readManifest(dir), manifest);
    assert.equal(manifest.database.sha256, (await hashFile(path.join(dir, 'imgapi.db'))).sha256);
    assert.equal(manifest.counts.accounts, accounts.length);
    assert.ok(manifest.counts.files >= 6 && manifest.objects.length === manifest.counts.files, `${manifest.counts.files} files`);
    for (const object of manifest.objects) assert.equal((await hashFile(path.join(dir, 'objects', object.key))).sha256, object.sha256, object.key);

    // Restore into a new directory, and serve from it.
    const dataDir = path.join(scratch, 'restored');
    const env = { DATA_DIR: dataDir, DATABASE_URL: `sqlite:${path.join(dataDir, 'imgapi.db')}`, PLANS_FILE: source.config.plansFile! };
    const report = await restore(loadConfig(env), dir);
    assert.deepEqual(report.counts, manifest.counts);
    const restored = await serveOn(env);
    try {
      let compared = 0;
      for (const { email, key } of accounts) {
        // The key works, and the password logs in to the dashboard.
        const client = restored.client(key);
        assert.equal((await client.get('/api/account')).status, 200);
        const login = await new Client(restored.url).post('/auth/login', { email, password: PASSWORD });
        assert.equal(login.status, 200, JSON.stringify(login.body));

        // Every file the restored copy lists is the same as the running service's, byte for byte.
        const files = (await listAll(client, '/api/files', 'files')) as { fileId: string }[];
        const original = new Client(source.url, key);
        for (const file of files) {
          assert.deepEqual(await client.download(file.fileId), await original.download(file.fileId), file.fileId);
          compared++;
        }
        // And every task that had completed at the backup lists its outputs there.
        const tasks = (await listAll(client, '/api/tasks', 'tasks')) as { status: string; outputFileId?: string }[];
        for (const task of tasks.filter((t) => t.status === 'completed'))
          assert.ok(
            files.some((f) => f.fileId === task.outputFileId),
            `output ${task.outputFileId} of a completed task is restored`,
          );
      }
      assert.equal(compared, manifest.counts.files);
    } finally {
      await restored.close();
    }

    // The same backup into an empty PostgreSQL database: brought to this schema, rows copied.
    if (DIALECTS.includes('postgres')) {
      const pgDir = path.join(scratch, 'restored-pg');
      const database = await freshDatabase('postgres', scratch);
      try {
        const pgEnv = { DATA_DIR: pgDir, DATABASE_URL: database.url, PLANS_FILE: source.config.plansFile! };
        assert.deepEqual((await restore(loadConfig(pgEnv), dir)).counts, manifest.counts);
        const onPostgres = await serveOn(pgEnv);
        const onSqlite = await serveOn(env);
        try {
          for (const { key } of accounts) {
            const listed = await listAll(onPostgres.client(key), '/api/files', 'files');
            assert.deepEqual(listed, await listAll(onSqlite.client(key), '/api/files', 'files'));
            assert.ok(listed.length > 0);
          }
        } finally {
          await onPostgres.close();
          await onSqlite.close();
        }
      } finally {
        await database.drop();
      }
    }

    // Restore refuses a target that is not empty.
    await assert.rejects(
      restore(loadConfig(env), dir),
      (err: Error) => err instanceof OpsError && /exists: restore needs an empty target/.test(err.message),
    );

    // And a damaged backup, before writing anything.
    const damaged = manifest.objects[0]!;
    fs.appendFileSync(path.join(dir, 'objects', damaged.key), 'x');
    const elsewhere = path.join(scratch, 'elsewhere');
    await assert.rejects(
      restore(loadConfig({ DATA_DIR: elsewhere, DATABASE_URL: `sqlite:${path.join(elsewhere, 'imgapi.db')}` }), dir),
      (err: Error) => err instanceof OpsError && err.message.includes(damaged.key) && /checksum/.test(err.message),
    );
    assert.ok(!fs.existsSync(path.join(elsewhere, 'imgapi.db')), 'nothing restored from a damaged backup');
  });

  it('refuses PostgreSQL, pointing at pg_dump; refuses a directory that is not empty', async () => {
    const config = loadConfig({ DATA_DIR: scratch, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    await assert.rejects(backup(config, path.join(scratch, 'pg')), /pg_dump/);
    const full = path.join(scratch, 'full');
    fs.mkdirSync(full);
    fs.writeFileSync(path.join(full, 'something'), '');
    await assert.rejects(backup(source.config, full), /not empty/);
  });
});
