// The render cache on both storages (local disk, S3 through s3rver) and both databases: miss,
// hit, 304; renders and fetched origin objects under their own prefixes; least-recently-used
// eviction under RENDER_CACHE_MAX_BYTES; purges delete the objects; a row whose object went
// renders again; an object no row names (a store cut between the two) is swept once an hour old.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { DIALECTS, startServer, type TestServer } from '../helpers.js';
import { startS3rver, type S3Server } from '../s3rver.js';
import type { ObjectStorage } from '../../src/storage/storage.js';
import { sweepOrphanedRenders } from '../../src/delivery/render-cache.js';
import { fetchDelivery, png, signer, startOrigin, type Origin } from './helpers.js';

/** Noise compresses badly: renders of a predictable size. */
const noise = (side: number) =>
  sharp(Buffer.from(Array.from({ length: side * side * 3 }, (_, i) => (i * 7919) % 251)), { raw: { width: side, height: side, channels: 3 } })
    .png()
    .toBuffer();

const STORAGES = ['local', 's3'] as const;

/** Holds the storage's writes of renders until released: `started` once one is waiting. */
function holdRenderStores(storage: ObjectStorage): { started: Promise<void>; release(): void } {
  const put = storage.put;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const waiting = new Promise<void>((resolve) => (started = resolve));
  storage.put = async function (this: ObjectStorage, key, body) {
    if (key.startsWith('renders/')) {
      started();
      await released;
    }
    return put.call(this, key, body);
  };
  return {
    started: waiting,
    release() {
      storage.put = put;
      release();
    },
  };
}

for (const storage of STORAGES) {
  for (const dialect of DIALECTS) {
    describe(`the render cache (${storage} storage, ${dialect})`, () => {
      let server: TestServer;
      let s3: S3Server | undefined;
      let origin: Origin;
      const CAP = 25_000;

      before(async () => {
        s3 = storage === 's3' ? await startS3rver() : undefined;
        server = await startServer({
          dialect,
          workers: 0,
          // No renders in memory: these tests are about the stored ones.
          env: {
            ...(s3?.env ?? {}),
            RENDER_CACHE_MAX_BYTES: String(CAP),
            RENDER_MEMORY_CACHE_BYTES: '0',
            ORIGIN_ALLOW_PRIVATE_NETWORKS: '1',
            ORIGIN_CACHE_SECONDS: '0',
          },
        });
        origin = await startOrigin(await png(40, 30), 1_000_000);
      });
      after(async () => {
        await origin?.close();
        await server?.close();
        await s3?.stop();
      });

      /** Keys under `prefix/` in the storage. */
      const keys = async (prefix: string): Promise<string[]> => {
        if (s3) return (await s3.listKeys(`${prefix}/`)).map((key) => key.slice(prefix.length + 1));
        return (await server.services.storage.list!(prefix)).map((key) => key.split('/').at(-1)!);
      };

      it('miss, hit, 304; the render is stored under renders/ and is nobody’s storageBytes', async () => {
        const a = await signer(server);
        const fileId = await a.client.uploadOk(await png(50, 50), 'a.png');
        const storageBefore = (await a.client.get('/api/account')).body.data.usage.storageBytes.used;
        const url = a.url('w:25', fileId);
        const miss = await fetchDelivery(url);
        assert.equal(miss.headers.get('imgapi-cache'), 'miss');
        // Answered before it was stored.
        await server.services.delivery.stored();
        const hit = await fetchDelivery(url);
        assert.equal(hit.headers.get('imgapi-cache'), 'hit');
        assert.deepEqual(hit.body, miss.body);
        assert.equal((await fetchDelivery(url, { 'if-none-match': hit.headers.get('etag')! })).status, 304);
        assert.ok((await keys('renders')).length >= 1);
        assert.equal((await a.client.get('/api/account')).body.data.usage.storageBytes.used, storageBefore);
        // Deleting the file deletes its render objects too.
        const before = (await keys('renders')).length;
        assert.equal((await a.client.request('DELETE', `/api/files/${fileId}`)).status, 204);
        assert.equal((await keys('renders')).length, before - 1);
      });

      it('a miss is answered before its render is stored; asked again meanwhile, a hit (one charge); a file deleted before the store leaves no entry', async () => {
        const a = await signer(server);
        const { storage, database, delivery } = server.services;
        const used = async () => (await a.client.get('/api/account')).body.data.usage.monthlyRenders.used as number;
        const rowsOf = (etag: string) => database.db.selectFrom('render_cache').select('key').where('etag', '=', etag).execute();
        const objectsOf = async (etag: string) => (await keys('renders')).filter((key) => key.startsWith(etag));

        const kept = await a.client.uploadOk(await png(40, 40), 'kept.png');
        let held = holdRenderStores(storage);
        // With the store held, the answer comes (it used to wait for the store).
        const miss = await fetchDelivery(a.url('w:21', kept));
        assert.equal(miss.status, 200);
        assert.equal(miss.headers.get('imgapi-cache'), 'miss');
        await held.started;
        const etag = miss.headers.get('etag')!.slice(1, -1);
        assert.deepEqual(await rowsOf(etag), []);
        const again = await fetchDelivery(a.url('w:21', kept));
        assert.equal(again.headers.get('imgapi-cache'), 'hit');
        assert.deepEqual(again.body, miss.body);
        assert.equal(await used(), 1);
        held.release();
        await delivery.stored();
        assert.equal((await rowsOf(etag)).length, 1);
        assert.equal((await objectsOf(etag)).length, 1);
        assert.equal((await fetchDelivery(a.url('w:21', kept))).headers.get('imgapi-cache'), 'hit');

        // The file is deleted (and its renders purged) after the answer, before the store: nothing is kept.
        const doomed = await a.client.uploadOk(await png(40, 40), 'doomed.png');
        held = holdRenderStores(storage);
        const late = await fetchDelivery(a.url('w:22', doomed));
        assert.equal(late.status, 200);
        await held.started;
        assert.equal((await a.client.request('DELETE', `/api/files/${doomed}`)).status, 204);
        held.release();
        await delivery.stored();
        const lateEtag = late.headers.get('etag')!.slice(1, -1);
        assert.deepEqual(await rowsOf(lateEtag), []);
        assert.deepEqual(await objectsOf(lateEtag), []);
        assert.equal((await fetchDelivery(a.url('w:22', doomed))).status, 404);
        assert.equal(await used(), 2);
      });

      it('origin objects are kept under origin-objects/ and deleted with their origin', async () => {
        const a = await signer(server);
        assert.equal((await a.client.post('/api/origins', { name: 'cdn', baseUrl: origin.url })).status, 201);
        assert.equal((await fetchDelivery(a.url('w:20', 'o/cdn/ok.png'))).status, 200);
        await server.services.delivery.stored();
        assert.equal((await fetchDelivery(a.url('w:20', 'o/cdn/ok.png'))).headers.get('imgapi-cache'), 'hit');
        const kept = await (s3 ? s3.listKeys('origin-objects/') : server.services.storage.list!('origin-objects'));
        assert.equal(kept.length, 1);
        assert.equal((await a.client.request('DELETE', '/api/origins/cdn')).status, 204);
        const left = s3 ? await s3.listKeys('origin-objects/') : await server.services.storage.list!('origin-objects').catch(() => []);
        assert.deepEqual(
          left.filter((k) => !k.endsWith('/')),
          [],
        );
      });

      it('past RENDER_CACHE_MAX_BYTES the least recently used renders go, rows and objects', async () => {
        const a = await signer(server);
        const fileId = await a.client.uploadOk(await noise(60), 'noise.png');
        const made: { etag: string; bytes: number }[] = [];
        for (const side of [58, 56, 54, 52]) {
          const response = await fetchDelivery(a.url(`w:${side}`, fileId));
          assert.equal(response.status, 200);
          made.push({ etag: response.headers.get('etag')!, bytes: response.body.length });
        }
        assert.ok(made.reduce((sum, r) => sum + r.bytes, 0) > CAP, `the renders (${made.map((r) => r.bytes).join(', ')} bytes) pass the cap`);
        await server.services.delivery.stored();
        const total = await server.services.delivery.cache.totalBytes();
        assert.ok(total <= CAP, `${total} bytes kept, cap ${CAP}`);
        // The newest is kept, the oldest went: asking for it again is a miss.
        assert.equal((await fetchDelivery(a.url('w:52', fileId))).headers.get('imgapi-cache'), 'hit');
        assert.equal((await fetchDelivery(a.url('w:58', fileId))).headers.get('imgapi-cache'), 'miss');
        const stored = await keys('renders');
        assert.ok(stored.length <= Math.floor(CAP / Math.min(...made.map((r) => r.bytes))));
      });

      it('an object under renders/ that no entry names (a store cut between object and entry) is swept once an hour old; entries keep theirs', async () => {
        const a = await signer(server);
        const { storage, database, maintenance } = server.services;
        const fileId = await a.client.uploadOk(await png(30, 30), 'kept.png');
        const url = a.url('w:14', fileId);
        assert.equal((await fetchDelivery(url)).headers.get('imgapi-cache'), 'miss');
        await server.services.delivery.stored();
        const entries = new Set((await database.db.selectFrom('render_cache').select('key').execute()).map((row) => row.key));
        const orphan = 'ab'.repeat(32);
        await storage.put(`renders/${orphan}`, Readable.from([Buffer.from('a render whose entry was never written')]));

        // Under an hour old it may be a store under way: kept.
        assert.equal(await sweepOrphanedRenders(database, storage, Date.now()), 0);
        assert.ok((await keys('renders')).includes(orphan));
        // An hour on, it goes; every entry's object stays, and is still served.
        assert.equal(await sweepOrphanedRenders(database, storage, Date.now() + 61 * 60_000), 1);
        const left = await keys('renders');
        assert.ok(!left.includes(orphan));
        for (const key of left) assert.ok(entries.has(key), `${key} has an entry`);
        assert.equal((await fetchDelivery(url)).headers.get('imgapi-cache'), 'hit');

        if (storage.localPath) {
          // The maintenance tick runs it (S3's objects cannot be made older than they are).
          const old = `${'cd'.repeat(32)}`;
          await storage.put(`renders/${old}`, Readable.from([Buffer.from('left over')]));
          const hoursAgo = new Date(Date.now() - 2 * 60 * 60_000);
          await fs.promises.utimes(storage.localPath(`renders/${old}`), hoursAgo, hoursAgo);
          await maintenance.tick(true);
          assert.ok(!(await keys('renders')).includes(old));
          assert.equal((await fetchDelivery(url)).headers.get('imgapi-cache'), 'hit');
        }
      });

      it('a row whose object went (evicted or purged by another process) renders again, never a 5xx', async () => {
        const a = await signer(server);
        const fileId = await a.client.uploadOk(await png(30, 30), 'b.png');
        const url = a.url('w:15', fileId);
        assert.equal((await fetchDelivery(url)).headers.get('imgapi-cache'), 'miss');
        await server.services.delivery.stored();
        for (const key of await keys('renders')) await server.services.storage.delete(`renders/${key}`);
        const again = await fetchDelivery(url);
        assert.equal(again.status, 200);
        assert.equal(again.headers.get('imgapi-cache'), 'miss');
      });
    });
  }
}
