import { LOSSLESS_CAPABLE, defaultOutputFormat } from '../imaging/formats.js';
import { formatOption, qualityOption, runSingleImage, type ImageOutputOptions } from './common.js';
import type { FieldError, Operation } from './types.js';

export interface CompressOptions extends ImageOutputOptions {
  targetSize?: number;
  lossless?: boolean;
  keepMetadata?: boolean;
}

export const compress: Operation<CompressOptions> = {
  kind: 'compress',
  summary: 'Compress an image',
  description:
    'Re-encodes the image smaller: mozjpeg for JPEG, a quantised palette for PNG, tuned WebP/AVIF. ' +
    '`targetSize` searches the quality for the largest output that fits; without a fit the task fails with TARGET_SIZE_UNREACHABLE.',
  accepts: 'image',
  batch: true,
  options: {
    properties: {
      format: formatOption,
      quality: qualityOption,
      targetSize: { type: 'integer', minimum: 1, description: 'Largest acceptable output, in bytes (exclusive with quality and lossless).' },
      lossless: { type: 'boolean', description: 'Lossless re-encoding (PNG, WebP, AVIF, GIF, TIFF outputs).' },
      keepMetadata: {
        type: 'boolean',
        description: 'Keep EXIF, XMP, IPTC and the ICC profile (pixels stay in the source colour space). Orientation is always applied. Default false.',
      },
    },
  },
  check(options, inputs) {
    const errors: FieldError[] = [];
    if (options.targetSize !== undefined && options.quality !== undefined) {
      errors.push({ field: 'targetSize', message: 'targetSize and quality are exclusive' });
    }
    if (options.lossless && (options.quality !== undefined || options.targetSize !== undefined)) {
      errors.push({ field: 'lossless', message: 'lossless cannot be combined with quality or targetSize' });
    }
    if (options.lossless) {
      for (const file of inputs) {
        const format = options.format ?? defaultOutputFormat(file.format, true);
        if (!LOSSLESS_CAPABLE.has(format)) {
          errors.push({ field: 'lossless', message: `${format} output cannot be lossless; choose format png, webp, avif or tiff` });
          break;
        }
      }
    }
    return errors;
  },
  run(ctx) {
    return runSingleImage(compress, ctx, {
      lossless: ctx.options.lossless,
      keepMetadata: ctx.options.keepMetadata,
      targetSize: ctx.options.targetSize,
      favourSize: true,
    });
  },
};
