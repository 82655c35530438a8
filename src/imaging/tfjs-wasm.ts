// TensorFlow.js on its WebAssembly backend, as the service's networks run it (the ESRGAN upscaler
// and the face detector, each in a worker thread of its own). One copy of TensorFlow.js: the
// project's pinned @tensorflow/tfjs, whose .wasm files are read from node_modules (the SIMD build
// where the CPU has it); nothing is fetched. A thread calls `wasmBackend()` once; later calls
// share the first.
import { createRequire } from 'node:module';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';

const require = createRequire(import.meta.url);
let ready: Promise<typeof tf> | undefined;

/** TensorFlow.js with the wasm backend set and ready, in this thread. */
export function wasmBackend(): Promise<typeof tf> {
  ready ??= (async () => {
    setWasmPaths(path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm')), path.sep));
    await tf.setBackend('wasm');
    await tf.ready();
    return tf;
  })();
  return ready;
}
