// The JPEG XL encoder: libjxl's WebAssembly build (@jsquash/jxl), since sharp's prebuilt libvips
// writes no JPEG XL. It takes the pipeline's finished pixels (8-bit RGBA from sharp) and runs on
// a worker thread of its own for each image, as the PNG optimiser does (png-optimise.ts): the
// event loop never waits on it, and at the task's deadline or cancel the thread is ended.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { TaskError } from '../errors.js';

/** libjxl's quality by default: distance 2.35 (cjxl's mapping, 0.1 + (100 − q) × 0.09 above 30). */
export const JXL_QUALITY = 75;
/**
 * libjxl's effort (1–9): 3 by default (a 12 MP photo in a few seconds of one core), 5 when
 * favouring size (compress); its own default, 7, costs about twice as much again.
 */
const EFFORT = 3;
const EFFORT_FAVOUR_SIZE = 5;
/** When the caller gives no deadline (a test, the bench): the default task time limit. */
const DEFAULT_ALLOWANCE_MS = 120_000;

interface JxlSettings {
  quality?: number;
  lossless?: boolean;
  favourSize?: boolean;
}

export interface EncodeBounds {
  /** Wall-clock deadline (ms since epoch). */
  deadline?: number;
  signal?: AbortSignal;
}

export interface RgbaPixels {
  data: Buffer;
  width: number;
  height: number;
}

/** The codec's WebAssembly, compiled once per process and handed to each worker. */
let compiled: Promise<WebAssembly.Module> | undefined;
const codecModule = (): Promise<WebAssembly.Module> =>
  (compiled ??= fs.promises
    .readFile(fileURLToPath(import.meta.resolve('@jsquash/jxl/codec/enc/jxl_enc.wasm')))
    .then((bytes) => WebAssembly.compile(bytes)));

// The worker: plain JavaScript, so it runs the same under tsx and from dist.
const WORKER_CODE = `
const { parentPort, workerData } = require('node:worker_threads');
import(workerData.codec).then(async ({ default: encode, init }) => {
  await init(workerData.module);
  const { pixels, width, height, options } = workerData;
  const data = new Uint8ClampedArray(pixels.buffer, pixels.byteOffset, pixels.byteLength);
  const out = await encode({ data, width, height }, options);
  parentPort.postMessage(new Uint8Array(out), [out]);
});
`;

/** `pixels` (RGBA) as a JPEG XL codestream. Fails PROCESSING_TIMEOUT at the deadline; rejects with the signal's reason on cancel. */
export async function encodeJxl(pixels: RgbaPixels, settings: JxlSettings, bounds: EncodeBounds = {}): Promise<Buffer> {
  const allowance = (bounds.deadline ?? Date.now() + DEFAULT_ALLOWANCE_MS) - Date.now();
  if (allowance <= 0) throw new TaskError('PROCESSING_TIMEOUT', 'The task ran past its time limit');
  const module = await codecModule();
  bounds.signal?.throwIfAborted();
  const options = {
    effort: settings.favourSize ? EFFORT_FAVOUR_SIZE : EFFORT,
    ...(settings.lossless ? { lossless: true } : { quality: settings.quality ?? JXL_QUALITY }),
  };
  const worker = new Worker(WORKER_CODE, {
    eval: true,
    workerData: {
      module,
      pixels: pixels.data,
      width: pixels.width,
      height: pixels.height,
      options,
      codec: import.meta.resolve('@jsquash/jxl/encode.js'),
    },
  });
  try {
    const encoded = await new Promise<Uint8Array>((resolve, reject) => {
      const settle = (outcome: () => void) => {
        clearTimeout(timer);
        bounds.signal?.removeEventListener('abort', onAbort);
        outcome();
      };
      const timer = setTimeout(() => settle(() => reject(new TaskError('PROCESSING_TIMEOUT', 'The task ran past its time limit'))), allowance);
      const onAbort = () => settle(() => reject(bounds.signal!.reason));
      bounds.signal?.addEventListener('abort', onAbort, { once: true });
      worker.once('message', (out: Uint8Array) => settle(() => resolve(out)));
      worker.once('error', (err) => settle(() => reject(new Error(`the JPEG XL encoder failed: ${err.message}`))));
      worker.once('exit', (code) => settle(() => reject(new Error(`the JPEG XL encoder exited (${code})`))));
    });
    return Buffer.from(encoded.buffer, encoded.byteOffset, encoded.byteLength);
  } finally {
    await worker.terminate();
  }
}
