// The last step: the output format's encoder (from the format table) over a finished sharp
// pipeline, or, for a target size, a search of the encoder's quality for the largest output
// that fits, or, for a similarity (compress "auto"), for the smallest output that keeps it.
import sharp, { type OutputInfo, type Sharp } from 'sharp';
import { TaskError } from '../errors.js';
import { asTaskError } from './errors.js';
import { canBeLossless, hasLocalCoding, writerOf, type EncodeSettings, type OutputFormat } from './formats.js';
import { optimisePng, type OptimiseBounds } from './png-optimise.js';
import { tidyPng } from './png-size.js';
import { comparedScale, reference, similarity, type Reference } from './similarity.js';

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

/** How a quality search is bounded and reported (the task's deadline, cancel and progress). */
export interface SearchControl {
  /** Runs before each encode: throws on cancel or past the deadline. */
  onStep(): void;
  /** The task's deadline (ms since epoch): an encode predicted to end past it is not started. */
  deadline: number;
  /** The share of the search done, 0–95, after each encode (the task's `progress`). */
  progress?(percent: number): void;
  /** The output is an animation: searched on its whole (crops are of a still image). */
  animated?: boolean;
}

/**
 * Progress of a search whose work is counted in pixels encoded, `planned` at most: reported
 * after each encode, never going back, held under 95 (the outputs are stored after it).
 */
function searchProgress(control: SearchControl, planned: number): (pixels: number) => void {
  let done = 0;
  let reported = 0;
  return (pixels) => {
    done += pixels;
    const percent = Math.min(95, Math.floor((95 * done) / planned));
    if (percent > reported) control.progress?.((reported = percent));
  };
}

/** Whether an encode taking about `ms` would end before the deadline. */
const fits = (control: SearchControl, ms: number): boolean => Date.now() + ms <= control.deadline;

/** Probes a bisection of the qualities 1–100 takes at most. */
const SIZE_PROBES = 7;

/**
 * The highest quality whose output fits `targetSize` bytes: a bisection of the qualities whose
 * bytes were not measured yet, each probe re-running the pipeline from the source (`build`: a
 * libvips pipeline is encoded once). A still image of at least SAMPLED_SEARCH_MIN_PIXELS, in a
 * format whose coding is local, is first searched on crops of it (the sampled search below):
 * their bytes at a quality, times the whole's share of them, foretell the whole's, and each
 * encode of the whole corrects that share; at most SAMPLED_FULL_ENCODES such encodes, then the
 * bisection closes what is left between the highest quality that fitted and the lowest that did
 * not. The control's onStep runs before each encode (the deadline), and progress is reported
 * after each. An encode that would not end before the deadline is not started: the highest
 * quality that fitted so far is the answer, or, with none yet, the task fails PROCESSING_TIMEOUT
 * then, rather than at the limit.
 */
export async function encodeToSize(
  build: () => Promise<Sharp>,
  options: EncodeOptions,
  targetSize: number,
  control: SearchControl,
): Promise<EncodedImage> {
  if (options.lossless) throw new TaskError('TARGET_SIZE_UNREACHABLE', 'targetSize cannot be combined with lossless output');
  options = await withColours(await build(), { ...options, favourSize: true });
  const lossy = { ...options, favourSize: true };
  // Qualities of the whole: `fitted` the highest measured that fits (`best`), `tooLarge` the lowest that does not.
  let fitted = 0;
  let tooLarge = 101;
  let best: EncodedImage | undefined;
  let smallest = Infinity;
  let wholeMs = 0;
  let progress: (pixels: number) => void = () => {};
  let wholePixels = 1;
  const encodeWhole = async (quality: number): Promise<number> => {
    control.onStep();
    const started = Date.now();
    const candidate = await encode(await build(), { ...lossy, quality });
    wholeMs = Math.max(wholeMs, Date.now() - started);
    progress(wholePixels);
    smallest = Math.min(smallest, candidate.data.length);
    if (candidate.data.length <= targetSize) {
      if (quality > fitted) [fitted, best] = [quality, { ...candidate, quality }];
    } else {
      tooLarge = Math.min(tooLarge, quality);
    }
    return candidate.data.length;
  };
  const tooSlowNow = (ms: number) => {
    if (best) return true;
    throw tooSlow(options.format, ms, control);
  };

  const sampled = !control.animated && hasLocalCoding(options.format) ? await sampleOf(build) : undefined;
  if (sampled) {
    const sample = sampled.sample;
    wholePixels = sampled.pixels;
    progress = searchProgress(control, SIZE_PROBES * sample.pixels + SAMPLED_FULL_ENCODES * wholePixels);
    const onSample = new Map<number, number>();
    let sampleMs = 0;
    const sampleBytes = async (quality: number): Promise<number> => {
      const known = onSample.get(quality);
      if (known !== undefined) return known;
      control.onStep();
      const started = Date.now();
      const bytes = (await encode(sample.open(), { ...lossy, quality })).data.length;
      sampleMs += Date.now() - started;
      onSample.set(quality, bytes);
      progress(sample.pixels);
      return bytes;
    };
    // The whole's bytes per byte of the crops: their share of its pixels at first, then as measured.
    let share = wholePixels / sample.pixels;
    const estimate = () => wholeMs || sampled.renderMs + (sampleMs / Math.max(1, onSample.size)) * (wholePixels / sample.pixels);
    for (let round = 0; round < SAMPLED_FULL_ENCODES && fitted + 1 < tooLarge; round++) {
      let [low, high, guess] = [fitted + 1, tooLarge - 1, fitted + 1];
      while (low <= high) {
        const quality = Math.floor((low + high) / 2);
        if ((await sampleBytes(quality)) * share <= targetSize) [guess, low] = [quality, quality + 1];
        else high = quality - 1;
      }
      if (!fits(control, estimate()) && tooSlowNow(estimate())) return best!;
      share = (await encodeWhole(guess)) / (await sampleBytes(guess));
    }
  } else {
    progress = searchProgress(control, SIZE_PROBES);
  }
  // A bisection of the whole between what fitted and what did not (all of 1–100 without a sample).
  while (fitted + 1 < tooLarge) {
    if (!fits(control, wholeMs) && tooSlowNow(wholeMs)) break;
    await encodeWhole(Math.floor((fitted + tooLarge) / 2));
  }
  if (!best) {
    throw new TaskError(
      'TARGET_SIZE_UNREACHABLE',
      `The smallest ${options.format} output at quality 1 is ${smallest} bytes, more than the target of ${targetSize} bytes`,
    );
  }
  return best;
}

/** The search stops before an encode it cannot finish: the task fails now, not at its limit. */
function tooSlow(format: OutputFormat, ms: number, control: SearchControl): TaskError {
  const left = Math.max(0, Math.round((control.deadline - Date.now()) / 1000));
  return new TaskError(
    'PROCESSING_TIMEOUT',
    `The quality search stopped: the next ${format} encode of this image takes about ${Math.ceil(ms / 1000)} s and the task has ${left} s left of its time limit`,
  );
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

type Measured = EncodedImage & { ssim: number };

/**
 * The smallest output whose SSIM to the pixels it is encoded from is at least `threshold`: a
 * binary search of the encoder's quality (SSIM grows with it). A still image of at least
 * SAMPLED_SEARCH_MIN_PIXELS, in a format whose coding is local (formats.ts), is searched on
 * crops of it (sampledSimilarity); any other on the whole, in at most SIMILARITY_PROBES encodes,
 * each compared with the reference (similarity.ts bounds a comparison's pixels). When no quality
 * tried keeps the threshold, the output is lossless where the format can be, else the best
 * quality tried. Lossless WebP is tried too when only a high quality kept it (graphics, where
 * lossless WebP is often the smaller), and a PNG of at most 16 colours starts from its exact
 * palette (lossless). At most SIMILARITY_PROBES + 1 encodes in all. An encode that would not
 * end before the deadline is not started: the best output measured is the answer (its `ssim`
 * says how close it came), or, with none yet, the task fails PROCESSING_TIMEOUT at once. With
 * `bounds`, a PNG chosen is then optimised losslessly within them (the same pixels, fewer bytes).
 */
export async function encodeToSimilarity(
  build: () => Promise<Sharp>,
  options: EncodeOptions,
  threshold: number,
  control: SearchControl,
  bounds?: OptimiseBounds,
): Promise<EncodedImage> {
  options = await withColours(await build(), { ...options, favourSize: true });
  const sampled = !control.animated && hasLocalCoding(options.format) ? await sampleOf(build) : undefined;
  if (sampled) return sampledSimilarity(build, options, threshold, control, sampled);
  let ref: Reference | undefined;
  let pixelCount = 0;
  let lastMs = 0;
  let progress: (pixels: number) => void = () => {};
  const measure = async (settings: EncodeOptions, quality?: number): Promise<Measured> => {
    control.onStep();
    const started = Date.now();
    const encoded = await encode(await build(), settings);
    try {
      // An animation is judged on its first frame (the encoders merge identical frames, so
      // the frames after it need not line up with the source's).
      ref ??= await reference(await build(), encoded);
      const measured = { ...encoded, quality, ssim: await similarity(ref, encoded.data) };
      lastMs = Date.now() - started;
      if (!pixelCount) {
        pixelCount = encoded.width * encoded.height;
        progress = searchProgress(control, pixelCount * (SIMILARITY_PROBES + 1));
      }
      progress(pixelCount);
      return measured;
    } catch (err) {
      throw asTaskError(err);
    }
  };
  let [low, high] = [LOWEST_QUALITY[options.format], 100];
  let kept: Measured | undefined;
  let closest: Measured | undefined;
  // A palette holding every colour exactly is lossless (SSIM 1), and often smaller than a
  // quantised, dithered one: the candidate to beat.
  if (options.format === 'png' && options.colours) {
    control.onStep();
    kept = { ...(await encode(await build(), { ...options, quality: undefined, lossless: false })), ssim: 1 };
  }
  for (let probe = 0; probe < SIMILARITY_PROBES && low <= high; probe++) {
    // Past the first, a probe that would end after the deadline is not started: what was measured is the answer.
    if ((kept || closest) && !fits(control, lastMs)) break;
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
  if (tryLossless && fits(control, lastMs)) {
    const lossless = await measure({ ...options, quality: undefined, lossless: true, favourSize: true });
    if (!kept || lossless.data.length < kept.data.length) kept = lossless;
  }
  // The loop ran at least once (low ≤ high at the start), so one of them is set.
  const chosen = kept ?? closest!;
  // The pixels measured, in fewer bytes: a PNG rewritten losslessly (png-optimise.ts).
  if (chosen.format === 'png' && bounds) return { ...chosen, data: await optimisePng(chosen.data, chosen.width * chosen.height, bounds) };
  return chosen;
}

// The sampled search -------------------------------------------------------------------------
// Encoding a 12 MP photo whole takes seconds per try (AVIF most), and a bisection makes six.
// For a format whose coding is local, a quality does to a few full-resolution crops what it
// does to the whole, so the bisection runs on a mosaic of crops (SAMPLE_GRID² tiles of
// SAMPLE_TILE px, spread evenly over the image: about 1 MP, whatever the image), compared at the
// reduction the whole image is compared at. The whole is then encoded at the quality chosen and
// measured: that SSIM is the one reported. Where it misses the threshold (or passes it by more
// than the crops said), the crops' error at that quality is known, and the bisection runs again
// on them with the threshold moved by it; once the whole has been measured on both sides of the
// threshold, with the crops' SSIM mapped onto the whole's by the line through those two points
// (the curves need not run parallel). At most SAMPLED_FULL_ENCODES encodes of the whole.

/** Crops a sample holds across and down; each SAMPLE_TILE px square (a JPEG XL group; 4 AV1 superblocks). */
const SAMPLE_GRID = 4;
const SAMPLE_TILE = 256;
const SAMPLE_PIXELS = (SAMPLE_GRID * SAMPLE_TILE) ** 2;
/** Crops a sample holds. */
export const SAMPLED_CROPS = SAMPLE_GRID ** 2;
/** Still images from this many pixels are searched on crops: below it, a sample saves less than the encodes of the whole it adds. */
export const SAMPLED_SEARCH_MIN_PIXELS = 4 * SAMPLE_PIXELS;
/** Encodes of the whole image a sampled search makes at most (the chosen quality, and its corrections). */
export const SAMPLED_FULL_ENCODES = 3;

interface RawPixels {
  data: Buffer;
  width: number;
  height: number;
  channels: 1 | 2 | 3 | 4;
}

/** The finished pipeline's pixels, 8-bit sRGB: the reference and the crops are read from them. */
async function rendered(image: Sharp): Promise<RawPixels> {
  try {
    const { data, info } = await image.toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    return { data, width: info.width, height: info.height, channels: info.channels };
  } catch (err) {
    throw asTaskError(err);
  }
}

const openRaw = ({ data, width, height, channels }: RawPixels): Sharp => sharp(data, { raw: { width, height, channels } });

/** What a sampled search works from: the whole image's pixels, its crops, and how long the pipeline took to render. */
interface Sampled {
  whole: RawPixels;
  pixels: number;
  sample: RawPixels & { pixels: number; open: () => Sharp };
  renderMs: number;
}

/** The pipeline's output and its crops, when it is large enough to be searched on them (else undefined). */
async function sampleOf(build: () => Promise<Sharp>): Promise<Sampled | undefined> {
  const started = Date.now();
  const whole = await rendered(await build());
  const pixels = whole.width * whole.height;
  if (pixels < SAMPLED_SEARCH_MIN_PIXELS) return undefined;
  const crops = mosaic(whole);
  return { whole, pixels, sample: { ...crops, pixels: crops.width * crops.height, open: () => openRaw(crops) }, renderMs: Date.now() - started };
}

/** SAMPLE_GRID² crops of `pixels` at full resolution, spread evenly (their centres on a regular grid), side by side. */
function mosaic(pixels: RawPixels): RawPixels {
  const { width, height, channels } = pixels;
  const [tileW, tileH] = [Math.min(SAMPLE_TILE, width), Math.min(SAMPLE_TILE, height)];
  const out = { width: tileW * SAMPLE_GRID, height: tileH * SAMPLE_GRID, channels };
  const data = Buffer.alloc(out.width * out.height * channels);
  const origin = (index: number, size: number, tile: number) =>
    Math.min(size - tile, Math.max(0, Math.round(((index + 0.5) * size) / SAMPLE_GRID - tile / 2)));
  for (let row = 0; row < SAMPLE_GRID; row++) {
    const top = origin(row, height, tileH);
    for (let column = 0; column < SAMPLE_GRID; column++) {
      const left = origin(column, width, tileW);
      for (let y = 0; y < tileH; y++) {
        const from = ((top + y) * width + left) * channels;
        pixels.data.copy(data, ((row * tileH + y) * out.width + column * tileW) * channels, from, from + tileW * channels);
      }
    }
  }
  return { ...out, data };
}

async function sampledSimilarity(
  build: () => Promise<Sharp>,
  options: EncodeOptions,
  threshold: number,
  control: SearchControl,
  { whole: pixels, pixels: whole, sample, renderMs }: Sampled,
): Promise<EncodedImage> {
  const samplePixels = sample.pixels;
  const lowest = LOWEST_QUALITY[options.format];
  // Planned: a bisection on the crops and two encodes of the whole (the usual case).
  const progress = searchProgress(control, SIMILARITY_PROBES * samplePixels + 2 * whole);
  const lossy = { ...options, lossless: false, favourSize: true };
  let sampleRef: Reference;
  let wholeRef: Reference;
  try {
    // Compared as the whole image is: reduced by the same factor.
    sampleRef = await reference(sample.open(), sample, comparedScale(pixels));
    wholeRef = await reference(openRaw(pixels), pixels);
  } catch (err) {
    throw asTaskError(err);
  }

  const onSample = new Map<number, number>();
  let sampleMs = 0;
  const probeSample = async (quality: number): Promise<number> => {
    const known = onSample.get(quality);
    if (known !== undefined) return known;
    control.onStep();
    const started = Date.now();
    const encoded = await encode(sample.open(), { ...lossy, quality });
    const score = await similarity(sampleRef, encoded.data).catch((err) => Promise.reject(asTaskError(err)));
    sampleMs += Date.now() - started;
    onSample.set(quality, score);
    progress(samplePixels);
    return score;
  };
  /** The lowest quality in [low, high] whose crops keep `target`, by bisection; undefined when none does. */
  const lowestOnSample = async (target: number, low: number, high: number): Promise<number | undefined> => {
    let found: number | undefined;
    while (low <= high) {
      const quality = Math.floor((low + high) / 2);
      if ((await probeSample(quality)) >= target) {
        found = quality;
        high = quality - 1;
      } else {
        low = quality + 1;
      }
    }
    return found;
  };

  let wholeMs = 0;
  const encodeWhole = async (settings: EncodeOptions, quality?: number): Promise<Measured> => {
    control.onStep();
    const started = Date.now();
    const encoded = await encode(await build(), settings);
    const score = await similarity(wholeRef, encoded.data).catch((err) => Promise.reject(asTaskError(err)));
    wholeMs = Math.max(wholeMs, Date.now() - started);
    progress(whole);
    return { ...encoded, quality, ssim: score };
  };
  // Before the first encode of the whole, its time is foretold from the crops' (per pixel) and the decode's.
  const wholeEstimate = () => wholeMs || renderMs + (sampleMs / Math.max(1, onSample.size)) * (whole / samplePixels);

  let kept: Measured | undefined;
  let closest: Measured | undefined;
  // Qualities of the whole measured below the threshold: the next try lies above the highest.
  let failedBelow = lowest - 1;
  let quality = await lowestOnSample(threshold, lowest, 100);
  for (let round = 0; round < SAMPLED_FULL_ENCODES && quality !== undefined; round++) {
    if (!fits(control, wholeEstimate())) {
      if (kept || closest) break;
      throw tooSlow(options.format, wholeEstimate(), control);
    }
    const measured = await encodeWhole({ ...lossy, quality }, quality);
    if (measured.ssim >= threshold) {
      if (!kept || measured.data.length < kept.data.length) kept = measured;
    } else {
      failedBelow = Math.max(failedBelow, quality);
      if (!closest || measured.ssim > closest.ssim) closest = measured;
    }
    if (round === SAMPLED_FULL_ENCODES - 1) break;
    const ceiling = (kept?.quality ?? 101) - 1;
    let next: number | undefined;
    if (kept?.quality !== undefined && closest?.quality !== undefined) {
      // The whole measured either side of the threshold: the crops' SSIM mapped onto the whole's by
      // the line through those two (their curves need not run parallel), and the crops asked again.
      const [below, above] = [closest as Measured & { quality: number }, kept as Measured & { quality: number }];
      const [cropsBelow, cropsAbove] = [await probeSample(below.quality), await probeSample(above.quality)];
      const slope = (above.ssim - below.ssim) / (cropsAbove - cropsBelow);
      // Where the mapped crops see none between them, the round left is spent halving the gap (the kept output stays the answer).
      const mapped =
        slope > 0 && Number.isFinite(slope)
          ? await lowestOnSample(cropsBelow + (threshold - below.ssim) / slope, failedBelow + 1, ceiling)
          : undefined;
      next = mapped ?? Math.floor((failedBelow + 1 + ceiling) / 2);
    } else {
      // How far the crops were from the whole at this quality: ask them again with the threshold moved by it.
      const error = (await probeSample(quality)) - measured.ssim;
      next = await lowestOnSample(threshold + error, failedBelow + 1, ceiling);
      if (next === undefined && !kept) next = ceiling;
    }
    quality = next !== undefined && next > failedBelow && next <= ceiling ? next : undefined;
  }
  const tryLossless = canBeLossless(options.format) && (!kept || (options.format === 'webp' && (kept.quality ?? 0) >= 90));
  const last = tryLossless ? { ...options, quality: undefined, lossless: true, favourSize: true } : { ...lossy, quality: 100 };
  if (tryLossless || !(kept || closest)) {
    if (fits(control, wholeEstimate())) {
      // Lossless where no quality kept it; else (not even quality 100 kept it on the crops) the format's best quality.
      const measured = await encodeWhole(last, last.quality);
      if (!kept || measured.data.length < kept.data.length) kept = measured;
    } else if (!(kept || closest)) {
      throw tooSlow(options.format, wholeEstimate(), control);
    }
  }
  return (kept ?? closest)!;
}
