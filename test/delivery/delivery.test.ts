// Delivery URLs (/r/…) on both databases: signing keys, the signature, the grammar, presets,
// the render cache (miss, hit, 304, purges), single-flight, the quota, origins.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import path from 'node:path';
import sharp from 'sharp';
import { detectFaces } from '../../src/imaging/faces.js';
import { simplePdf } from '../documents/pdf-fixtures.js';
import { DIALECTS, REPO_ROOT, startServer, type TestServer } from '../helpers.js';
import { sweepExpiredRenders } from '../../src/delivery/render-cache.js';
import { findSigningKey } from '../../src/delivery/signing-keys.js';
import { fileIsLive } from '../../src/files/files.js';
import { jxlHeader } from '../../src/imaging/decoders/jxl.js';
import { sniff } from '../../src/imaging/sniff.js';
import { fetchDelivery, png, rawGet, sign, signer, sizeOf, startOrigin, type Origin, type Signer } from './helpers.js';

const renderRows = (server: TestServer) => server.services.delivery.cache.totalBytes();

for (const dialect of DIALECTS) {
  describe(`delivery URLs (${dialect})`, () => {
    let server: TestServer;
    let a: Signer;
    let fileId: string;
    let alphaId: string;
    let origin: Origin;

    before(async () => {
      server = await startServer({
        dialect,
        workers: 0,
        env: { ORIGIN_ALLOW_PRIVATE_NETWORKS: '1', ORIGIN_TIMEOUT_SECONDS: '1', ORIGIN_CACHE_SECONDS: '0' },
        plans: { pro: { maxFileBytes: 200_000 } },
      });
      a = await signer(server);
      fileId = await a.client.uploadOk(await png(120, 80), 'a.png');
      alphaId = await a.client.uploadOk(await png(40, 40, true), 'alpha.png');
      origin = await startOrigin(await png(64, 48), 200_000);
    });
    after(async () => {
      await origin?.close();
      await server?.close();
    });

    it('signing keys: created with a secret shown once, listed without it, deleted', async () => {
      const created = await a.client.post('/api/signing-keys', {});
      assert.equal(created.status, 201);
      assert.match(created.body.data.keyId, /^sk_/);
      assert.match(created.body.data.secret, /^[A-Za-z0-9_-]{43}$/);
      const list = await a.client.get('/api/signing-keys');
      assert.equal(list.status, 200);
      assert.ok(list.body.data.signingKeys.some((k: { keyId: string }) => k.keyId === created.body.data.keyId));
      assert.ok(list.body.data.signingKeys.every((k: object) => !('secret' in k)));
      assert.equal((await a.client.request('DELETE', `/api/signing-keys/${created.body.data.keyId}`)).status, 204);
      assert.equal((await a.client.request('DELETE', `/api/signing-keys/${created.body.data.keyId}`)).status, 404);
      // An Idempotency-Key makes a repeat answer the first key, not a second one.
      const once = await a.client.post('/api/signing-keys', {}, { 'idempotency-key': 'key-once' });
      const twice = await a.client.post('/api/signing-keys', {}, { 'idempotency-key': 'key-once' });
      assert.equal(twice.body.data.keyId, once.body.data.keyId);
    });

    it('a miss renders and stores, a hit serves the stored render; ETag → 304; HEAD', async () => {
      const url = a.url('w:60', fileId);
      const first = await a.get(url);
      assert.equal(first.status, 200);
      assert.equal(first.headers.get('imgapi-cache'), 'miss');
      assert.equal(first.headers.get('content-type'), 'image/png');
      assert.equal(first.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.equal(first.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(Number(first.headers.get('content-length')), first.body.length);
      assert.deepEqual(await sizeOf(first.body), { width: 60, height: 40, format: 'png' });
      const etag = first.headers.get('etag')!;
      assert.match(etag, /^"[0-9a-f]{32}"$/);
      const second = await a.get(url);
      assert.equal(second.headers.get('imgapi-cache'), 'hit');
      assert.deepEqual(second.body, first.body);
      assert.equal(second.headers.get('etag'), etag);
      for (const ifNoneMatch of [etag, `"other", ${etag}`, `W/${etag}`, '*']) {
        const notModified = await a.get(url, { 'if-none-match': ifNoneMatch });
        assert.equal(notModified.status, 304, ifNoneMatch);
        assert.equal(notModified.headers.get('etag'), etag);
      }
      assert.equal((await a.get(url, { 'if-none-match': '"other"' })).status, 200);
      // The transform as sent is signed; percent-encoded, it reads the same.
      const encoded = await a.get(a.url('w%3A60', fileId));
      assert.equal(encoded.status, 200);
      assert.equal(encoded.headers.get('etag'), etag);
      const head = await a.get(url, {}, 'HEAD');
      assert.equal(head.status, 200);
      assert.equal(Number(head.headers.get('content-length')), first.body.length);
      // Renders by outcome (the hit ratio is hit / (hit + miss)), their time, the cache's bytes.
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(metrics, /imgapi_renders_total\{outcome="hit"\} [1-9]/);
      assert.match(metrics, /imgapi_renders_total\{outcome="miss"\} [1-9]/);
      assert.match(metrics, /imgapi_render_duration_seconds_count [1-9]/);
      assert.match(metrics, /imgapi_render_cache_bytes [1-9]/);
    });

    it('the signature: wrong, missing, tampered, unknown key, deleted key, another account → 403 or 404, no-store, no image headers', async () => {
      const good = a.url('w:50', fileId);
      const wrong = good.replace(/\/r\/([^/]+)\/[^/]+\//, `/r/$1/${sign('not-the-secret', `w:50/${fileId}`)}/`);
      const tampered = good.replace('/w:50/', '/w:51/');
      const missing = `${server.url}/r/${a.keyId}//w:50/${fileId}`;
      const unknown = `${server.url}/r/sk_unknown/${sign(a.secret, `w:50/${fileId}`)}/w:50/${fileId}`;
      for (const url of [wrong, tampered, missing, unknown]) {
        const response = await a.get(url);
        assert.equal(response.status, 403, url);
        assert.equal(response.body.error.code, 'SIGNATURE_INVALID');
        assert.equal(response.headers.get('cache-control'), 'no-store');
        assert.equal(response.headers.get('etag'), null);
        assert.equal(response.headers.get('imgapi-cache'), null);
      }
      // Another account's key signs correctly, but the file is not its own: 404, as for a missing one.
      const b = await signer(server);
      const other = await b.get(b.url('w:50', fileId));
      assert.equal(other.status, 404);
      assert.equal(other.body.error.code, 'NOT_FOUND');
      // A deleted key: its URLs stop at once in this process.
      const second = await a.client.post('/api/signing-keys', {});
      const { keyId, secret } = second.body.data;
      const url = `${server.url}/r/${keyId}/${sign(secret, `w:50/${fileId}`)}/w:50/${fileId}`;
      assert.equal((await a.get(url)).status, 200);
      assert.equal((await a.client.request('DELETE', `/api/signing-keys/${keyId}`)).status, 204);
      assert.equal((await a.get(url)).status, 403);
    });

    it('f:jxl renders JPEG XL that libjxl reads; f:jpg is f:jpeg, one render', async () => {
      const jxl = await a.get(a.url('w:40,f:jxl', fileId));
      assert.equal(jxl.status, 200, JSON.stringify(jxl.body?.error ?? ''));
      assert.equal(jxl.headers.get('content-type'), 'image/jxl');
      assert.deepEqual(sniff(jxl.body), { format: 'jxl', mimeType: 'image/jxl' });
      const { width, height } = jxlHeader(jxl.body);
      assert.deepEqual([width, height], [40, 27]);
      const jpeg = await a.get(a.url('w:40,f:jpeg', fileId));
      const jpg = await a.get(a.url('w:40,f:jpg', fileId));
      assert.equal(jpg.status, 200);
      assert.equal(jpg.headers.get('content-type'), 'image/jpeg');
      assert.equal(jpg.headers.get('imgapi-cache'), 'hit', 'f:jpg is the render f:jpeg made');
      assert.equal(jpg.headers.get('etag'), jpeg.headers.get('etag'));
    });

    it('a PDF source renders its page (page:N, default 1) at the size asked; a page past the end is 400 naming page', async () => {
      // Three 200 × 100 pt pages, a blue square on each.
      const pdfId = await a.client.uploadOk(simplePdf({ pages: 3, mediaBox: [200, 100] }), 'doc.pdf');
      const second = await a.get(a.url('w:100,page:2', pdfId));
      assert.equal(second.status, 200, JSON.stringify(second.body?.error ?? ''));
      assert.deepEqual(await sizeOf(second.body), { width: 100, height: 50, format: 'png' });
      const first = await a.get(a.url('-', pdfId));
      assert.equal(first.status, 200);
      assert.deepEqual(await sizeOf(first.body), { width: 1024, height: 512, format: 'png' });
      const past = await a.get(a.url('w:100,page:4', pdfId));
      assert.equal(past.status, 400);
      assert.equal(past.body.error.details.fields[0].field, 'page');
    });

    it('every pair: valid values render, bad ones are 400 naming the pair', async () => {
      const valid: [string, { width: number; height: number; format?: string }][] = [
        ['-', { width: 120, height: 80, format: 'png' }],
        ['h:40', { width: 60, height: 40 }],
        ['w:30,h:30,fit:cover,g:north', { width: 30, height: 30 }],
        ['w:30,h:30,fit:cover,g:attention', { width: 30, height: 30 }],
        ['w:30,h:30,fit:contain,bg:ff0000', { width: 30, height: 30 }],
        ['w:30,h:30,fit:fill', { width: 30, height: 30 }],
        ['w:30,h:30,fit:outside', { width: 45, height: 30 }],
        ['w:25,dpr:2', { width: 50, height: 33 }],
        ['w:20,dpr:1.5', { width: 30, height: 20 }],
        ['f:webp,q:50', { width: 120, height: 80, format: 'webp' }],
        ['f:jpeg,w:40', { width: 40, height: 27, format: 'jpeg' }],
        ['f:gif,w:40', { width: 40, height: 27, format: 'gif' }],
        ['f:avif,w:40', { width: 40, height: 27, format: 'heif' }],
        ['rot:90', { width: 80, height: 120 }],
        ['rot:180,flip:hv', { width: 120, height: 80 }],
        ['flip:h,blur:2,sharpen:1', { width: 120, height: 80 }],
        ['w:40,f:jpeg,bg:00ff00ff', { width: 40, height: 27, format: 'jpeg' }],
      ];
      for (const [transform, expected] of valid) {
        const response = await a.get(a.url(transform, fileId));
        assert.equal(response.status, 200, `${transform}: ${JSON.stringify(response.body?.error ?? '')}`);
        const size = await sizeOf(response.body);
        assert.equal(size.width, expected.width, transform);
        assert.equal(size.height, expected.height, transform);
        if (expected.format) assert.equal(size.format, expected.format, transform);
      }
      const invalid: [string, string][] = [
        ['w:0', 'w'],
        ['w:4097', 'w'],
        ['w:abc', 'w'],
        ['h:-1', 'h'],
        ['fit:stretch', 'fit'],
        ['g:up', 'g'],
        ['g:face', 'g'],
        ['g:entropy', 'g'],
        ['dpr:0.5', 'dpr'],
        ['dpr:5', 'dpr'],
        ['f:bmp', 'f'],
        ['q:0', 'q'],
        ['q:101', 'q'],
        ['bg:fff', 'bg'],
        ['bg:zzzzzz', 'bg'],
        ['rot:45', 'rot'],
        ['flip:x', 'flip'],
        ['blur:0.1', 'blur'],
        ['blur:1001', 'blur'],
        ['sharpen:11', 'sharpen'],
        ['page:0', 'page'],
        ['page:1', 'page'],
        ['p:UPPER', 'p'],
        ['p:nope', 'p'],
        ['zoom:2', 'zoom'],
        ['w', 'w'],
        ['w:10,w:20', 'w'],
        ['w:2049,dpr:2', 'w'],
        ['w:3000,fit:outside,h:3000', 'w'],
      ];
      for (const [transform, field] of invalid) {
        const response = await a.get(a.url(transform, fileId));
        assert.equal(response.status, 400, transform);
        assert.equal(response.body.error.code, 'VALIDATION_ERROR', transform);
        assert.equal(response.body.error.details.fields[0].field, field, transform);
        assert.equal(response.headers.get('cache-control'), 'no-store');
      }
      const faceMessage = (await a.get(a.url('g:face', fileId))).body.error.message;
      assert.match(faceMessage, /needs fit:cover/);
    });

    it('g:face with fit:cover renders a crop centred on the faces (a real photo of three people)', async () => {
      const photo = await a.client.uploadOk(path.join(REPO_ROOT, 'node_modules/@vladmandic/face-api/demo/sample1.jpg'));
      const response = await a.get(a.url('w:200,h:400,fit:cover,g:face,f:png', photo));
      assert.equal(response.status, 200, JSON.stringify(response.body?.error ?? ''));
      const size = await sizeOf(response.body);
      assert.deepEqual([size.width, size.height], [200, 400]);
      const faces = await detectFaces(sharp(response.body), { width: 200, height: 400 });
      assert.ok(faces.length >= 1, 'no face in the g:face render');
    });

    it('f:auto: AVIF, WebP, then JPEG or PNG (alpha) by Accept, with Vary: Accept', async () => {
      const cases: [string, string, string][] = [
        ['image/avif,image/webp,*/*', fileId, 'image/avif'],
        ['image/webp,*/*', fileId, 'image/webp'],
        ['image/avif;q=0,image/webp', fileId, 'image/webp'],
        ['*/*', fileId, 'image/jpeg'],
        ['*/*', alphaId, 'image/png'],
      ];
      for (const [accept, source, type] of cases) {
        const response = await a.get(a.url('w:20,f:auto', source), { accept });
        assert.equal(response.status, 200);
        assert.equal(response.headers.get('content-type'), type, accept);
        assert.equal(response.headers.get('vary'), 'Accept');
      }
      assert.equal((await a.get(a.url('w:20', fileId))).headers.get('vary'), null);
    });

    it('presets: p:name expanded (pairs after it override), `_` only for a public preset alone, PUT and DELETE purge', async () => {
      assert.equal((await a.client.post('/api/presets', { name: 'thumb', transform: 'w:40,f:webp', public: true })).status, 201);
      assert.equal((await a.client.post('/api/presets', { name: 'private', transform: 'w:30' })).status, 201);
      assert.equal((await a.client.post('/api/presets', { name: 'thumb', transform: 'w:10' })).status, 400);
      assert.equal((await a.client.post('/api/presets', { name: 'bad', transform: 'w:0' })).status, 400);
      assert.equal((await a.client.post('/api/presets', { name: 'nest', transform: 'p:thumb' })).status, 400);
      const listed = await a.client.get('/api/presets');
      assert.deepEqual(
        listed.body.data.presets.map((p: { name: string; transform: string; public: boolean }) => [p.name, p.transform, p.public]),
        [
          ['private', 'w:30', false],
          ['thumb', 'w:40,f:webp', true],
        ],
      );
      const viaPreset = await a.get(a.url('p:thumb', fileId));
      assert.equal(viaPreset.headers.get('content-type'), 'image/webp');
      assert.equal((await sizeOf(viaPreset.body)).width, 40);
      const overridden = await a.get(a.url('p:thumb,w:20', fileId));
      assert.equal((await sizeOf(overridden.body)).width, 20);
      const before = await a.get(a.url('w:20,p:thumb', fileId));
      assert.equal((await sizeOf(before.body)).width, 40);
      // Unsigned: a public preset as the whole transform, nothing else.
      const unsigned = await a.get(`${server.url}/r/${a.keyId}/_/p:thumb/${fileId}`);
      assert.equal(unsigned.status, 200);
      assert.equal(unsigned.headers.get('imgapi-cache'), 'hit');
      for (const transform of ['p:private', 'p:thumb,w:20', 'w:40,f:webp', 'p:none']) {
        assert.equal((await a.get(`${server.url}/r/${a.keyId}/_/${transform}/${fileId}`)).status, 403, transform);
      }
      // A change makes the old renders unreachable (and deletes them).
      await server.services.delivery.stored();
      const stored = await renderRows(server);
      const changed = await a.client.request('PUT', '/api/presets/thumb', { json: { transform: 'w:55' } });
      assert.equal(changed.status, 200);
      assert.equal(changed.body.data.public, true);
      assert.ok((await renderRows(server)) < stored);
      const after = await a.get(`${server.url}/r/${a.keyId}/_/p:thumb/${fileId}`);
      assert.equal(after.headers.get('imgapi-cache'), 'miss');
      assert.equal((await sizeOf(after.body)).width, 55);
      assert.equal((await a.client.request('PUT', '/api/presets/none', { json: { transform: 'w:50' } })).status, 404);
      assert.equal((await a.client.request('DELETE', '/api/presets/thumb')).status, 204);
      assert.equal((await a.get(a.url('p:thumb', fileId))).status, 400);
      assert.equal((await a.get(`${server.url}/r/${a.keyId}/_/p:thumb/${fileId}`)).status, 403);
    });

    it('deleting a file purges its renders; its URLs answer 404', async () => {
      const doomed = await a.client.uploadOk(await png(30, 30), 'doomed.png');
      assert.equal((await a.get(a.url('w:10', doomed))).status, 200);
      assert.equal((await a.get(a.url('w:12', doomed))).status, 200);
      // Kept in memory too: a hit reads no file, and the purge still stops it at once.
      assert.equal((await a.get(a.url('w:10', doomed))).headers.get('imgapi-cache'), 'hit');
      await server.services.delivery.stored();
      const before = await renderRows(server);
      assert.equal((await a.client.request('DELETE', `/api/files/${doomed}`)).status, 204);
      assert.ok((await renderRows(server)) < before);
      const gone = await a.get(a.url('w:10', doomed));
      assert.equal(gone.status, 404);
      // An expired file's renders are not served (404, as the file) and the retention sweep deletes them.
      const expiring = await a.client.uploadOk(await png(30, 30), 'expiring.png');
      assert.equal((await a.get(a.url('w:11', expiring))).status, 200);
      await server.services.delivery.stored();
      const kept = await renderRows(server);
      const later = Date.now() + 400 * 86_400_000;
      assert.ok((await sweepExpiredRenders(server.services.database, server.services.storage, later)) >= 1);
      assert.ok((await renderRows(server)) < kept);
    });

    it('a render whose file was deleted while it rendered is not kept: its row is written only while the file is live', async () => {
      const { database, storage, delivery } = server.services;
      const accountId = (await findSigningKey(database, a.keyId))!.accountId;
      const raced = await a.client.uploadOk(await png(30, 30), 'raced.png');
      const render = (key: string) => ({
        key,
        accountId,
        source: `file:${raced}`,
        preset: undefined,
        contentType: 'image/png',
        etag: key,
        data: Buffer.from('a render'),
        expiresAt: null,
      });
      const live = () => fileIsLive(database, accountId, raced, Date.now());
      assert.ok(await delivery.cache.store(render(`raced-kept-${dialect}`), Date.now(), live()));
      assert.equal((await a.client.request('DELETE', `/api/files/${raced}`)).status, 204);
      // The store that lost the race to the deletion (and to its purge).
      assert.equal(await delivery.cache.store(render(`raced-late-${dialect}`), Date.now(), live()), undefined);
      assert.equal(await delivery.cache.lookup(`raced-late-${dialect}`, Date.now()), undefined);
      await assert.rejects(storage.get(`renders/raced-late-${dialect}`));
      assert.equal(await delivery.cache.lookup(`raced-kept-${dialect}`, Date.now()), undefined, 'purged with its file');
    });

    it('concurrent misses of one render make it once and charge once; hits are free', async () => {
      const usage = async () => (await a.client.get('/api/account')).body.data.usage.monthlyRenders.used as number;
      const start = await usage();
      const url = a.url('w:33,f:webp', fileId);
      const answers = await Promise.all(Array.from({ length: 6 }, () => a.get(url)));
      assert.ok(answers.every((r) => r.status === 200));
      assert.ok(answers.every((r) => r.headers.get('etag') === answers[0]!.headers.get('etag')));
      assert.equal(await usage(), start + 1);
      await a.get(url);
      assert.equal(await usage(), start + 1);
      const account = (await a.client.get('/api/account')).body.data;
      assert.equal(account.limits.monthlyRenders, 100_000);
      assert.equal(account.limits.origins, 5);
      assert.equal(account.usage.monthlyRenders.limit, 100_000);
    });

    it('origins: created and listed; fetched, kept, revalidated; 404, 500, redirect, hang, HTML, too large, .., unknown', async () => {
      const created = await a.client.post('/api/origins', { name: 'shop', baseUrl: `${origin.url}/` });
      assert.equal(created.status, 201);
      assert.equal(created.body.data.baseUrl, origin.url);
      assert.equal((await a.client.post('/api/origins', { name: 'shop', baseUrl: origin.url })).status, 400);
      assert.equal((await a.client.post('/api/origins', { name: 'Bad_Name', baseUrl: origin.url })).status, 400);
      assert.equal((await a.client.post('/api/origins', { name: 'ftp', baseUrl: 'ftp://example.com' })).status, 400);
      const listed = await a.client.get('/api/origins');
      assert.equal(listed.body.data.limit, 5);
      assert.deepEqual(
        listed.body.data.origins.map((o: { name: string }) => o.name),
        ['shop'],
      );

      const ok = await a.get(a.url('w:32', 'o/shop/ok.png'));
      assert.equal(ok.status, 200, JSON.stringify(ok.body?.error));
      assert.deepEqual(await sizeOf(ok.body), { width: 32, height: 24, format: 'png' });
      // ORIGIN_CACHE_SECONDS=0: the next request revalidates with the ETag; a 304 keeps the object and the render.
      const again = await a.get(a.url('w:32', 'o/shop/ok.png'));
      assert.equal(again.headers.get('imgapi-cache'), 'hit');
      assert.equal(origin.seen.filter((s) => s.path === '/ok.png').at(-1)?.ifNoneMatch, '"v1"');
      assert.equal((await a.get(a.url('-', 'o/shop/dir/a%20b.png'))).status, 200);
      assert.match(await (await fetch(`${server.url}/metrics`)).text(), /imgapi_origin_fetch_duration_seconds_count\{outcome="revalidated"\} [1-9]/);

      const expect = async (source: string, status: number, code: string) => {
        const started = Date.now();
        const response = await a.get(a.url('w:10', source));
        assert.equal(response.status, status, `${source}: ${JSON.stringify(response.body?.error)}`);
        assert.equal(response.body.error.code, code, source);
        assert.equal(response.headers.get('cache-control'), 'no-store');
        return Date.now() - started;
      };
      await expect('o/shop/missing', 404, 'NOT_FOUND');
      await expect('o/shop/broken', 502, 'ORIGIN_FAILED');
      await expect('o/shop/moved', 502, 'ORIGIN_FAILED');
      const hung = await expect('o/shop/hang', 502, 'ORIGIN_FAILED');
      assert.ok(hung < 5000, `a hanging origin is given up after ORIGIN_TIMEOUT_SECONDS (took ${hung} ms)`);
      await expect('o/shop/page.html', 415, 'UNSUPPORTED_MEDIA_TYPE');
      await expect('o/shop/huge', 502, 'ORIGIN_FAILED');
      // Sent as written (fetch would resolve the `..` before sending).
      for (const source of ['o/shop/../secret', 'o/shop/a/%2e%2e/b', 'o/shop/a/%2E./b', 'o/shop/a%2f..%2fb']) {
        const dotted = await rawGet(a.url('w:10', source));
        assert.equal(dotted.status, 400, source);
        assert.equal(JSON.parse(dotted.body).error.details.fields[0].field, 'source');
      }
      await expect('o/nowhere/ok.png', 404, 'NOT_FOUND');
      assert.ok(!origin.seen.some((s) => s.path.includes('..') || s.path.includes('secret')));

      // Deleting the origin purges its renders: its URLs answer 404.
      await server.services.delivery.stored();
      const before = await renderRows(server);
      assert.equal((await a.client.request('DELETE', '/api/origins/shop')).status, 204);
      assert.ok((await renderRows(server)) < before);
      await expect('o/shop/ok.png', 404, 'NOT_FOUND');
    });

    it('the plan caps origins: 403 ORIGIN_LIMIT_EXCEEDED', async () => {
      const c = await signer(server);
      for (let i = 0; i < 5; i++) assert.equal((await c.client.post('/api/origins', { name: `o${i}`, baseUrl: origin.url })).status, 201);
      const refused = await c.client.post('/api/origins', { name: 'o5', baseUrl: origin.url });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.error.code, 'ORIGIN_LIMIT_EXCEEDED');
    });
  });

  describe(`delivery URLs: the monthly render quota (${dialect})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ dialect, workers: 0, env: { RENDER_CONCURRENCY: '4' }, plans: { pro: { monthlyRenders: 5 } } });
    });
    after(async () => server?.close());

    it('12 concurrent distinct misses at a quota of 5: exactly 5 render, 7 are 429; hits stay free', async () => {
      const a = await signer(server);
      const fileId = await a.client.uploadOk(await png(64, 64), 'q.png');
      const urls = Array.from({ length: 12 }, (_, i) => a.url(`w:${10 + i}`, fileId));
      const answers = await Promise.all(urls.map((url) => fetchDelivery(url)));
      const ok = answers.filter((r) => r.status === 200);
      const refused = answers.filter((r) => r.status === 429);
      assert.equal(ok.length, 5);
      assert.equal(refused.length, 7);
      for (const r of refused) {
        assert.equal(r.body.error.code, 'RENDER_QUOTA_EXCEEDED');
        assert.equal(r.body.error.details.limit, 5);
      }
      const served = urls[answers.findIndex((r) => r.status === 200)]!;
      const hit = await fetchDelivery(served);
      assert.equal(hit.status, 200);
      assert.equal(hit.headers.get('imgapi-cache'), 'hit');
      const usage = (await a.client.get('/api/account')).body.data.usage.monthlyRenders;
      assert.equal(usage.used, 5);
      assert.equal(usage.limit, 5);
    });

    it('without ORIGIN_ALLOW_PRIVATE_NETWORKS a loopback origin is refused', async () => {
      const a = await signer(server);
      const refused = await a.client.post('/api/origins', { name: 'local', baseUrl: 'http://127.0.0.1:9/images' });
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.details.fields[0].field, 'baseUrl');
    });
  });
}
