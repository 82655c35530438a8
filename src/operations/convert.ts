import { imageOutputOptions, runSingleImage } from './common.js';
import type { Operation } from './types.js';

const optionsSchema = {
  properties: imageOutputOptions,
  required: ['format'],
} as const;

export const convert: Operation<typeof optionsSchema> = {
  kind: 'convert',
  summary: 'Convert an image to another format',
  description:
    'Writes the image in `format`. Animation is kept where the format can hold it (GIF, WebP, AVIF), else the first frame is used; ' +
    'alpha is flattened onto white for JPEG.',
  accepts: 'image',
  batch: true,
  example: { format: 'webp', quality: 80 },
  options: optionsSchema,
  run(ctx) {
    return runSingleImage(convert, ctx, {});
  },
};
