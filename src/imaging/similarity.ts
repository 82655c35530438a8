// How far an encoded image is from the pixels it was encoded from, as SSIM (Wang et al. 2004)
// on luma: 1 is identical, and VISUALLY_LOSSLESS_SSIM is the least compress "auto" accepts.
//
// The metric is ssim.js's (Bezkrovny's variant: 11×11 windows, the luma of Rec. 601 weights),
// computed at full resolution up to SIMILARITY_MAX_PIXELS; a larger image is compared on copies
// of both reduced to that many pixels (the same reduction on both sides), so one comparison
// costs a bounded time whatever the image (about 0.3 s of CPU at the cap). Transparent images
// are compared flattened over black and over white, and the lower score counts: a change in
// alpha shows on one of them, while a colour under full transparency (invisible) shows on none.
import sharp, { type Sharp } from 'sharp';
import { ssim } from 'ssim.js';
import { asLibvipsAvif } from './heif-items.js';

/**
 * The visually-lossless threshold: at or above it, differences are not seen at 100 % on a screen
 * (a 6 MP camera photo through mozjpeg scores 0.976 at quality 70, 0.991 at 80, 0.997 at 90; the
 * bench reports every output's score).
 */
export const VISUALLY_LOSSLESS_SSIM = 0.99;

/** Pixels compared at most; past this, both images are reduced to it first. */
export const SIMILARITY_MAX_PIXELS = 2_000_000;

/** The reference side of comparisons, decoded and reduced once. */
export interface Reference {
  width: number;
  height: number;
  /** The compared sides' size (the reference reduced to SIMILARITY_MAX_PIXELS). */
  compared: { width: number; height: number };
  /** RGBA pixels of each background the image is seen on (one when it is opaque). */
  views: Uint8ClampedArray[];
  hasAlpha: boolean;
}

const BACKGROUNDS = ['#000000', '#ffffff'];

/**
 * Decodes `image` (a finished pipeline) as a reference for outputs of `size` (one frame: the top
 * rows of an animation, whose frames are one below the other). The pixels are reduced in the
 * pipeline, so a huge image is never held whole. `scale`: the reduction to compare at, in place
 * of the one `size` calls for (crops of a larger image are compared as that image would be).
 */
export async function reference(image: Sharp, size: { width: number; height: number }, scale = comparedScale(size)): Promise<Reference> {
  const { width, height } = size;
  const compared =
    scale === 1 ? { width, height } : { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
  const { data, info } = await viewPipeline(image, size, compared).raw().toBuffer({ resolveWithObject: true });
  const hasAlpha = info.channels === 4;
  const raw = { raw: { width: info.width, height: info.height, channels: info.channels } };
  return { width, height, compared, hasAlpha, views: await viewsOf(() => sharp(data, raw), hasAlpha) };
}

/**
 * SSIM of `candidate` (encoded bytes; an animation's first frame) to the reference; the lowest
 * over the backgrounds a transparent image is seen on.
 */
export async function similarity(ref: Reference, encoded: Buffer): Promise<number> {
  // An AVIF image sequence is judged on its still image, its first frame.
  const candidate = asLibvipsAvif(encoded);
  const meta = await sharp(candidate, { limitInputPixels: false }).metadata();
  const height = meta.pageHeight ?? meta.height;
  if (meta.width !== ref.width || height !== ref.height) {
    throw new Error(`cannot compare ${meta.width}×${height} with ${ref.width}×${ref.height}`);
  }
  const open = () => viewPipeline(sharp(candidate, { limitInputPixels: false }), ref, ref.compared);
  const views = await viewsOf(open, ref.hasAlpha);
  let lowest = 1;
  for (const [index, view] of views.entries()) {
    const { width, height: h } = ref.compared;
    const score = ssim({ data: ref.views[index]!, width, height: h }, { data: view, width, height: h }, SSIM_OPTIONS).mssim;
    lowest = Math.min(lowest, score);
  }
  return lowest;
}

/** Full resolution (no viewing-distance downsampling); Bezkrovny's windows: fast and in range. */
const SSIM_OPTIONS = { ssim: 'bezkrovny', downsample: false } as const;

/** The factor an image of `size` is reduced by before it is compared: 1 up to SIMILARITY_MAX_PIXELS. */
export function comparedScale({ width, height }: { width: number; height: number }): number {
  const pixels = width * height;
  return pixels <= SIMILARITY_MAX_PIXELS ? 1 : Math.sqrt(SIMILARITY_MAX_PIXELS / pixels);
}

/** The first `size.height` rows of `image` (a frame), in sRGB, reduced to `compared`: the same on both sides. */
function viewPipeline(image: Sharp, size: { width: number; height: number }, compared: { width: number; height: number }): Sharp {
  let view = image.extract({ left: 0, top: 0, width: size.width, height: size.height });
  if (compared.width !== size.width || compared.height !== size.height) view = view.resize(compared.width, compared.height, { fit: 'fill' });
  return view.toColourspace('srgb');
}

/** The view as seen on each background (opaque: one), RGBA. */
async function viewsOf(open: () => Sharp, hasAlpha: boolean): Promise<Uint8ClampedArray[]> {
  const backgrounds = hasAlpha ? BACKGROUNDS : BACKGROUNDS.slice(0, 1);
  return Promise.all(
    backgrounds.map(async (background) => {
      const pixels = await open().flatten({ background }).ensureAlpha(1).raw().toBuffer();
      return new Uint8ClampedArray(pixels.buffer, pixels.byteOffset, pixels.length);
    }),
  );
}
