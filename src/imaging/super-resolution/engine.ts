// The main thread's side of super-resolution. One worker thread per process runs the network
// (inference-worker.ts) and keeps its models loaded, so the event loop that serves HTTP and the
// other tasks never waits on inference; jobs from several tasks run there one after the other.
// `superResolve` is what the upscale kind calls: it decodes the image to sRGB pixels, has the
// worker upscale them tile by tile, writes each band of output rows to the task's scratch
// directory as it arrives (the output is never held whole), and answers a lazy sharp pipeline
// over those bands — alpha, upscaled with Lanczos, joined back, and an exact resize when the
// size asked for is not the network's scale.
import fs from 'node:fs';
import path from 'node:path';
import sharp, { type Sharp } from 'sharp';
import { SerialThread } from '../../worker-thread.js';
import type { Size } from '../geometry.js';
import type { InferenceJob, InferenceMessage } from './inference-worker.js';
import { modelScaleFor, TILE_OVERLAP, TILE_SIZE, type ModelScale } from './model.js';

export interface UpscaleRun {
  /** Aborting stops the job between two tiles (the running tile finishes). */
  signal?: AbortSignal;
  /** After every tile. */
  progress?(done: number, total: number): void;
  /** Input pixels per tile side (tests force small tiles); default TILE_SIZE. */
  tileSize?: number;
  /** After a cancel: tiles finished when it was asked for, and when the worker stopped. */
  onCanceled?(tiles: { atCancel: number; run: number }): void;
}

export interface UpscaledBand {
  /** First output row. */
  y: number;
  height: number;
  /** Packed RGB bytes, `width × scale` pixels per row. */
  data: Uint8Array;
}

export class SuperResolutionEngine {
  /** Jobs run one at a time on it: each waits for the one before it. */
  private readonly thread = new SerialThread(import.meta.url, 'inference-worker', 'super-resolution');
  /**
   * Upscales packed RGB bytes (or RGBA, whose alpha is skipped) by the network's `scale`, band by
   * band (`onBand` is awaited in order; the bands together are the whole output). Rejects with
   * the signal's reason when aborted.
   */
  upscale(
    pixels: { data: Uint8Array; channels: 3 | 4 },
    size: Size,
    scale: ModelScale,
    onBand: (band: UpscaledBand) => Promise<void>,
    run: UpscaleRun = {},
  ): Promise<{ tiles: number }> {
    const { signal } = run;
    // [0]: the cancel flag the worker reads between tiles; [1]: tiles it has finished.
    const state = new Int32Array(new SharedArrayBuffer(8));
    let writing: Promise<void> = Promise.resolve();
    let atCancel = -1;
    return this.thread.request<InferenceJob, InferenceMessage, { tiles: number }>({
      job: (id) => ({
        type: 'run',
        id,
        scale,
        width: size.width,
        height: size.height,
        pixels: pixels.data,
        channels: pixels.channels,
        tileSize: run.tileSize ?? TILE_SIZE,
        overlap: TILE_OVERLAP,
        state,
      }),
      signal,
      onAbort: () => {
        atCancel = Atomics.load(state, 1);
        Atomics.store(state, 0, 1);
      },
      onReply: (message) => {
        switch (message.type) {
          case 'tile':
            run.progress?.(message.done, message.total);
            return undefined;
          case 'band': {
            const band = { y: message.y, height: message.height, data: message.data };
            writing = writing.then(() => onBand(band));
            // A band that cannot be written stops the job, as a cancel does.
            writing.catch(() => Atomics.store(state, 0, 1));
            return undefined;
          }
          case 'done':
            return writing.then(() => ({ tiles: message.tiles }));
          case 'canceled':
            run.onCanceled?.({ atCancel, run: message.tiles });
            // A band that failed to be written is the cause; else the abort's reason.
            return writing.then(() => Promise.reject(signal?.reason ?? new Error('super-resolution canceled')));
        }
      },
    });
  }

  /** Ends the worker thread (its models go with it); the next job starts a new one. */
  close(): Promise<void> {
    return this.thread.close();
  }
}

let shared: SuperResolutionEngine | undefined;

/** This process's engine: one worker thread, its models loaded once and kept. */
export function superResolutionEngine(): SuperResolutionEngine {
  shared ??= new SuperResolutionEngine();
  return shared;
}

export interface SuperResolveRun extends UpscaleRun {
  /** A directory of the task's own, where the output bands are written. */
  tmpDir: string;
}

/** A finished super-resolution: its output, opened as often as asked (each a new sharp pipeline). */
export interface SuperResolved {
  open(): Sharp;
  /** The network's scale that ran. */
  scale: ModelScale;
  tiles: number;
}

/**
 * `image` (upright) upscaled by the network to `target`: the smallest of the network's scales at
 * or above the one asked for, then an exact Lanczos resize when the sizes differ. Pixels are
 * converted to sRGB first (ICC profiles applied), alpha is upscaled with Lanczos.
 */
export async function superResolve(image: Sharp, target: Size, run: SuperResolveRun): Promise<SuperResolved> {
  const { data, info } = await image.toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  const size = { width: info.width, height: info.height };
  const hasAlpha = info.channels === 4;
  if (info.channels !== 3 && info.channels !== 4) throw new Error(`super-resolution got ${info.channels} channels in sRGB`);
  const scale = modelScaleFor(Math.max(target.width / size.width, target.height / size.height));
  const dir = await fs.promises.mkdtemp(path.join(run.tmpDir, 'super-resolution-'));
  const bands: string[] = [];
  const outWidth = size.width * scale;
  // The worker reads the colour channels itself: this thread, which serves HTTP, does not copy them.
  const { tiles } = await superResolutionEngine().upscale(
    { data, channels: hasAlpha ? 4 : 3 },
    size,
    scale,
    async (band) => {
      const file = path.join(dir, `band-${String(bands.length).padStart(5, '0')}.tif`);
      await sharp(band.data, { raw: { width: outWidth, height: band.height, channels: 3 } })
        .tiff({ compression: 'none' })
        .toFile(file);
      bands.push(file);
    },
    run,
  );
  let alpha: string | undefined;
  if (hasAlpha) {
    // Written out too: at ×4 the alpha plane alone is 16 bytes per input pixel.
    alpha = path.join(dir, 'alpha.tif');
    await sharp(data, { raw: { width: size.width, height: size.height, channels: 4 } })
      .extractChannel(3)
      .resize({ width: target.width, height: target.height, fit: 'fill', kernel: 'lanczos3' })
      .toColourspace('b-w')
      .tiff({ compression: 'none' })
      .toFile(alpha);
  }
  const outHeight = size.height * scale;
  const exact = outWidth === target.width && outHeight === target.height;
  const open = (): Sharp => {
    // A join makes every cell as tall as the tallest band: the last band, shorter when the height
    // is not a multiple of the tile, is padded below. Cut back to the network's output first.
    let out =
      bands.length === 1 ? sharp(bands[0]) : sharp(bands, { join: { across: 1 } }).extract({ left: 0, top: 0, width: outWidth, height: outHeight });
    if (!exact) out = out.resize({ width: target.width, height: target.height, fit: 'fill', kernel: 'lanczos3' });
    // Joined after the resize (sharp applies joinChannel last), at the target size already.
    return alpha ? out.joinChannel(alpha) : out;
  };
  return { open, scale, tiles };
}
