// The last step: the output format's encoder (from the format table) over a finished sharp
// pipeline, or, for a target size, a search of the encoder's quality for the largest output
// that fits, or, for a similarity (compress "auto"), for the smallest output that keeps it.
import sharp, { type OutputInfo, type Sharp } from 'sharp';
import { TaskError } from '../errors.js';
import { asTaskError } from './errors.js';
import { canBeLossless, writerOf, type EncodeSettings, type OutputFormat } from './formats.js';
import { optimisePng, type OptimiseBounds } from './png-optimise.js';
import { tidyPng } from './png-size.js';
import { reference, similarity, type Reference } from './similarity.js';

export interface EncodeOptions extends EncodeSettings {
  format: OutputFormat;
  /** An encoder of its own for an animation libvips cannot write (animated AVIF: pipeline.ts). */
  sequence?: (image: Sharp, options: EncodeOptions) => Promise<EncodedImage>;
}

export interface EncodedImage {
  data: Buffer;
  format: OutputFormat;
  width: number;
  height: number;
  frames: number;
  /** Set by a search (target size, similarity): the quality chosen (absent when the output is lossless), */
  quality?: number;
  /** and, by a similarity search, the output's SSIM to the pixels it was encoded from. */
  ssim?: number;
}

/** The format's encoder, with its settings, added to `image` (a sharp pipeline, not yet run): for the formats libvips writes. */
export function applyEncoder(image: Sharp, { format, ...settings }: EncodeOptions): Sharp {
  const writer = writerOf(format);
  if (!('encode' in writer)) throw new Error(`${format} is not written by libvips`);
  return writer.encode(image, settings);
}

export async function encode(image: Sharp, options: EncodeOptions): Promise<EncodedImage> {
  try {
    if (options.sequence) return await options.sequence(image, options);
    const writer = writerOf(options.format);
    if ('encodePixels' in writer) {
      // An encoder outside libvips (JPEG XL): the finished pipeline's pixels, one frame, as 8-bit RGBA.
      const { format, ...settings } = options;
      const { data, info } = await image.ensureAlpha().raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
      const encoded = await writer.encodePixels({ data, width: info.width, height: info.height }, settings);
      return { data: encoded, format, width: info.width, height: info.height, frames: 1 };
    }
    options = await withColours(image, options);
    const { data: written, info } = await applyEncoder(image, options).toBuffer({ resolveWithObject: true });
    // Compress drops the chunks a PNG does without (png-size.ts); other kinds write what libvips writes.
    const data = options.format === 'png' && options.favourSize ? tidyPng(written) : written;
    const height = (info as { pageHeight?: number }).pageHeight ?? info.height;
    return { data, format: options.format, width: info.width, height, frames: await framesOf(data, info) };
  } catch (err) {
    throw asTaskError(err);
  }
}

/** Images up to this many pixels have their colours counted for a palette PNG (one decode, bounded). */
export const COUNT_COLOURS_MAX_PIXELS = 4_000_000;
/**
 * The most colours written as an exact palette: up to 16 the bit depth shrinks (1, 2 or 4 bits);
 * past it the 8-bit palette of the quantiser (quality 80) was the smaller on the bench's graphics.
 */
const EXACT_PALETTE_MAX_COLOURS = 16;

/**
 * For a palette PNG favouring size (compress), `options` with `colours` set: the image's exact
 * number of colours when at most EXACT_PALETTE_MAX_COLOURS, else 0 (more colours, or too large to count).
 * The encoder then writes that exact palette at the smallest bit depth (1, 2 or 4 bits), as
 * pngquant does for few-colour graphics. Counted once: options already counted pass through.
 */
async function withColours(image: Sharp, options: EncodeOptions): Promise<EncodeOptions> {
  if (options.format !== 'png' || !options.favourSize || options.lossless || options.colours !== undefined) return options;
  try {
    const count = await distinctColours(image);
    // libvips' palettes have at least 2 entries: a one-colour image is written with 2 (1 bit).
    return { ...options, colours: count === undefined ? 0 : Math.max(2, count) };
  } catch (err) {
    throw asTaskError(err);
  }
}

/** The number of distinct pixel values (all channels) of the pipeline's output, or undefined past EXACT_PALETTE_MAX_COLOURS or COUNT_COLOURS_MAX_PIXELS. */
async function distinctColours(image: Sharp): Promise<number | undefined> {
  const meta = await image.metadata();
  const pixels = (meta.width ?? Infinity) * (meta.height ?? Infinity);
  if (pixels > COUNT_COLOURS_MAX_PIXELS) return undefined;
  const { data, info } = await image.clone().raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  if (info.width * info.height > COUNT_COLOURS_MAX_PIXELS) return undefined;
  const channels = info.channels;
  const seen = new Set<number>();
  for (let i = 0; i < data.length; i += channels) {
    let key = 0;
    for (let c = 0; c < channels; c++) key = key * 256 + data[i + c]!;
    seen.add(key);
    if (seen.size > EXACT_PALETTE_MAX_COLOURS) return undefined;
  }
  return seen.size;
}

/**
 * The frames the encoded file holds. The encoders merge identical consecutive frames (adding
 * their delays), so the count libvips was given may be more: an animation is counted in its output.
 */
async function framesOf(data: Buffer, info: OutputInfo): Promise<number> {
  const given = (info as { pages?: number }).pages ?? 1;
  if (given <= 1) return 1;
  return (await sharp(data, { limitInputPixels: false }).metadata()).pages ?? 1;
}

/**
 * Binary search for the highest quality whose output fits `targetSize` bytes. Each probe
 * re-runs the pipeline from the source (`build`: a libvips pipeline is encoded once); `onStep`
 * runs before each (the deadline).
 */
export async function encodeToSize(
  build: () => Promise<Sharp>,
  options: EncodeOptions,
  targetSize: number,
  onStep: () => void,
): Promise<EncodedImage> {
  if (options.lossless) throw new TaskError('TARGET_SIZE_UNREACHABLE', 'targetSize cannot be combined with lossless output');
  options = await withColours(await build(), { ...options, favourSize: true });
  let low = 1;
  let high = 100;
  let best: EncodedImage | undefined;
  let smallest = Infinity;
  while (low <= high) {
    onStep();
    const quality = Math.floor((low + high) / 2);
    const candidate = await encode(await build(), { ...options, quality, favourSize: true });
    smallest = Math.min(smallest, candidate.data.length);
    if (candidate.data.length <= targetSize) {
      best = { ...candidate, quality };
      low = quality + 1;
    } else {
      high = quality - 1;
    }
  }
  if (!best) {
    throw new TaskError(
      'TARGET_SIZE_UNREACHABLE',
      `The smallest ${options.format} output at quality 1 is ${smallest} bytes, more than the target of ${targetSize} bytes`,
    );
  }
  return best;
}

/** Encodes a similarity search may make: SIMILARITY_PROBES lossy tries, then one lossless. */
export const SIMILARITY_PROBES = 6;
/**
 * The lowest quality the search tries, by format. SSIM barely sees banding in smooth gradients
 * (a flat sky, a studio backdrop): mozjpeg below quality 70 turns the rings of such a gradient
 * into visible blocks while luma SSIM stays above 0.99, so the search stays above where that
 * begins. For PNG and GIF the quality is the palette's.
 */
const LOWEST_QUALITY: Record<OutputFormat, number> = { jpeg: 70, webp: 70, tiff: 70, avif: 45, png: 30, gif: 30, jxl: 65 };

/**
 * The smallest output whose SSIM to the pixels it is encoded from is at least `threshold`: a
 * binary search of the encoder's quality (SSIM grows with it) of at most SIMILARITY_PROBES
 * encodes, each compared with the reference (similarity.ts bounds a comparison's pixels). When
 * no quality tried keeps the threshold, the output is lossless where the format can be, else
 * the best quality tried. Lossless WebP is tried too when only a high quality kept it (graphics,
 * where lossless WebP is often the smaller), and a PNG of at most 16 colours starts from its
 * exact palette (lossless). At most SIMILARITY_PROBES + 1 encodes in all. With `bounds`, a PNG
 * chosen is then optimised losslessly within them (the same pixels, fewer bytes).
 */
export async function encodeToSimilarity(
  build: () => Promise<Sharp>,
  options: EncodeOptions,
  threshold: number,
  onStep: () => void,
  bounds?: OptimiseBounds,
): Promise<EncodedImage> {
  type Measured = EncodedImage & { ssim: number };
  let ref: Reference | undefined;
  const measure = async (settings: EncodeOptions, quality?: number): Promise<Measured> => {
    onStep();
    const encoded = await encode(await build(), settings);
    try {
      // An animation is judged on its first frame (the encoders merge identical frames, so
      // the frames after it need not line up with the source's).
      ref ??= await reference(await build(), encoded);
      return { ...encoded, quality, ssim: await similarity(ref, encoded.data) };
    } catch (err) {
      throw asTaskError(err);
    }
  };
  options = await withColours(await build(), { ...options, favourSize: true });
  let [low, high] = [LOWEST_QUALITY[options.format], 100];
  let kept: Measured | undefined;
  let closest: Measured | undefined;
  // A palette holding every colour exactly is lossless (SSIM 1), and often smaller than a
  // quantised, dithered one: the candidate to beat.
  if (options.format === 'png' && options.colours) {
    onStep();
    kept = { ...(await encode(await build(), { ...options, quality: undefined, lossless: false })), ssim: 1 };
  }
  for (let probe = 0; probe < SIMILARITY_PROBES && low <= high; probe++) {
    const quality = Math.floor((low + high) / 2);
    const candidate = await measure({ ...options, quality, lossless: false, favourSize: true }, quality);
    if (candidate.ssim >= threshold) {
      if (!kept || candidate.data.length < kept.data.length) kept = candidate;
      high = quality - 1;
    } else {
      if (!closest || candidate.ssim > closest.ssim) closest = candidate;
      low = quality + 1;
    }
  }
  const tryLossless = canBeLossless(options.format) && (!kept || (options.format === 'webp' && (kept.quality ?? 0) >= 90));
  if (tryLossless) {
    const lossless = await measure({ ...options, quality: undefined, lossless: true, favourSize: true });
    if (!kept || lossless.data.length < kept.data.length) kept = lossless;
  }
  // The loop ran at least once (low ≤ high at the start), so one of them is set.
  const chosen = kept ?? closest!;
  // The pixels measured, in fewer bytes: a PNG rewritten losslessly (png-optimise.ts).
  if (chosen.format === 'png' && bounds) return { ...chosen, data: await optimisePng(chosen.data, chosen.width * chosen.height, bounds) };
  return chosen;
}
