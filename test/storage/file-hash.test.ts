// The hashing thread (src/files/file-hash.ts): the digest and size of a stored file as
// node:crypto computes them, several files at once each answered with its own, and a file
// that cannot be read refused with the error's code, after which the thread still answers.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { hashFileOffThread } from '../../src/files/file-hash.js';
import { tempDir } from '../helpers.js';

describe('hashing a stored file off the event loop', () => {
  const dir = tempDir();
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('answers each file its SHA-256 and size, and refuses a missing file', async () => {
    // Sizes around the thread's 1 MiB read buffer, and an empty file.
    const sizes = [0, 1, 1024 * 1024, 1024 * 1024 + 1, 3 * 1024 * 1024 + 17];
    const files = sizes.map((size, i) => {
      const file = path.join(dir, `f${i}`);
      fs.writeFileSync(file, crypto.randomBytes(size));
      return file;
    });
    const hashed = await Promise.all(files.map((file) => hashFileOffThread(file)));
    hashed.forEach((result, i) => {
      const bytes = fs.readFileSync(files[i]!);
      assert.deepEqual(result, { sha256: crypto.createHash('sha256').update(bytes).digest('hex'), size: bytes.length });
    });
    await assert.rejects(hashFileOffThread(path.join(dir, 'missing')), { code: 'ENOENT' });
    assert.equal((await hashFileOffThread(files[1]!)).size, 1);
  });
});
