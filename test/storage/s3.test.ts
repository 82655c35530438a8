// The storage port, one suite for both adapters: the local directory and S3 (against s3rver,
// started here in a child process on a loopback port). Every round trip is checked byte for byte.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { LocalStorage } from '../../src/storage/local.js';
import { S3Storage } from '../../src/storage/s3.js';
import { isObjectNotFound, type ObjectStorage } from '../../src/storage/storage.js';
import { sleep, tempDir } from '../helpers.js';
import { startS3rver, type S3Server } from '../s3rver.js';

const MiB = 1024 * 1024;

/** `size` random bytes (`label` only names them in failure messages). */
const bytes = (size: number, _label: string): Buffer => crypto.randomBytes(size);

/** A stream of `data` in chunks of odd sizes, as a network would deliver it. */
function chunked(data: Buffer, chunk = 65_521): Readable {
  return Readable.from(
    (function* () {
      for (let offset = 0; offset < data.length; offset += chunk) yield data.subarray(offset, offset + chunk);
    })(),
  );
}

async function read(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const sha = (data: Buffer) => crypto.createHash('sha256').update(data).digest('hex');

interface Adapter {
  name: string;
  setup(): Promise<{ storage: ObjectStorage; s3?: S3Server; cleanup(): Promise<void> }>;
}

const ADAPTERS: Adapter[] = [
  {
    name: 'local',
    async setup() {
      const dir = tempDir('imgapi-storage-');
      return { storage: new LocalStorage(dir), cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 's3',
    async setup() {
      const s3 = await startS3rver();
      const storage = new S3Storage(s3.storageConfig);
      return {
        storage,
        s3,
        cleanup: async () => {
          storage.close();
          await s3.stop();
        },
      };
    },
  },
];

for (const adapter of ADAPTERS) {
  describe(`storage adapter: ${adapter.name}`, () => {
    let storage: ObjectStorage;
    let s3: S3Server | undefined;
    let cleanup: () => Promise<void>;

    before(async () => {
      ({ storage, s3, cleanup } = await adapter.setup());
    });
    after(async () => cleanup());

    it('stores and returns streams byte for byte, small and multi-part sized', async () => {
      for (const [key, size] of [
        ['uploads/file_small', 1000],
        ['uploads/file_empty', 0],
        // 20 MiB: three parts of a streamed S3 multipart upload.
        ['uploads/file_large', 20 * MiB + 12_345],
      ] as const) {
        const data = bytes(size, key);
        const before = Date.now();
        assert.deepEqual(await storage.put(key, chunked(data)), { size }, key);
        const head = await storage.head(key);
        assert.equal(head?.size, size, key);
        // When it was written, by the store's clock: S3's to the second, the file system's coarse one.
        assert.ok(Math.abs(head.modifiedAt - before) <= 2000, `${key}: written at ${head.modifiedAt}, put at ${before}`);
        assert.equal(sha(await read(await storage.get(key))), sha(data), key);
      }
    });

    it('stores bytes in memory whole (one PutObject, or a multipart upload past a part), replacing what was there', async () => {
      for (const [key, size] of [
        ['renders/small', 36_744],
        ['renders/empty', 0],
        ['renders/large', 12 * MiB + 5],
      ] as const) {
        const data = bytes(size, `memory ${key}`);
        await storage.put(key, chunked(bytes(size + 10, 'older')));
        assert.deepEqual(await storage.put(key, data), { size }, key);
        assert.equal((await storage.head(key))?.size, size, key);
        assert.equal(sha(await read(await storage.get(key))), sha(data), key);
      }
    });

    it('reads single ranges exactly', async () => {
      const data = bytes(3 * MiB + 7, 'ranges');
      await storage.put('uploads/file_ranges', chunked(data));
      for (const [start, end] of [
        [0, 0],
        [0, 1023],
        [1, 1],
        [MiB - 1, 2 * MiB + 5],
        [data.length - 1, data.length - 1],
        [0, data.length - 1],
      ] as const) {
        const got = await read(await storage.get('uploads/file_ranges', { start, end }));
        assert.equal(got.length, end - start + 1, `${start}-${end}`);
        assert.ok(got.equals(data.subarray(start, end + 1)), `${start}-${end}`);
      }
    });

    it('answers a missing key: head null, get and move ENOENT, delete quietly', async () => {
      assert.equal(await storage.head('uploads/file_missing'), null);
      await assert.rejects(storage.get('uploads/file_missing'), (err) => isObjectNotFound(err));
      await assert.rejects(storage.get('uploads/file_missing', { start: 0, end: 10 }), (err) => isObjectNotFound(err));
      await assert.rejects(storage.move('uploads/file_missing', 'uploads/file_elsewhere'), (err) => isObjectNotFound(err));
      await storage.delete('uploads/file_missing');
    });

    it('deletes, overwrites and moves', async () => {
      await storage.put('uploads/file_del', chunked(bytes(5000, 'a')));
      await storage.delete('uploads/file_del');
      assert.equal(await storage.head('uploads/file_del'), null);

      const second = bytes(7000, 'b');
      await storage.put('uploads/file_over', chunked(bytes(9000, 'a')));
      await storage.put('uploads/file_over', chunked(second));
      assert.ok((await read(await storage.get('uploads/file_over'))).equals(second));

      const moved = bytes(2 * MiB, 'moved');
      await storage.put('incoming/upl_move', chunked(moved));
      await storage.move('incoming/upl_move', 'uploads/file_moved');
      assert.equal(await storage.head('incoming/upl_move'), null);
      assert.ok((await read(await storage.get('uploads/file_moved'))).equals(moved));
    });

    it('leaves nothing behind when the stream fails, before or after the first part', async () => {
      for (const [key, failAfter] of [
        ['uploads/file_fail_small', 100_000],
        ['uploads/file_fail_large', 19 * MiB],
      ] as const) {
        const body = Readable.from(
          (async function* () {
            let sent = 0;
            while (sent < failAfter) {
              yield bytes(MiB / 4, `${key}${sent}`);
              sent += MiB / 4;
            }
            throw new Error('the client went away');
          })(),
        );
        await assert.rejects(storage.put(key, body), /went away/, key);
        assert.equal(await storage.head(key), null, key);
      }
    });

    it('refuses keys that could escape their namespace', async () => {
      for (const key of ['../etc/passwd', 'uploads/../../x', '/abs', 'a//b', 'uploads/.']) {
        await assert.rejects(storage.put(key, chunked(Buffer.from('x'))), /invalid object key/, key);
      }
    });

    it('passes its readiness check', async () => {
      await storage.check();
    });

    if (adapter.name === 's3') {
      it('presigns a PUT whose signature covers the length; the bytes arrive whole', async () => {
        const data = bytes(1_500_000, 'presigned');
        const target = await storage.presignPut!('incoming/upl_presigned', data.length, Date.now() + 60_000, 'image/png');
        const url = new URL(target.url);
        assert.equal(url.origin, s3!.endpoint);
        assert.equal(url.pathname, `/${s3!.bucket}/incoming/upl_presigned`);
        assert.deepEqual(url.searchParams.get('X-Amz-SignedHeaders')?.split(';').sort(), ['content-length', 'content-type', 'host']);
        assert.ok(Number(url.searchParams.get('X-Amz-Expires')) <= 60);
        assert.deepEqual(target.headers, { 'content-length': String(data.length), 'content-type': 'image/png' });
        const response = await fetch(target.url, { method: 'PUT', headers: target.headers, body: new Uint8Array(data) });
        assert.equal(response.status, 200, await response.text());
        assert.ok((await read(await storage.get('incoming/upl_presigned'))).equals(data));
      });

      it('presigned URLs expire', async () => {
        const target = await storage.presignPut!('incoming/upl_late', 5, Date.now() + 1000);
        await sleep(2100);
        const response = await fetch(target.url, { method: 'PUT', headers: target.headers, body: 'hello' });
        assert.equal(response.status, 403);
        assert.match(await response.text(), /expired/i);
        assert.equal(await storage.head('incoming/upl_late'), null);
      });

      it('fails its readiness check for a bucket that does not exist', async () => {
        const other = new S3Storage({ ...s3!.storageConfig, bucket: 'no-such-bucket' });
        await assert.rejects(other.check());
        other.close();
      });
    }
  });
}
