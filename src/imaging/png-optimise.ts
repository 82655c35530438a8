// A lossless PNG optimiser for compress: oxipng (Rust, as WebAssembly: @jsquash/oxipng) rewrites a
// PNG with the same pixels in fewer bytes — libdeflate rather than zlib, several row filters
// tried, the palette and bit depth reduced where the pixels allow. It runs on a worker
// thread of its own for each PNG (the event loop never waits on it), is ended when it takes
// longer than its time allowance (proportional to the pixels) or the task's deadline or cancel,
// and in every such case the PNG is kept as it was: the optimiser only ever makes a PNG smaller.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

/** PNGs of more pixels than this are kept as they are (0.3–0.9 s of one core per megapixel at OXIPNG_LEVEL; 180 MB at 6 MP). */
export const OPTIMISE_MAX_PIXELS = 8_000_000;
/** oxipng's preset: 2 tries a few filters with libdeflate; higher presets cost 3–5× the time for under 1 % more. */
const OXIPNG_LEVEL = 2;
/**
 * The time allowed: 4 µs a pixel (4× or more what it takes on one free core, so that a busy
 * machine does not change the bytes) and a second for the worker's start, at most until the deadline.
 */
const MS_PER_PIXEL = 0.004;
const START_MS = 1000;

/** The codec's WebAssembly, compiled once per process and handed to each worker. */
let compiled: Promise<WebAssembly.Module> | undefined;
const codecModule = (): Promise<WebAssembly.Module> =>
  (compiled ??= fs.promises
    .readFile(fileURLToPath(import.meta.resolve('@jsquash/oxipng/codec/pkg/squoosh_oxipng_bg.wasm')))
    .then((bytes) => WebAssembly.compile(bytes)));

// The worker: plain JavaScript, so it runs the same under tsx and from dist.
const WORKER_CODE = `
const { parentPort, workerData } = require('node:worker_threads');
import(workerData.codec).then(({ initSync, optimise }) => {
  initSync(workerData.module);
  const out = optimise(workerData.png, workerData.level, false, false);
  parentPort.postMessage(out, [out.buffer]);
});
`;

export interface OptimiseBounds {
  /** Wall-clock deadline of the task (ms since epoch). */
  deadline: number;
  signal?: AbortSignal;
}

/**
 * `png` (of `pixels` pixels) rewritten losslessly in fewer bytes, or `png` itself when the
 * optimiser finds nothing smaller, runs out of time, fails, or the image is past
 * OPTIMISE_MAX_PIXELS. Rejects only when `signal` is aborted (with its reason).
 */
export async function optimisePng(png: Buffer, pixels: number, bounds: OptimiseBounds): Promise<Buffer> {
  if (pixels > OPTIMISE_MAX_PIXELS) return png;
  const allowance = Math.min(START_MS + pixels * MS_PER_PIXEL, bounds.deadline - Date.now());
  if (allowance <= 0) return png;
  const module = await codecModule();
  bounds.signal?.throwIfAborted();
  const worker = new Worker(WORKER_CODE, {
    eval: true,
    workerData: {
      module,
      png,
      level: OXIPNG_LEVEL,
      codec: import.meta.resolve('@jsquash/oxipng/codec/pkg/squoosh_oxipng.js'),
    },
  });
  try {
    const optimised = await new Promise<Uint8Array | undefined>((resolve, reject) => {
      const settle = (outcome: () => void) => {
        clearTimeout(timer);
        bounds.signal?.removeEventListener('abort', onAbort);
        outcome();
      };
      const timer = setTimeout(() => settle(() => resolve(undefined)), allowance);
      const onAbort = () => settle(() => reject(bounds.signal!.reason));
      bounds.signal?.addEventListener('abort', onAbort, { once: true });
      worker.once('message', (out: Uint8Array) => settle(() => resolve(out)));
      // A PNG the optimiser cannot read, or memory it cannot have: the PNG stays as it was.
      worker.once('error', () => settle(() => resolve(undefined)));
      worker.once('exit', () => settle(() => resolve(undefined)));
    });
    return optimised && optimised.length < png.length ? Buffer.from(optimised.buffer, optimised.byteOffset, optimised.length) : png;
  } finally {
    await worker.terminate();
  }
}
