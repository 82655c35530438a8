import type { OutputFormat } from '../imaging/formats.js';
import { formatOption, qualityOption, runSingleImage } from './common.js';
import type { Operation } from './types.js';

export interface ConvertOptions {
  format: OutputFormat;
  quality?: number;
}

export const convert: Operation<ConvertOptions> = {
  kind: 'convert',
  summary: 'Convert an image to another format',
  description:
    'Writes the image in `format`. Animation is kept where the format can hold it (GIF, WebP), else the first frame is used; ' +
    'alpha is flattened onto white for JPEG.',
  accepts: 'image',
  batch: true,
  options: {
    properties: { format: formatOption, quality: qualityOption },
    required: ['format'],
  },
  run(ctx) {
    return runSingleImage(convert, ctx, {});
  },
};
