// The fixed image pipeline: inspect → open → orient → the kind's own step → colour → alpha →
// encode. Each job kind supplies only its own step; the order, the limits and the encoders
// live here once. The deadline is checked between steps and handed to libvips.
import fs from 'node:fs';
import sharp, { type Sharp, type Metadata } from 'sharp';
import { TaskError } from '../errors.js';
import { decodeRaw, RAW_DECODED_FORMATS, readHeader } from './decoders.js';
import {
  ALPHA_OUTPUTS,
  ANIMATED_OUTPUTS,
  LOSSLESS_CAPABLE,
  defaultOutputFormat,
  type OutputFormat,
} from './formats.js';

// Let the worker pool, not libvips' cache, decide how much memory is in use.
sharp.cache(false);

/** Resize and upscale outputs are capped at this many pixels per side. */
export const MAX_OUTPUT_SIDE = 16_384;

export interface ImageLimits {
  maxPixels: number;
  maxFrames: number;
}

/** What the header says about the source, before any pixel is decoded. */
export interface SourceInfo {
  format: string;
  /** Displayed size of one frame: EXIF/HEIF orientation applied. */
  width: number;
  height: number;
  frames: number;
  hasAlpha: boolean;
  delay?: number[];
  loop?: number;
}

export interface Size {
  width: number;
  height: number;
}

export interface EncodeOptions {
  format: OutputFormat;
  quality?: number;
  lossless?: boolean;
  /** Compress favours small files (palette PNG); other kinds favour fidelity. */
  favourSize?: boolean;
  /** Frame timing for animations assembled frame by frame. */
  delay?: number[];
  loop?: number;
}

/** A kind's own step. `frame` is set when an animation is processed one frame at a time. */
export type Transform = (image: Sharp, source: SourceInfo) => Sharp | Promise<Sharp>;

export interface ImageJob {
  inputPath: string;
  inputFormat: string;
  limits: ImageLimits;
  deadline: number;
  format?: OutputFormat;
  quality?: number;
  lossless?: boolean;
  keepMetadata?: boolean;
  favourSize?: boolean;
  /** Colour used where alpha must be flattened (JPEG output). */
  background?: string;
  /** The kind's own step, applied after orientation. */
  transform?: Transform;
  /**
   * Steps libvips cannot apply to a whole animation (rotation, vertical flip, overlays) run
   * on each frame, and the frames are joined again.
   */
  perFrame?: boolean;
  /** The output size the options decide, checked against the limits before decoding. */
  outputSize?: (source: SourceInfo) => Size | undefined;
  /** Whether the output's sides are capped at MAX_OUTPUT_SIDE (resize and upscale). */
  capOutputSide?: boolean;
  /** Aim for a file of at most this many bytes by searching the encoder's quality. */
  targetSize?: number;
  signal?: AbortSignal;
}

export interface EncodedImage {
  data: Buffer;
  format: OutputFormat;
  width: number;
  height: number;
  frames: number;
}

const ANIMATED_INPUTS = new Set(['gif', 'webp']);

/** Reads the header and enforces the plan's pixel and frame limits before any decoding. */
export async function inspect(inputPath: string, inputFormat: string, limits: ImageLimits): Promise<SourceInfo> {
  let info: SourceInfo;
  if (RAW_DECODED_FORMATS.has(inputFormat)) {
    const header = await readHeader(await fs.promises.readFile(inputPath), inputFormat as 'heic' | 'bmp');
    info = { format: inputFormat, width: header.width, height: header.height, frames: 1, hasAlpha: header.hasAlpha };
  } else {
    let meta: Metadata;
    try {
      meta = await sharp(inputPath, { limitInputPixels: false }).metadata();
    } catch (err) {
      throw asTaskError(err);
    }
    const frameWidth = meta.width ?? 0;
    const frameHeight = meta.pageHeight ?? meta.height ?? 0;
    if (!frameWidth || !frameHeight) throw new TaskError('INVALID_IMAGE', 'The image header has no dimensions');
    const swap = (meta.orientation ?? 1) >= 5;
    info = {
      format: inputFormat,
      width: swap ? frameHeight : frameWidth,
      height: swap ? frameWidth : frameHeight,
      // Only GIF and WebP animations are animations; TIFF pages and HEIF items are not.
      frames: ANIMATED_INPUTS.has(inputFormat) ? (meta.pages ?? 1) : 1,
      hasAlpha: meta.hasAlpha ?? false,
      delay: meta.delay,
      // GIFs in the wild carry 65536; encoders take at most 65535.
      loop: meta.loop === undefined ? undefined : Math.min(meta.loop, 65_535),
    };
  }
  checkPixels(info, limits, 'The image');
  if (info.frames > limits.maxFrames) {
    throw new TaskError('IMAGE_TOO_LARGE', `The animation has ${info.frames} frames; the plan allows ${limits.maxFrames}`);
  }
  return info;
}

/** The computed output against the plan's pixel limit and, for resize and upscale, the side cap. */
export function checkOutputSize(size: Size, limits: ImageLimits, capSide: boolean): void {
  if (capSide && (size.width > MAX_OUTPUT_SIDE || size.height > MAX_OUTPUT_SIDE)) {
    throw new TaskError('IMAGE_TOO_LARGE', `The output would be ${size.width}×${size.height}; outputs are capped at ${MAX_OUTPUT_SIDE} px per side`);
  }
  checkPixels(size, limits, 'The output');
}

export function checkPixels(size: Size, limits: ImageLimits, what: string): void {
  if (size.width * size.height > limits.maxPixels) {
    throw new TaskError(
      'IMAGE_TOO_LARGE',
      `${what} is ${size.width}×${size.height} (${size.width * size.height} pixels per frame); the plan allows ${limits.maxPixels}`,
    );
  }
}

export async function runImageJob(job: ImageJob): Promise<EncodedImage> {
  checkDeadline(job);
  const source = await inspect(job.inputPath, job.inputFormat, job.limits);
  const planned = job.outputSize?.(source);
  if (planned) checkOutputSize(planned, job.limits, job.capOutputSide ?? false);
  // HEIC and BMP headers only say alpha may be present; the decoded pixels say whether it is.
  const decodedFirst = RAW_DECODED_FORMATS.has(job.inputFormat);
  let open = decodedFirst ? await openUpright(job.inputPath, job.inputFormat, job.limits.maxPixels) : undefined;
  const hasAlpha = open ? ((await open(0).metadata()).hasAlpha ?? source.hasAlpha) : source.hasAlpha;
  const format = job.format ?? defaultOutputFormat(job.inputFormat, hasAlpha);
  const animated = source.frames > 1 && ANIMATED_OUTPUTS.has(format);
  if (job.lossless && !LOSSLESS_CAPABLE.has(format)) {
    throw new TaskError('UNSUPPORTED_FORMAT', `${format} output cannot be lossless`);
  }
  open ??= await openUpright(job.inputPath, job.inputFormat, job.limits.maxPixels, animated);
  const transform = job.transform;
  const step = transform && (async (image: Sharp) => {
    try {
      return await transform(image, source);
    } catch (err) {
      throw asTaskError(err);
    }
  });

  const finish = (image: Sharp): Sharp => {
    if (job.keepMetadata) image = image.keepMetadata();
    else image = image.toColourspace('srgb');
    if (!ALPHA_OUTPUTS.has(format)) image = image.flatten({ background: job.background ?? '#ffffff' });
    return image.timeout({ seconds: Math.max(1, Math.ceil((job.deadline - Date.now()) / 1000)) });
  };

  let frames: Buffer[] | undefined;
  if (animated && job.perFrame && step) {
    // Each frame through the kind's step once; the joined animation is re-encoded as needed.
    frames = [];
    for (let page = 0; page < source.frames; page++) {
      checkDeadline(job);
      const frame = await step!(open(page));
      frames.push(await frame.png({ compressionLevel: 0 }).toBuffer().catch((err) => Promise.reject(asTaskError(err))));
    }
  }
  const build = async (): Promise<Sharp> => {
    if (frames) return finish(sharp(frames, { join: { animated: true } }));
    const image = open!(animated ? -1 : 0);
    return finish(step ? await step(image) : image);
  };

  checkDeadline(job);
  const encodeOptions: EncodeOptions = {
    format,
    quality: job.quality,
    lossless: job.lossless,
    favourSize: job.favourSize,
    ...(animated ? { delay: source.delay, loop: source.loop } : {}),
  };
  const result =
    job.targetSize === undefined
      ? await encode(await build(), encodeOptions)
      : await searchQualityForSize(build, encodeOptions, job.targetSize, () => checkDeadline(job));
  checkDeadline(job);
  return result;
}

/**
 * How to open a source as an upright sharp image: `page` -1 for the whole animation, else one
 * frame. HEIC and BMP are decoded to raw pixels first (sharp's libvips cannot read them); SVG
 * is read from memory, so it cannot reach files next to it.
 */
export async function openUpright(inputPath: string, inputFormat: string, maxPixels: number, animated = false): Promise<(page: number) => Sharp> {
  if (RAW_DECODED_FORMATS.has(inputFormat)) {
    const raw = await decodeRaw(await fs.promises.readFile(inputPath), inputFormat as 'heic' | 'bmp', maxPixels);
    return () => sharp(raw.data, { raw: { width: raw.width, height: raw.height, channels: raw.channels } });
  }
  const input = inputFormat === 'svg' ? await fs.promises.readFile(inputPath) : inputPath;
  return (page) =>
    sharp(input, {
      // Limits were checked per frame from the header; libvips' own check counts all frames.
      limitInputPixels: false,
      failOn: 'error',
      ...(page === -1 ? { animated } : { page }),
    }).autoOrient();
}

async function encode(image: Sharp, options: EncodeOptions): Promise<EncodedImage> {
  try {
    const { data, info } = await applyEncoder(image, options).toBuffer({ resolveWithObject: true });
    const frames = (info as { pages?: number }).pages ?? 1;
    const height = (info as { pageHeight?: number }).pageHeight ?? info.height;
    return { data, format: options.format, width: info.width, height, frames };
  } catch (err) {
    throw asTaskError(err);
  }
}

/**
 * Per-format encoder settings: mozjpeg for JPEG; for PNG a quantised palette when favouring
 * size (compress) and fast zlib otherwise (level 9 with adaptive filtering costs 8× the time of
 * level 6 on large images for a few percent); moderate efforts for WebP, AVIF and GIF.
 */
export function applyEncoder(image: Sharp, { format, quality, lossless, favourSize, delay, loop }: EncodeOptions): Sharp {
  const timing = { ...(delay ? { delay } : {}), ...(loop !== undefined ? { loop } : {}) };
  switch (format) {
    case 'jpeg':
      return image.jpeg({ quality: quality ?? 80, mozjpeg: true });
    case 'png':
      if (lossless) return image.png({ compressionLevel: 9, adaptiveFiltering: true });
      if (quality === undefined && !favourSize) return image.png({ compressionLevel: 6 });
      return image.png({ palette: true, quality: quality ?? 80, compressionLevel: 9, effort: 4 });
    case 'webp':
      return lossless ? image.webp({ lossless: true, effort: 4, ...timing }) : image.webp({ quality: quality ?? 80, effort: 4, ...timing });
    case 'avif':
      return lossless
        ? image.avif({ lossless: true, effort: favourSize ? 4 : 2 })
        : image.avif({ quality: quality ?? 50, effort: favourSize ? 4 : 2 });
    case 'gif': {
      // GIF has no quality knob; the colour count plays that part.
      const colours = quality === undefined || lossless ? 256 : Math.max(2, Math.round((256 * quality) / 100));
      return image.gif({ colours, effort: favourSize ? 7 : 4, ...timing });
    }
    case 'tiff':
      if (lossless || quality === undefined) return image.tiff({ compression: 'deflate', predictor: 'horizontal' });
      return image.tiff({ compression: 'jpeg', quality });
  }
}

/**
 * Binary search for the highest quality whose output fits `targetSize` bytes. Each probe
 * re-runs the pipeline from the source (a libvips pipeline is encoded once).
 */
async function searchQualityForSize(
  build: () => Promise<Sharp>,
  options: EncodeOptions,
  targetSize: number,
  onStep: () => void,
): Promise<EncodedImage> {
  if (options.lossless) throw new TaskError('TARGET_SIZE_UNREACHABLE', 'targetSize cannot be combined with lossless output');
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
      best = candidate;
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

function checkDeadline(job: Pick<ImageJob, 'deadline' | 'signal'>): void {
  if (job.signal?.aborted) throw job.signal.reason instanceof Error ? job.signal.reason : new Error('aborted');
  if (Date.now() > job.deadline) throw new TaskError('PROCESSING_TIMEOUT', 'The task ran past its time limit');
}

/** libvips reports decode faults as plain errors: those are the input's fault. */
export function asTaskError(err: unknown): Error {
  if (err instanceof TaskError) return err;
  const e = err as NodeJS.ErrnoException;
  if (e?.code && /^E[A-Z]+$/.test(e.code)) return e; // a system fault (disk, memory): retried
  const message = String(e?.message ?? err);
  if (/timeout/i.test(message)) return new TaskError('PROCESSING_TIMEOUT', 'The task ran past its time limit');
  if (/pixel limit/i.test(message)) return new TaskError('IMAGE_TOO_LARGE', "The image exceeds the plan's pixel limit");
  if (/unsupported image format|compression format has not been built/i.test(message)) {
    return new TaskError('UNSUPPORTED_FORMAT', "This image's encoding is not supported");
  }
  return new TaskError('INVALID_IMAGE', `The image could not be decoded: ${firstLine(message)}`);
}

const firstLine = (text: string): string => text.split('\n')[0]!.slice(0, 200);
