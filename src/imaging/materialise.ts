// A sharp object applies its operations in sharp's own fixed order, not the order they are
// called in. A step that must apply several in a stated order (adjust) or read a result before
// going on (trim's box) computes each one here and opens its pixels again.
import sharp, { type Sharp } from 'sharp';
import { TaskError } from '../errors.js';
import { asTaskError } from './errors.js';

export interface Pixels {
  data: Buffer;
  width: number;
  height: number;
  channels: 1 | 2 | 3 | 4;
}

/** The image's pixels, 8-bit sRGB (alpha kept), computed before `deadline` (ms since epoch). */
export async function pixelsOf(image: Sharp, deadline: number): Promise<Pixels & { trimOffsetLeft?: number; trimOffsetTop?: number }> {
  const seconds = Math.ceil((deadline - Date.now()) / 1000);
  if (seconds <= 0) throw new TaskError('PROCESSING_TIMEOUT', 'The task ran past its time limit');
  const { data, info } = await image
    .toColourspace('srgb')
    .raw({ depth: 'uchar' })
    .timeout({ seconds })
    .toBuffer({ resolveWithObject: true })
    .catch((err) => Promise.reject(asTaskError(err)));
  return {
    data,
    width: info.width,
    height: info.height,
    channels: info.channels,
    trimOffsetLeft: info.trimOffsetLeft,
    trimOffsetTop: info.trimOffsetTop,
  };
}

/** Pixels as a sharp image again. */
export function openPixels({ data, width, height, channels }: Pixels): Sharp {
  return sharp(data, { raw: { width, height, channels } });
}

/** The image computed now and opened again: what follows starts from its pixels. */
export async function materialise(image: Sharp, deadline: number): Promise<Sharp> {
  const pixels = await pixelsOf(image, deadline);
  // A grey result (grayscale) stays grey whatever colour space is asked in the same pipeline:
  // made RGB here, so that what follows (a tint) has colour to work with.
  return openPixels(pixels.channels <= 2 ? await pixelsOf(openPixels(pixels), deadline) : pixels);
}
