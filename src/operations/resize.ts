import { resizedSize, type Fit } from '../imaging/geometry.js';
import { MAX_OUTPUT_SIDE } from '../imaging/pipeline.js';
import { GRAVITIES, SHARP_GRAVITY, SMART_GRAVITIES, checkColour, colourOption, formatOption, qualityOption, runSingleImage, type Gravity, type ImageOutputOptions } from './common.js';
import type { FieldError, Operation } from './types.js';

export interface ResizeOptions extends ImageOutputOptions {
  width?: number;
  height?: number;
  fit?: Fit;
  position?: Gravity | (typeof SMART_GRAVITIES)[number];
  background?: string;
  withoutEnlargement?: boolean;
}

const side = (what: string) => ({ type: 'integer', minimum: 1, maximum: MAX_OUTPUT_SIDE, description: `${what} in pixels (at most ${MAX_OUTPUT_SIDE}).` });

export const resize: Operation<ResizeOptions> = {
  kind: 'resize',
  summary: 'Resize an image',
  description:
    'Scales to `width` and/or `height`. `fit` decides how the box is filled: `inside` (default) keeps the aspect ratio within the box, ' +
    '`cover` fills it and crops (at `position`; `attention` and `entropy` choose the crop by content), `contain` letterboxes on `background`, ' +
    '`fill` stretches, `outside` covers without cropping. Animations are resized frame by frame.',
  accepts: 'image',
  batch: true,
  capsOutputSide: true,
  options: {
    properties: {
      width: side('Target width'),
      height: side('Target height'),
      fit: { type: 'string', enum: ['cover', 'contain', 'fill', 'inside', 'outside'], description: 'Default inside.' },
      position: { type: 'string', enum: [...GRAVITIES, ...SMART_GRAVITIES], description: 'Where `cover` crops and `contain` places the image. Default center.' },
      background: colourOption('Letterbox colour for `contain`. Default transparent where the format has alpha, else white.'),
      withoutEnlargement: { type: 'boolean', description: 'Never make the image larger than it is.' },
      format: formatOption,
      quality: qualityOption,
    },
  },
  check(options) {
    const errors: FieldError[] = [];
    if (options.width === undefined && options.height === undefined) errors.push({ field: 'width', message: 'give width, height or both' });
    if (options.position && (SMART_GRAVITIES as readonly string[]).includes(options.position) && (options.fit ?? 'inside') !== 'cover') {
      errors.push({ field: 'position', message: `${options.position} chooses a crop, so it needs fit: cover` });
    }
    return [...errors, ...checkColour('background', options.background)];
  },
  outputSize: (options, source) => resizedSize(source, options),
  run(ctx) {
    const { width, height, fit = 'inside', position = 'center', background, withoutEnlargement } = ctx.options;
    return runSingleImage(resize, ctx, {
      background,
      transform: (image) =>
        image.resize({
          width,
          height,
          fit,
          position: (SHARP_GRAVITY as Record<string, string>)[position] ?? position,
          background: background ?? { r: 0, g: 0, b: 0, alpha: 0 },
          withoutEnlargement,
          kernel: 'lanczos3',
        }),
    });
  },
};
