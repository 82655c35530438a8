// Option schemas and helpers shared by the image kinds.
import { OUTPUT_FORMATS, OUTPUT_MIME, outputFilename, type OutputFormat } from '../imaging/formats.js';
import { parseColour } from '../imaging/geometry.js';
import { runImageJob, type ImageJob } from '../imaging/pipeline.js';
import type { FieldError, JsonSchema, Operation, OperationContext, OperationResult } from './types.js';

export const formatOption: JsonSchema = {
  type: 'string',
  enum: [...OUTPUT_FORMATS],
  description: "Output format. Default: the input's format where it can be written, else PNG (with alpha) or JPEG.",
};

export const qualityOption: JsonSchema = {
  type: 'integer',
  minimum: 1,
  maximum: 100,
  description: "Encoder quality, 1–100 (for PNG and GIF: the palette's size and fidelity).",
};

export const colourOption = (description: string): JsonSchema => ({
  type: 'string',
  maxLength: 64,
  description: `${description} A CSS colour: a name, #rgb, #rrggbb, #rrggbbaa, rgb() or rgba().`,
  example: '#ffffff',
});

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

export interface ImageOutputOptions {
  format?: OutputFormat;
  quality?: number;
}

/** Runs one image through the pipeline and wraps it as the task's single output. */
export async function runSingleImage<O extends ImageOutputOptions>(
  op: Operation<O>,
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
    quality: ctx.options.quality,
    outputSize: op.outputSize ? (source) => op.outputSize!(ctx.options, source) : undefined,
    capOutputSide: op.capsOutputSide,
    ...job,
  });
  return {
    outputs: [
      {
        data: encoded.data,
        format: encoded.format,
        mimeType: OUTPUT_MIME[encoded.format],
        filename: outputFilename(input.file.filename, encoded.format),
        width: encoded.width,
        height: encoded.height,
        pages: encoded.frames > 1 ? encoded.frames : undefined,
      },
    ],
  };
}
