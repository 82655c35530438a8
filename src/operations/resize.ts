import { FITS, resizedSize } from '../imaging/geometry.js';
import { MAX_OUTPUT_SIDE } from '../imaging/limits.js';
import { coverResize } from '../imaging/smart-crop.js';
import { GRAVITIES, SHARP_GRAVITY, SMART_GRAVITIES, checkColour, colourOption, imageOutputOptions, runSingleImage } from './common.js';
import type { FieldError, Operation } from './types.js';

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
    withoutEnlargement: { type: 'boolean', description: 'Never make the image larger than it is.' },
    ...imageOutputOptions,
  },
} as const;

export const resize: Operation<typeof optionsSchema> = {
  kind: 'resize',
  summary: 'Resize an image',
  description:
    'Scales to `width` and/or `height`. `fit` decides how the box is filled: `inside` (default) keeps the aspect ratio within the box, ' +
    '`cover` fills it and crops (at `position`; `attention` and `entropy` choose the crop by content, `face` centres it on the faces found, else as `attention`), `contain` letterboxes on `background`, ' +
    '`fill` stretches, `outside` covers without cropping. Animations are resized frame by frame.',
  accepts: 'image',
  batch: true,
  capsOutputSide: true,
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
  outputSize: (options, source) => resizedSize(source, options),
  step: {
    background: (options) => options.background,
    transform({ width, height, fit = 'inside', position = 'center', background, withoutEnlargement }, env) {
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
  run: (ctx) => runSingleImage(resize, ctx, {}),
};
