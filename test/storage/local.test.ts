// Local storage's writes: a body arriving in many small chunks is written whole and in order (in
// batches, not a write per chunk), into a directory made on demand; a body that fails half-way
// leaves neither the object nor a temporary file behind; bytes in memory go the same way.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { LocalStorage } from '../../src/storage/local.js';
import { tempDir } from '../helpers.js';

/** `bytes` as a stream of `chunk`-byte pieces, failing with `fail` after `failAfter` bytes when given. */
function chunked(bytes: Buffer, chunk: number, fail?: { after: number; error: Error }): Readable {
  let offset = 0;
  return new Readable({
    read() {
      if (fail && offset >= fail.after) return this.destroy(fail.error);
      if (offset >= bytes.length) return this.push(null);
      this.push(bytes.subarray(offset, offset + chunk));
      offset += chunk;
    },
  });
}

describe('local storage writes', () => {
  const root = tempDir();
  const storage = new LocalStorage(root);
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  const read = async (key: string) => {
    const chunks: Buffer[] = [];
    for await (const c of await storage.get(key)) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  };
  const leftovers = () => fs.readdirSync(path.join(root, '.tmp'));

  it('writes a body of many small chunks whole, in order, in a directory it makes', async () => {
    const bytes = crypto.randomBytes(3 * 1024 * 1024 + 123);
    const { size } = await storage.put('uploads/new-dir/a', chunked(bytes, 1000));
    assert.equal(size, bytes.length);
    assert.ok((await read('uploads/new-dir/a')).equals(bytes));
    // The directory exists now: a second object goes in beside the first.
    await storage.put('uploads/new-dir/b', chunked(bytes.subarray(0, 10), 3));
    assert.ok((await read('uploads/new-dir/b')).equals(bytes.subarray(0, 10)));
    assert.deepEqual(leftovers(), []);
  });

  it('writes an empty body as an empty object', async () => {
    assert.equal((await storage.put('uploads/empty', Readable.from([]))).size, 0);
    assert.equal((await read('uploads/empty')).length, 0);
  });

  it('a body that fails before it is read (the file still opening) rejects the put, and nothing is uncaught', async () => {
    const uncaught: unknown[] = [];
    const record = (err: unknown) => uncaught.push(err);
    process.on('uncaughtException', record);
    try {
      const body = new PassThrough();
      const put = storage.put('uploads/early-failure', body);
      // Fails at once, as a size meter does on a small body that arrived whole.
      body.destroy(new Error('refused before reading'));
      await assert.rejects(put, /refused before reading/);
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(uncaught, []);
      assert.equal(fs.existsSync(storage.localPath('uploads/early-failure')), false);
      assert.deepEqual(leftovers(), []);
    } finally {
      process.off('uncaughtException', record);
    }
  });

  it('writes bytes in memory whole, in a directory it makes, and leaves nothing behind when they cannot be put in place', async () => {
    const bytes = crypto.randomBytes(40_000);
    assert.deepEqual(await storage.put('renders/new-dir/a', bytes), { size: bytes.length });
    assert.ok((await read('renders/new-dir/a')).equals(bytes));
    assert.deepEqual(leftovers(), []);
    // A directory where the object should go: the rename fails, the temporary file goes.
    fs.mkdirSync(storage.localPath('renders/taken'), { recursive: true });
    fs.writeFileSync(path.join(storage.localPath('renders/taken'), 'inside'), 'x');
    await assert.rejects(storage.put('renders/taken', bytes), (err: NodeJS.ErrnoException) => err.code === 'EISDIR' || err.code === 'ENOTEMPTY');
    assert.deepEqual(leftovers(), []);
  });

  it('leaves nothing behind when the body fails half-way, before or after a batch was written', async () => {
    const bytes = crypto.randomBytes(2 * 1024 * 1024);
    for (const failAfter of [10_000, 1_500_000]) {
      const error = new Error(`client went away after ${failAfter}`);
      await assert.rejects(storage.put(`uploads/failed-${failAfter}`, chunked(bytes, 64 * 1024, { after: failAfter, error })), error);
      assert.equal(await storage.head(`uploads/failed-${failAfter}`), null);
      assert.deepEqual(leftovers(), []);
    }
  });
});
