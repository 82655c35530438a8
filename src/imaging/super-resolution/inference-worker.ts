// The worker thread that runs the network (engine.ts starts one per process and keeps it). It
// loads TensorFlow.js on its WebAssembly backend (../tfjs-wasm.ts), loads each scale's model once,
// when first asked for, and keeps it. A job is one image: its tiles run one after the other, each
// row of tiles is sent back as a band of output rows, and progress is reported after every tile.
// Between tiles the job's cancel flag (shared memory, so no message needs to get through while a
// tile runs) is read: a canceled job stops there.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';
import type * as tf from '@tensorflow/tfjs';
import { wasmBackend } from '../tfjs-wasm.js';
import { readModelFiles, type ModelScale } from './model.js';
import { placeTile, planTiles, tileInput } from './tiles.js';

/** A job: packed bytes of the whole input (bounded by the plan's maxAiUpscalePixels), RGB or RGBA. */
export interface InferenceJob {
  type: 'run';
  id: number;
  scale: ModelScale;
  width: number;
  height: number;
  pixels: Uint8Array;
  /** 3, or 4: the alpha is not the network's (the engine upscales it apart). */
  channels: number;
  tileSize: number;
  overlap: number;
  /** Int32Array over shared memory: [0] non-zero once the job is canceled; [1] tiles finished. */
  state: Int32Array;
}

export type InferenceMessage =
  | { type: 'band'; id: number; y: number; height: number; data: Uint8Array }
  | { type: 'tile'; id: number; done: number; total: number }
  | { type: 'done'; id: number; tiles: number }
  | { type: 'canceled'; id: number; tiles: number }
  | { type: 'error'; id: number; message: string };

const port = parentPort;
if (!port) throw new Error('inference-worker.ts runs as a worker thread');

const models = new Map<ModelScale, Promise<tf.LayersModel>>();

/**
 * The niceness of this thread: when the CPUs are full, the HTTP server's thread and the other
 * tasks' go first, and an AI upscale, hours of CPU at the plan's limits, takes what is left.
 */
const INFERENCE_NICENESS = 10;

/**
 * Lowers this thread's priority alone: on Linux, setpriority() given a thread's id applies to that
 * thread (its id is read from /proc/thread-self). Elsewhere, or if refused, it keeps the process's.
 */
function lowerThreadPriority(): void {
  try {
    const tid = Number(path.basename(fs.readlinkSync('/proc/thread-self')));
    if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, INFERENCE_NICENESS);
  } catch {
    // Not Linux, or not allowed: the thread runs at the process's priority.
  }
}

lowerThreadPriority();

const backend = wasmBackend();

function model(scale: ModelScale): Promise<tf.LayersModel> {
  let loading = models.get(scale);
  if (!loading) {
    loading = backend.then((tf) => tf.loadLayersModel(tf.io.fromMemory(readModelFiles(scale))));
    models.set(scale, loading);
    loading.catch(() => models.delete(scale));
  }
  return loading;
}

async function run(job: InferenceJob): Promise<void> {
  const tf = await backend;
  const network = await model(job.scale);
  const rows = planTiles(job.width, job.height, job.tileSize, job.overlap);
  const total = rows.reduce((n, row) => n + row.tiles.length, 0);
  const outWidth = job.width * job.scale;
  let done = 0;
  for (const row of rows) {
    const band = new Uint8Array(outWidth * row.height * job.scale * 3);
    for (const tile of row.tiles) {
      if (Atomics.load(job.state, 0) !== 0) {
        port!.postMessage({ type: 'canceled', id: job.id, tiles: done } satisfies InferenceMessage);
        return;
      }
      const input = tileInput(job.pixels, job.width, job.channels, tile);
      const output = tf.tidy(() => network.predict(tf.tensor4d(input, [1, tile.runHeight, tile.runWidth, 3])) as tf.Tensor);
      try {
        placeTile(output.dataSync() as Float32Array, tile, job.scale, band, outWidth);
      } finally {
        output.dispose();
      }
      done++;
      Atomics.store(job.state, 1, done);
      port!.postMessage({ type: 'tile', id: job.id, done, total } satisfies InferenceMessage);
    }
    const message: InferenceMessage = { type: 'band', id: job.id, y: row.y * job.scale, height: row.height * job.scale, data: band };
    port!.postMessage(message, [band.buffer]);
  }
  port!.postMessage({ type: 'done', id: job.id, tiles: done } satisfies InferenceMessage);
}

// One job at a time: the engine sends the next when this one has ended.
port.on('message', (job: InferenceJob) => {
  run(job).catch((err: unknown) => {
    port.postMessage({ type: 'error', id: job.id, message: err instanceof Error ? err.message : String(err) } satisfies InferenceMessage);
  });
});
