// A cover resize whose crop is chosen by content (libvips' attention and entropy strategies).
// libvips refuses those strategies on a multi-page image, so for an animation the rectangle is
// chosen on the first frame, and every frame is scaled alike and cut at that rectangle: the
// frames stay aligned, as a single crop of the animation would leave them.
import type { ResizeOptions, Sharp } from 'sharp';
import { resizedSize, type Size } from './geometry.js';

const SMART_POSITIONS: readonly string[] = ['attention', 'entropy'];

export interface CoverOptions extends ResizeOptions {
  width: number;
  height: number;
}

/**
 * `image` (frames of `source` size) resized to cover width × height at `options.position`;
 * `firstFrame`, given when `image` is a whole animation, opens its first frame upright.
 */
export async function coverResize(image: Sharp, options: CoverOptions, source: Size, firstFrame: (() => Sharp) | undefined): Promise<Sharp> {
  const position = options.position;
  if (!firstFrame || typeof position !== 'string' || !SMART_POSITIONS.includes(position)) {
    return image.resize({ ...options, fit: 'cover' });
  }
  // The crop libvips chooses on the first frame, in the coordinates of the scaled frame.
  const { info } = await firstFrame()
    .resize({ ...options, fit: 'cover' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  // cover scales as outside does, then crops.
  const scaled = resizedSize(source, {
    width: options.width,
    height: options.height,
    fit: 'outside',
    withoutEnlargement: options.withoutEnlargement,
  });
  const width = Math.min(info.width, scaled.width);
  const height = Math.min(info.height, scaled.height);
  // libvips reports the offsets as the translation of the frame (zero or negative).
  const left = Math.min(Math.abs(info.cropOffsetLeft ?? 0), scaled.width - width);
  const top = Math.min(Math.abs(info.cropOffsetTop ?? 0), scaled.height - height);
  return image
    .resize({ ...options, width: scaled.width, height: scaled.height, fit: 'fill', position: undefined })
    .extract({ left, top, width, height });
}
