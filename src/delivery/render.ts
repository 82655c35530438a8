// One render of a delivery URL: the jobs' image pipeline (src/imaging/pipeline.ts: the header
// checked against the plan before decoding, one decode, one encode, raw decoders on their
// thread) with the transform's pairs mapped onto the jobs' own steps — rotate, flip, resize
// (fit, gravity, letterbox colour) — and one small step of its own for blur and sharpen.
// Rotation and flips come first, so `w` and `h` are the output's.
import { TaskError } from '../errors.js';
import type { PlanLimits } from '../accounts/plans.js';
import { FORMATS, type OutputFormat } from '../imaging/formats.js';
import type { EncodedImage } from '../imaging/encode.js';
import { runImageJob, type JobStep } from '../imaging/pipeline.js';
import { inspect } from '../imaging/source.js';
import { resizedSize, type Size } from '../imaging/geometry.js';
import { jobStep, type StepCall } from '../operations/common.js';
import { flip } from '../operations/flip.js';
import { resize } from '../operations/resize.js';
import { rotate } from '../operations/rotate.js';
import type { StepEnv } from '../operations/types.js';
import { invalidPair, MAX_RENDER_SIDE, type Transform } from './transform.js';

/** The URL's gravities in the resize job's terms (attention, entropy and face are the same words). */
const POSITION: Record<string, string> = {
  center: 'center',
  north: 'top',
  northeast: 'top-right',
  east: 'right',
  southeast: 'bottom-right',
  south: 'bottom',
  southwest: 'bottom-left',
  west: 'left',
  northwest: 'top-left',
  attention: 'attention',
  entropy: 'entropy',
  face: 'face',
};

const FLIP_DIRECTION = { h: 'horizontal', v: 'vertical', hv: 'both' } as const;

export interface RenderJob {
  inputPath: string;
  inputFormat: string;
  transform: Transform;
  /**
   * The output format; a function chooses it by the source's alpha (f:auto without AVIF or WebP
   * in Accept); undefined keeps the source's where it can be written.
   */
  format: OutputFormat | ((hasAlpha: boolean) => OutputFormat) | undefined;
  limits: PlanLimits;
  deadline: number;
  signal: AbortSignal;
  tmpDir: string;
}

/** The jobs' steps for a transform, in order. */
function calls(transform: Transform): StepCall[] {
  const bg = transform.bg === undefined ? undefined : `#${transform.bg}`;
  const list: StepCall[] = [];
  if (transform.rot) list.push({ op: rotate, options: { angle: transform.rot, ...(bg ? { background: bg } : {}) } });
  if (transform.flip) list.push({ op: flip, options: { direction: FLIP_DIRECTION[transform.flip] } });
  if (transform.w !== undefined || transform.h !== undefined) {
    list.push({
      op: resize,
      options: {
        width: transform.w,
        height: transform.h,
        fit: transform.fit ?? 'inside',
        // A delivery URL's w/h is the size asked for (dpr included), as plannedSize computes it.
        withoutEnlargement: false,
        ...(transform.g ? { position: POSITION[transform.g] } : {}),
        ...(bg ? { background: bg } : {}),
      },
    });
  }
  return list;
}

/** Blur and sharpen: a step of their own, over the whole image (after the resize). */
function effects(transform: Transform): JobStep | undefined {
  const { blur, sharpen } = transform;
  if (blur === undefined && sharpen === undefined) return undefined;
  return {
    transform: (image) => {
      let out = image;
      if (blur !== undefined) out = out.blur(blur);
      if (sharpen !== undefined) out = out.sharpen({ sigma: sharpen });
      return out;
    },
  };
}

/** The render's size for a source of `source` size, before decoding: at most MAX_RENDER_SIDE a side. */
function plannedSize(transform: Transform, source: Size): Size {
  let size = transform.rot === 90 || transform.rot === 270 ? { width: source.height, height: source.width } : source;
  if (transform.w !== undefined || transform.h !== undefined)
    size = resizedSize(size, { width: transform.w, height: transform.h, fit: transform.fit });
  if (size.width > MAX_RENDER_SIDE || size.height > MAX_RENDER_SIDE) {
    const field = transform.w === undefined && transform.h === undefined ? 'w' : size.width > MAX_RENDER_SIDE ? 'w' : 'h';
    throw invalidPair(
      field,
      `the render would be ${size.width}×${size.height}; a render is at most ${MAX_RENDER_SIDE} px a side (give w or h, or another fit)`,
    );
  }
  return size;
}

export async function render(job: RenderJob): Promise<EncodedImage> {
  const { transform } = job;
  // The header, against the plan's limits and the side cap, before any pixel is decoded.
  const source = await inspect(job.inputPath, job.inputFormat, job.limits);
  plannedSize(transform, source);
  const format = typeof job.format === 'function' ? job.format(source.hasAlpha) : job.format;
  const env: StepEnv = {
    limits: job.limits,
    format: format ?? job.inputFormat,
    task: { scratchDir: async () => job.tmpDir, signal: job.signal, progress: () => {}, deadline: job.deadline },
    file() {
      throw new TaskError('INPUT_MISSING', 'A delivery render reads one source');
    },
  };
  const list = calls(transform);
  const steps = list.map((call) => jobStep(call, env));
  const extra = effects(transform);
  if (extra) steps.push(extra);
  return runImageJob({
    inputPath: job.inputPath,
    inputFormat: job.inputFormat,
    source,
    limits: job.limits,
    deadline: job.deadline,
    signal: job.signal,
    format,
    quality: transform.q,
    background: transform.bg === undefined ? undefined : `#${transform.bg}`,
    steps,
  });
}

/** The media type of an encoded render. */
export const mediaTypeOf = (format: OutputFormat): string => FORMATS[format].mime;
