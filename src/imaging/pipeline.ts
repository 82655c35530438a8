// The fixed image pipeline: one job's steps, in this order, over one context.
//
//   inspect  the header against the plan's limits, before any pixel is decoded  (source.ts, limits.ts)
//   plan     the output size the options decide, against the same limits
//   open     the decoder; the output's format and frames are decided here
//   orient   EXIF orientation, applied once
//   step     the kind's own step; one frame at a time where libvips cannot apply it to a whole
//            animation (a pipeline of several kinds over one decode plugs in here)
//   colour   to sRGB, unless the metadata is kept
//   alpha    flattened onto the background where the output format has no alpha
//   encode   the format's encoder, or a search of its quality for a target size  (encode.ts)
//
// Each job kind supplies only its step (ImageJob.transform); the order, the limits and the
// encoders live here and in the modules named above. The deadline is checked between steps and
// handed to libvips.
import sharp, { type Sharp } from 'sharp';
import { invalidOption, TaskError } from '../errors.js';
import { encode, encodeToSimilarity, encodeToSize, type EncodedImage, type EncodeOptions } from './encode.js';
import { asTaskError } from './errors.js';
import { canBeLossless, canHoldAlpha, defaultOutputFormat, isRawDecoded, type OutputFormat } from './formats.js';
import type { Size } from './geometry.js';
import { checkOutputSize, checkTotalPixels, outputFrames, type ImageLimits } from './limits.js';
import { inspect, openSource, orient, type OpenSource, type SourceInfo } from './source.js';

/**
 * A kind's own step, over the whole image. When that image is an animation (every frame, one
 * below the other), `firstFrame` opens its first frame upright, for a choice made on one frame
 * (smart-crop.ts).
 */
export type Transform = (image: Sharp, source: SourceInfo, firstFrame?: () => Sharp) => Sharp | Promise<Sharp>;

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
  /** Aim for the smallest file whose SSIM to its pixels is at least this (compress "auto"). */
  similarity?: number;
  signal?: AbortSignal;
}

/** One job as it passes through the steps. */
interface Context {
  job: ImageJob;
  source: SourceInfo;
  open: OpenSource;
  format: OutputFormat;
  /** The output is an animation: every frame is kept. */
  animated: boolean;
  /** The frames, each through the kind's step already (`perFrame` animations). */
  frames?: Buffer[];
}

export async function runImageJob(job: ImageJob): Promise<EncodedImage> {
  checkDeadline(job);
  const source = await inspect(job.inputPath, job.inputFormat, job.limits);
  const planned = plan(job, source);
  const ctx = await open(job, source, planned);
  if (ctx.animated && job.perFrame && job.transform) ctx.frames = await stepEachFrame(ctx);
  // A libvips pipeline runs once: a target-size search builds it again for each try.
  const build = async (): Promise<Sharp> => {
    const image = ctx.frames
      ? sharp(ctx.frames, { join: { animated: true } })
      : await step(ctx, orient(ctx.open(ctx.animated ? -1 : 0)), ctx.animated);
    return withDeadline(job, alpha(ctx, colour(ctx, image)));
  };
  checkDeadline(job);
  const result = await encodeOutput(ctx, build);
  checkDeadline(job);
  return result;
}

/** The output size the options decide, checked against the limits (its frames once known). */
function plan(job: ImageJob, source: SourceInfo): Size | undefined {
  const planned = job.outputSize?.(source);
  if (planned) checkOutputSize(planned, job.limits, job.capOutputSide ?? false);
  return planned;
}

/**
 * Opens the source and decides the output: its format (the job's, else the input's where it
 * can be written, else by alpha) and whether it keeps every frame. HEIC and BMP headers only say
 * alpha may be present, so they are decoded first and the pixels say whether it is.
 */
async function open(job: ImageJob, source: SourceInfo, planned: Size | undefined): Promise<Context> {
  const decodedFirst = isRawDecoded(job.inputFormat) ? await openSource(job.inputPath, job.inputFormat, job.limits.maxPixels) : undefined;
  const hasAlpha = decodedFirst ? ((await decodedFirst(0).metadata()).hasAlpha ?? source.hasAlpha) : source.hasAlpha;
  const format = job.format ?? defaultOutputFormat(job.inputFormat, hasAlpha);
  const frames = outputFrames(source.frames, format);
  // Every frame of an animated output: the planned frame size times the frames kept.
  if (planned) checkTotalPixels(planned, frames, job.limits, 'The output');
  if (job.lossless && !canBeLossless(format)) throw invalidOption('lossless', `${format} output cannot be lossless`);
  const animated = frames > 1;
  return {
    job,
    source,
    format,
    animated,
    open: decodedFirst ?? (await openSource(job.inputPath, job.inputFormat, job.limits.maxPixels, animated)),
  };
}

/** The kind's own step (on the whole animation, or on one frame); its failures are the input's (TaskError). */
async function step(ctx: Context, image: Sharp, wholeAnimation: boolean): Promise<Sharp> {
  const transform = ctx.job.transform;
  if (!transform) return image;
  try {
    return await transform(image, ctx.source, wholeAnimation ? () => orient(ctx.open(0)) : undefined);
  } catch (err) {
    throw asTaskError(err);
  }
}

/** Each frame through the kind's step once, kept losslessly to be joined again. */
async function stepEachFrame(ctx: Context): Promise<Buffer[]> {
  const frames: Buffer[] = [];
  for (let page = 0; page < ctx.source.frames; page++) {
    checkDeadline(ctx.job);
    const frame = await step(ctx, orient(ctx.open(page)), false);
    frames.push(
      await frame
        .png({ compressionLevel: 0 })
        .toBuffer()
        .catch((err) => Promise.reject(asTaskError(err))),
    );
  }
  return frames;
}

function colour(ctx: Context, image: Sharp): Sharp {
  return ctx.job.keepMetadata ? image.keepMetadata() : image.toColourspace('srgb');
}

function alpha(ctx: Context, image: Sharp): Sharp {
  return canHoldAlpha(ctx.format) ? image : image.flatten({ background: ctx.job.background ?? '#ffffff' });
}

function encodeOutput(ctx: Context, build: () => Promise<Sharp>): Promise<EncodedImage> {
  const { job, source } = ctx;
  const options: EncodeOptions = {
    format: ctx.format,
    quality: job.quality,
    lossless: job.lossless,
    favourSize: job.favourSize,
    ...(ctx.animated ? { delay: source.delay, loop: source.loop } : {}),
  };
  if (job.targetSize !== undefined) return encodeToSize(build, options, job.targetSize, () => checkDeadline(job));
  if (job.similarity !== undefined) return encodeToSimilarity(build, options, job.similarity, () => checkDeadline(job));
  return build().then((image) => encode(image, options));
}

/** libvips stops the work at the deadline. */
function withDeadline(job: ImageJob, image: Sharp): Sharp {
  return image.timeout({ seconds: Math.max(1, Math.ceil((job.deadline - Date.now()) / 1000)) });
}

function checkDeadline(job: Pick<ImageJob, 'deadline' | 'signal'>): void {
  if (job.signal?.aborted) throw job.signal.reason instanceof Error ? job.signal.reason : new Error('aborted');
  if (Date.now() > job.deadline) throw new TaskError('PROCESSING_TIMEOUT', 'The task ran past its time limit');
}
