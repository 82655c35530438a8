// Hits answered from memory before Fastify (routes/delivery.ts memoryHits, in front of Fastify: app.ts) answer what
// the route answers: each case is asked over HTTP (the memory path, counted here to prove it
// answered) and through app.inject (light-my-request calls Fastify's handler directly, so the
// route answers), and the two answers — status, headers, bytes — are compared.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/services.js';
import { DIALECTS, startServer, type TestServer } from '../helpers.js';
import { fetchDelivery, png, sign, signer, type Signer } from './helpers.js';
import type { FastifyInstance } from 'fastify';
import type { Delivery } from '../../src/delivery/delivery.js';

/** Headers that differ between any two answers (or between a socket and light-my-request). */
const PER_ANSWER = new Set(['date', 'connection', 'keep-alive', 'x-request-id', 'transfer-encoding']);

/** Counts the hits the memory path answered. */
function countMemoryHits(delivery: Delivery): { count: number } {
  const counter = { count: 0 };
  const original = delivery.deliverFromMemory.bind(delivery);
  delivery.deliverFromMemory = (request) => {
    const delivered = original(request);
    if (delivered) counter.count++;
    return delivered;
  };
  return counter;
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

async function overHttp(url: string, headers: Record<string, string>, method: string): Promise<Answer> {
  const response = await fetch(url, { method, headers });
  const out: Record<string, string> = {};
  response.headers.forEach((value, name) => (out[name] = value));
  return { status: response.status, headers: out, body: Buffer.from(await response.arrayBuffer()) };
}

async function throughFastify(app: FastifyInstance, url: string, headers: Record<string, string>, method: string): Promise<Answer> {
  const { pathname } = new URL(url);
  const response = await app.inject({ method: method as 'GET' | 'HEAD', url: pathname, headers });
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers)) out[name] = String(value);
  return { status: response.statusCode, headers: out, body: response.rawPayload };
}

const comparable = (answer: Answer) => ({
  status: answer.status,
  headers: Object.fromEntries(Object.entries(answer.headers).filter(([name]) => !PER_ANSWER.has(name))),
  body: answer.body,
});

for (const dialect of DIALECTS) {
  describe(`delivery hits from memory answer as the route does (${dialect})`, () => {
    let server: TestServer;
    let a: Signer;
    let fileId: string;
    let memoryHits: { count: number };

    before(async () => {
      server = await startServer({ dialect, workers: 0 });
      a = await signer(server);
      fileId = await a.client.uploadOk(await png(120, 80), 'a.png');
      memoryHits = countMemoryHits(server.services.delivery);
    });
    after(() => server?.close());

    /** Requests bothPaths has sent (for the metrics' count). */
    let sent = 0;

    /**
     * Asks both paths and returns the memory path's answer, after checking it answered. Memory
     * answers only while the signing key was read within KEY_CACHE_MS: on a machine stalled past
     * that since the last request, the route answers (and reads the key again), so it is asked
     * again, a few times at most.
     */
    async function bothPaths(url: string, headers: Record<string, string> = {}, method = 'GET') {
      let fast: Answer | undefined;
      for (let attempt = 0; attempt < 5 && !fast; attempt++) {
        const before = memoryHits.count;
        const answer = await overHttp(url, headers, method);
        sent++;
        if (memoryHits.count === before + 1) fast = answer;
      }
      assert.ok(fast, `the memory path answered ${method} ${url}`);
      const before = memoryHits.count;
      const slow = await throughFastify(server.app, url, headers, method);
      sent++;
      assert.equal(memoryHits.count, before, 'inject went through Fastify');
      assert.deepEqual(comparable(fast), comparable(slow));
      assert.match(fast.headers['x-request-id']!, /^req_/);
      assert.notEqual(fast.headers['x-request-id'], slow.headers['x-request-id']);
      return fast;
    }

    it('GET, HEAD and 304 of a hit: the same status, headers and bytes', async () => {
      const url = a.url('w:60,f:webp', fileId);
      const miss = await fetchDelivery(url);
      assert.equal(miss.headers.get('imgapi-cache'), 'miss');
      // Answered before it was stored; in memory once stored.
      await server.services.delivery.stored();
      const hit = await bothPaths(url);
      assert.equal(hit.status, 200);
      assert.equal(hit.headers['imgapi-cache'], 'hit');
      assert.equal(hit.headers['content-type'], 'image/webp');
      assert.equal(Number(hit.headers['content-length']), hit.body.length);
      assert.ok(hit.body.length > 0);
      assert.equal(hit.headers.vary, undefined);
      const head = await bothPaths(url, {}, 'HEAD');
      assert.equal(head.status, 200);
      assert.equal(head.headers['content-length'], hit.headers['content-length']);
      assert.equal(head.body.length, 0);
      const etag = hit.headers.etag!;
      for (const ifNoneMatch of [etag, `"other", ${etag}`, `W/${etag}`, '*']) {
        const notModified = await bothPaths(url, { 'if-none-match': ifNoneMatch });
        assert.equal(notModified.status, 304);
        assert.equal(notModified.headers.etag, etag);
        assert.equal(notModified.body.length, 0);
      }
      assert.equal((await bothPaths(url, { 'if-none-match': '"other"' })).status, 200);
    });

    it('f:auto: Vary: Accept and the format Accept chose, from memory too', async () => {
      const url = a.url('w:50,f:auto', fileId);
      await fetchDelivery(url, { accept: 'image/webp' });
      await server.services.delivery.stored();
      const webp = await bothPaths(url, { accept: 'image/webp' });
      assert.equal(webp.headers['content-type'], 'image/webp');
      assert.equal(webp.headers.vary, 'Accept');
      // Another Accept is another render: a miss, which the memory path leaves to the route.
      const before = memoryHits.count;
      const jpeg = await fetchDelivery(url, { accept: 'image/jpeg' });
      assert.equal(jpeg.headers.get('imgapi-cache'), 'miss');
      assert.equal(jpeg.headers.get('content-type'), 'image/jpeg');
      assert.equal(memoryHits.count, before);
    });

    it('a bad signature, a deleted key and a purged render are left to the route, which refuses them', async () => {
      const url = a.url('w:40', fileId);
      await fetchDelivery(url);
      await server.services.delivery.stored();
      await bothPaths(url);
      const before = memoryHits.count;
      const wrong = url.replace(/\/r\/([^/]+)\/[^/]+\//, `/r/$1/${sign('not-the-secret', `w:40/${fileId}`)}/`);
      const refused = await fetchDelivery(wrong);
      assert.equal(refused.status, 403);
      assert.equal(refused.body.error.code, 'SIGNATURE_INVALID');
      assert.equal(refused.headers.get('cache-control'), 'no-store');
      // A purged render (its file deleted): 404 at once, not the copy in memory.
      const doomed = await a.client.uploadOk(await png(30, 30), 'doomed.png');
      const doomedUrl = a.url('w:20', doomed);
      await fetchDelivery(doomedUrl);
      await server.services.delivery.stored();
      await bothPaths(doomedUrl);
      const afterHits = memoryHits.count;
      assert.equal((await a.client.request('DELETE', `/api/files/${doomed}`)).status, 204);
      const gone = await fetchDelivery(doomedUrl);
      assert.equal(gone.status, 404);
      assert.equal(gone.body.error.code, 'NOT_FOUND');
      assert.equal(memoryHits.count, afterHits);
      // A deleted key: its URLs stop at once, memory or not.
      const second = await a.client.post('/api/signing-keys', {});
      const { keyId, secret } = second.body.data as { keyId: string; secret: string };
      const keyUrl = `${server.url}/r/${keyId}/${sign(secret, `w:40/${fileId}`)}/w:40/${fileId}`;
      assert.equal((await fetchDelivery(keyUrl)).status, 200);
      assert.equal((await overHttp(keyUrl, {}, 'GET')).headers['imgapi-cache'], 'hit');
      assert.equal((await a.client.request('DELETE', `/api/signing-keys/${keyId}`)).status, 204);
      assert.equal((await fetchDelivery(keyUrl)).status, 403);
      assert.ok(memoryHits.count > before);
    });

    it('counts its hits in the same metrics as the route', async () => {
      const url = a.url('w:30', fileId);
      await fetchDelivery(url);
      await server.services.delivery.stored();
      const metricsOf = async () => {
        const text = await (await fetch(`${server.url}/metrics`)).text();
        const hits = Number(/imgapi_renders_total\{outcome="hit"\} (\d+)/.exec(text)?.[1] ?? 0);
        const requests = Number(/http_requests_total\{[^}]*route="\/r\/:keyId\/:signature\/\*"[^}]*status="200"[^}]*\} (\d+)/.exec(text)?.[1] ?? NaN);
        return { hits, requests };
      };
      const first = await metricsOf();
      const sentBefore = sent;
      await bothPaths(url);
      const second = await metricsOf();
      // Each hit, from memory or through the route, counted once (two unless the machine stalled).
      assert.equal(second.hits, first.hits + (sent - sentBefore));
      assert.equal(second.requests, first.requests + (sent - sentBefore));
    });
  });
}

describe('delivery hits from memory: the access-log line', () => {
  it('is the line Fastify writes for the route', async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const server = await startServer({ dialect: 'sqlite', workers: 0, logger: createLogger(loadConfig({ LOG_LEVEL: 'info' }), sink) });
    try {
      const a = await signer(server);
      const fileId = await a.client.uploadOk(await png(40, 40), 'a.png');
      const url = a.url('w:20', fileId);
      await fetchDelivery(url);
      await server.services.delivery.stored();
      const hits = countMemoryHits(server.services.delivery);
      // Until memory answers (the route does, and reads the key again, after a stall past KEY_CACHE_MS).
      for (let attempt = 0; attempt < 5 && hits.count === 0; attempt++) await fetchDelivery(url);
      assert.equal(hits.count, 1);
      const { pathname, host } = new URL(url);
      await server.app.inject({ method: 'GET', url: pathname, headers: { host }, remoteAddress: '127.0.0.1' });
      const [fast, slow] = lines.filter((line) => line.msg === 'request completed' && (line.req as { url: string }).url === pathname).slice(-2);
      assert.ok(fast && slow, 'two access-log lines');
      const shape = (line: Record<string, unknown>) => ({ ...line, time: 0, reqId: 'req', responseTime: 0 });
      assert.deepEqual(shape(fast), shape(slow));
      assert.match(String(fast.reqId), /^req_/);
      assert.equal(typeof fast.responseTime, 'number');
    } finally {
      await server.close();
    }
  });
});
