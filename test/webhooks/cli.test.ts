// `imgapi webhooks …` against a real server: create (the secret printed once), list, test,
// deliveries, resend, delete, and usage errors.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { clientCommand } from '../../src/cli/client.js';
import { DIALECTS, startServer, type TestServer } from '../helpers.js';
import { waitFor } from '../e2e/processes.js';
import { startReceiver, type Receiver } from '../e2e/webhook-receiver.js';

/** Runs `imgapi webhooks <args>` in this process; answers the exit status and what it printed. */
async function webhooks(server: TestServer, key: string, args: string[]) {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (text: string) => ((stdout += text), true), isTTY: false },
    stderr: { write: (text: string) => ((stderr += text), true), isTTY: false },
    env: { IMGAPI_URL: server.url, IMGAPI_KEY: key },
  } as never;
  const code = await clientCommand('webhooks', args, io);
  return { code, stdout, stderr };
}

for (const dialect of DIALECTS) {
  describe(`imgapi webhooks (${dialect})`, () => {
    let server: TestServer;
    let receiver: Receiver;
    before(async () => {
      server = await startServer({ dialect, workers: 1, env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: '1' } });
      receiver = await startReceiver();
    });
    after(async () => {
      await receiver?.close();
      await server?.close();
    });

    it('creates, lists, tests, shows deliveries, resends and deletes', async () => {
      const key = await server.newKey('pro');
      const created = await webhooks(server, key, ['create', `${receiver.url}/cli`, '--events', 'task.completed,task.failed', '--json']);
      assert.equal(created.code, 0, created.stderr);
      const endpoint = JSON.parse(created.stdout);
      assert.match(endpoint.secret, /^whsec_/);
      assert.deepEqual(endpoint.events, ['task.completed', 'task.failed']);

      const listed = await webhooks(server, key, ['list']);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, new RegExp(`${endpoint.webhookId}\\s+${receiver.url}/cli\\s+task.completed,task.failed`));
      assert.match(listed.stdout, /1 of 10 endpoints/);
      assert.ok(!listed.stdout.includes(endpoint.secret));

      const tested = await webhooks(server, key, ['test', endpoint.webhookId, '--json']);
      assert.equal(tested.code, 0, tested.stderr);
      const delivery = JSON.parse(tested.stdout);
      assert.equal(delivery.event, 'webhook.test');
      await receiver.waitFor(1);
      const shown = await waitFor('the delivery in the table', 60_000, async () => {
        const result = await webhooks(server, key, ['deliveries', endpoint.webhookId]);
        return result.stdout.includes('delivered') ? result : undefined;
      });
      assert.match(shown.stdout, new RegExp(`${delivery.deliveryId}\\s+webhook.test\\s+delivered\\s+1\\s+200`));

      const resent = await webhooks(server, key, ['resend', endpoint.webhookId, delivery.deliveryId, '--json']);
      assert.equal(resent.code, 0, resent.stderr);
      assert.equal(JSON.parse(resent.stdout).eventId, delivery.eventId);
      const [, again] = await receiver.waitFor(2);
      assert.equal(again!.headers['imgapi-event-id'], delivery.eventId);

      // Without --json, text: the resend's delivery on one line.
      const resentText = await webhooks(server, key, ['resend', endpoint.webhookId, delivery.deliveryId]);
      assert.match(resentText.stdout, new RegExp(`^dlv_\\S+ webhook.test \\S+ \\(event ${delivery.eventId}\\)\n$`), resentText.stdout);
      const deleted = await webhooks(server, key, ['delete', endpoint.webhookId, '--json']);
      assert.deepEqual([deleted.code, JSON.parse(deleted.stdout)], [0, { webhookId: endpoint.webhookId, deleted: true }]);
      const gone = await webhooks(server, key, ['delete', endpoint.webhookId]);
      assert.equal(gone.code, 1);
      assert.match(gone.stderr, /NOT_FOUND/);
    });

    it('refuses what it cannot do with a usage error', async () => {
      const key = await server.newKey('pro');
      for (const args of [
        [],
        ['frobnicate'],
        ['create'],
        ['create', 'https://a.example', '--secret', 'x'],
        ['resend', 'whk_1'],
        ['deliveries', 'whk_1', '--limit', '0'],
      ]) {
        const result = await webhooks(server, key, args);
        assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      }
      const refused = await webhooks(server, key, ['create', 'ftp://example.net/x']);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /VALIDATION_ERROR/);
    });
  });
}
