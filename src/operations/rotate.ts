import { canHoldAlpha } from '../imaging/formats.js';
import { checkColour, colourOption, imageOutputOptions, runSingleImage, tagged, tagNumber } from './common.js';
import type { Operation } from './types.js';

const optionsSchema = {
  properties: {
    angle: { type: 'number', description: 'Degrees, clockwise: any number (turned modulo 360).' },
    background: colourOption('Colour of the uncovered corners.'),
    ...imageOutputOptions,
  },
  required: ['angle'],
} as const;

/** The bounding box of a `width`×`height` image turned by `angle` degrees. */
function rotatedSize(source: { width: number; height: number }, angle: number) {
  const radians = (((angle % 360) + 360) % 360) * (Math.PI / 180);
  const cos = Math.abs(Math.cos(radians));
  const sin = Math.abs(Math.sin(radians));
  // Right angles are exact; round away float noise like 1e-16.
  const w = source.width * cos + source.height * sin;
  const h = source.width * sin + source.height * cos;
  return { width: Math.round(w), height: Math.round(h) };
}

export const rotate: Operation<typeof optionsSchema> = {
  kind: 'rotate',
  summary: 'Rotate an image',
  description:
    'Turns the upright image clockwise by `angle` degrees (any value). Right angles are lossless in geometry; other angles enlarge the canvas ' +
    'and fill the corners with `background` (default transparent where the output format has alpha, else white).',
  accepts: 'image',
  batch: true,
  example: { angle: 90 },
  options: optionsSchema,
  check: (options) => checkColour('background', options.background),
  // `rotate-90`, `rotate-ccw90` for −90.
  tag: (options) => tagged('rotate', tagNumber(options.angle)?.replace(/^-/, 'ccw')),
  sizes: (options, source) => [{ ...rotatedSize(source, options.angle), capped: false }],
  step: {
    background: (options) => options.background ?? '#ffffff',
    // libvips rotates single images; animations are turned frame by frame.
    perFrame: () => true,
    transform(options, env) {
      // Any finite number of degrees: libvips takes the same turn within one revolution.
      const angle = ((options.angle % 360) + 360) % 360;
      const fill = options.background ?? (canHoldAlpha(env.format) ? '#00000000' : '#ffffff');
      return (image) => image.rotate(angle, { background: fill });
    },
  },
  run: (ctx) => runSingleImage(rotate, ctx, {}),
};
