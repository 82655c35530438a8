import fs from 'node:fs';
import { SIMILARITY_PROBES } from '../imaging/encode.js';
import { canBeLossless, defaultOutputFormat } from '../imaging/formats.js';
import { SIMILARITY_MAX_PIXELS, VISUALLY_LOSSLESS_SSIM } from '../imaging/similarity.js';
import { imageOutputOptions, runSingleImage } from './common.js';
import type { FieldError, Operation, OperationOutput } from './types.js';

const optionsSchema = {
  properties: {
    ...imageOutputOptions,
    // A number 1–100 or the word "auto" (minimum and maximum hold for numbers, pattern for
    // strings): one schema rather than anyOf, so a bad value gets one error naming the field.
    quality: {
      type: ['string', 'number'],
      minimum: 1,
      maximum: 100,
      pattern: '^auto$',
      description:
        'Encoder quality, 1–100 (a fraction is rounded; for PNG and GIF the palette), or "auto": the smallest output whose SSIM to the ' +
        `input stays at or above ${VISUALLY_LOSSLESS_SSIM} (visually lossless), found in at most ${SIMILARITY_PROBES + 1} encodes; ` +
        '`result.quality` and `result.ssim` say what was chosen.',
    },
    targetSize: { type: 'integer', minimum: 1, description: 'Largest acceptable output, in bytes (exclusive with quality and lossless).' },
    lossless: { type: 'boolean', description: 'Lossless re-encoding (PNG, WebP, AVIF, GIF, TIFF outputs).' },
    keepMetadata: {
      type: 'boolean',
      description: 'Keep EXIF, XMP, IPTC and the ICC profile (pixels stay in the source colour space). Orientation is always applied. Default false.',
    },
  },
} as const;

export const compress: Operation<typeof optionsSchema> = {
  kind: 'compress',
  summary: 'Compress an image',
  description:
    'Re-encodes the image smaller: mozjpeg for JPEG, a quantised palette for PNG, tuned WebP/AVIF. ' +
    '`targetSize` searches the quality for the largest output that fits; without a fit the task fails with TARGET_SIZE_UNREACHABLE. ' +
    'Never larger than the input in the same format: when re-encoding does not help, the output is a lossless rewrite (PNG) or, failing that, ' +
    "the input's bytes as they are (metadata included), and `result.savedBytes` is 0. " +
    '`quality: "auto"` searches the quality for the smallest output whose SSIM (luma, full resolution up to ' +
    `${SIMILARITY_MAX_PIXELS / 1e6} megapixels, both sides reduced past that) to the input is at least ${VISUALLY_LOSSLESS_SSIM}, ` +
    'lossless where no quality keeps it and the format can be; `result.quality` (absent when lossless) and `result.ssim` report it.',
  accepts: 'image',
  batch: true,
  example: { quality: 75, format: 'webp' },
  options: optionsSchema,
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
        if (!canBeLossless(format)) {
          errors.push({ field: 'lossless', message: `${format} output cannot be lossless; choose format png, webp, avif or tiff` });
          break;
        }
      }
    }
    return errors;
  },
  async run(ctx) {
    const auto = ctx.options.quality === 'auto';
    const job = {
      lossless: ctx.options.lossless,
      keepMetadata: ctx.options.keepMetadata,
      targetSize: ctx.options.targetSize,
      similarity: auto ? VISUALLY_LOSSLESS_SSIM : undefined,
      favourSize: true,
    };
    const input = ctx.inputs[0]!;
    const inputSize = Number(input.file.size);
    const first = await runSingleImage(compress, ctx, job);
    let output = first.outputs[0]!;
    // "auto": what the search chose; a lossless rewrite or the input's bytes below are exact.
    let chosen = auto ? first.result : undefined;
    // Never larger than the input in its own format (a palette PNG re-quantised can grow):
    // a lossless rewrite where the format has one that may be smaller, else the input's bytes.
    if (output.format === input.file.format && outputSize(output) >= inputSize) {
      if (LOSSLESS_REWRITE.has(output.format) && !job.lossless) {
        const rewrite = (await runSingleImage(compress, ctx, { ...job, lossless: true, targetSize: undefined, similarity: undefined })).outputs[0]!;
        if (outputSize(rewrite) < inputSize) {
          output = rewrite;
          if (auto) chosen = { ssim: 1 };
        }
      }
      if (outputSize(output) >= inputSize) {
        output = {
          ...output,
          data: await fs.promises.readFile(input.path),
          path: undefined,
          width: input.file.width ?? output.width,
          height: input.file.height ?? output.height,
          pages: input.file.pages ?? undefined,
        };
        if (auto) chosen = { ssim: 1 };
      }
    }
    return { outputs: [output], result: { inputSize, savedBytes: Math.max(0, inputSize - outputSize(output)), ...chosen } };
  },
};

/**
 * Formats whose lossless encoding can be smaller than the lossy one compress tries first: PNG
 * (zlib at its best rather than a quantised palette). GIF's default is already its lossless
 * encoding; JPEG has none in libvips; lossless WebP, AVIF and TIFF of a lossy input only grow.
 */
const LOSSLESS_REWRITE: ReadonlySet<string> = new Set(['png']);

const outputSize = (output: OperationOutput): number => output.data?.length ?? Infinity;
