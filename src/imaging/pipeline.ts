// The fixed image pipeline: inspect → open → orient → the kind's own steps → colour → alpha →
// encode. Each job kind supplies only its own step; the order, the limits and the encoders
// live here once. The deadline is checked between steps and handed to libvips.
import sharp, { type Sharp, type Metadata } from 'sharp';
import { TaskError } from '../errors.js';
import {
  ALPHA_OUTPUTS,
  ANIMATED_OUTPUTS,
  LOSSLESS_CAPABLE,
  defaultOutputFormat,
  type OutputFormat,
} from './formats.js';

// Let the worker pool, not libvips' cache, decide how much memory is in use.
sharp.cache(false);

export interface ImageLimits {
  maxPixels: number;
  maxFrames: number;
}

/** What the header says about the source, before any pixel is decoded. */
export interface SourceInfo {
  format: string;
  /** Displayed size: EXIF/HEIF orientation applied. */
  width: number;
  height: number;
  frames: number;
  hasAlpha: boolean;
}

export interface EncodeOptions {
  format: OutputFormat;
  quality?: number;
  lossless?: boolean;
  /** Compress favours small files (palette PNG); convert favours fidelity. */
  favourSize?: boolean;
}

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
  /** The kind's own steps, applied after orientation. */
  transform?: (image: Sharp, source: SourceInfo) => Sharp;
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

export async function inspect(inputPath: string, inputFormat: string, limits: ImageLimits): Promise<SourceInfo> {
  let meta: Metadata;
  try {
    meta = await sharp(inputPath, { limitInputPixels: false }).metadata();
  } catch (err) {
    throw asTaskError(err);
  }
  const frames = meta.pages ?? 1;
  const frameWidth = meta.width ?? 0;
  const frameHeight = meta.pageHeight ?? meta.height ?? 0;
  if (!frameWidth || !frameHeight) throw new TaskError('INVALID_IMAGE', 'The image header has no dimensions');
  if (frameWidth * frameHeight > limits.maxPixels) {
    throw new TaskError(
      'IMAGE_TOO_LARGE',
      `The image is ${frameWidth}×${frameHeight} (${frameWidth * frameHeight} pixels per frame); the plan allows ${limits.maxPixels}`,
    );
  }
  if (frames > limits.maxFrames && ANIMATED_INPUTS.has(inputFormat)) {
    throw new TaskError('IMAGE_TOO_LARGE', `The animation has ${frames} frames; the plan allows ${limits.maxFrames}`);
  }
  const swap = (meta.orientation ?? 1) >= 5;
  return {
    format: inputFormat,
    width: swap ? frameHeight : frameWidth,
    height: swap ? frameWidth : frameHeight,
    frames,
    hasAlpha: meta.hasAlpha ?? false,
  };
}

const ANIMATED_INPUTS = new Set(['gif', 'webp']);

export async function runImageJob(job: ImageJob): Promise<EncodedImage> {
  checkDeadline(job);
  const source = await inspect(job.inputPath, job.inputFormat, job.limits);
  const format = job.format ?? defaultOutputFormat(job.inputFormat, source.hasAlpha);
  const animated = source.frames > 1 && ANIMATED_INPUTS.has(job.inputFormat) && ANIMATED_OUTPUTS.has(format);
  if (job.lossless && !LOSSLESS_CAPABLE.has(format)) {
    throw new TaskError('UNSUPPORTED_FORMAT', `${format} output cannot be lossless`);
  }

  const build = (): Sharp => {
    let image = sharp(job.inputPath, {
      // Limits were checked per frame from the header; libvips' own check counts all frames.
      limitInputPixels: false,
      animated,
      failOn: 'error',
    }).autoOrient();
    if (job.transform) image = job.transform(image, source);
    if (job.keepMetadata) image = image.keepMetadata();
    else image = image.toColourspace('srgb');
    if (source.hasAlpha && !ALPHA_OUTPUTS.has(format)) image = image.flatten({ background: job.background ?? '#ffffff' });
    return image.timeout({ seconds: Math.max(1, Math.ceil((job.deadline - Date.now()) / 1000)) });
  };

  checkDeadline(job);
  const encodeOptions: EncodeOptions = { format, quality: job.quality, lossless: job.lossless, favourSize: job.favourSize };
  const result =
    job.targetSize === undefined
      ? await encode(build(), encodeOptions)
      : await searchQualityForSize(build, encodeOptions, job.targetSize, () => checkDeadline(job));
  checkDeadline(job);
  return result;
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

/** Per-format encoder settings: mozjpeg, palette PNG when favouring size, effort for WebP/AVIF. */
export function applyEncoder(image: Sharp, { format, quality, lossless, favourSize }: EncodeOptions): Sharp {
  switch (format) {
    case 'jpeg':
      return image.jpeg({ quality: quality ?? 80, mozjpeg: true });
    case 'png':
      if (lossless || (quality === undefined && !favourSize)) return image.png({ compressionLevel: 9, adaptiveFiltering: true });
      return image.png({ palette: true, quality: quality ?? 80, compressionLevel: 9, effort: 7 });
    case 'webp':
      return lossless ? image.webp({ lossless: true, effort: 4 }) : image.webp({ quality: quality ?? 80, effort: 4 });
    case 'avif':
      return lossless ? image.avif({ lossless: true, effort: 4 }) : image.avif({ quality: quality ?? 50, effort: 4 });
    case 'gif': {
      // GIF has no quality knob; the colour count plays that part.
      const colours = quality === undefined || lossless ? 256 : Math.max(2, Math.round((256 * quality) / 100));
      return image.gif({ colours, effort: 7 });
    }
    case 'tiff':
      if (lossless || quality === undefined) return image.tiff({ compression: 'deflate', predictor: 'horizontal' });
      return image.tiff({ compression: 'jpeg', quality });
  }
}

/**
 * Binary search for the highest quality whose output fits `targetSize` bytes. Each probe
 * re-runs the pipeline from the source (a fresh libvips pipeline cannot be encoded twice).
 */
async function searchQualityForSize(
  build: () => Sharp,
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
    const candidate = await encode(build(), { ...options, quality, favourSize: true });
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
  if (/pixel limit/i.test(message)) return new TaskError('IMAGE_TOO_LARGE', 'The image exceeds the plan\'s pixel limit');
  if (/unsupported image format|compression format has not been built/i.test(message)) {
    return new TaskError('UNSUPPORTED_FORMAT', 'This image\'s encoding is not supported');
  }
  return new TaskError('INVALID_IMAGE', `The image could not be decoded: ${firstLine(message)}`);
}

const firstLine = (text: string): string => text.split('\n')[0]!.slice(0, 200);
