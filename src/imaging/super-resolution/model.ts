// The super-resolution network: ESRGAN "slim" (an RDN: residual dense network) from the npm
// package @upscalerjs/esrgan-slim, MIT licence, by Kevin Scott. The package ships its ×2, ×3 and
// ×4 (and ×8) weights in TensorFlow.js layers format; they are read from node_modules, nothing is
// fetched. The slim variant was chosen by measurement on a 2-core machine (docs/api.md, "AI upscaling"):
// the medium one is 0.2–0.5 dB PSNR better on the corpus photos but takes 3.2× as long, and the
// thick one (28 MB per scale, 154 convolutions) far longer.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const MODEL_PACKAGE = '@upscalerjs/esrgan-slim';

/** The network's scales this service uses, smallest first. */
const MODEL_SCALES = [2, 3, 4] as const;
export type ModelScale = (typeof MODEL_SCALES)[number];

/**
 * Input pixels per side of a tile's core: 128 is the network's training patch and the fastest
 * per pixel measured (64: 21 s/MP, 128: 14 s/MP, 256: 18 s/MP at ×2 on the wasm backend).
 */
export const TILE_SIZE = 128;

/** Pixels of context run around each tile's core; wider than the network's receptive field. */
export const TILE_OVERLAP = 16;

/** The smallest of the network's scales at or above `scale` (the largest past ×4). */
export function modelScaleFor(scale: number): ModelScale {
  return MODEL_SCALES.find((s) => s >= scale - 1e-9) ?? MODEL_SCALES[MODEL_SCALES.length - 1]!;
}

/** What tf.io.fromMemory takes: the topology, the weights' specs and their bytes. */
export interface ModelFiles {
  modelTopology: object;
  weightSpecs: object[];
  weightData: ArrayBuffer;
}

const require = createRequire(import.meta.url);

/** The installed package's directory (its `exports` do not list package.json: found from its entry). */
function modelPackageDir(): string {
  // Spelled out (not MODEL_PACKAGE) so that the dependency check sees the package used.
  let dir = path.dirname(require.resolve('@upscalerjs/esrgan-slim'));
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest) && (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { name?: string }).name === MODEL_PACKAGE) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`${MODEL_PACKAGE} is not installed`);
    dir = parent;
  }
}

/** The ×`scale` model's files, read from the package. */
export function readModelFiles(scale: ModelScale): ModelFiles {
  const dir = path.join(modelPackageDir(), 'models', `x${scale}`);
  const model = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8')) as {
    modelTopology: object;
    weightsManifest: { paths: string[]; weights: object[] }[];
  };
  const bytes = Buffer.concat(model.weightsManifest.flatMap((group) => group.paths.map((p) => fs.readFileSync(path.join(dir, p)))));
  return {
    modelTopology: model.modelTopology,
    weightSpecs: model.weightsManifest.flatMap((group) => group.weights),
    weightData: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
  };
}
