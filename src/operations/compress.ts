import fs from 'node:fs';
import type { FileRecord } from '../files/files.js';
import { COUNT_COLOURS_MAX_PIXELS, SAMPLED_CROPS, SAMPLED_FULL_ENCODES, SAMPLED_SEARCH_MIN_PIXELS, SIMILARITY_PROBES } from '../imaging/encode.js';
import { canBeLossless, defaultOutputFormat, mimeOf, outputFilename } from '../imaging/formats.js';
import { OPTIMISE_MAX_PIXELS, optimisePng } from '../imaging/png-optimise.js';
import { smallestPngBytes } from '../imaging/png-size.js';
import { SIMILARITY_MAX_PIXELS, VISUALLY_LOSSLESS_SSIM } from '../imaging/similarity.js';
import { imageOutputOptions, runSingleImage, tagged, tagNumber } from './common.js';
import type { FieldError, InputFile, Operation, OperationOutput, OutputMeta, ResultSchema } from './types.js';

/** Where "auto" searches crops, as the docs round it. */
const SAMPLED_MIN_MP = Math.round(SAMPLED_SEARCH_MIN_PIXELS / 1e5) / 10;

/** What compress (and a pipeline, which encodes as compress does) adds to `result`. */
export const COMPRESSION_RESULT = {
  properties: {
    inputSize: { type: 'integer', minimum: 0, description: 'Bytes of the input.' },
    savedBytes: { type: 'integer', minimum: 0, description: 'inputSize − size, or 0 when the output is not smaller.' },
    quality: {
      type: 'integer',
      minimum: 1,
      maximum: 100,
      description:
        'The quality a search chose: with `targetSize`, the highest that fits; with `quality: "auto"`, the lowest that keeps `ssim` ' +
        "(absent when the output is lossless or the input's own bytes).",
    },
    ssim: {
      type: 'number',
      minimum: -1,
      maximum: 1,
      description: 'With `quality: "auto"`: SSIM of the output to the input (1 when the output is lossless or the input itself).',
    },
  },
} as const satisfies ResultSchema;

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
        `input stays at or above ${VISUALLY_LOSSLESS_SSIM} (visually lossless), found in at most ${SIMILARITY_PROBES + 1} encodes ` +
        `(from ${SAMPLED_MIN_MP} megapixels, probes of crops and at most ${SAMPLED_FULL_ENCODES + 1} of the whole image); ` +
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
    '`targetSize` searches the quality for the largest output that fits (`result.quality` reports it): a bisection of up to 7 encodes, ' +
    `or, for a still image of ${SAMPLED_MIN_MP} megapixels or more to JPEG, WebP, AVIF, JPEG XL or TIFF, one on ${SAMPLED_CROPS} crops of it whose bytes ` +
    `foretell the whole's, corrected by up to ${SAMPLED_FULL_ENCODES} encodes of the whole and closed by a bisection of what is left; ` +
    'without a fit the task fails with TARGET_SIZE_UNREACHABLE, and when the time limit stops it early, the largest fitting output found is the answer. ' +
    'Never larger than the input in the same format: when re-encoding does not help, the output is a lossless rewrite (PNG) or, failing that, ' +
    "the input's bytes as they are (metadata included), and `result.savedBytes` is 0. " +
    '`quality: "auto"` searches the quality for the smallest output whose SSIM (luma, full resolution up to ' +
    `${SIMILARITY_MAX_PIXELS / 1e6} megapixels, both sides reduced past that) to the input is at least ${VISUALLY_LOSSLESS_SSIM}, ` +
    'lossless where no quality keeps it and the format can be; `result.quality` (absent when lossless) and `result.ssim` report it. ' +
    `A still image of ${SAMPLED_MIN_MP} megapixels or more to JPEG, WebP, AVIF, JPEG XL or TIFF is searched on ${SAMPLED_CROPS} full-resolution crops ` +
    '(about 1 megapixel, compared at the reduction the whole image is), then encoded whole at the quality chosen and measured: `result.ssim` ' +
    "is always the output's own. Where the whole misses the threshold (or clears it by more than the crops said), the crops are searched " +
    `again with the difference seen, and the whole encoded again: at most ${SAMPLED_FULL_ENCODES} times, plus one lossless encode where no quality keeps it. ` +
    'Both searches report `progress` after each encode, and neither starts an encode it cannot finish before the time limit ' +
    '(`TASK_TIMEOUT_SECONDS`), foretold from the ones before it: when the first encode of the whole image cannot fit, the task fails ' +
    'with PROCESSING_TIMEOUT at once (within seconds, not at the limit; a fixed `quality` needs one encode), and when a later one cannot, ' +
    'the best output measured is the answer — `result.ssim` then says how close it came (it may be just below the threshold).',
  accepts: 'image',
  batch: true,
  example: { quality: 75, format: 'webp' },
  options: optionsSchema,
  result: COMPRESSION_RESULT,
  // `compress-q75`; the search's choices are in `result`, not the name.
  tag: (options) => tagged('compress', typeof options.quality === 'number' ? `q${tagNumber(options.quality)}` : undefined),
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
    if (cannotBeSmaller(input.file, ctx.options.format, job.targetSize)) {
      const png = { format: 'png', mimeType: mimeOf('png'), filename: outputFilename(input.file.filename, 'png') };
      return { outputs: [await inputAsOutput(input, png)], result: { inputSize, savedBytes: 0, ...(auto ? { ssim: 1 } : {}) } };
    }
    const first = await runSingleImage(compress, ctx, job);
    let output = first.outputs[0]!;
    // What the search chose ("auto": quality and SSIM; targetSize: quality); a lossless rewrite
    // or the input's bytes below are exact, and no quality chose them.
    const searched = auto || job.targetSize !== undefined;
    let chosen = searched ? first.result : undefined;
    // Never larger than the input in its own format (a palette PNG re-quantised can grow):
    // a lossless rewrite where the format has one that may be smaller, else the input's bytes.
    if (output.format === input.file.format && outputSize(output) >= inputSize) {
      if (LOSSLESS_REWRITE.has(output.format) && !job.lossless) {
        const rewrite = (await runSingleImage(compress, ctx, { ...job, lossless: true, targetSize: undefined, similarity: undefined })).outputs[0]!;
        // The same pixels in fewer bytes where the optimiser finds them (png-optimise.ts).
        rewrite.data = await optimisePng(rewrite.data!, rewrite.width! * rewrite.height!, ctx);
        if (outputSize(rewrite) < inputSize) {
          output = rewrite;
          chosen = auto ? { ssim: 1 } : undefined;
        }
      }
      if (outputSize(output) >= inputSize) {
        output = await inputAsOutput(input, output);
        chosen = auto ? { ssim: 1 } : undefined;
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

/** The input's bytes as they are (metadata included) as the task's output, in the format `meta` names (the input's); its size where the file record has none. */
async function inputAsOutput(input: InputFile, meta: Omit<OutputMeta, 'pages'>): Promise<OperationOutput> {
  const { file } = input;
  return {
    format: meta.format,
    mimeType: meta.mimeType,
    filename: meta.filename,
    data: await fs.promises.readFile(input.path),
    width: file.width ?? meta.width,
    height: file.height ?? meta.height,
    pages: file.pages ?? undefined,
  };
}

/**
 * Whether no output compress could write is smaller than the input, so that its bytes are the
 * answer before any pixel is decoded: a PNG kept a PNG whose size is at or below the least any
 * PNG of its pixels takes (png-size.ts) — at 1 bit a pixel where the colours are counted or the
 * optimiser runs (a palette of 2, or the optimiser's reductions), else at 8 bits (the fewest
 * libvips writes: a 256-colour palette, or one 8-bit channel). A 16383×16383 PNG of two
 * colours in 33 KB (deflate at its limit) is that: every encode of it would take 260 KB or more.
 * A target size has its own answer (the search fails or fits), so it is left to the search.
 */
function cannotBeSmaller(file: FileRecord, format: string | undefined, targetSize: number | undefined): boolean {
  if (file.format !== 'png' || (format ?? 'png') !== 'png' || targetSize !== undefined || !file.width || !file.height) return false;
  const pixels = file.width * file.height;
  const bitsPerPixel = pixels <= Math.max(COUNT_COLOURS_MAX_PIXELS, OPTIMISE_MAX_PIXELS) ? 1 : 8;
  return smallestPngBytes(file.width, file.height, bitsPerPixel) >= Number(file.size);
}
