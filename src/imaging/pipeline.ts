// The fixed image pipeline: one job's steps, in this order, over one context.
//
//   inspect  the header against the plan's limits, before any pixel is decoded  (source.ts, limits.ts)
//   plan     the size each step decides, against the same limits
//   open     the decoder; the output's format and frames are decided here
//   orient   EXIF orientation, applied once
//   steps    the kinds' steps, in order (one for a single job, up to ten for a pipeline); one
//            frame at a time where libvips cannot apply a step to a whole animation
//   colour   to sRGB, unless the metadata is kept
//   alpha    flattened onto the background where the output format has no alpha
//   encode   the format's encoder, or a search of its quality for a target size  (encode.ts)
//
// Each kind supplies only its step (JobStep.transform); the order, the limits and the
// encoders live here and in the modules named above. The deadline is checked between steps and
// handed to libvips. A sharp object applies its operations in a fixed order, not the order they
// are called in: between two steps the image is therefore written out losslessly (an
// uncompressed PNG in memory, metadata kept when asked) and read again — pixels, not a second
// decode of the input nor a second lossy encode.
import sharp, { type Sharp } from 'sharp';
import { invalidOption, TaskError } from '../errors.js';
import { encode, encodeToSimilarity, encodeToSize, type EncodedImage, type EncodeOptions, type SearchControl } from './encode.js';
import { asTaskError } from './errors.js';
import type { Ffmpeg } from '../programs/ffmpeg.js';
import { canBeLossless, canHoldAlpha, defaultOutputFormat, isRawDecoded, readsHeifSequences, type OutputFormat } from './formats.js';
import type { Size } from './geometry.js';
import { checkOutputSize, checkTotalPixels, outputFrames, type ImageLimits } from './limits.js';
import { inspect, openSource, orient, type OpenSource, type SourceInfo } from './source.js';

/**
 * A kind's own step, over the whole image. `source` describes the step's input (the source as
 * decoded and turned upright for the first step; the previous step's result after that). When
 * the image is an animation (every frame, one below the other), `firstFrame` opens the first
 * frame of that input, for a choice made on one frame (smart-crop.ts).
 */
export type Transform = (image: Sharp, source: SourceInfo, firstFrame?: () => Sharp) => Sharp | Promise<Sharp>;

/** One step of a job: a kind's transform and what the plan needs to know of it. */
export interface JobStep {
  transform: Transform;
  /**
   * Steps libvips cannot apply to a whole animation (rotation, vertical flip, overlays) run
   * on each frame, and the frames are joined again.
   */
  perFrame?: boolean;
  /**
   * The size (one frame) the step makes of an input of `input` size, checked before decoding;
   * `capped`: held to MAX_OUTPUT_SIDE per side (resize and upscale).
   */
  outputSize?: (input: Size) => (Size & { capped?: boolean }) | undefined;
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
  /** The kinds' steps, applied in order after orientation (none: the image as it is). */
  steps?: readonly JobStep[];
  /** Aim for a file of at most this many bytes by searching the encoder's quality. */
  targetSize?: number;
  /** Aim for the smallest file whose SSIM to its pixels is at least this (compress "auto"). */
  similarity?: number;
  /** The task's progress, 0–95, reported by a search (target size, similarity) after each encode. */
  progress?: (percent: number) => void;
  signal?: AbortSignal;
  /** The source's header when the caller read it already (checked against `limits`): not read again. */
  source?: SourceInfo;
  /** Decodes AVIF image sequences and writes animated AVIF; without it (or ffmpeg), an animation to AVIF is its first frame. */
  ffmpeg?: Ffmpeg;
}

/** One job as it passes through the steps. */
interface Context {
  job: ImageJob;
  source: SourceInfo;
  open: OpenSource;
  format: OutputFormat;
  /** The output is an animation: every frame is kept. */
  animated: boolean;
  /** The frames, each through every step already (animations with a `perFrame` step). */
  frames?: Buffer[];
}

export async function runImageJob(job: ImageJob): Promise<EncodedImage> {
  checkDeadline(job);
  const source = job.source ?? (await inspect(job.inputPath, job.inputFormat, job.limits));
  const planned = plan(job, source);
  const ctx = await open(job, source, planned);
  const steps = job.steps ?? [];
  if (ctx.animated && steps.some((s) => s.perFrame)) ctx.frames = await stepEachFrame(ctx);
  // Every step but the last is computed once; the last stays lazy, so that a target-size
  // search (which runs the libvips pipeline again for each try) repeats only it and the encode.
  const upright: StepInput = {
    open: () => orient(ctx.open(ctx.animated ? -1 : 0)),
    info: source,
    firstFrame: ctx.animated ? () => orient(ctx.open(0)) : undefined,
  };
  const beforeLast = ctx.frames ? undefined : await stepsBeforeLast(ctx, upright, ctx.animated);
  const build = async (): Promise<Sharp> => {
    const image = ctx.frames ? sharp(ctx.frames, { join: { animated: true } }) : await lastStep(ctx, beforeLast!);
    return withDeadline(job, alpha(ctx, colour(ctx, image)));
  };
  checkDeadline(job);
  const result = await encodeOutput(ctx, build);
  checkDeadline(job);
  return result;
}

/**
 * The size each step decides, checked against the limits (all frames once they are known):
 * every intermediate result as well as the output, in order, as far as the options decide them.
 */
function plan(job: ImageJob, source: SourceInfo): Size[] {
  const planned: Size[] = [];
  let size: Size | undefined = { width: source.width, height: source.height };
  for (const step of job.steps ?? []) {
    // A step that keeps the size has no outputSize; one whose size the pixels decide answers undefined.
    const next: (Size & { capped?: boolean }) | undefined = step.outputSize ? step.outputSize(size) : size;
    if (!next) break;
    checkOutputSize(next, job.limits, next.capped ?? false);
    size = { width: next.width, height: next.height };
    planned.push(size);
  }
  return planned;
}

/**
 * Opens the source and decides the output: its format (the job's, else the input's where it
 * can be written, else by alpha) and whether it keeps every frame. HEIC and BMP headers only say
 * alpha may be present, so they are decoded first and the pixels say whether it is.
 */
async function open(job: ImageJob, source: SourceInfo, planned: Size[]): Promise<Context> {
  const decodedFirst = isRawDecoded(job.inputFormat) ? await openSource(job.inputPath, job.inputFormat, job.limits.maxPixels) : undefined;
  const hasAlpha = decodedFirst ? ((await decodedFirst(0).metadata()).hasAlpha ?? source.hasAlpha) : source.hasAlpha;
  const format = job.format ?? defaultOutputFormat(job.inputFormat, hasAlpha);
  // Animated AVIF is written by ffmpeg: where it is missing, the first frame, as a still AVIF.
  const frames = readsHeifSequences(format) && !job.ffmpeg?.available() ? 1 : outputFrames(source.frames, format);
  // Every frame of an animated output: each planned frame size times the frames kept.
  for (const size of planned) checkTotalPixels(size, frames, job.limits, 'The output');
  if (job.lossless && !canBeLossless(format)) throw invalidOption('lossless', `${format} output cannot be lossless`);
  const animated = frames > 1;
  return {
    job,
    source,
    format,
    animated,
    open:
      decodedFirst ??
      (await openSource(
        job.inputPath,
        job.inputFormat,
        job.limits.maxPixels,
        animated,
        { ffmpeg: job.ffmpeg, signal: job.signal, deadline: job.deadline },
        source.rawDecoder,
      )),
  };
}

/** What a step takes: a way to open its input (again, each time) and what that input is. */
interface StepInput {
  open: () => Sharp;
  info: SourceInfo;
  /** The first frame of that input, when it is a whole animation or one of its frames. */
  firstFrame?: () => Sharp;
}

/** One step (on the whole animation, or on one frame); its failures are the input's (TaskError). */
async function apply(step: JobStep, input: StepInput): Promise<Sharp> {
  try {
    return await step.transform(input.open(), input.info, input.firstFrame);
  } catch (err) {
    throw asTaskError(err);
  }
}

/**
 * A step's result, kept for the next step: written out losslessly (an uncompressed TIFF holds
 * every frame of an animation, alpha, 16-bit samples and, when asked, the metadata) and opened
 * from memory. Its size is the one libvips computed.
 */
async function intermediate(ctx: Context, image: Sharp, info: SourceInfo, animated: boolean): Promise<StepInput> {
  const kept = ctx.job.keepMetadata ? image.keepMetadata() : image;
  const { data, info: written } = await withDeadline(ctx.job, kept)
    .tiff({ compression: 'none' })
    .toBuffer({ resolveWithObject: true })
    .catch((err) => Promise.reject(asTaskError(err)));
  const open = (page = -1) => sharp(data, { limitInputPixels: false, ...(animated ? (page === -1 ? { animated: true } : { page }) : {}) });
  return {
    open: () => open(),
    info: {
      ...info,
      width: written.width,
      height: animated ? (written.pageHeight ?? written.height) : written.height,
      hasAlpha: written.channels === 2 || written.channels === 4,
    },
    firstFrame: animated ? () => open(0) : undefined,
  };
}

/** The input, upright, through every step but the last (each computed once): what the last step takes. */
async function stepsBeforeLast(ctx: Context, input: StepInput, animated: boolean): Promise<StepInput> {
  for (const step of (ctx.job.steps ?? []).slice(0, -1)) {
    checkDeadline(ctx.job);
    input = await intermediate(ctx, await apply(step, input), input.info, animated);
  }
  return input;
}

/** The last step, over what the others made (built again for each try of a target-size search). */
function lastStep(ctx: Context, input: StepInput): Promise<Sharp> | Sharp {
  const last = ctx.job.steps?.at(-1);
  return last ? apply(last, input) : input.open();
}

/**
 * Each frame through every step, kept losslessly to be joined again. Frame 0 goes first: its
 * input to each step is that step's `firstFrame` for every frame, so a choice made on one frame
 * (a smart crop) is the same for all.
 */
async function stepEachFrame(ctx: Context): Promise<Buffer[]> {
  const frames: Buffer[] = [];
  const firstFrames: (() => Sharp)[] = [];
  for (let page = 0; page < ctx.source.frames; page++) {
    checkDeadline(ctx.job);
    let input: StepInput = { open: () => orient(ctx.open(page)), info: ctx.source };
    let frame: Sharp | undefined;
    const steps = ctx.job.steps ?? [];
    for (const [index, step] of steps.entries()) {
      if (page === 0) firstFrames[index] = input.open;
      frame = await apply(step, { ...input, firstFrame: firstFrames[index] });
      if (index < steps.length - 1) input = await intermediate(ctx, frame, input.info, false);
    }
    frames.push(
      await (frame ?? input.open())
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
    ...(ctx.animated && readsHeifSequences(ctx.format) ? { sequence: (image, settings) => encodeSequence(ctx, image, settings) } : {}),
    bounds: { deadline: job.deadline, signal: job.signal },
  };
  const control: SearchControl = { onStep: () => checkDeadline(job), deadline: job.deadline, progress: job.progress, animated: ctx.animated };
  if (job.targetSize !== undefined) return encodeToSize(build, options, job.targetSize, control);
  if (job.similarity !== undefined) return encodeToSimilarity(build, options, job.similarity, control, job);
  return build().then((image) => encode(image, options));
}

/**
 * An animation as an AVIF image sequence (ffmpeg.ts): its frames as RGBA, an alpha track only
 * where some pixel is not opaque. Every frame is written (none merged), so the output's frames
 * are the input's.
 */
async function encodeSequence(ctx: Context, image: Sharp, settings: EncodeOptions): Promise<EncodedImage> {
  const { data, info } = await image
    .ensureAlpha()
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true })
    .catch((err) => Promise.reject(asTaskError(err)));
  const height = info.pageHeight ?? info.height;
  const frames = Math.round(info.height / height);
  let alpha = false;
  for (let i = 3; i < data.length && !alpha; i += 4) alpha = data[i] !== 255;
  const { job } = ctx;
  const { header, data: encoded } = await job.ffmpeg!.encode(
    { data, width: info.width, height, frames },
    { quality: settings.quality, lossless: settings.lossless, favourSize: settings.favourSize, delay: settings.delay, loop: settings.loop, alpha },
    { signal: job.signal, deadline: job.deadline },
  );
  return { data: encoded, format: ctx.format, width: header.width, height: header.height, frames: header.frames };
}

/** sharp refuses a timeout past an hour; a longer time limit (TASK_TIMEOUT_SECONDS allows a day) is the runner's timer's to enforce. */
const LIBVIPS_MAX_TIMEOUT_SECONDS = 3600;

/** libvips stops the work at the deadline. */
function withDeadline(job: ImageJob, image: Sharp): Sharp {
  return image.timeout({ seconds: Math.min(LIBVIPS_MAX_TIMEOUT_SECONDS, Math.max(1, Math.ceil((job.deadline - Date.now()) / 1000))) });
}

function checkDeadline(job: Pick<ImageJob, 'deadline' | 'signal'>): void {
  if (job.signal?.aborted) throw job.signal.reason instanceof Error ? job.signal.reason : new Error('aborted');
  if (Date.now() > job.deadline) throw new TaskError('PROCESSING_TIMEOUT', 'The task ran past its time limit');
}
