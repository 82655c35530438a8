// At least once across a crash: a worker process SIGKILLed while its delivery waits for the
// receiver's answer loses no event. The delivery's lease lapses and another worker process
// delivers the same event (the same id, signed with the same secret).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { verifyWebhook } from '../../sdk/webhooks.js';
import { Client, DIALECTS, startServer, type TestServer } from '../helpers.js';
import { startProc, stopProc, waitFor, waitWorking, type Proc } from './processes.js';
import { startReceiver, type Receiver } from './webhook-receiver.js';

for (const dialect of DIALECTS) {
  describe(`webhooks across a SIGKILLed worker (${dialect})`, () => {
    let server: TestServer;
    let hooks: Receiver;
    const procs: Proc[] = [];
    const worker = (name: string) => {
      const proc = startProc(name, ['worker'], {
        DATA_DIR: server.dataDir,
        DATABASE_URL: server.databaseUrl,
        PLANS_FILE: `${server.dataDir}/plans.json`,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: '1',
        WORKER_CONCURRENCY: '1',
        // A lapsed delivery lease is the 10 s answer limit plus this.
        TASK_LEASE_SECONDS: '2',
        QUEUE_POLL_MS: '100',
        LOG_LEVEL: 'info',
      });
      procs.push(proc);
      return proc;
    };

    before(async () => {
      // The API in this process, without workers: the worker processes do all the work.
      server = await startServer({ dialect, workers: 0, env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: '1' } });
      // The first request is left unanswered (the worker is killed while it waits); the rest get 200.
      hooks = await startReceiver((_request, index) => (index === 0 ? 'hang' : { status: 200 }));
    });
    after(async () => {
      for (const proc of procs) await stopProc(proc);
      await hooks?.close();
      await server?.close();
    });

    it('delivers the event again, with the same id, from another worker', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const created = await client.post('/api/webhooks', { url: hooks.url, events: ['task.completed'] });
      assert.equal(created.status, 201);
      const { webhookId, secret } = created.body.data;

      const first = worker('worker-a');
      await waitWorking(first);
      const fileId = await client.uploadOk(
        await sharp({ create: { width: 32, height: 24, channels: 3, background: '#888' } })
          .png()
          .toBuffer(),
        'grey.png',
      );
      const queued = await client.post('/api/process/resize', { fileId, width: 16 });
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed');

      // Mid-delivery: the receiver holds the request; the worker dies before any answer.
      const [lost] = await hooks.waitFor(1);
      await stopProc(first, 'SIGKILL');

      const second = worker('worker-b');
      await waitWorking(second);
      const requests = await hooks.waitFor(2, 120_000);
      const events = [lost!, requests[1]!].map((r) => verifyWebhook(r.body, r.headers['imgapi-signature'], secret));
      assert.equal(events[0]!.id, events[1]!.id);
      assert.equal(events[1]!.type, 'task.completed');
      assert.equal((events[1]!.data as { task: { taskId: string } }).task.taskId, task.taskId);

      const deliveries = await waitFor('the delivery to be recorded', 60_000, async () => {
        const list = (await client.get(`/api/webhooks/${webhookId}/deliveries`)).body.data.deliveries as any[];
        return list.length === 1 && list[0].status === 'delivered' ? list : undefined;
      });
      assert.equal(deliveries[0].eventId, events[0]!.id);
      assert.equal(deliveries[0].statusCode, 200);
      // Both attempts are in its log: the lost one says so.
      assert.equal(deliveries[0].attempts, 2);
      assert.match(deliveries[0].attemptLog[0].error, /worker stopped during the attempt/);
      assert.equal(deliveries[0].attemptLog[1].statusCode, 200);
    });
  });
}
