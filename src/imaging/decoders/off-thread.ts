// The raw decoders (raw.ts), run on a thread of their own (decode-worker.ts) so that decoding a
// HEIC, JPEG 2000 or lossless JPEG never holds the event loop. One thread per process, started on
// first use and unref'd; decodes run there one after another, as they did on the event loop. The
// pixels come back without a copy (their buffer is transferred). A thread that dies fails what it
// was decoding, and the next decode starts a new one.
import type { Worker } from 'node:worker_threads';
import { TaskError } from '../../errors.js';
import { startWorkerThread } from '../../worker-thread.js';
import type { DecodeReply, DecodeRequest } from './decode-worker.js';
import type { RawDecoderName } from './raw.js';
import type { SharpInput } from './to-sharp.js';

let thread: Worker | undefined;
let nextId = 0;
const pending = new Map<number, { resolve(input: SharpInput): void; reject(err: Error): void }>();

/** Structured cloning hands a Buffer over as a plain Uint8Array: a Buffer over the same memory. */
const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

function decoderThread(): Worker {
  if (thread) return thread;
  const started = startWorkerThread(import.meta.url, 'decode-worker');
  started.unref();
  started.on('message', (reply: DecodeReply) => {
    const waiter = pending.get(reply.id);
    if (!waiter) return;
    pending.delete(reply.id);
    if (pending.size === 0) started.unref();
    if ('input' in reply) {
      const { input } = reply;
      if (input.kind === 'png') return waiter.resolve({ kind: 'png', png: asBuffer(input.png) });
      // Pixels with no profile, EXIF or 16-bit samples (else they came as a PNG).
      waiter.resolve({ kind: 'raw', image: { ...input.image, data: asBuffer(input.image.data) } });
    } else if ('taskError' in reply) {
      const { code, message, transient, details } = reply.taskError;
      waiter.reject(new TaskError(code, message, transient, details));
    } else {
      waiter.reject(new Error(`decoding failed: ${reply.failure}`));
    }
  });
  const gone = (err: Error) => {
    if (thread === started) thread = undefined;
    for (const waiter of pending.values()) waiter.reject(err);
    pending.clear();
  };
  started.on('error', gone);
  started.on('exit', (code) => gone(new Error(`the decoding thread exited (${code})`)));
  thread = started;
  return started;
}

/**
 * The primary image of the file at `file`, decoded by this service's decoder for `format` and
 * made ready for sharp (openSharpInput); decodeRaw's contract: the pixel limit checked from the
 * header first, TaskErrors as thrown there.
 */
export function decodeForSharp(file: string, format: RawDecoderName, maxPixels: number): Promise<SharpInput> {
  const worker = decoderThread();
  const id = nextId++;
  // Only while a decode is under way does the thread keep the process up.
  worker.ref();
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    const request: DecodeRequest = { id, file, format, maxPixels };
    worker.postMessage(request);
  });
}
