// Byte sources: a local file, or an object in storage read by ranges, for the readers that look
// at a few parts of a large file by random access (a ZIP's central directory, an OLE2 directory,
// an ISO-BMFF header) without reading it whole.
import fs from 'node:fs';
import { PassThrough, Readable, pipeline } from 'node:stream';
import type { ObjectStorage } from '../storage/storage.js';
import type { ByteReader } from './cfb.js';

export interface ByteSource extends ByteReader {
  /** A stream of bytes [start, end). */
  stream(start: number, end: number): Readable;
  close(): Promise<void>;
}

export async function fileSource(file: string): Promise<ByteSource> {
  const handle = await fs.promises.open(file, 'r');
  const { size } = await handle.stat();
  return {
    size,
    async read(offset, length) {
      const buffer = Buffer.alloc(Math.max(0, Math.min(length, size - offset)));
      if (buffer.length) await handle.read(buffer, 0, buffer.length, offset);
      return buffer;
    },
    stream: (start, end) => (end > start ? fs.createReadStream(file, { start, end: end - 1 }) : Readable.from([])),
    close: () => handle.close(),
  };
}

export function storageSource(storage: ObjectStorage, key: string, size: number): ByteSource {
  const stream = (start: number, end: number): Readable => {
    if (end <= start) return Readable.from([]);
    const out = new PassThrough();
    storage.get(key, { start, end: end - 1 }).then(
      // Errors travel both ways: a failed read ends the reader's stream; a reader that stops
      // early (yauzl closing the zip) releases the storage stream.
      (body) => {
        // A reader that stopped before the object arrived: nothing will read it, so let it go now
        // (its file handle, on local storage) instead of leaving it to the garbage collector.
        if (out.destroyed) body.destroy();
        else pipeline(body, out, () => {});
      },
      (err) => out.destroy(err),
    );
    return out;
  };
  return {
    size,
    async read(offset, length) {
      const chunks: Buffer[] = [];
      for await (const chunk of stream(offset, Math.min(size, offset + length))) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    },
    stream,
    close: async () => {},
  };
}
