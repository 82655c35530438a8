// Option schemas and helpers shared by the image kinds.
import { mimeOf, OUTPUT_FORMATS, outputFilename } from '../imaging/formats.js';
import { parseColour, type Size } from '../imaging/geometry.js';
import { runImageJob, type ImageJob } from '../imaging/pipeline.js';
import type { FieldError, OperationContext, OperationResult, OptionsOf } from './types.js';

// Schemas are written `as const`: each kind's options type is read from them (OptionsOf).

/** `format` and `quality`, the options of every kind that writes one image. */
export const imageOutputOptions = {
  format: {
    type: 'string',
    enum: [...OUTPUT_FORMATS],
    description: "Output format. Default: the input's format where it can be written, else PNG (with alpha) or JPEG.",
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
export const SMART_GRAVITIES = ['attention', 'entropy'] as const;

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

/** Runs one image through the pipeline and wraps it as the task's single output. */
export async function runSingleImage<O extends Omit<ImageOutputOptions, 'quality'> & { quality?: number | string }>(
  op: { outputSize?(options: O, source: Size): Size | undefined; capsOutputSide?: boolean },
  ctx: OperationContext<O>,
  job: Partial<ImageJob>,
): Promise<OperationResult> {
  const input = ctx.inputs[0]!;
  const encoded = await runImageJob({
    inputPath: input.path,
    inputFormat: input.file.format,
    limits: ctx.limits,
    deadline: ctx.deadline,
    signal: ctx.signal,
    format: ctx.options.format,
    // Any number 1–100 is accepted; encoders take whole steps ("auto" is compress's, which says what it means).
    quality: typeof ctx.options.quality === 'number' ? Math.round(ctx.options.quality) : undefined,
    outputSize: op.outputSize ? (source) => op.outputSize!(ctx.options, source) : undefined,
    capOutputSide: op.capsOutputSide,
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
    // What a similarity search chose: the quality (absent when lossless) and the SSIM it kept.
    ...(encoded.ssim === undefined ? {} : { result: { quality: encoded.quality, ssim: Math.floor(encoded.ssim * 10_000) / 10_000 } }),
  };
}
