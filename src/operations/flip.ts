import { imageOutputOptions, runSingleImage, tagged } from './common.js';
import type { Operation } from './types.js';

const optionsSchema = {
  properties: {
    direction: { type: 'string', enum: ['horizontal', 'vertical', 'both'] },
    ...imageOutputOptions,
  },
  required: ['direction'],
} as const;

export const flip: Operation<typeof optionsSchema> = {
  kind: 'flip',
  summary: 'Mirror an image',
  description: '`horizontal` mirrors left–right, `vertical` top–bottom, `both` does both (a 180° turn). Applied after EXIF orientation.',
  accepts: 'image',
  batch: true,
  example: { direction: 'horizontal' },
  options: optionsSchema,
  tag: (options) => tagged('flip', options.direction),
  step: {
    // A vertical flip of a whole animation would also reverse its frames: flip each frame.
    perFrame: ({ direction }) => direction !== 'horizontal',
    transform:
      ({ direction }) =>
      (image) => {
        if (direction !== 'vertical') image = image.flop();
        if (direction !== 'horizontal') image = image.flip();
        return image;
      },
  },
  run: (ctx) => runSingleImage(flip, ctx, {}),
};
