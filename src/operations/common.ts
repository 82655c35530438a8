// Option schemas and helpers shared by the image kinds.
import { TaskError } from '../errors.js';
import { aliasesText, defaultOutputFormat, mimeOf, OUTPUT_FORMAT_NAMES, outputFilename, type OutputFormat } from '../imaging/formats.js';
import { parseColour } from '../imaging/geometry.js';
import { runImageJob, type ImageJob, type JobStep } from '../imaging/pipeline.js';
import type { AnyOperation, FieldError, OperationContext, OperationResult, OptionsOf, StepEnv } from './types.js';

// Schemas are written `as const`: each kind's options type is read from them (OptionsOf).

/** `format` and `quality`, the options of every kind that writes one image. */
/** A rectangle in the upright image's pixels, as a result reports one (a face found, a region covered). */
export const PIXEL_BOX_PROPERTIES = {
  left: { type: 'integer', minimum: 0 },
  top: { type: 'integer', minimum: 0 },
  width: { type: 'integer', minimum: 1 },
  height: { type: 'integer', minimum: 1 },
} as const;

export const imageOutputOptions = {
  format: {
    type: 'string',
    // Typed as the formats alone: the routes put an alias's format in its place before a kind sees the options.
    enum: [...OUTPUT_FORMAT_NAMES] as OutputFormat[],
    description: `Output format. Default: the input's format where it can be written, else PNG (with alpha) or JPEG. Aliases: ${aliasesText()}, stored and answered as the format they name.`,
  },
  quality: {
    type: 'number',
    minimum: 1,
    maximum: 100,
    description: "Encoder quality, 1–100; a fraction is rounded (for PNG and GIF: the palette's size and fidelity).",
  },
} as const;

export type ImageOutputOptions = OptionsOf<{ properties: typeof imageOutputOptions }>;

export const colourOption = (description: string) =>
  ({
    type: 'string',
    maxLength: 64,
    description: `${description} A CSS colour: a name, #rgb, #rrggbb, #rrggbbaa, rgb() or rgba().`,
    examples: ['#ffffff'],
  }) as const;

/** Positions shared by resize, crop and watermark, as the API spells them. */
export const GRAVITIES = ['center', 'top', 'right', 'bottom', 'left', 'top-left', 'top-right', 'bottom-left', 'bottom-right'] as const;
export type Gravity = (typeof GRAVITIES)[number];
/** Crops chosen by content: libvips' attention and entropy, and the box around the faces (smart-crop.ts). */
export const SMART_GRAVITIES = ['attention', 'entropy', 'face'] as const;

/** The API's gravity names in sharp's terms. */
export const SHARP_GRAVITY: Record<Gravity, string> = {
  center: 'centre',
  top: 'north',
  right: 'east',
  bottom: 'south',
  left: 'west',
  'top-left': 'northwest',
  'top-right': 'northeast',
  'bottom-left': 'southwest',
  'bottom-right': 'southeast',
};

export function checkColour(field: string, value: string | undefined): FieldError[] {
  if (value === undefined || parseColour(value)) return [];
  return [{ field, message: `"${value}" is not a CSS colour` }];
}

/** Exactly one of `fields` must be present. */
export function exactlyOne(options: Record<string, unknown>, fields: string[]): FieldError[] {
  const present = fields.filter((f) => options[f] !== undefined);
  if (present.length === 1) return [];
  return [{ field: present[1] ?? fields[0]!, message: `give exactly one of ${fields.join(', ')}` }];
}

// Output names ------------------------------------------------------------------------------
// The one naming rule: an output is `<input stem>.<tag>.<ext>` — `photo.jpg` resized to 800 px
// wide as WebP is `photo.resize-800.webp` — the tag being its kind's (Operation.tag), the
// extension its format's. A kind without a tag keeps `<input stem>.<ext>` (convert: the
// extension says it). The service decides the name; every client (CLI, SDK, batch ZIP) uses it.

/** A number as a tag shows it: at most two decimals, no exponent noise. */
export const tagNumber = (value: unknown): string | undefined =>
  typeof value === 'number' && Number.isFinite(value) ? String(Math.round(value * 100) / 100) : undefined;

/** `800x600`, `800` (width only), `x600` (height only), or undefined. */
export function sizeTag(width: unknown, height: unknown): string | undefined {
  const w = tagNumber(width);
  const h = tagNumber(height);
  if (w && h) return `${w}x${h}`;
  return w ?? (h ? `x${h}` : undefined);
}

/** `<kind>-<detail>`, or the kind alone without a detail. */
export const tagged = (kind: string, detail: string | undefined): string => (detail ? `${kind}-${detail}` : kind);

/** `filename` (`<stem>.<ext>`, as a kind's `run` names it) with `tag` before its extension: `photo.webp` → `photo.resize-800.webp`. */
function withTag(filename: string, tag: string | undefined): string {
  if (!tag) return filename;
  const dot = filename.lastIndexOf('.');
  return dot > 0 ? `${filename.slice(0, dot)}.${tag}${filename.slice(dot)}` : `${filename}.${tag}`;
}

/** The name a task's output is stored under: the kind's run named it `<stem>.<ext>`, the kind's tag goes before the extension. */
export function outputName(op: AnyOperation | undefined, filename: string, options: Record<string, unknown>): string {
  return withTag(filename, op?.tag?.(options));
}

/** One transform of a job: a kind with a step (ImageStep) and that step's options. */
export interface StepCall {
  op: AnyOperation;
  options: Record<string, unknown>;
  /** Where the step's options are in the request (`steps[2]`): its faults name their field under it. */
  path?: string;
}

/** A kind's step with its options, as the image pipeline runs it (jobs here; delivery URLs in src/delivery/render.ts). */
export function jobStep({ op, options, path }: StepCall, env: StepEnv): JobStep {
  const step = op.step!;
  const transform = step.transform(options, env);
  return {
    transform: path
      ? async (...args) => {
          try {
            return await transform(...args);
          } catch (err) {
            throw underPath(err, path);
          }
        }
      : transform,
    perFrame: step.perFrame?.(options) ?? false,
    outputSize: op.sizes ? (size) => op.sizes!(options, size).at(-1) : undefined,
  };
}

/** A failure naming an option (`details.field`), named under the step's path instead (`steps[2].margin`). */
function underPath(err: unknown, path: string): unknown {
  if (!(err instanceof TaskError) || typeof err.details?.field !== 'string') return err;
  const named = err.details.field;
  const field = `${path}.${named}`;
  const message = err.message.startsWith(`${named}: `)
    ? `${field}${err.message.slice(named.length)}`
    : err.message.replace(`(${named})`, `(${field})`);
  return new TaskError(err.code, message, err.transient, { ...err.details, field });
}

/**
 * Runs one image through the pipeline and wraps it as the task's single output. The steps are
 * `calls`: by default the kind's own step with the job's options (a single resize is a pipeline
 * of one step), none for kinds that only re-encode (compress, convert).
 */
export async function runSingleImage<O extends Omit<ImageOutputOptions, 'quality'> & { quality?: number | string }>(
  op: Pick<AnyOperation, 'step'>,
  ctx: OperationContext<O>,
  job: Partial<Omit<ImageJob, 'steps'>>,
  calls: StepCall[] = op.step ? [{ op: op as AnyOperation, options: ctx.options }] : [],
): Promise<OperationResult> {
  const input = ctx.inputs[0]!;
  const env: StepEnv = {
    limits: ctx.limits,
    format: ctx.options.format ?? defaultOutputFormat(input.file.format, true),
    task: { scratchDir: ctx.scratchDir, signal: ctx.signal, progress: ctx.progress, deadline: ctx.deadline },
    file(fileId) {
      const file = ctx.inputs.find((i) => i.file.id === fileId);
      if (!file) throw new TaskError('INPUT_MISSING', `The file ${fileId} the options name is not among the task's inputs`);
      return file;
    },
  };
  // Where alpha is flattened: the colour of the last step that has one (resize's letterbox, rotate's corners).
  const background = calls.reduce<string | undefined>((found, call) => call.op.step?.background?.(call.options) ?? found, undefined);
  const encoded = await runImageJob({
    inputPath: input.path,
    inputFormat: input.file.format,
    limits: ctx.limits,
    deadline: ctx.deadline,
    signal: ctx.signal,
    format: ctx.options.format,
    // Any number 1–100 is accepted; encoders take whole steps ("auto" is compress's, which says what it means).
    quality: typeof ctx.options.quality === 'number' ? Math.round(ctx.options.quality) : undefined,
    background,
    steps: calls.map((call) => jobStep(call, env)),
    ffmpeg: ctx.documents.ffmpeg,
    progress: ctx.progress,
    ...job,
  });
  return {
    outputs: [
      {
        data: encoded.data,
        format: encoded.format,
        mimeType: mimeOf(encoded.format),
        filename: outputFilename(input.file.filename, encoded.format),
        width: encoded.width,
        height: encoded.height,
        pages: encoded.frames > 1 ? encoded.frames : undefined,
      },
    ],
    // What a search chose: the quality (a target size's; a similarity's, absent when lossless) and the SSIM it kept.
    ...(encoded.quality === undefined && encoded.ssim === undefined
      ? {}
      : {
          result: {
            ...(encoded.quality === undefined ? {} : { quality: encoded.quality }),
            ...(encoded.ssim === undefined ? {} : { ssim: Math.floor(encoded.ssim * 10_000) / 10_000 }),
          },
        }),
  };
}
