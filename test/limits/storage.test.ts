// Storage is a limit, not only a counter (API.md "Plans and limits"), on every dialect: a job is
// refused when queued while the account is at or over its limit (403, after validation, not
// found and conflicts, before the quotas); a task whose outputs would take the account past it
// fails STORAGE_LIMIT_EXCEEDED, keeps nothing and is refunded; an output larger than the plan's
// maxFileBytes fails OUTPUT_TOO_LARGE the same way; parallel completions at the edge keep
// exactly what fits; a task that ends without outputs keeps no output object, whoever wrote it.
// After each, storage used equals the live files plus open reservations.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { periods } from '../../src/accounts/quota.js';
import { outputKey } from '../../src/storage/storage.js';
import type { StoredOutput } from '../../src/files/files.js';
import { WorkerPool } from '../../src/worker/worker.js';
import { Client, DIALECTS, completeTask, corpusFile, startServer, type ApiResponse, type TestServer } from '../helpers.js';
import { ledgerMismatches } from './storage-ledger.js';

// A 24 KB JPEG whose PNG is several times larger.
const JPEG = fs.readFileSync(corpusFile('images/sharp/concert.jpg'));
const TINY = fs.readFileSync(corpusFile('images/sharp/2x2_fdcce6.png'));
const ROOM = 30_000;

function expectError(response: ApiResponse, status: number, code: string): void {
  assert.equal(response.status, status, JSON.stringify(response.body));
  assert.equal(response.body.error.code, code, JSON.stringify(response.body));
}

async function accountIdOf(server: TestServer, client: Client): Promise<string> {
  const email = (await client.get('/api/account')).body.data.email;
  return (await server.services.database.db.selectFrom('accounts').select('id').where('email', '=', email).executeTakeFirstOrThrow()).id;
}

const usage = async (client: Client) => (await client.get('/api/account')).body.data.usage;

async function outputRows(server: TestServer, taskId: string) {
  return server.services.database.db.selectFrom('files').selectAll().where('task_id', '=', taskId).execute();
}

for (const dialect of DIALECTS) {
  describe(`storage limits (${dialect})`, () => {
    let server: TestServer;

    before(async () => {
      server = await startServer({
        dialect,
        plans: {
          // Room for the JPEG and 30 KB more: not the JPEG's PNG.
          pro: { storageBytes: JPEG.length + ROOM },
          // Files of at most 40 KB: the JPEG is accepted, its PNG is not.
          max: { maxFileBytes: 40_000 },
        },
      });
    });
    after(() => server.close());

    it('an account at its limit (a reservation included) is refused new jobs with 403, after validation and not found, before the quotas', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(JPEG, 'concert.jpg');
      // A presigned upload reserves the rest: the account is exactly at its limit.
      assert.equal((await client.post('/api/upload/presign', { filename: 'big.png', size: ROOM })).status, 201);
      assert.deepEqual((await usage(client)).storageBytes, { used: JPEG.length + ROOM, limit: JPEG.length + ROOM });

      const refused = await client.post('/api/process/convert', { fileId, format: 'webp' });
      expectError(refused, 403, 'STORAGE_LIMIT_EXCEEDED');
      assert.deepEqual(refused.body.error.details, { limit: JPEG.length + ROOM, used: JPEG.length + ROOM, resetsAt: null });
      expectError(await client.post('/api/process/batch/convert', { fileIds: [fileId, fileId], format: 'webp' }), 403, 'STORAGE_LIMIT_EXCEEDED');
      // Earlier errors win: validation, then not found.
      expectError(await client.post('/api/process/convert', { fileId, format: 'bmp' }), 400, 'VALIDATION_ERROR');
      expectError(await client.post('/api/process/resize', { fileId, width: 10, fit: 'cover', left: 1 }), 400, 'VALIDATION_ERROR');
      expectError(await client.post('/api/process/convert', { fileId: 'file_nope', format: 'webp' }), 404, 'NOT_FOUND');
      // Storage comes before the quota: with the monthly quota used up too, the answer is still 403.
      const accountId = await accountIdOf(server, client);
      const monthly = { account_id: accountId, period: periods.monthlyTasks(server.services.clock.now()), used: 10_000 };
      await server.services.database.db.insertInto('usage_counters').values(monthly).execute();
      expectError(await client.post('/api/process/convert', { fileId, format: 'webp' }), 403, 'STORAGE_LIMIT_EXCEEDED');
      // Below the limit again, the quota speaks.
      assert.equal((await client.request('DELETE', `/api/files/${fileId}`)).status, 204);
      const tiny = await client.uploadOk(TINY, 'tiny.png');
      expectError(await client.post('/api/process/convert', { fileId: tiny, format: 'webp' }), 429, 'MONTHLY_QUOTA_EXCEEDED');
      assert.equal((await usage(client)).storageBytes.used, ROOM + TINY.length);
      assert.deepEqual(await ledgerMismatches(server.services.database.db), []);
    });

    it('a task whose output would pass the limit fails STORAGE_LIMIT_EXCEEDED, keeps nothing and is refunded', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(JPEG, 'concert.jpg');
      const queued = await client.post('/api/process/convert', { fileId, format: 'png' });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      assert.equal((await usage(client)).monthlyTasks.used, 1);
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'failed', JSON.stringify(task));
      assert.equal(task.error.code, 'STORAGE_LIMIT_EXCEEDED');
      assert.match(task.error.message, /storage limit/);
      assert.equal(task.outputFileId, undefined);
      assert.deepEqual(await outputRows(server, task.taskId), []);
      assert.equal(await server.services.storage.head(outputKey(task.taskId, 0)), null, 'no output object is kept');
      const after = await usage(client);
      assert.equal(after.monthlyTasks.used, 0, 'refunded');
      assert.equal(after.storageBytes.used, JPEG.length);
      assert.deepEqual(
        (await client.get('/api/files')).body.data.files.map((f: { fileId: string }) => f.fileId),
        [fileId],
      );
      // An output that fits is kept and charged.
      const small = await client.waitForTask((await client.post('/api/process/convert', { fileId, format: 'webp', quality: 40 })).body.data.taskId);
      assert.equal(small.status, 'completed', JSON.stringify(small));
      assert.ok(small.result.size <= ROOM);
      assert.equal((await usage(client)).storageBytes.used, JPEG.length + small.result.size);
      assert.deepEqual(await ledgerMismatches(server.services.database.db), []);
    });

    it('an output larger than maxFileBytes fails OUTPUT_TOO_LARGE, keeps nothing and is refunded', async () => {
      const client = new Client(server.url, await server.newKey('max'));
      const fileId = await client.uploadOk(JPEG, 'concert.jpg');
      const task = await client.waitForTask((await client.post('/api/process/convert', { fileId, format: 'png' })).body.data.taskId);
      assert.equal(task.status, 'failed', JSON.stringify(task));
      assert.equal(task.error.code, 'OUTPUT_TOO_LARGE');
      assert.match(task.error.message, /40000 bytes per file/);
      assert.deepEqual(await outputRows(server, task.taskId), []);
      assert.equal(await server.services.storage.head(outputKey(task.taskId, 0)), null);
      const after = await usage(client);
      assert.equal(after.monthlyTasks.used, 0, 'refunded');
      assert.equal(after.storageBytes.used, JPEG.length);
    });
  });

  describe(`storage limits at completion (${dialect})`, () => {
    let server: TestServer;
    const LIMIT = 400_000;

    before(async () => {
      server = await startServer({ dialect, workers: 0, plans: { pro: { storageBytes: LIMIT } } });
    });
    after(() => server.close());

    it('completion charges the outputs in its transaction, or fails the task STORAGE_LIMIT_EXCEEDED with a refund', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(JPEG, 'concert.jpg');
      const taskIds = (await client.post('/api/process/batch/convert', { fileIds: [fileId, fileId], format: 'png' })).body.data.tasks.map(
        (t: { taskId: string }) => t.taskId,
      );
      const { queue } = server.services;
      const output = (size: number): StoredOutput => ({
        fileId: `file_fake${size}`,
        storageKey: `outputs/fake/${size}`,
        filename: 'x.png',
        mimeType: 'image/png',
        format: 'png',
        size,
        etag: 'e',
      });
      const [first] = await queue.claim('w', 1, 30_000);
      const room = LIMIT - JPEG.length;
      assert.equal(await completeTask(queue, first!, 'w', [output(room + 1)], { retentionMs: 60_000, storageLimit: LIMIT }), false);
      const failed = (await client.get(`/api/tasks/${first!.id}`)).body.data;
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error.code, 'STORAGE_LIMIT_EXCEEDED');
      assert.equal((await usage(client)).monthlyTasks.used, 1, 'the failed task was refunded');
      assert.equal((await usage(client)).storageBytes.used, JPEG.length);
      const [second] = await queue.claim('w', 1, 30_000);
      assert.equal(
        await completeTask(queue, second!, 'w', [output(room)], { retentionMs: 60_000, storageLimit: LIMIT }),
        true,
        'exactly the room left fits',
      );
      assert.equal((await usage(client)).storageBytes.used, LIMIT);
      assert.deepEqual(new Set([first!.id, second!.id]), new Set(taskIds));
      assert.deepEqual(await ledgerMismatches(server.services.database.db), []);
    });

    it('a task that ends without outputs keeps no output object, even one a dead worker wrote before it was canceled', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(JPEG, 'concert.jpg');
      const batch = await client.post('/api/process/batch/convert', { fileIds: [fileId, fileId], format: 'webp' });
      const { queue, storage, maintenance } = server.services;
      // A worker writes two outputs of the first task and dies; the task is canceled meanwhile.
      const [dead] = await queue.claim('dead-worker', 1, 30_000);
      for (const index of [0, 1]) await storage.put(outputKey(dead!.id, index), Readable.from([Buffer.alloc(1000, index)]));
      assert.equal((await client.request('DELETE', `/api/tasks/${dead!.id}`)).status, 200);
      // The second completes: its object is its output file's.
      const [done] = await queue.claim('live-worker', 1, 30_000);
      await storage.put(outputKey(done!.id, 0), Readable.from([Buffer.alloc(500, 9)]));
      const output: StoredOutput = {
        fileId: 'file_kept',
        storageKey: outputKey(done!.id, 0),
        filename: 'x.webp',
        mimeType: 'image/webp',
        format: 'webp',
        size: 500,
        etag: 'e',
      };
      assert.equal(await completeTask(queue, done!, 'live-worker', [output], { retentionMs: 86_400_000, storageLimit: LIMIT }), true);
      assert.deepEqual(new Set(batch.body.data.tasks.map((t: { taskId: string }) => t.taskId)), new Set([dead!.id, done!.id]));
      assert.deepEqual(await ledgerMismatches(server.services.database.db), [], "the dead worker's objects were never charged");

      await maintenance.tick(true);
      assert.equal(await storage.head(outputKey(dead!.id, 0)), null);
      assert.equal(await storage.head(outputKey(dead!.id, 1)), null);
      assert.equal((await storage.head(outputKey(done!.id, 0)))?.size, 500, 'a completed task keeps its output');
      assert.deepEqual(await ledgerMismatches(server.services.database.db), []);
    });

    it('a task whose ending commits after a later one is still swept of what a dead worker wrote', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(JPEG, 'concert.jpg');
      const batch = await client.post('/api/process/batch/convert', { fileIds: [fileId, fileId], format: 'webp' });
      const { queue, storage, maintenance, database } = server.services;
      const [first, second] = await queue.claim('dead-worker', 2, 30_000);
      for (const task of [first!, second!]) await storage.put(outputKey(task.id, 0), Readable.from([Buffer.alloc(1000, 1)]));
      // The second ends and is swept first; the first ends with an earlier time, as a transaction
      // that read the clock before the other one but committed after the sweep would leave it.
      assert.equal((await client.request('DELETE', `/api/tasks/${second!.id}`)).status, 200);
      await maintenance.tick(true);
      assert.equal(await storage.head(outputKey(second!.id, 0)), null);
      assert.equal((await client.request('DELETE', `/api/tasks/${first!.id}`)).status, 200);
      await database.db.updateTable('tasks').set({ completed_at: 1 }).where('id', '=', first!.id).execute();
      await maintenance.tick(true);
      assert.equal(await storage.head(outputKey(first!.id, 0)), null);
      assert.equal(batch.body.data.tasks.length, 2);
    });

    it('parallel completions at the edge keep exactly the outputs that fit; the rest fail and keep nothing', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(JPEG, 'concert.jpg');
      const batch = await client.post('/api/process/batch/convert', { fileIds: Array(10).fill(fileId), format: 'png' });
      assert.equal(batch.status, 202, JSON.stringify(batch.body));
      const workers = new WorkerPool(server.services, 4);
      workers.start();
      let tasks: any[];
      try {
        tasks = await Promise.all(batch.body.data.tasks.map((t: { taskId: string }) => client.waitForTask(t.taskId)));
      } finally {
        await workers.stop(2000);
      }
      const completed = tasks.filter((t) => t.status === 'completed');
      const refused = tasks.filter((t) => t.status === 'failed');
      assert.equal(completed.length + refused.length, 10, JSON.stringify(tasks.map((t) => t.status)));
      for (const t of refused) assert.equal(t.error.code, 'STORAGE_LIMIT_EXCEEDED');
      // The same input and options give the same bytes: exactly floor(room / size) fit.
      const size = completed[0]!.result.size as number;
      for (const t of completed) assert.equal(t.result.size, size);
      assert.equal(completed.length, Math.floor((LIMIT - JPEG.length) / size), `${completed.length} outputs of ${size} bytes kept`);
      for (const t of refused) {
        assert.deepEqual(await outputRows(server, t.taskId), []);
        assert.equal(await server.services.storage.head(outputKey(t.taskId, 0)), null);
      }
      const after = await usage(client);
      assert.equal(after.storageBytes.used, JPEG.length + completed.length * size);
      assert.ok(after.storageBytes.used <= LIMIT);
      assert.equal(after.monthlyTasks.used, completed.length, 'refused tasks are refunded');
      assert.deepEqual(await ledgerMismatches(server.services.database.db), []);
    });
  });
}
