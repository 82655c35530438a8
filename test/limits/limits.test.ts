// Plans and limits, enforced exactly under concurrency and visible to the client, on every dialect.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { findAccountByEmail, setPlan } from '../../src/accounts/accounts.js';
import { Client, DIALECTS, completeTask, corpusFile, startServer, type TestServer } from '../helpers.js';

const SMALL = corpusFile('images/sharp/320x240.jpg');
const SMALL_SIZE = fs.statSync(SMALL).size;

async function emailOf(server: TestServer, client: Client): Promise<string> {
  return (await client.get('/api/account')).body.data.email;
}

for (const dialect of DIALECTS) {
  describe(`limits (${dialect})`, () => {
    let server: TestServer;
    const clock = new ManualClock();

    before(async () => {
      server = await startServer({
        dialect,
        clock,
        workers: 0,
        plans: {
          pro: { monthlyTasks: 5, dailyBatchFiles: 4, storageBytes: Math.floor(SMALL_SIZE * 3.5) },
          max: { requestsPerSecond: 3 },
        },
      });
    });
    after(() => server.close());

    it('with 5 tasks left of the monthly quota, 50 parallel job requests admit exactly 5', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(SMALL);
      const responses = await Promise.all(Array.from({ length: 50 }, () => client.post('/api/process/compress', { fileId })));
      const statuses = responses.map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 202).length, 5, JSON.stringify(statuses));
      const refused = responses.filter((r) => r.status !== 202);
      assert.ok(refused.every((r) => r.status === 429 && r.body.error.code === 'MONTHLY_QUOTA_EXCEEDED'));
      const details = refused[0]!.body.error.details;
      assert.equal(details.limit, 5);
      assert.equal(details.used, 5);
      assert.ok(Date.parse(details.resetsAt) > clock.now());
      assert.match(details.resetsAt, /^\d{4}-\d{2}-01T00:00:00\.000Z$/);
      const account = (await client.get('/api/account')).body.data;
      assert.equal(account.usage.monthlyTasks.used, 5);
      assert.equal((await client.get('/api/tasks?limit=100')).body.data.tasks.length, 5);
    });

    it('with room for 2 batches of the daily quota, 10 parallel batches admit exactly 2', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      // Monthly quota is 5 on this plan: the daily batch quota (4 files) binds first.
      const files = [await client.uploadOk(SMALL), await client.uploadOk(SMALL)];
      const responses = await Promise.all(
        Array.from({ length: 10 }, () => client.post('/api/process/batch/convert', { fileIds: files, format: 'png' })),
      );
      const admitted = responses.filter((r) => r.status === 202);
      assert.equal(admitted.length, 2, JSON.stringify(responses.map((r) => r.status)));
      for (const r of responses.filter((r) => r.status !== 202)) {
        assert.equal(r.status, 429);
        assert.equal(r.body.error.code, 'DAILY_BATCH_QUOTA_EXCEEDED');
        assert.equal(r.body.error.details.limit, 4);
      }
      const usage = (await client.get('/api/account')).body.data.usage;
      assert.equal(usage.dailyBatchFiles.used, 4);
      assert.equal(usage.monthlyTasks.used, 4, 'a refused batch charges nothing');
    });

    it('parallel uploads at the storage limit admit what fits, and nothing else is stored', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const responses = await Promise.all(Array.from({ length: 10 }, () => client.upload(SMALL)));
      const admitted = responses.filter((r) => r.status === 201);
      assert.equal(admitted.length, 3, JSON.stringify(responses.map((r) => r.status)));
      for (const r of responses.filter((r) => r.status !== 201)) assert.equal(r.body.error.code, 'STORAGE_LIMIT_EXCEEDED');
      assert.equal((await client.get('/api/account')).body.data.usage.storageBytes.used, 3 * SMALL_SIZE);
      // Deleting frees room at once.
      assert.equal((await client.request('DELETE', `/api/files/${admitted[0]!.body.data.fileId}`)).status, 204);
      assert.equal((await client.upload(SMALL)).status, 201);
    });

    it('a plan change takes effect on the next request; a Free key is refused', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      assert.equal((await client.get('/api/account')).body.data.limits.monthlyTasks, 5);
      const account = (await findAccountByEmail(server.services.database, await emailOf(server, client)))!;
      await setPlan(server.services.database, account.id, 'max');
      const now = (await client.get('/api/account')).body.data;
      assert.equal(now.plan, 'max');
      assert.equal(now.limits.monthlyTasks, 100_000);
      await setPlan(server.services.database, account.id, 'free');
      const refused = await client.get('/api/account');
      assert.equal(refused.status, 403);
      assert.equal(refused.body.error.code, 'PLAN_NO_API_ACCESS');
    });

    it('rate limits per key: 429 RATE_LIMITED with Retry-After, RateLimit-* on every authenticated response', async () => {
      const client = new Client(server.url, await server.newKey('max'));
      const other = new Client(server.url, await server.newKey('max'));
      const responses = [];
      const started = clock.now();
      for (let i = 0; i < 8; i++) responses.push(await client.get(i % 2 ? '/api/account' : '/api/files/file_nope'));
      const finished = clock.now();
      for (const r of responses) {
        assert.equal(r.headers.get('ratelimit-limit'), '3');
        assert.ok(Number(r.headers.get('ratelimit-remaining')) >= 0);
        assert.ok(Number(r.headers.get('ratelimit-reset')) >= 1);
      }
      const limited = responses.filter((r) => r.status === 429);
      assert.ok(limited.length >= 1, 'eight quick requests at 3/s must be limited');
      assert.equal(limited[0]!.body.error.code, 'RATE_LIMITED');
      assert.ok(Number(limited[0]!.headers.get('retry-after')) >= 1);
      // Like every quota error, its details say the limit, the amount used and when it resets.
      // The window is the whole second the request fell in, so it resets on a second boundary
      // after the loop started and at most a second after it finished (the loop may cross one).
      const { resetsAt, ...rest } = limited[0]!.body.error.details;
      assert.deepEqual(rest, { limit: 3, used: 3, retryAfterSeconds: Number(limited[0]!.headers.get('retry-after')) });
      const resetsAtMs = Date.parse(resetsAt);
      assert.equal(resetsAtMs % 1000, 0, resetsAt);
      assert.ok(resetsAtMs > started && resetsAtMs <= finished + 1000, `${resetsAt} not in the loop's windows`);
      // Another key has its own budget.
      assert.equal((await other.get('/api/account')).status, 200);
      // The window moves on with the application's clock.
      clock.advance(1000);
      assert.equal((await client.get('/api/account')).status, 200);
    });

    it('retention: files expire, their bytes go, storage usage drops, downloads answer 410', async () => {
      const client = new Client(server.url, await server.newKey('max'));
      const upload = (await client.upload(SMALL)).body.data;
      const inUse = (await client.upload(SMALL)).body.data;
      clock.advance(1000);
      assert.equal((await client.post('/api/process/compress', { fileId: inUse.fileId })).status, 202);
      const account = (await findAccountByEmail(server.services.database, await emailOf(server, client)))!;
      const keyOf = async (id: string) =>
        (await server.services.database.db.selectFrom('files').select('storage_key').where('id', '=', id).executeTakeFirstOrThrow()).storage_key;
      const path = server.services.storage.localPath!(await keyOf(upload.fileId));
      assert.ok(fs.existsSync(path));
      assert.equal(Date.parse(upload.expiresAt) - Date.parse(upload.createdAt), 604_800_000, 'max plan keeps files a week');

      clock.advance(604_800_000);
      assert.equal(await server.services.maintenance.tick(), true);
      assert.equal(fs.existsSync(path), false, 'bytes are gone');
      const download = await client.get(`/api/download/${upload.fileId}`);
      assert.equal(download.status, 410);
      assert.equal(download.body.error.code, 'FILE_EXPIRED');
      // The input of a queued task is kept until the task ends.
      assert.ok(fs.existsSync(server.services.storage.localPath!(await keyOf(inUse.fileId))));
      const used = (
        await server.services.database.db.selectFrom('accounts').select('storage_used').where('id', '=', account.id).executeTakeFirstOrThrow()
      ).storage_used;
      assert.equal(Number(used), SMALL_SIZE);
      const task = (await client.get('/api/tasks?status=queued')).body.data.tasks[0];
      assert.equal((await client.request('DELETE', `/api/tasks/${task.taskId}`)).status, 200);
      clock.advance(61_000);
      assert.equal(await server.services.maintenance.tick(), true);
      assert.equal(fs.existsSync(server.services.storage.localPath!(await keyOf(inUse.fileId))), false);
      clock.advance(1000);
      assert.equal((await client.get('/api/account')).body.data.usage.storageBytes.used, 0);
      // The task keeps its record.
      assert.equal((await client.get(`/api/tasks/${task.taskId}`)).body.data.status, 'canceled');
      // A second process's tick in the same interval does nothing.
      assert.equal(await server.services.maintenance.tick(), false);
    });
  });

  describe(`fair claiming (${dialect})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({
        dialect,
        workers: 0,
        plans: { max: { dailyBatchFiles: 100_000 }, pro: { dailyBatchFiles: 100_000, batchSize: 200 } },
      });
    });
    after(() => server.close());

    /** Claims one task at a time, as a single worker slot would, and completes it. */
    async function claimOrder(count: number): Promise<string[]> {
      const order: string[] = [];
      for (let i = 0; i < count; i++) {
        const [task] = await server.services.queue.claim('one-slot', 1, 30_000);
        if (!task) break;
        order.push(task.id);
        assert.equal(await completeTask(server.services.queue, task, 'one-slot'), true);
      }
      return order;
    }

    it("one account's batch of 100 does not hold back another account's single task", async () => {
      const a = new Client(server.url, await server.newKey('max'));
      const b = new Client(server.url, await server.newKey('max'));
      const fileA = await a.uploadOk(SMALL);
      const fileB = await b.uploadOk(SMALL);
      // A has been served before (it is busy); then it queues 100 and B queues one.
      assert.equal((await a.post('/api/process/compress', { fileId: fileA })).status, 202);
      await claimOrder(1);
      const batch = await a.post('/api/process/batch/compress', { fileIds: Array(100).fill(fileA) });
      assert.equal(batch.status, 202);
      const single = (await b.post('/api/process/compress', { fileId: fileB })).body.data.taskId;
      const order = await claimOrder(3);
      assert.ok(order.slice(0, 1).includes(single), `B's task started at slot ${order.indexOf(single) + 1}`);
      await claimOrder(200);
    });

    it('a Max task queued after 100 Pro tasks starts next', async () => {
      const pro = new Client(server.url, await server.newKey('pro'));
      const max = new Client(server.url, await server.newKey('max'));
      const proFile = await pro.uploadOk(SMALL);
      assert.equal((await pro.post('/api/process/batch/compress', { fileIds: Array(100).fill(proFile) })).status, 202);
      const maxTask = (await max.post('/api/process/compress', { fileId: await max.uploadOk(SMALL) })).body.data.taskId;
      assert.deepEqual(await claimOrder(1), [maxTask]);
      await claimOrder(200);
    });
  });
}
