import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { ownedTempPrefix, removeAbandoned } from '../temp-files.js';
import { assertValidKey, type ByteRange, type ObjectStorage } from './storage.js';

/**
 * Objects as files under one directory; writes go to a temp file in `.tmp`, named for the
 * process writing it, renamed into place when complete and removed when the write fails.
 */
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

  async put(key: string, body: Readable | Buffer): Promise<{ size: number }> {
    const target = this.localPath(key);
    const tmp = path.join(this.tmpDir, ownedTempPrefix('') + crypto.randomBytes(12).toString('hex'));
    if (Buffer.isBuffer(body)) return this.putBytes(tmp, target, body);
    let size: number;
    // The body may fail (a size refused, a client gone) while the file is still being opened,
    // before the loop that reads it listens: without a listener that 'error' would be an
    // uncaught exception. The loop still sees the failure (the stream stays errored).
    const heldUntilRead = () => {};
    body.on('error', heldUntilRead);
    try {
      const handle = await fs.promises.open(tmp, 'w');
      try {
        size = await writeBatched(handle, body);
      } finally {
        await handle.close();
      }
      await renameInto(tmp, target);
    } catch (err) {
      body.destroy(); // as pipeline() did: a body not read to its end is not left hanging
      await fs.promises.rm(tmp, { force: true });
      throw err;
    } finally {
      body.off('error', heldUntilRead);
    }
    return { size };
  }

  /**
   * Bytes in memory, through fs's callback functions: on a busy machine each of fs.promises'
   * operations (FileHandle, stream) costs the event loop about twice as much, and a delivery
   * miss stores one render per request (docs/benchmarks.md).
   */
  private async putBytes(tmp: string, target: string, data: Buffer): Promise<{ size: number }> {
    try {
      await writeFile(tmp, data);
      await renameInto(tmp, target);
    } catch (err) {
      await fs.promises.rm(tmp, { force: true });
      throw err;
    }
    return { size: data.length };
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const file = this.localPath(key);
    const handle = await fs.promises.open(file, 'r');
    return handle.createReadStream(range ? { start: range.start, end: range.end } : {});
  }

  async head(key: string): Promise<{ size: number; modifiedAt: number } | null> {
    try {
      const stat = await fs.promises.stat(this.localPath(key));
      return { size: stat.size, modifiedAt: stat.mtimeMs };
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

  /** Temp files of writes that a killed process never finished. */
  async sweepTemporary(now = Date.now()): Promise<number> {
    return removeAbandoned(this.tmpDir, '', now);
  }

  async list(prefix: string): Promise<string[]> {
    assertValidKey(prefix);
    try {
      const entries = await fs.promises.readdir(path.join(this.root, prefix), { withFileTypes: true });
      return entries.filter((entry) => entry.isFile()).map((entry) => `${prefix}/${entry.name}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  async check(): Promise<void> {
    const probe = path.join(this.tmpDir, `ready-${process.pid}`);
    await fs.promises.writeFile(probe, '');
    await fs.promises.rm(probe, { force: true });
  }
}

/** Bytes gathered before one write: a few system calls per upload, not one per network chunk. */
const WRITE_BATCH_BYTES = 1024 * 1024;

/**
 * Writes `body` to `handle` in batches of about WRITE_BATCH_BYTES, one `writev` each (the
 * chunks are not copied), with one write in flight while the next batch gathers. Answers the
 * bytes written; throws what the body throws (a refusal, a client gone), after the write in
 * flight has settled.
 */
async function writeBatched(handle: fs.promises.FileHandle, body: Readable): Promise<number> {
  let size = 0;
  let batch: Buffer[] = [];
  let batchBytes = 0;
  let inFlight: Promise<void> = Promise.resolve();
  const flush = async () => {
    const buffers = batch;
    const bytes = batchBytes;
    batch = [];
    batchBytes = 0;
    await inFlight;
    inFlight = writeAll(handle, buffers, bytes);
    // Settled by whoever awaits it next; never an unhandled rejection in between.
    inFlight.catch(() => {});
  };
  try {
    for await (const chunk of body) {
      const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
      batch.push(buffer);
      batchBytes += buffer.length;
      size += buffer.length;
      if (batchBytes >= WRITE_BATCH_BYTES) await flush();
    }
    if (batchBytes > 0) await flush();
  } finally {
    await inFlight.catch(() => {});
  }
  await inFlight;
  return size;
}

async function writeAll(handle: fs.promises.FileHandle, buffers: Buffer[], bytes: number): Promise<void> {
  let written = (await handle.writev(buffers)).bytesWritten;
  if (written === bytes) return;
  // A short write (rare on files): the rest from one buffer.
  const all = Buffer.concat(buffers);
  while (written < bytes) written += (await handle.write(all, written, bytes - written)).bytesWritten;
}

const writeFile = promisify(fs.writeFile);
const rename = promisify(fs.rename);

/** Renames into place; the directory is made only when missing (the rename says so), not checked each time. */
async function renameInto(from: string, to: string): Promise<void> {
  try {
    await rename(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    await fs.promises.mkdir(path.dirname(to), { recursive: true });
    await rename(from, to);
  }
}
