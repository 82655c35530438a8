// The endpoints a worker process keeps per account (src/webhooks/store.ts, subscriptionsOf) are
// never stale: a worker that has already ended a task of the account, and so knows it has no
// endpoint, queues the events of its next task for an endpoint created meanwhile through another
// process, and none for one deleted meanwhile. Two Services on one database stand for the two
// processes (each its own handle, so its own copy of the endpoints), on every dialect.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { createServices, type Services } from '../../src/services.js';
import { WorkerPool } from '../../src/worker/worker.js';
import { Client, DIALECTS, corpusFile, startServer, type TestServer } from '../helpers.js';
import { waitFor } from '../e2e/processes.js';

for (const dialect of DIALECTS) {
  describe(`webhook endpoints kept by a worker process (${dialect})`, () => {
    let server: TestServer;
    let worker: Services;
    let pool: WorkerPool;

    before(async () => {
      // The API process runs no tasks: every task ends in the other process's worker.
      server = await startServer({ dialect, workers: 0, env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: '1' } });
      worker = await createServices(server.config, { logger: pino({ level: 'silent' }) });
      pool = new WorkerPool({ ...worker, logger: pino({ level: 'silent' }) }, 1);
      pool.start();
    });
    after(async () => {
      await pool?.stop(5000);
      await worker?.close();
      await server?.close();
    });

    it('an endpoint created or deleted through another process applies to the next task that ends', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(corpusFile('images/sharp/320x240.jpg'));
      const db = server.services.database.db;
      const runTask = async () => {
        const queued = await client.post('/api/process/resize', { fileId, width: 32 });
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        const taskId = queued.body.data.taskId as string;
        await waitFor(`task ${taskId} to complete`, 60_000, async () => {
          const task = await db.selectFrom('tasks').select('status').where('id', '=', taskId).executeTakeFirstOrThrow();
          return task.status === 'completed' ? true : undefined;
        });
        return taskId;
      };
      const eventsOf = async (taskId: string) =>
        (await db.selectFrom('webhook_deliveries').select('payload').where('event_type', '=', 'task.completed').execute()).filter((d) =>
          d.payload.includes(taskId),
        ).length;

      // The worker ends a task of an account without endpoints: it knows there are none.
      assert.equal(await eventsOf(await runTask()), 0);
      // An endpoint created through the API process (the receiver need not answer: the event is
      // queued when the task ends, whatever becomes of its delivery).
      const created = await client.post('/api/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['task.completed'] });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.equal(await eventsOf(await runTask()), 1, "the next task's event is queued for the new endpoint");
      // Deleted the same way: the next task's event is queued for nobody.
      assert.equal((await client.request('DELETE', `/api/webhooks/${created.body.data.webhookId}`)).status, 204);
      assert.equal(await eventsOf(await runTask()), 0, 'no event for a deleted endpoint');
    });
  });
}
