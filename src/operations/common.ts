// Option schemas and helpers shared by the image kinds.
import { OUTPUT_FORMATS, OUTPUT_MIME, outputFilename, type OutputFormat } from '../imaging/formats.js';
import { runImageJob, type ImageJob } from '../imaging/pipeline.js';
import type { JsonSchema, OperationContext, OperationResult } from './types.js';

export const formatOption: JsonSchema = {
  type: 'string',
  enum: [...OUTPUT_FORMATS],
  description: 'Output format. Default: the input\'s format where it can be written, else PNG (with alpha) or JPEG.',
};

export const qualityOption: JsonSchema = {
  type: 'integer',
  minimum: 1,
  maximum: 100,
  description: 'Encoder quality, 1–100 (for PNG and GIF: the palette\'s size and fidelity).',
};

export interface ImageOutputOptions {
  format?: OutputFormat;
  quality?: number;
}

/** Runs one image through the pipeline and wraps it as the task's single output. */
export async function runSingleImage(
  ctx: OperationContext<ImageOutputOptions>,
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
