// Webhooks end to end: endpoints over the API (secret shown once, tenant isolation, the cap),
// signed deliveries verified with the SDK, retries on the application clock with the same event
// id, no redirects, private destinations refused without WEBHOOK_ALLOW_PRIVATE_NETWORKS, and a
// receiver that hangs not holding the image-task slot.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { ManualClock } from '../../src/clock.js';
import { verifyWebhook } from '../../sdk/webhooks.js';
import { Client, DIALECTS, startServer, type TestServer } from '../helpers.js';
import { waitFor } from './processes.js';
import { startReceiver, type Receiver } from './webhook-receiver.js';

const png = (color: string) =>
  sharp({ create: { width: 40, height: 30, channels: 3, background: color } })
    .png()
    .toBuffer();

/** Polls the endpoint's deliveries until `done` holds for the list. */
async function deliveriesWhen(client: Client, webhookId: string, what: string, done: (deliveries: any[]) => boolean): Promise<any[]> {
  return waitFor(what, 60_000, async () => {
    const response = await client.get(`/api/webhooks/${webhookId}/deliveries`);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    const deliveries = response.body.data.deliveries as any[];
    return done(deliveries) ? deliveries : undefined;
  });
}

for (const dialect of DIALECTS) {
  describe(`webhooks (${dialect})`, () => {
    const clock = new ManualClock();
    let server: TestServer;
    const receivers: Receiver[] = [];
    const receiver = async (...args: Parameters<typeof startReceiver>) => {
      const started = await startReceiver(...args);
      receivers.push(started);
      return started;
    };

    before(async () => {
      // One image slot: the slow-receiver test shows deliveries do not take it.
      server = await startServer({ dialect, clock, workers: 1, env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: '1' } });
    });
    after(async () => {
      for (const r of receivers) await r.close();
      await server?.close();
    });

    it('signs task.completed and batch.completed with the secret shown once; the SDK verifies them', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const hooks = await receiver();
      const created = await client.post('/api/webhooks', {
        url: `${hooks.url}/imgapi`,
        events: ['task.completed', 'batch.completed'],
        description: 'test receiver',
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const { webhookId, secret } = created.body.data;
      assert.match(secret, /^whsec_[A-Za-z0-9_-]{40,}$/);
      assert.deepEqual(created.body.data.events, ['task.completed', 'batch.completed']);
      // Shown once: neither the list nor the endpoint carries it again.
      const listed = await client.get('/api/webhooks');
      assert.equal(listed.body.data.webhooks.length, 1);
      assert.ok(!JSON.stringify(listed.body).includes(secret));
      const one = await client.get(`/api/webhooks/${webhookId}`);
      assert.equal(one.status, 200);
      assert.equal(one.body.data.secret, undefined);

      const fileId = await client.uploadOk(await png('#c00'), 'red.png');
      const queued = await client.post('/api/process/resize', { fileId, width: 20 });
      assert.equal(queued.status, 202);
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed');

      const [request] = await hooks.waitFor(1);
      assert.equal(request!.path, '/imgapi');
      assert.equal(request!.headers['content-type'], 'application/json');
      const event = verifyWebhook(request!.body, request!.headers['imgapi-signature'], secret, { now: clock.now() });
      assert.equal(event.type, 'task.completed');
      assert.match(event.id, /^evt_/);
      assert.equal(request!.headers['imgapi-event-id'], event.id);
      // The task exactly as GET /api/tasks/{taskId} shows it.
      assert.deepEqual((event.data as { task: unknown }).task, (await client.get(`/api/tasks/${task.taskId}`)).body.data);
      // A changed body, another secret, or an old timestamp are refused.
      const tampered = Buffer.from(request!.body.toString().replace('"completed"', '"failed"'));
      assert.throws(() => verifyWebhook(tampered, request!.headers['imgapi-signature'], secret, { now: clock.now() }), /does not match/);
      assert.throws(() => verifyWebhook(request!.body, request!.headers['imgapi-signature'], 'whsec_other', { now: clock.now() }), /does not match/);
      assert.throws(() => verifyWebhook(request!.body, request!.headers['imgapi-signature'], secret, { now: clock.now() + 301_000 }), /timestamp/);

      const [delivered] = await deliveriesWhen(client, webhookId, 'the delivery to be recorded', (d) => d[0]?.status === 'delivered');
      assert.equal(delivered.eventId, event.id);
      assert.equal(delivered.event, 'task.completed');
      assert.equal(delivered.statusCode, 200);
      assert.equal(delivered.attempts, 1);
      assert.ok(delivered.durationMs >= 0);

      // A batch: a task.completed per task, and one batch.completed once both have ended.
      const other = await client.uploadOk(await png('#0c0'), 'green.png');
      const batch = await client.post('/api/process/batch/resize', { fileIds: [fileId, other], width: 10 });
      assert.equal(batch.status, 202);
      for (const t of batch.body.data.tasks) await client.waitForTask(t.taskId);
      const requests = await hooks.waitFor(4);
      const events = requests.map((r) => verifyWebhook(r.body, r.headers['imgapi-signature'], secret, { now: clock.now() }));
      const batchEvents = events.filter((e) => e.type === 'batch.completed');
      assert.equal(batchEvents.length, 1);
      const batchData = (batchEvents[0]!.data as { batch: any }).batch;
      assert.equal(batchData.batchId, batch.body.data.batchId);
      assert.deepEqual(batchData.counts, { queued: 0, processing: 0, completed: 2, failed: 0, canceled: 0 });
      // Every delivery was made while the batch ran: exactly one batch.completed was ever queued.
      const all = await deliveriesWhen(client, webhookId, 'four delivered', (d) => d.length === 4 && d.every((x) => x.status === 'delivered'));
      assert.equal(all.filter((d) => d.event === 'batch.completed').length, 1);
      assert.equal(new Set(all.map((d) => d.eventId)).size, 4);
    });

    it('retries a receiver that answers 500 twice, on the clock, with the same event id; resend repeats the id', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const hooks = await receiver((_request, index) => (index < 2 ? { status: 500, body: 'not yet' } : { status: 200, body: 'ok' }));
      const created = await client.post('/api/webhooks', { url: hooks.url });
      assert.equal(created.status, 201);
      const { webhookId, secret } = created.body.data;
      assert.deepEqual(created.body.data.events, ['task.completed', 'task.failed', 'task.canceled', 'batch.completed']);

      const test = await client.post(`/api/webhooks/${webhookId}/test`, undefined);
      assert.equal(test.status, 202, JSON.stringify(test.body));
      assert.equal(test.body.data.event, 'webhook.test');

      await hooks.waitFor(1);
      const [first] = await deliveriesWhen(client, webhookId, 'the first attempt', (d) => d[0]?.attempts === 1);
      assert.equal(first.status, 'pending');
      assert.equal(first.statusCode, 500);
      assert.equal(first.attemptLog[0].responseBody, 'not yet');
      // The first retry is about 10 s later on the application clock: nothing before that.
      assert.equal(Date.parse(first.nextAttemptAt) - Date.parse(first.attemptLog[0].at), 10_000);
      clock.advance(11_000);
      await hooks.waitFor(2);
      const [second] = await deliveriesWhen(client, webhookId, 'the second attempt', (d) => d[0]?.attempts === 2);
      assert.equal(Date.parse(second.nextAttemptAt) - Date.parse(second.attemptLog[1].at), 60_000);
      clock.advance(61_000);
      const requests = await hooks.waitFor(3);
      const [third] = await deliveriesWhen(client, webhookId, 'the delivery', (d) => d[0]?.status === 'delivered');
      assert.equal(third.attempts, 3);
      assert.deepEqual(
        third.attemptLog.map((a: { statusCode: number }) => a.statusCode),
        [500, 500, 200],
      );

      const ids = requests.map((r) => verifyWebhook(r.body, r.headers['imgapi-signature'], secret, { now: clock.now(), toleranceSeconds: 600 }).id);
      assert.equal(new Set(ids).size, 1);
      assert.deepEqual(
        requests.map((r) => r.headers['imgapi-event-id']),
        ids,
      );
      assert.equal(ids[0], third.eventId);

      // Resend: a new delivery of the same event.
      const resent = await client.post(`/api/webhooks/${webhookId}/deliveries/${third.deliveryId}/resend`, undefined);
      assert.equal(resent.status, 202, JSON.stringify(resent.body));
      assert.equal(resent.body.data.eventId, third.eventId);
      assert.notEqual(resent.body.data.deliveryId, third.deliveryId);
      const [again] = await hooks.waitFor(4).then((r) => r.slice(3));
      assert.equal(again!.headers['imgapi-event-id'], third.eventId);
      const missing = await client.post(`/api/webhooks/${webhookId}/deliveries/dlv_nope/resend`, undefined);
      assert.equal(missing.status, 404);
    });

    it('does not follow a redirect', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const target = await receiver();
      const hooks = await receiver(() => ({ status: 302, headers: { location: `${target.url}/elsewhere` } }));
      const created = await client.post('/api/webhooks', { url: hooks.url });
      const { webhookId } = created.body.data;
      await client.post(`/api/webhooks/${webhookId}/test`, undefined);
      await hooks.waitFor(1);
      const [attempted] = await deliveriesWhen(client, webhookId, 'the attempt', (d) => d[0]?.attempts === 1);
      assert.equal(attempted.status, 'pending');
      assert.equal(attempted.statusCode, 302);
      assert.match(attempted.error, /redirects are not followed/);
      assert.equal(target.received.length, 0);
    });

    it("keeps accounts apart, refuses bad endpoints, and caps an account's endpoints", async () => {
      const alice = new Client(server.url, await server.newKey('pro'));
      const bob = new Client(server.url, await server.newKey('pro'));
      const hooks = await receiver();
      const created = await alice.post('/api/webhooks', { url: hooks.url, events: ['task.failed'] });
      const { webhookId } = created.body.data;
      const test = await alice.post(`/api/webhooks/${webhookId}/test`, undefined);
      const deliveryId = test.body.data.deliveryId;

      // Another account's endpoint answers as a missing one.
      assert.equal((await bob.get(`/api/webhooks/${webhookId}`)).status, 404);
      assert.equal((await bob.get(`/api/webhooks/${webhookId}/deliveries`)).status, 404);
      assert.equal((await bob.post(`/api/webhooks/${webhookId}/test`, undefined)).status, 404);
      assert.equal((await bob.post(`/api/webhooks/${webhookId}/deliveries/${deliveryId}/resend`, undefined)).status, 404);
      assert.equal((await bob.request('DELETE', `/api/webhooks/${webhookId}`)).status, 404);
      assert.deepEqual((await bob.get('/api/webhooks')).body.data.webhooks, []);
      assert.equal((await bob.get('/api/webhooks/whk_unknown')).body.error.code, 'NOT_FOUND');

      // Validation: the URL's form and the events.
      for (const [body, field] of [
        [{ url: 'ftp://example.com/x' }, 'url'],
        [{ url: 'not a url' }, 'url'],
        [{ url: 'https://user:pw@example.com/' }, 'url'],
        [{ url: hooks.url, events: ['task.started'] }, 'events'],
        [{ url: hooks.url, events: [] }, 'events'],
        [{ url: hooks.url, secret: 'mine' }, 'secret'],
      ] as const) {
        const refused = await alice.post('/api/webhooks', body);
        assert.equal(refused.status, 400, JSON.stringify(body));
        assert.equal(refused.body.error.code, 'VALIDATION_ERROR');
        assert.match(JSON.stringify(refused.body.error.details), new RegExp(field));
      }

      // The cap: ten endpoints, then 403.
      for (let i = 1; i < 10; i++) assert.equal((await alice.post('/api/webhooks', { url: `${hooks.url}/${i}` })).status, 201);
      const capped = await alice.post('/api/webhooks', { url: `${hooks.url}/11` });
      assert.equal(capped.status, 403);
      assert.equal(capped.body.error.code, 'WEBHOOK_LIMIT_EXCEEDED');
      assert.equal(capped.body.error.details.limit, 10);

      // Deleted: gone with its deliveries, and a slot is free again.
      assert.equal((await alice.request('DELETE', `/api/webhooks/${webhookId}`)).status, 204);
      assert.equal((await alice.get(`/api/webhooks/${webhookId}`)).status, 404);
      assert.equal((await alice.post('/api/webhooks', { url: `${hooks.url}/again` })).status, 201);
    });

    it('a receiver that hangs does not hold the image slot: the next task completes meanwhile', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const hooks = await receiver(() => 'hang');
      const created = await client.post('/api/webhooks', { url: hooks.url, events: ['task.completed'] });
      const { webhookId } = created.body.data;
      const fileId = await client.uploadOk(await png('#00c'), 'blue.png');
      const first = await client.post('/api/process/resize', { fileId, width: 12 });
      await client.waitForTask(first.body.data.taskId);
      const [hanging] = await hooks.waitFor(1);
      // The delivery hangs (for up to its 10 s); the one image slot is free for the next task.
      const second = await client.post('/api/process/rotate', { fileId, angle: 90 });
      const done = await client.waitForTask(second.body.data.taskId);
      assert.equal(done.status, 'completed');
      const eventId = hanging!.headers['imgapi-event-id'];
      const deliveries = await deliveriesWhen(client, webhookId, 'the timed-out attempt', (d) => d.some((x) => x.eventId === eventId && x.error));
      const attempt = deliveries.find((x) => x.eventId === eventId)!;
      assert.match(attempt.error, /no answer within 10 s/);
      // The second task ended while the first delivery was still waiting for its answer.
      assert.ok(Date.parse(done.completedAt) < Date.parse(attempt.attemptLog[0].at), `${done.completedAt} vs ${attempt.attemptLog[0].at}`);
    });
  });

  describe(`webhooks without WEBHOOK_ALLOW_PRIVATE_NETWORKS (${dialect})`, () => {
    let server: TestServer;
    before(async () => {
      // No workers: events are queued (and listed) but nothing is sent. Max accounts have a tiny pixel limit.
      server = await startServer({ dialect, workers: 0, plans: { max: { maxPixels: 100 } } });
    });
    after(async () => server?.close());

    it('queues task.canceled and batch.completed when tasks are canceled, task.failed when a task fails when queued', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      // A public address literal: accepted without resolving anything, never contacted here.
      const created = await client.post('/api/webhooks', { url: 'http://8.8.8.8:9/hook' });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const { webhookId } = created.body.data;
      const fileId = await client.uploadOk(await png('#ccc'), 'grey.png');
      const single = await client.post('/api/process/resize', { fileId, width: 10 });
      assert.equal((await client.request('DELETE', `/api/tasks/${single.body.data.taskId}`)).status, 200);
      const batch = await client.post('/api/process/batch/flip', { fileIds: [fileId, fileId], direction: 'both' });
      assert.equal((await client.request('DELETE', `/api/batches/${batch.body.data.batchId}`)).status, 200);
      const deliveries = (await client.get(`/api/webhooks/${webhookId}/deliveries`)).body.data.deliveries as any[];
      assert.deepEqual(deliveries.map((d) => d.event).sort(), ['batch.completed', 'task.canceled', 'task.canceled', 'task.canceled']);
      assert.ok(deliveries.every((d) => d.status === 'pending' && d.attempts === 0));

      const max = new Client(server.url, await server.newKey('max'));
      const maxHook = await max.post('/api/webhooks', { url: 'http://8.8.8.8:9/max', events: ['task.failed'] });
      const tooLarge = await max.post('/api/process/resize', { fileId: await max.uploadOk(await png('#ccc'), 'big.png'), width: 10 });
      assert.equal(tooLarge.body.data.status, 'failed');
      const failed = (await max.get(`/api/webhooks/${maxHook.body.data.webhookId}/deliveries`)).body.data.deliveries as any[];
      assert.deepEqual(
        failed.map((d) => d.event),
        ['task.failed'],
      );
    });

    it('refuses loopback, private, link-local and metadata destinations at creation', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      for (const url of [
        'http://127.0.0.1:8080/hook',
        'http://localhost/hook',
        'http://10.0.0.5/hook',
        'http://192.168.1.10/hook',
        'http://169.254.169.254/latest/meta-data/',
        'http://[::1]/hook',
        'http://[::ffff:127.0.0.1]/hook',
        'http://[fd00::1]/hook',
        'http://100.64.0.1/hook',
        'http://0.0.0.0/hook',
      ]) {
        const refused = await client.post('/api/webhooks', { url });
        assert.equal(refused.status, 400, url);
        assert.equal(refused.body.error.code, 'WEBHOOK_URL_NOT_ALLOWED', url);
        assert.match(refused.body.error.message, /not a public address/);
      }
      assert.deepEqual((await client.get('/api/webhooks')).body.data.webhooks, []);
    });
  });
}
