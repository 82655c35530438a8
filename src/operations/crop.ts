import { aspectBox, parseAspectRatio } from '../imaging/geometry.js';
import { coverResize } from '../imaging/smart-crop.js';
import { GRAVITIES, SHARP_GRAVITY, SMART_GRAVITIES, imageOutputOptions, runSingleImage, sizeTag, tagged, type Gravity } from './common.js';
import type { FieldError, Operation, OptionsOf } from './types.js';

const RECT = ['left', 'top', 'width', 'height'] as const;
/** Compass names crop's gravity also takes, as the API's positions. */
const COMPASS = {
  north: 'top',
  south: 'bottom',
  east: 'right',
  west: 'left',
  northeast: 'top-right',
  northwest: 'top-left',
  southeast: 'bottom-right',
  southwest: 'bottom-left',
} as const satisfies Record<string, Gravity>;
const px = (description: string) => ({ type: 'integer', minimum: 0, maximum: 1_000_000, description }) as const;

const optionsSchema = {
  properties: {
    left: px('Left edge, in pixels.'),
    top: px('Top edge, in pixels.'),
    width: { ...px('Width, in pixels.'), minimum: 1 },
    height: { ...px('Height, in pixels.'), minimum: 1 },
    aspectRatio: {
      type: 'string',
      pattern: '^\\d{1,5}(\\.\\d{1,4})?:\\d{1,5}(\\.\\d{1,4})?$',
      description: 'Width:height, e.g. "16:9".',
      examples: ['16:9'],
    },
    gravity: {
      type: 'string',
      enum: [...GRAVITIES, ...(Object.keys(COMPASS) as (keyof typeof COMPASS)[]), ...SMART_GRAVITIES],
      description: 'Where the aspect-ratio crop sits. Default center.',
    },
    ...imageOutputOptions,
  },
} as const;

type CropOptions = OptionsOf<typeof optionsSchema>;

/** The rectangle a crop takes from an upright image of `source` size. */
function cropRect(options: CropOptions, source: { width: number; height: number }) {
  if (options.aspectRatio) return { ...aspectBox(source, options.aspectRatio), left: undefined, top: undefined };
  return { left: options.left!, top: options.top!, width: options.width!, height: options.height! };
}

export const crop: Operation<typeof optionsSchema> = {
  kind: 'crop',
  summary: 'Crop an image',
  description:
    'Either a rectangle (`left`, `top`, `width`, `height` in pixels of the upright image) or the largest area of `aspectRatio` ("16:9") ' +
    'placed by `gravity` — `attention` (salient features) and `entropy` (detail) are the smart crops of libvips, `face` centres on the box ' +
    'around every face found (a detector run on the CPU; `attention` when there is none). A rectangle outside the image is refused.',
  accepts: 'image',
  batch: true,
  example: { aspectRatio: '16:9', gravity: 'attention' },
  options: optionsSchema,
  check(options, inputs) {
    const errors: FieldError[] = [];
    const rect = RECT.filter((f) => options[f] !== undefined);
    if (options.aspectRatio !== undefined) {
      if (rect.length) errors.push({ field: rect[0]!, message: 'give either a rectangle or aspectRatio, not both' });
      if (!parseAspectRatio(options.aspectRatio)) errors.push({ field: 'aspectRatio', message: 'must be two positive numbers, like "16:9"' });
    } else {
      for (const field of RECT)
        if (options[field] === undefined) errors.push({ field, message: 'is required for a rectangle crop (or give aspectRatio)' });
      if (options.gravity !== undefined) errors.push({ field: 'gravity', message: 'applies to aspectRatio crops only' });
    }
    if (!errors.length && options.aspectRatio === undefined) {
      for (const file of inputs) {
        if (file.width === null || file.height === null) continue;
        if (options.left! + options.width! > file.width || options.top! + options.height! > file.height) {
          errors.push({ field: 'width', message: `the rectangle reaches outside the ${file.width}×${file.height} image ${file.id}` });
          break;
        }
      }
    }
    return errors;
  },
  // `crop-200x150` for a rectangle; an aspect-ratio crop's size depends on the input's.
  tag: (options) => tagged('crop', options.aspectRatio === undefined ? sizeTag(options.width, options.height) : undefined),
  sizes: (options, source) => {
    const rect = cropRect(options, source);
    return [{ width: rect.width, height: rect.height, capped: false }];
  },
  step: {
    transform: (options, env) => (image, source, firstFrame) => {
      const rect = cropRect(options, source);
      if (rect.left === undefined) {
        // cover at scale 1: the box of that ratio, placed by gravity (or chosen by content).
        const gravity = options.gravity ? ((COMPASS as Record<string, Gravity>)[options.gravity] ?? options.gravity) : 'center';
        const position = (SHARP_GRAVITY as Record<string, string>)[gravity] ?? gravity;
        return coverResize(image, { width: rect.width, height: rect.height, position }, source, firstFrame, env.task.signal);
      }
      // Headers can be wrong about the size: clip to the real image rather than fail.
      const left = Math.min(rect.left, source.width - 1);
      const top = Math.min(rect.top!, source.height - 1);
      return image.extract({ left, top, width: Math.min(rect.width, source.width - left), height: Math.min(rect.height, source.height - top) });
    },
  },
  run: (ctx) => runSingleImage(crop, ctx, {}),
};
