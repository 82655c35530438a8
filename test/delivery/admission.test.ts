// Render admission: RENDER_CONCURRENCY slots, a bounded wait (503 RENDER_BUSY with Retry-After),
// and RENDER_TIMEOUT_SECONDS (504 RENDER_TIMEOUT, abandoned, refunded, nothing stored). The slow
// render is slow by its input (a large image, a wide blur), not by a sleep. Admission is per
// process and touches no table of its own: one dialect.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { startServer, type TestServer } from '../helpers.js';
import { fetchDelivery, png, signer } from './helpers.js';

describe('delivery URLs: render slots and the time limit', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ workers: 0, env: { RENDER_CONCURRENCY: '1', RENDER_QUEUE_SECONDS: '0', RENDER_TIMEOUT_SECONDS: '1' } });
  });
  after(async () => server?.close());

  it('a render holding the only slot: another miss is 503 RENDER_BUSY at once; the slow one is 504 after the time limit; the event loop stays free', async () => {
    const a = await signer(server);
    const big = await sharp({ create: { width: 8000, height: 6000, channels: 3, background: { r: 10, g: 200, b: 90 } } })
      .png({ compressionLevel: 9 })
      .toBuffer();
    const bigId = await a.client.uploadOk(big, 'big.png');
    const smallId = await a.client.uploadOk(await png(20, 20), 'small.png');
    const used = async () => (await a.client.get('/api/account')).body.data.usage.monthlyRenders.used as number;

    const started = Date.now();
    const slow = fetchDelivery(a.url('w:4000,blur:150', bigId));
    // Charged, then admitted: once the charge shows, the slot is taken.
    while ((await used()) < 1) await new Promise((resolve) => setImmediate(resolve));
    const busy = await fetchDelivery(a.url('w:10', smallId));
    assert.equal(busy.status, 503);
    assert.equal(busy.body.error.code, 'RENDER_BUSY');
    assert.ok(Number(busy.headers.get('retry-after')) >= 1);
    assert.equal(busy.headers.get('cache-control'), 'no-store');

    // The API answers while the render runs (decoding and libvips are off the event loop).
    const health = Date.now();
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    assert.ok(Date.now() - health < 1000);

    const timedOut = await slow;
    assert.equal(timedOut.status, 504, JSON.stringify(timedOut.body));
    assert.equal(timedOut.body.error.code, 'RENDER_TIMEOUT');
    assert.ok(Date.now() - started < 5000, `answered after ${Date.now() - started} ms`);
    // Neither failed render is charged, and nothing was stored.
    assert.equal(await used(), 0);
    assert.equal(await server.services.delivery.cache.totalBytes(), 0);

    // The slot comes free once libvips has stopped the abandoned render.
    let ok = await fetchDelivery(a.url('w:10', smallId));
    while (ok.status === 503) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      ok = await fetchDelivery(a.url('w:10', smallId));
    }
    assert.equal(ok.status, 200);
    assert.equal(await used(), 1);
  });
});
