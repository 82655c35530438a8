import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { assertValidKey, type ByteRange, type ObjectStorage } from './storage.js';

/** Objects as files under one directory; writes go to a temp file renamed into place. */
export class LocalStorage implements ObjectStorage {
  readonly name = 'local';
  private readonly tmpDir: string;

  constructor(private readonly root: string) {
    this.tmpDir = path.join(root, '.tmp');
    fs.mkdirSync(this.tmpDir, { recursive: true });
  }

  localPath(key: string): string {
    assertValidKey(key);
    return path.join(this.root, key);
  }

  async put(key: string, body: Readable): Promise<{ size: number }> {
    const target = this.localPath(key);
    const tmp = path.join(this.tmpDir, crypto.randomBytes(12).toString('hex'));
    const out = fs.createWriteStream(tmp);
    try {
      await pipeline(body, out);
      await fs.promises.mkdir(path.dirname(target), { recursive: true });
      await fs.promises.rename(tmp, target);
    } catch (err) {
      // The file is opened asynchronously: wait until the stream has closed, or a late open
      // would recreate the file after it was removed.
      if (!out.closed) await new Promise<void>((resolve) => out.once('close', () => resolve()));
      await fs.promises.rm(tmp, { force: true });
      throw err;
    }
    const { size } = await fs.promises.stat(target);
    return { size };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const file = this.localPath(key);
    const handle = await fs.promises.open(file, 'r');
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async head(key: string): Promise<{ size: number } | null> {
    try {
      const stat = await fs.promises.stat(this.localPath(key));
      return { size: stat.size };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await fs.promises.rm(this.localPath(key), { force: true });
  }

  async move(from: string, to: string): Promise<void> {
    const target = this.localPath(to);
    await fs.promises.mkdir(path.dirname(target), { recursive: true });
    await fs.promises.rename(this.localPath(from), target);
  }

  async check(): Promise<void> {
    const probe = path.join(this.tmpDir, `ready-${process.pid}`);
    await fs.promises.writeFile(probe, '');
    await fs.promises.rm(probe, { force: true });
  }
}
