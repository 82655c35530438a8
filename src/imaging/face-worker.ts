// The worker thread that runs the face detector (faces.ts starts one per process and keeps it).
// It loads TensorFlow.js on its WebAssembly backend (tfjs-wasm.ts, the same setup as the ESRGAN
// upscaler's), then @vladmandic/face-api's Node build for the wasm backend, which takes that
// TensorFlow.js as an external (`require('@tensorflow/tfjs')`: one copy, the project's pinned
// version), and reads the SSD MobileNet v1 face model from the package's own `model/` folder once.
// A job is one image's packed RGB pixels and the views to run the network on (the whole image,
// and tiles of it for small faces); the job's cancel flag (shared memory) is read between views.
import { createRequire } from 'node:module';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';
import type * as FaceApi from '@vladmandic/face-api';
import { wasmBackend } from './tfjs-wasm.js';

/** A region of the job's pixels the network looks at on its own (it sees it at 512 × 512). */
export interface FaceView {
  left: number;
  top: number;
  width: number;
  height: number;
}

export interface FaceJob {
  type: 'detect';
  id: number;
  width: number;
  height: number;
  /** Packed RGB bytes, width × height × 3. */
  pixels: Uint8Array;
  views: FaceView[];
  /** Detections scored below this are dropped. */
  minScore: number;
  /** Int32Array over shared memory: [0] non-zero once the job is canceled. */
  state: Int32Array;
}

/** A face as the network saw it, in the job's pixel coordinates. */
export interface RawFace {
  left: number;
  top: number;
  width: number;
  height: number;
  score: number;
}

export type FaceMessage =
  { type: 'done'; id: number; faces: RawFace[] } | { type: 'canceled'; id: number } | { type: 'error'; id: number; message: string };

const port = parentPort;
if (!port) throw new Error('face-worker.ts runs as a worker thread');

const require = createRequire(import.meta.url);

/** The face-api package's directory (its model/ folder is beside dist/). */
const FACE_API_DIR = path.resolve(path.dirname(require.resolve('@vladmandic/face-api/dist/face-api.node-wasm.js')), '..');

const detector = (async () => {
  const tf = await wasmBackend();
  // The build that requires @tensorflow/tfjs and its wasm backend rather than bundling its own.
  const faceapi = require('@vladmandic/face-api/dist/face-api.node-wasm.js') as typeof FaceApi;
  await faceapi.nets.ssdMobilenetv1.loadFromDisk(path.join(FACE_API_DIR, 'model'));
  return { tf, faceapi };
})();

async function run(job: FaceJob): Promise<void> {
  const { tf, faceapi } = await detector;
  const image = tf.tensor3d(job.pixels, [job.height, job.width, 3], 'int32');
  const faces: RawFace[] = [];
  try {
    for (const view of job.views) {
      if (Atomics.load(job.state, 0) !== 0) {
        port!.postMessage({ type: 'canceled', id: job.id } satisfies FaceMessage);
        return;
      }
      const whole = view.left === 0 && view.top === 0 && view.width === job.width && view.height === job.height;
      const input = whole ? image : tf.slice(image, [view.top, view.left, 0], [view.height, view.width, 3]);
      try {
        const found = await faceapi.detectAllFaces(
          input as unknown as FaceApi.tf.Tensor3D,
          new faceapi.SsdMobilenetv1Options({ minConfidence: job.minScore, maxResults: 200 }),
        );
        for (const face of found) {
          const { x, y, width, height } = face.box;
          faces.push({ left: x + view.left, top: y + view.top, width, height, score: face.score });
        }
      } finally {
        if (input !== image) input.dispose();
      }
    }
  } finally {
    image.dispose();
  }
  port!.postMessage({ type: 'done', id: job.id, faces } satisfies FaceMessage);
}

// One job at a time: faces.ts sends the next when this one has ended.
port.on('message', (job: FaceJob) => {
  run(job).catch((err: unknown) => {
    port.postMessage({ type: 'error', id: job.id, message: err instanceof Error ? err.message : String(err) } satisfies FaceMessage);
  });
});
