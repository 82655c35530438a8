// The main thread's side of the decoding thread (decode-worker.ts says what runs there and why).
// One thread per process, started on first use and unref'd; its work runs one piece after
// another, as it did on the event loop. Results come back without a copy (their buffer is
// transferred). A thread that dies fails what it was doing, and the next call starts a new one.
import type { Worker } from 'node:worker_threads';
import { TaskError } from '../errors.js';
import { startWorkerThread } from '../worker-thread.js';
import type { RawDecoderName } from './decoders/raw.js';
import type { SharpInput } from './decoders/to-sharp.js';
import type { DecodeReply, DecodeResult, DecodeWork } from './decode-worker.js';

let thread: Worker | undefined;
let nextId = 0;
const pending = new Map<number, { resolve(result: DecodeResult): void; reject(err: Error): void }>();

/** Structured cloning hands a Buffer over as a plain Uint8Array: a Buffer over the same memory. */
const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** A result as it arrived, its byte arrays Buffers again. */
function revived(result: DecodeResult): DecodeResult {
  if (result.kind === 'svg') return { kind: 'svg', svg: asBuffer(result.svg) };
  const { input } = result;
  if (input.kind === 'png') return { kind: 'raw', input: { kind: 'png', png: asBuffer(input.png) } };
  // Pixels with no profile, EXIF or 16-bit samples (else they came as a PNG).
  return { kind: 'raw', input: { kind: 'raw', image: { ...input.image, data: asBuffer(input.image.data) } } };
}

function decodingThread(): Worker {
  if (thread) return thread;
  const started = startWorkerThread(import.meta.url, 'decode-worker');
  started.unref();
  started.on('message', (reply: DecodeReply) => {
    const waiter = pending.get(reply.id);
    if (!waiter) return;
    pending.delete(reply.id);
    if (pending.size === 0) started.unref();
    if ('result' in reply) {
      waiter.resolve(revived(reply.result));
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

function onDecodingThread(work: DecodeWork): Promise<DecodeResult> {
  const worker = decodingThread();
  const id = nextId++;
  // Only while work is under way does the thread keep the process up.
  worker.ref();
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, work });
  });
}

/**
 * The primary image of the file at `file`, decoded by this service's decoder for `format` and
 * made ready for sharp (openSharpInput); decodeRaw's contract: the pixel limit checked from the
 * header first, TaskErrors as thrown there.
 */
export async function decodeForSharp(file: string, format: RawDecoderName, maxPixels: number): Promise<SharpInput> {
  const result = await onDecodingThread({ kind: 'raw', file, format, maxPixels });
  if (result.kind !== 'raw') throw new Error('the decoding thread answered another question');
  return result.input;
}

/** The SVG in `source` (a file's path, or its bytes) without outside references: svg.ts safeSvg. */
export async function safeSvgOffThread(source: { file: string } | { bytes: Buffer }, maxPixels: number): Promise<Buffer> {
  const result = await onDecodingThread({ kind: 'svg', ...source, maxPixels });
  if (result.kind !== 'svg') throw new Error('the decoding thread answered another question');
  return result.svg;
}
