import { formatOption, qualityOption, runSingleImage, type ImageOutputOptions } from './common.js';
import type { Operation } from './types.js';

export interface FlipOptions extends ImageOutputOptions {
  direction: 'horizontal' | 'vertical' | 'both';
}

export const flip: Operation<FlipOptions> = {
  kind: 'flip',
  summary: 'Mirror an image',
  description: '`horizontal` mirrors left–right, `vertical` top–bottom, `both` does both (a 180° turn). Applied after EXIF orientation.',
  accepts: 'image',
  batch: true,
  options: {
    properties: {
      direction: { type: 'string', enum: ['horizontal', 'vertical', 'both'] },
      format: formatOption,
      quality: qualityOption,
    },
    required: ['direction'],
  },
  run(ctx) {
    const { direction } = ctx.options;
    return runSingleImage(flip, ctx, {
      // A vertical flip of a whole animation would also reverse its frames: flip each frame.
      perFrame: direction !== 'horizontal',
      transform: (image) => {
        if (direction !== 'vertical') image = image.flop();
        if (direction !== 'horizontal') image = image.flip();
        return image;
      },
    });
  },
};
