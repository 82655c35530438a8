// Where webhooks may go: the address rules (IPv4, IPv6 and the IPv6 forms of IPv4), and the
// check at connect time on the address a name resolves to then (so DNS rebinding cannot pass),
// plus what one attempt reads of the answer.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { checkDestination, isForbiddenAddress, parseWebhookUrl } from '../../src/webhooks/address.js';
import { postWebhook } from '../../src/webhooks/send.js';
import { startReceiver, type Receiver } from '../e2e/webhook-receiver.js';

describe('webhook destinations', () => {
  it('refuses every non-public address, in all its forms, and allows public ones', () => {
    const forbidden = [
      '127.0.0.1',
      '127.255.0.9',
      '10.1.2.3',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::',
      '::1',
      '[::1]',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:169.254.169.254',
      '::ffff:10.0.0.1',
      '::127.0.0.1',
      '64:ff9b::7f00:1',
      '2002:7f00:1::',
      'fc00::1',
      'fd12:3456::1',
      'fe80::1',
      'fe80::1%eth0',
      'ff02::1',
      '2001:db8::1',
      'not-an-address',
    ];
    for (const address of forbidden) assert.equal(isForbiddenAddress(address), true, address);
    for (const address of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '::ffff:8.8.8.8', '2606:4700:4700::1111', '2001:4860:4860::8888'])
      assert.equal(isForbiddenAddress(address), false, address);
  });

  it('takes only http(s) URLs without credentials', () => {
    assert.equal(parseWebhookUrl('https://hooks.example.net/a?b=1').hostname, 'hooks.example.net');
    for (const url of ['ftp://example.net/', 'file:///etc/passwd', 'https://u:p@example.net/', 'example.net/hook', 'https://example.net/#x'])
      assert.throws(() => parseWebhookUrl(url), { code: 'VALIDATION_ERROR' }, url);
  });

  it('resolves names at creation: localhost is loopback', async () => {
    await assert.rejects(checkDestination(new URL('http://localhost:9/'), false), { code: 'WEBHOOK_URL_NOT_ALLOWED' });
    await assert.rejects(checkDestination(new URL('http://[::ffff:a9fe:a9fe]/'), false), { code: 'WEBHOOK_URL_NOT_ALLOWED' });
    await checkDestination(new URL('http://localhost:9/'), true);
  });

  describe('one attempt', () => {
    let receiver: Receiver;
    before(async () => {
      receiver = await startReceiver((request) => ({
        status: request.path === '/big' ? 503 : 204,
        body: request.path === '/big' ? 'x'.repeat(100_000) : '',
      }));
    });
    after(async () => receiver.close());
    const send = (url: string, allowPrivate: boolean) => postWebhook(url, '{"id":"evt_x"}', { timeoutMs: 10_000, allowPrivate, headers: {} });

    it('connects only to a public address, checked on the address a name resolves to when connecting', async () => {
      const port = new URL(receiver.url).port;
      const byName = await send(`http://localhost:${port}/hook`, false);
      assert.equal(byName.ok, false);
      assert.match(byName.error!, /refused to connect to (127\.0\.0\.1|::1): not a public address/);
      const byAddress = await send(`http://127.0.0.1:${port}/hook`, false);
      assert.equal(byAddress.ok, false);
      assert.match(byAddress.error!, /not a public address/);
      assert.equal(receiver.received.length, 0);
      // Allowed by the operator: delivered.
      const allowed = await send(`http://localhost:${port}/hook`, true);
      assert.deepEqual([allowed.ok, allowed.statusCode], [true, 204]);
      assert.equal(receiver.received.length, 1);
    });

    it('reads at most 4 KiB of the answer and keeps 1 KiB of it', async () => {
      const result = await send(`${receiver.url}/big`, true);
      assert.equal(result.ok, false);
      assert.equal(result.statusCode, 503);
      assert.equal(result.responseBody, 'x'.repeat(1024));
    });
  });
});
