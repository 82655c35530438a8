import { FITS, resizedSize, type Size } from '../imaging/geometry.js';
import { MAX_OUTPUT_SIDE } from '../imaging/limits.js';
import { coverResize } from '../imaging/smart-crop.js';
import {
  GRAVITIES,
  SHARP_GRAVITY,
  SMART_GRAVITIES,
  checkColour,
  colourOption,
  imageOutputOptions,
  runSingleImage,
  sizeTag,
  tagged,
} from './common.js';
import type { FieldError, Operation, OptionsOf } from './types.js';

const side = (what: string) =>
  ({ type: 'integer', minimum: 1, maximum: MAX_OUTPUT_SIDE, description: `${what} in pixels (at most ${MAX_OUTPUT_SIDE}).` }) as const;

const optionsSchema = {
  properties: {
    width: side('Target width'),
    height: side('Target height'),
    fit: { type: 'string', enum: FITS, description: 'Default inside.' },
    position: {
      type: 'string',
      enum: [...GRAVITIES, ...SMART_GRAVITIES],
      description: 'Where `cover` crops and `contain` places the image. Default center.',
    },
    background: colourOption('Letterbox colour for `contain`. Default transparent where the format has alpha, else white.'),
    withoutEnlargement: {
      type: 'boolean',
      description:
        'Default true: an image smaller than the box keeps its size (`result.sizeKept` says so) rather than being enlarged; ' +
        '`false` enlarges it to the box (or use upscale).',
    },
    ...imageOutputOptions,
  },
} as const;

export const resize: Operation<typeof optionsSchema> = {
  kind: 'resize',
  summary: 'Resize an image',
  description:
    'Scales to `width` and/or `height`. `fit` decides how the box is filled: `inside` (default) keeps the aspect ratio within the box, ' +
    '`cover` fills it and crops (at `position`; `attention` and `entropy` choose the crop by content, `face` centres it on the faces found, else as `attention`), `contain` letterboxes on `background`, ' +
    '`fill` stretches, `outside` covers without cropping. Never enlarges unless `withoutEnlargement: false`: an image smaller than the ' +
    'box keeps its size and `result.sizeKept` is true. Animations are resized frame by frame.',
  accepts: 'image',
  batch: true,
  example: { width: 1600, fit: 'inside', format: 'webp', quality: 80 },
  options: optionsSchema,
  check(options) {
    const errors: FieldError[] = [];
    if (options.width === undefined && options.height === undefined) errors.push({ field: 'width', message: 'give width, height or both' });
    if (options.position && (SMART_GRAVITIES as readonly string[]).includes(options.position) && (options.fit ?? 'inside') !== 'cover') {
      errors.push({ field: 'position', message: `${options.position} chooses a crop, so it needs fit: cover` });
    }
    return [...errors, ...checkColour('background', options.background)];
  },
  result: {
    properties: {
      sizeKept: {
        type: 'boolean',
        const: true,
        description: 'Present when the image was smaller than the box and kept its size (`withoutEnlargement`, the default).',
      },
    },
  },
  tag: (options) => tagged('resize', sizeTag(options.width, options.height)),
  sizes: (options, source) => [{ ...resizedSize(source, enlarging(options)), capped: true }],
  step: {
    background: (options) => options.background,
    transform({ width, height, fit = 'inside', position = 'center', background, withoutEnlargement = true }, env) {
      return (image, source, firstFrame) => {
        const options = {
          width,
          height,
          fit,
          position: (SHARP_GRAVITY as Record<string, string>)[position] ?? position,
          background: background ?? { r: 0, g: 0, b: 0, alpha: 0 },
          withoutEnlargement,
          kernel: 'lanczos3',
        } as const;
        // A cover box of both sides may be chosen by content, on an animation too.
        if (fit === 'cover' && width !== undefined && height !== undefined)
          return coverResize(image, { ...options, width, height }, source, firstFrame, env.task.signal);
        return image.resize(options);
      };
    },
  },
  async run(ctx) {
    // The frame size the step saw (upright): whether the box would have enlarged it.
    let seen: Size | undefined;
    const step = resize.step!;
    const watched = {
      ...resize,
      step: {
        ...step,
        transform: (options: ResizeOptions, env: Parameters<typeof step.transform>[1]) => {
          const transform = step.transform(options, env);
          return (...args: Parameters<typeof transform>) => {
            seen = { width: args[1].width, height: args[1].height };
            return transform(...args);
          };
        },
      },
    };
    const done = await runSingleImage(watched, ctx, {});
    if (!seen || !keepsSize(ctx.options, seen)) return done;
    return { ...done, result: { ...done.result, sizeKept: true } };
  },
};

type ResizeOptions = OptionsOf<typeof optionsSchema>;

/** The options with `withoutEnlargement` as it applies (true unless false is given). */
const enlarging = (options: ResizeOptions): ResizeOptions => ({ ...options, withoutEnlargement: options.withoutEnlargement ?? true });

/** Whether `withoutEnlargement` kept a `source`-sized image from growing to the box. */
function keepsSize(options: ResizeOptions, source: Size): boolean {
  if (options.withoutEnlargement === false) return false;
  const asked = resizedSize(source, { ...options, withoutEnlargement: false });
  return asked.width > source.width || asked.height > source.height;
}
