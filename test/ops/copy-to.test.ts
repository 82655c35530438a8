// `imgapi copy-to`: a running SQLite + local-disk install moved to PostgreSQL + S3 (the test's
// s3rver). 1,000 files with their tasks (500 uploads, each read by a completed task, and its output) are written through the data layer, a few
// more over HTTP with a real job; the copy is interrupted half-way through the objects and run
// again, then a server on the new configuration answers the same listings, usage and bytes as
// the old one. The source is only read.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, freshDatabase, startServer, tempDir, type TestServer } from '../helpers.js';
import { startS3rver, type S3Server } from '../s3rver.js';
import { listAll, serveOn } from './serve.js';
import { migrate, openDatabase, type Database } from '../../src/db/database.js';
import { countAllRows } from '../../src/db/dump.js';
import { copyTo, type CopyProgress } from '../../src/ops/copy.js';
import { eachLimited } from '../../src/ops/objects.js';
import { S3Storage } from '../../src/storage/s3.js';
import { newId } from '../../src/ids.js';
import { periods } from '../../src/accounts/quota.js';
import { findAccountByEmail } from '../../src/accounts/accounts.js';

/** Files written through the data layer: half uploads, half the outputs of a completed task reading one. */
const FILES = 1000;
const TASKS = FILES / 2;

describe('copy-to: SQLite + disk → PostgreSQL + S3', () => {
  let source: TestServer;
  let s3: S3Server;
  let target: { url: string; drop: () => Promise<void> };
  let targetDatabase: Database;
  let targetStorage: S3Storage;
  const keys: string[] = [];
  const scratch = tempDir('imgapi-copy-');

  before(async () => {
    source = await startServer({ dialect: 'sqlite', workers: 1 });
    s3 = await startS3rver('imgapi-copy-to');
    target = await freshDatabase('postgres', scratch);
    targetDatabase = await openDatabase({ dialect: 'postgres', url: target.url });
    targetStorage = new S3Storage(s3.storageConfig);

    // Over HTTP: two accounts, an upload each and a real job.
    keys.push(await source.newKey('pro'), await source.newKey('max'));
    for (const [i, key] of keys.entries()) {
      const client = new Client(source.url, key);
      const png = await sharp({ create: { width: 40 + i, height: 30, channels: 3, background: { r: 200, g: 20 * i, b: 90 } } })
        .png()
        .toBuffer();
      const fileId = await client.uploadOk(png, `seed-${i}.png`);
      const queued = await client.post('/api/process/convert', { fileId, format: 'webp' });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      assert.equal((await client.waitForTask(queued.body.data.taskId)).status, 'completed');
    }

    // Through the data layer: FILES uploads, each read by a completed task with one output.
    const { database, storage, clock } = source.services;
    const accounts = await database.db.selectFrom('accounts').select(['id']).orderBy('created_at').execute();
    const now = clock.now();
    const files: Record<string, unknown>[] = [];
    const tasks: Record<string, unknown>[] = [];
    const inputs: Record<string, unknown>[] = [];
    const charged = new Map<string, number>();
    const writes: [string, Buffer][] = [];
    for (let i = 0; i < TASKS; i++) {
      const accountId = accounts[i % accounts.length]!.id;
      const fileId = newId('file');
      const taskId = newId('task');
      const outputId = newId('file');
      const input = crypto.randomBytes(64 + (i % 200));
      const output = crypto.randomBytes(32 + (i % 100));
      writes.push([`uploads/${fileId}`, input], [`outputs/${taskId}/0`, output]);
      const file = (id: string, origin: string, key: string, bytes: Buffer, at: number) => ({
        id,
        account_id: accountId,
        origin,
        storage_key: key,
        filename: `bulk-${i}.${origin === 'upload' ? 'png' : 'webp'}`,
        mime_type: origin === 'upload' ? 'image/png' : 'image/webp',
        format: origin === 'upload' ? 'png' : 'webp',
        size: bytes.length,
        width: 10,
        height: 10,
        pages: 1,
        etag: crypto.createHash('sha256').update(bytes).digest('hex').slice(0, 32),
        task_id: origin === 'output' ? taskId : null,
        output_index: origin === 'output' ? 0 : null,
        created_at: at,
        expires_at: now + 7 * 86_400_000,
        deleted_at: null,
      });
      files.push(
        file(fileId, 'upload', `uploads/${fileId}`, input, now - FILES + 2 * i),
        file(outputId, 'output', `outputs/${taskId}/0`, output, now - FILES + 2 * i + 1),
      );
      charged.set(accountId, (charged.get(accountId) ?? 0) + input.length + output.length);
      tasks.push({
        id: taskId,
        account_id: accountId,
        batch_id: null,
        batch_index: null,
        type: 'convert',
        status: 'completed',
        priority: 1,
        input: JSON.stringify({ fileId }),
        options: JSON.stringify({ format: 'webp' }),
        output_file_id: outputId,
        output_file_ids: JSON.stringify([outputId]),
        result: JSON.stringify({ format: 'webp', width: 10, height: 10, size: output.length }),
        error_code: null,
        error_message: null,
        error_details: null,
        progress: 100,
        attempts: 1,
        max_attempts: 3,
        charged: 1,
        run_at: now - FILES + 2 * i,
        lease_owner: null,
        lease_expires_at: null,
        created_at: now - FILES + 2 * i,
        started_at: now - FILES + 2 * i,
        completed_at: now - FILES + 2 * i + 1,
      });
      inputs.push({ task_id: taskId, file_id: fileId, position: 0 });
    }
    await eachLimited(writes, 8, async ([key, bytes]) => {
      await storage.put(key, Readable.from([bytes]));
    });
    await database.db.transaction().execute(async (tx) => {
      for (let i = 0; i < files.length; i += 200)
        await tx
          .insertInto('files')
          .values(files.slice(i, i + 200) as never)
          .execute();
      for (let i = 0; i < tasks.length; i += 200)
        await tx
          .insertInto('tasks')
          .values(tasks.slice(i, i + 200) as never)
          .execute();
      for (let i = 0; i < inputs.length; i += 400)
        await tx
          .insertInto('task_inputs')
          .values(inputs.slice(i, i + 400) as never)
          .execute();
      const period = periods.monthlyTasks(now);
      for (const [accountId, bytes] of charged) {
        await tx
          .updateTable('accounts')
          .set((eb) => ({ storage_used: eb('storage_used', '+', bytes) }))
          .where('id', '=', accountId)
          .execute();
        await tx
          .updateTable('usage_counters')
          .set((eb) => ({ used: eb('used', '+', TASKS / accounts.length) }))
          .where('account_id', '=', accountId)
          .where('period', '=', period)
          .execute();
      }
    });
  });

  after(async () => {
    await targetDatabase?.close();
    targetStorage?.close();
    await source?.close();
    await target?.drop();
    await s3?.stop();
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('copies everything, is interrupted half-way, resumes, and the new configuration serves the same', async () => {
    const { database, storage } = source.services;
    const sourceRows = async () => {
      const db = database.db;
      return {
        files: await db.selectFrom('files').selectAll().orderBy('id').execute(),
        tasks: await db.selectFrom('tasks').selectAll().orderBy('id').execute(),
        accounts: await db.selectFrom('accounts').select(['id', 'email', 'storage_used', 'plan']).orderBy('id').execute(),
      };
    };
    const before = await sourceRows();
    const objectCount = before.files.length;
    assert.equal(objectCount, FILES + 2 * keys.length);

    // 1. Interrupted half-way through the objects.
    const interruption = new Error('interrupted (test)');
    await assert.rejects(
      copyTo({
        source: { database, storage },
        target: { database: targetDatabase, storage: targetStorage },
        concurrency: 16,
        onProgress: (p: CopyProgress) => {
          if (p.phase === 'objects' && p.done === Math.floor(objectCount / 2)) throw interruption;
        },
      }),
      (err) => err === interruption,
    );
    // (s3rver's listing fails past 1,000 keys: ask for each object instead.)
    let partway = 0;
    for (const file of before.files) if (await targetStorage.head(file.storage_key)) partway++;
    assert.ok(partway >= objectCount / 2 && partway < objectCount, `${partway} of ${objectCount} objects were copied before the interruption`);

    // 2. Run again: it goes on, copies only what is missing, and checks everything.
    const report = await copyTo({ source: { database, storage }, target: { database: targetDatabase, storage: targetStorage }, concurrency: 16 });
    assert.equal(report.objects, objectCount);
    assert.ok(report.copied <= objectCount - partway + 16, `copied ${report.copied} objects on resume, ${partway} were there`);
    assert.equal(report.counts.files, objectCount);
    assert.equal(report.counts.tasks, TASKS + keys.length);
    const landed = await countAllRows(targetDatabase.db);
    for (const table of ['accounts', 'api_keys', 'files', 'tasks', 'task_inputs', 'usage_counters', 'idempotency_keys'] as const)
      assert.equal(landed[table], report.counts[table], table);

    // The source is as it was.
    assert.deepEqual(await sourceRows(), before);

    // 3. Serve from the new configuration: PostgreSQL and the bucket.
    const dataDir = path.join(scratch, 'new-data');
    let downloaded = 0;
    const moved = await serveOn({ DATA_DIR: dataDir, DATABASE_URL: target.url, PLANS_FILE: source.config.plansFile!, ...s3.env });
    try {
      for (const key of keys) {
        const old = new Client(source.url, key);
        const now = moved.client(key);
        const oldFiles = await listAll(old, '/api/files', 'files');
        assert.ok(oldFiles.length >= FILES / 2, `${oldFiles.length} files listed`);
        assert.deepEqual(await listAll(now, '/api/files', 'files'), oldFiles);
        assert.deepEqual(await listAll(now, '/api/tasks', 'tasks'), await listAll(old, '/api/tasks', 'tasks'));
        assert.deepEqual((await now.get('/api/account/usage')).body, (await old.get('/api/account/usage')).body);
        // Every file's bytes from the new configuration, against the old disk (plain fetch: the
        // contract of the download is checked by the other suites, 2,000 times is only slow).
        const listed = oldFiles as { fileId: string }[];
        await eachLimited(listed, 8, async (file) => {
          const row = before.files.find((f) => f.id === file.fileId)!;
          const response = await fetch(`${moved.url}/api/download/${file.fileId}`, { headers: { 'x-api-key': key } });
          if (response.status !== 200) assert.fail(`${file.fileId}: ${response.status} ${await response.text()}`);
          assert.deepEqual(Buffer.from(await response.arrayBuffer()), fs.readFileSync(storage.localPath!(row.storage_key)), file.fileId);
        });
        downloaded += listed.length;
      }
      assert.equal(downloaded, objectCount);
      // An account found by email on the new database, as on the old.
      assert.ok(await findAccountByEmail(targetDatabase, before.accounts[0]!.email));
    } finally {
      await moved.close();
    }
  });

  it('refuses a target that holds accounts the source does not have', async () => {
    const dir = tempDir('imgapi-copy-foreign-');
    const other = await openDatabase({ dialect: 'sqlite', file: path.join(dir, 'other.db') });
    try {
      await migrate(other);
      await other.db
        .insertInto('accounts')
        .values({ id: 'acct_stranger', email: 'stranger@example.com', plan: 'pro', is_admin: 0, created_at: 1 })
        .execute();
      await assert.rejects(
        copyTo({ source: { database: source.services.database, storage: source.services.storage }, target: { database: other } }),
        /holds 1 account\(s\) that the source does not have/,
      );
    } finally {
      await other.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
