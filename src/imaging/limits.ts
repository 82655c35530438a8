// The plan's image limits, each checked at its cheapest point: a source's header before any pixel
// is decoded, the output size the options decide before decoding, and a raw decoder's pixel
// buffer before it is allocated. Every refusal is TaskError IMAGE_TOO_LARGE.
import { constants as bufferConstants } from 'node:buffer';
import { TaskError } from '../errors.js';
import { isAnimation } from './formats.js';
import type { Size } from './geometry.js';

export interface ImageLimits {
  maxPixels: number;
  maxFrames: number;
  /** All frames together (frames × canvas): an animation of tiny frames on a huge canvas. */
  maxTotalPixels: number;
}

/** Resize and upscale outputs are capped at this many pixels per side. */
export const MAX_OUTPUT_SIDE = 16_384;

/** A source's header against the plan: pixels per frame, frames, and all frames together. */
export function checkSource(source: Size & { frames: number }, limits: ImageLimits): void {
  checkPixels(source, limits, 'The image');
  if (source.frames > limits.maxFrames) {
    throw new TaskError('IMAGE_TOO_LARGE', `The animation has ${source.frames} frames; the plan allows ${limits.maxFrames}`);
  }
  checkTotalPixels(source, source.frames, limits, 'The image');
}

/**
 * The computed output (one frame of `size`, `frames` of them) against the plan's pixel limits
 * and, for resize and upscale, the side cap.
 */
export function checkOutputSize(size: Size, limits: ImageLimits, capSide: boolean, frames = 1): void {
  if (capSide && (size.width > MAX_OUTPUT_SIDE || size.height > MAX_OUTPUT_SIDE)) {
    throw new TaskError('IMAGE_TOO_LARGE', `The output would be ${size.width}×${size.height}; outputs are capped at ${MAX_OUTPUT_SIDE} px per side`);
  }
  checkPixels(size, limits, 'The output');
  checkTotalPixels(size, frames, limits, 'The output');
}

/** How many frames the output of a `frames`-frame source holds: all where the format animates. */
export const outputFrames = (frames: number, format: string): number => (frames > 1 && isAnimation(format) ? frames : 1);

export function checkPixels(size: Size, limits: ImageLimits, what: string): void {
  if (size.width * size.height > limits.maxPixels) {
    throw new TaskError(
      'IMAGE_TOO_LARGE',
      `${what} is ${size.width}×${size.height} (${size.width * size.height} pixels per frame); the plan allows ${limits.maxPixels}`,
    );
  }
}

export function checkTotalPixels(size: Size, frames: number, limits: ImageLimits, what: string): void {
  const total = size.width * size.height * frames;
  if (total > limits.maxTotalPixels) {
    throw new TaskError(
      'IMAGE_TOO_LARGE',
      `${what} is ${frames} frame(s) of ${size.width}×${size.height} (${total} pixels in all); the plan allows ${limits.maxTotalPixels}`,
    );
  }
}

/** A raw decoder's pixel buffer against the pixel limit and what a Buffer can hold at all, before it is allocated. */
export function checkPixelsToDecode(width: number, height: number, channels: number, maxPixels: number): void {
  const pixels = width * height;
  // Written so that a NaN limit refuses rather than allows.
  if (!(pixels <= maxPixels)) {
    throw new TaskError('IMAGE_TOO_LARGE', `The image is ${width}×${height} (${pixels} pixels); the plan allows ${maxPixels}`);
  }
  if (pixels * channels > bufferConstants.MAX_LENGTH) {
    throw new TaskError('IMAGE_TOO_LARGE', `The image is ${width}×${height}, too large to decode`);
  }
}
