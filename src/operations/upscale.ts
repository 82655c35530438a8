import { MAX_OUTPUT_SIDE } from '../imaging/limits.js';
import { exactlyOne, imageOutputOptions, runSingleImage, sizeTag, tagged, tagNumber } from './common.js';
import type { Operation, OptionsOf } from './types.js';
import { aiTimeLimitMs, aiUpscaleTransform, checkAiUpscale, isAiUpscale, UPSCALE_MODELS } from './upscale-esrgan.js';

const optionsSchema = {
  properties: {
    factor: { type: 'integer', enum: [2, 3, 4] },
    width: { type: 'integer', minimum: 1, maximum: MAX_OUTPUT_SIDE, description: 'Target width in pixels.' },
    height: { type: 'integer', minimum: 1, maximum: MAX_OUTPUT_SIDE, description: 'Target height in pixels.' },
    model: {
      type: 'string',
      enum: [...UPSCALE_MODELS],
      description:
        '`lanczos` (default): fast interpolation. `esrgan`: a super-resolution network (ESRGAN, run on the CPU) that restores detail: ' +
        "its ×2, ×3 or ×4 model at or above the asked scale, then an exact resize; inputs up to the plan's `maxAiUpscalePixels` (else 400 " +
        '`VALIDATION_ERROR` naming `model`; not on Free), no animations, time limit `AI_TASK_TIMEOUT_SECONDS` (default 900 s).',
    },
    ...imageOutputOptions,
  },
} as const;

type UpscaleOptions = OptionsOf<typeof optionsSchema>;

function upscaledSize(options: UpscaleOptions, source: { width: number; height: number }) {
  if (options.factor) return { width: source.width * options.factor, height: source.height * options.factor };
  const scale = options.width ? options.width / source.width : options.height! / source.height;
  return { width: Math.max(1, Math.round(source.width * scale)), height: Math.max(1, Math.round(source.height * scale)) };
}

export const upscale: Operation<typeof optionsSchema> = {
  kind: 'upscale',
  summary: 'Enlarge an image',
  description:
    'Enlarges by `factor` (2, 3 or 4) or to a `width` or `height`, keeping the aspect ratio, with Lanczos resampling and a light unsharp mask ' +
    'to restore edge contrast, or with `model: "esrgan"` a super-resolution network run on the CPU, which restores detail Lanczos blurs ' +
    "(slower: seconds per megapixel; inputs up to the plan's `maxAiUpscalePixels`). " +
    `Outputs are capped at ${MAX_OUTPUT_SIDE} px per side and at the plan's pixel limit.`,
  accepts: 'image',
  batch: true,
  example: { factor: 2 },
  options: optionsSchema,
  check: (options, inputs, limits) => [
    ...exactlyOne(options as Record<string, unknown>, ['factor', 'width', 'height']),
    ...checkAiUpscale(options, inputs, limits),
  ],
  result: {
    properties: {
      model: { type: 'string', enum: [...UPSCALE_MODELS], description: 'The model that enlarged it: `lanczos` or `esrgan`.' },
    },
  },
  // `upscale-2x`, `upscale-1600`, `upscale-2x-esrgan`.
  tag(options) {
    const detail = options.factor ? `${tagNumber(options.factor)}x` : sizeTag(options.width, options.height);
    return tagged('upscale', isAiUpscale(options) && detail ? `${detail}-esrgan` : detail);
  },
  timeLimitMs: aiTimeLimitMs,
  lane: (options) => (isAiUpscale(options) ? 'ai' : 'image'),
  sizes: (options, source) => [{ ...upscaledSize(options, source), capped: true }],
  step: {
    transform: (options, env) => {
      if (isAiUpscale(options)) return aiUpscaleTransform(env, (source) => upscaledSize(options, source));
      return (image, source) => {
        const size = upscaledSize(options, source);
        return image.resize({ width: size.width, height: size.height, fit: 'fill', kernel: 'lanczos3' }).sharpen({ sigma: 0.6, m1: 0.5, m2: 1.5 });
      };
    },
  },
  async run(ctx) {
    const done = await runSingleImage(upscale, ctx, {});
    return { ...done, result: { ...done.result, model: ctx.options.model ?? 'lanczos' } };
  },
};
