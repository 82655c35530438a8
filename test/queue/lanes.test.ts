// The AI lane: AI tasks (esrgan upscales) run in slots of their own (AI_CONCURRENCY), so image
// tasks do not wait behind them, and within the lane accounts take turns, as in the image lane.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { WorkerPool } from '../../src/worker/worker.js';
import { waitFor } from '../e2e/processes.js';
import { Client, corpusFile, DIALECTS, startServer, type TestServer } from '../helpers.js';

/** A photo of the corpus as a PNG of `size` × `size`. */
const photo = (size: number) => sharp(corpusFile('images/sharp/Landscape_1.jpg')).resize(size, size, { fit: 'cover' }).png().toBuffer();

for (const dialect of DIALECTS) {
  describe(`the AI lane (${dialect})`, () => {
    let server: TestServer;
    /** No worker of its own: the test queues first, then starts one. */
    let idle: TestServer;
    before(async () => {
      [server, idle] = await Promise.all([startServer({ dialect, workers: 2 }), startServer({ dialect, workers: 0 })]);
    });
    after(async () => {
      await Promise.all([server.close(), idle.close()]);
    });

    it('small image tasks of two accounts finish while one account’s four esrgan tasks wait their turn', async () => {
      const a = new Client(server.url, await server.newKey('pro'));
      const b = new Client(server.url, await server.newKey('pro'));
      // Seconds of network work each (×4 of 384 × 384: 9 tiles), one after the other.
      const large = await a.uploadOk(await photo(384), 'large.png');
      const ai: string[] = [];
      for (let i = 0; i < 4; i++) {
        const queued = await a.post('/api/process/upscale', { fileId: large, factor: 4, model: 'esrgan' });
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        ai.push(queued.body.data.taskId);
      }
      const tiny = await photo(32);
      const resizes = await Promise.all(
        [a, b].map(async (client) => {
          const fileId = await client.uploadOk(tiny, 'tiny.png');
          const queued = await client.post('/api/process/resize', { fileId, width: 16 });
          assert.equal(queued.status, 202, JSON.stringify(queued.body));
          return { client, taskId: queued.body.data.taskId as string };
        }),
      );
      const statusOf = async (client: Client, taskId: string) => (await client.get(`/api/tasks/${taskId}`)).body.data.status as string;
      for (const { client, taskId } of resizes) assert.equal((await client.waitForTask(taskId, 120_000)).status, 'completed');
      // At that moment: with AI tasks in the image slots (two), both resizes would have waited for
      // two esrgan tasks to end; in their own lane, one runs at a time and the others wait.
      const aiStatuses = await Promise.all(ai.map((id) => statusOf(a, id)));
      assert.ok(aiStatuses.filter((s) => s === 'queued' || s === 'processing').length >= 3, `esrgan tasks: ${aiStatuses.join(', ')}`);
      assert.ok(aiStatuses.filter((s) => s === 'processing').length <= 1, `one AI slot: ${aiStatuses.join(', ')}`);
      for (const id of ai) await a.request('DELETE', `/api/tasks/${id}`);
      // The canceled run stops between two tiles; the next test starts on idle workers.
      await waitFor('the canceled esrgan runs to stop', 30_000, () => (server.workers.busy === 0 ? true : undefined));
    });

    it('accounts take turns within the lane: A, B, A, B, A for three of A’s and two of B’s queued before', async () => {
      const a = new Client(idle.url, await idle.newKey('pro'));
      const b = new Client(idle.url, await idle.newKey('pro'));
      const small = await photo(24);
      const queue = async (client: Client, count: number) => {
        const fileId = await client.uploadOk(small, 'small.png');
        const ids: string[] = [];
        for (let i = 0; i < count; i++) {
          const queued = await client.post('/api/process/upscale', { fileId, factor: 2, model: 'esrgan' });
          assert.equal(queued.status, 202, JSON.stringify(queued.body));
          ids.push(queued.body.data.taskId);
        }
        return ids;
      };
      const ofA = await queue(a, 3);
      const ofB = await queue(b, 2);
      // One image slot and one AI slot: the AI tasks run one at a time, in claim order.
      const workers = new WorkerPool(idle.services, 1);
      workers.start();
      try {
        const done = [];
        for (const [client, id] of [...ofA.map((id) => [a, id] as const), ...ofB.map((id) => [b, id] as const)]) {
          const task = await client.waitForTask(id, 300_000);
          assert.equal(task.status, 'completed', JSON.stringify(task));
          done.push({ account: client === a ? 'A' : 'B', startedAt: task.startedAt as string });
        }
        done.sort((x, y) => x.startedAt.localeCompare(y.startedAt));
        assert.deepEqual(
          done.map((t) => t.account),
          ['A', 'B', 'A', 'B', 'A'],
        );
      } finally {
        await workers.stop(2000);
      }
    });
  });
}
