// A cover resize whose crop is chosen by content: libvips' attention and entropy strategies, and
// `face` — centred on the box around every face the detector finds (faces.ts), `attention` when
// it finds none. libvips refuses its strategies on a multi-page image, so for an animation the
// rectangle is chosen on the first frame, and every frame is scaled alike and cut at that
// rectangle: the frames stay aligned, as a single crop of the animation would leave them.
import type { ResizeOptions, Sharp } from 'sharp';
import { boxAround, detectFaces } from './faces.js';
import { resizedSize, type Size } from './geometry.js';

const SMART_POSITIONS: readonly string[] = ['attention', 'entropy', 'face'];

export interface CoverOptions extends ResizeOptions {
  width: number;
  height: number;
}

/**
 * `image` (frames of `source` size) resized to cover width × height at `options.position`;
 * `firstFrame`, given when `image` is a whole animation, opens its first frame upright. `signal`
 * cancels a face detection.
 */
export async function coverResize(
  image: Sharp,
  options: CoverOptions,
  source: Size,
  firstFrame: (() => Sharp) | undefined,
  signal?: AbortSignal,
): Promise<Sharp> {
  const position = options.position;
  if (position === 'face') {
    const faces = await detectFaces(firstFrame ? firstFrame() : image, source, { signal });
    const box = boxAround(faces);
    if (box) return cutAround(image, options, source, { x: box.left + box.width / 2, y: box.top + box.height / 2 });
    return coverResize(image, { ...options, position: 'attention' }, source, firstFrame, signal);
  }
  if (!firstFrame || typeof position !== 'string' || !SMART_POSITIONS.includes(position)) {
    return image.resize({ ...options, fit: 'cover' });
  }
  // The crop libvips chooses on the first frame, in the coordinates of the scaled frame.
  const { info } = await firstFrame()
    .resize({ ...options, fit: 'cover' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  const scaled = coverScale(source, options);
  const width = Math.min(info.width, scaled.width);
  const height = Math.min(info.height, scaled.height);
  // libvips reports the offsets as the translation of the frame (zero or negative).
  const left = Math.min(Math.abs(info.cropOffsetLeft ?? 0), scaled.width - width);
  const top = Math.min(Math.abs(info.cropOffsetTop ?? 0), scaled.height - height);
  return image
    .resize({ ...options, width: scaled.width, height: scaled.height, fit: 'fill', position: undefined })
    .extract({ left, top, width, height });
}

/** cover scales as outside does, then crops. */
function coverScale(source: Size, options: CoverOptions): Size {
  return resizedSize(source, { width: options.width, height: options.height, fit: 'outside', withoutEnlargement: options.withoutEnlargement });
}

/** The cover crop whose centre is as near `centre` (in the source's pixels) as the image allows. */
function cutAround(image: Sharp, options: CoverOptions, source: Size, centre: { x: number; y: number }): Sharp {
  const scaled = coverScale(source, options);
  const width = Math.min(options.width, scaled.width);
  const height = Math.min(options.height, scaled.height);
  const place = (at: number, scale: number, side: number, room: number) => Math.max(0, Math.min(room - side, Math.round(at * scale - side / 2)));
  const left = place(centre.x, scaled.width / source.width, width, scaled.width);
  const top = place(centre.y, scaled.height / source.height, height, scaled.height);
  return image
    .resize({ ...options, width: scaled.width, height: scaled.height, fit: 'fill', position: undefined })
    .extract({ left, top, width, height });
}
