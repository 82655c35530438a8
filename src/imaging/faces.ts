// Faces in an image, found on the CPU by a network that ships inside an npm package: the SSD
// MobileNet v1 face detector of @vladmandic/face-api (MIT; docs/faces.md says where its weights
// come from), on the TensorFlow.js WebAssembly backend. It runs in one worker thread per process
// (face-worker.ts), apart from the ESRGAN upscaler's so that a face crop never waits behind an
// upscale of several minutes; jobs run there one after the other, and the model is loaded once,
// when the first job asks for it. The network always looks at a downscaled copy (the size of the
// image never decides its cost), and a canceled job stops between two of the network's runs.
//
//   detectFaces(upright sharp image, its size, { signal, thorough })  → FaceBox[]
//   detectFacesInFile(path, format, plan limits, { signal, thorough }) → FaceBox[]
//
// `thorough` is for redaction, where a missed face is a privacy failure: a larger copy, the
// network run on overlapping tiles too (a face 30 px tall in a 12 MP photo is found), and a
// lower score threshold. Without it, one run over the whole image: the faces a crop centres on.
import type { Sharp } from 'sharp';
import { SerialThread } from '../worker-thread.js';
import type { FaceJob, FaceMessage, FaceView, RawFace } from './face-worker.js';
import type { Size } from './geometry.js';
import type { ImageLimits } from './limits.js';
import { inspect, openUpright } from './source.js';

/** A face, in pixels of the upright (EXIF-oriented) image; `score` is the network's confidence, 0–1. */
export interface FaceBox {
  left: number;
  top: number;
  width: number;
  height: number;
  score: number;
}

export interface DetectOptions {
  /** Aborting stops the detection between two runs of the network; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Favour recall over time (redaction): tiles and a lower threshold. Default false. */
  thorough?: boolean;
}

/** How each mode looks: the copy's longest side, the tiles (0: none) and the score threshold. */
const MODES = {
  // The network sees 512 × 512: a copy a little larger costs little to make and nothing to run.
  quick: { side: 640, tile: 0, minScore: 0.5 },
  // The whole copy, then tiles of 512 px overlapping by a quarter, each seen at the network's size
  // (twice the whole copy's scale): 7 runs of the network on a 4:3 photo.
  thorough: { side: 1024, tile: 512, minScore: 0.3 },
} as const;

/** Thorough mode enlarges a copy at most this many times (quick mode never does). */
const MAX_ENLARGEMENT = 2;

/** Two boxes are one face when they overlap this much (of the smaller one's area): a face cut by a tile's edge is part of the whole one. */
const SAME_FACE_OVERLAP = 0.5;

class FaceDetector {
  private readonly thread = new SerialThread(import.meta.url, 'face-worker', 'face detection');

  /** Runs the network on `views` of packed RGB pixels; jobs wait for the one before them. */
  detect(pixels: Uint8Array, size: Size, views: FaceView[], minScore: number, signal?: AbortSignal): Promise<RawFace[]> {
    // [0]: the cancel flag the worker reads between two runs of the network.
    const state = new Int32Array(new SharedArrayBuffer(4));
    return this.thread.request<FaceJob, FaceMessage, RawFace[]>({
      job: (id) => ({ type: 'detect', id, width: size.width, height: size.height, pixels, views, minScore, state }),
      signal,
      onAbort: () => Atomics.store(state, 0, 1),
      onReply: (message) =>
        message.type === 'done' ? Promise.resolve(message.faces) : Promise.reject(signal?.reason ?? new Error('face detection canceled')),
    });
  }

  /** Ends the thread (its model goes with it); the next job starts a new one. */
  close(): Promise<void> {
    return this.thread.close();
  }
}

let shared: FaceDetector | undefined;
const detector = () => (shared ??= new FaceDetector());

/** Ends the detector's thread (tests; a process that exits needs not). The next detection starts a new one. */
export function closeFaceDetector(): Promise<void> {
  return shared?.close() ?? Promise.resolve();
}

/** The whole image, then (`tile` > 0) square tiles overlapping by a quarter, covering it. */
function planViews(size: Size, tile: number): FaceView[] {
  const views: FaceView[] = [{ left: 0, top: 0, ...size }];
  if (tile <= 0 || (size.width <= tile && size.height <= tile)) return views;
  const stride = Math.round(tile * 0.75);
  const starts = (length: number) => {
    if (length <= tile) return [0];
    const count = Math.ceil((length - tile) / stride) + 1;
    // Spread evenly, so the last tile ends at the edge.
    return Array.from({ length: count }, (_, i) => Math.round((i * (length - tile)) / (count - 1)));
  };
  for (const top of starts(size.height))
    for (const left of starts(size.width)) views.push({ left, top, width: Math.min(tile, size.width), height: Math.min(tile, size.height) });
  return views;
}

/** One box per face: the best-scored of those that overlap (a tile's partial view of a face goes into the whole one). */
function mergeFaces(faces: RawFace[]): RawFace[] {
  const kept: RawFace[] = [];
  for (const face of [...faces].sort((a, b) => b.score - a.score)) {
    const same = kept.some((k) => {
      const w = Math.min(k.left + k.width, face.left + face.width) - Math.max(k.left, face.left);
      const h = Math.min(k.top + k.height, face.top + face.height) - Math.max(k.top, face.top);
      return w > 0 && h > 0 && (w * h) / Math.min(k.width * k.height, face.width * face.height) > SAME_FACE_OVERLAP;
    });
    if (!same) kept.push(face);
  }
  return kept;
}

/**
 * The faces in `image`, an upright sharp image of `size` (for an animation: one frame). Boxes are
 * in `size`'s pixels, clipped to the image, best score first. The image is only read (cloned).
 */
export async function detectFaces(image: Sharp, size: Size, options: DetectOptions = {}): Promise<FaceBox[]> {
  const mode = options.thorough ? MODES.thorough : MODES.quick;
  // Thorough enlarges a small image (a face 16 px tall in a 600 px photo is found at 1024), but
  // not past MAX_ENLARGEMENT: an 80 px animation frame blown up to 1024 and tiled cost ten runs
  // of the network a frame for nothing a face of a few pixels could show.
  const side = options.thorough ? Math.min(mode.side, MAX_ENLARGEMENT * Math.max(size.width, size.height)) : mode.side;
  const { data, info } = await image
    .clone()
    .resize({ width: side, height: side, fit: 'inside', withoutEnlargement: !options.thorough })
    .removeAlpha()
    .toColourspace('srgb')
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true });
  if (info.channels !== 3) throw new Error(`face detection got ${info.channels} channels in sRGB`);
  const copy = { width: info.width, height: info.height };
  const found = await detector().detect(
    new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    copy,
    planViews(copy, mode.tile),
    mode.minScore,
    options.signal,
  );
  const sx = size.width / copy.width;
  const sy = size.height / copy.height;
  return mergeFaces(found).map((face) => {
    const left = Math.max(0, Math.floor(face.left * sx));
    const top = Math.max(0, Math.floor(face.top * sy));
    const right = Math.min(size.width, Math.ceil((face.left + face.width) * sx));
    const bottom = Math.min(size.height, Math.ceil((face.top + face.height) * sy));
    return { left, top, width: Math.max(1, right - left), height: Math.max(1, bottom - top), score: Math.round(face.score * 1000) / 1000 };
  });
}

/**
 * The faces in an image file (its first frame, upright): the header is checked against the plan's
 * pixel limits before anything is decoded (IMAGE_TOO_LARGE), then as detectFaces.
 */
export async function detectFacesInFile(filePath: string, format: string, limits: ImageLimits, options: DetectOptions = {}): Promise<FaceBox[]> {
  const source = await inspect(filePath, format, limits);
  const open = await openUpright(filePath, format, limits.maxPixels);
  return detectFaces(open(0), { width: source.width, height: source.height }, options);
}

/** The smallest box holding every face; undefined when there is none. */
export function boxAround(faces: readonly Omit<FaceBox, 'score'>[]): Omit<FaceBox, 'score'> | undefined {
  if (!faces.length) return undefined;
  const left = Math.min(...faces.map((f) => f.left));
  const top = Math.min(...faces.map((f) => f.top));
  const right = Math.max(...faces.map((f) => f.left + f.width));
  const bottom = Math.max(...faces.map((f) => f.top + f.height));
  return { left, top, width: right - left, height: bottom - top };
}
