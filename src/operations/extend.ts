import { canHoldAlpha } from '../imaging/formats.js';
import { checkColour, colourOption, imageOutputOptions, runSingleImage } from './common.js';
import type { FieldError, Operation, OptionsOf } from './types.js';

/** sharp takes any whole number of pixels; the plan's pixel limit bounds the result, this bounds the option. */
const MAX_EXTEND = 100_000;
const px = (description: string) => ({ type: 'integer', minimum: 0, maximum: MAX_EXTEND, description }) as const;

const optionsSchema = {
  properties: {
    top: px('Pixels added above.'),
    right: px('Pixels added on the right.'),
    bottom: px('Pixels added below.'),
    left: px('Pixels added on the left.'),
    all: px('Pixels added on every side not given on its own.'),
    background: colourOption('Colour of the added area. Default transparent where the output format has alpha, else white.'),
    ...imageOutputOptions,
  },
} as const;

type ExtendOptions = OptionsOf<typeof optionsSchema>;
const SIDES = ['top', 'right', 'bottom', 'left'] as const;

/** Pixels added on each side: its own option, else `all`, else 0. */
function margins(options: ExtendOptions): Record<(typeof SIDES)[number], number> {
  const side = (name: (typeof SIDES)[number]) => options[name] ?? options.all ?? 0;
  return { top: side('top'), right: side('right'), bottom: side('bottom'), left: side('left') };
}

export const extend: Operation<typeof optionsSchema> = {
  kind: 'extend',
  summary: 'Add a border around an image',
  description:
    'Adds `top`, `right`, `bottom` and `left` pixels around the upright image (`all` for every side not given on its own), filled with ' +
    '`background` (default transparent where the output format has alpha, else white). The new size is checked against the plan’s ' +
    'pixel limits when the task is queued. Animations are extended frame by frame.',
  accepts: 'image',
  batch: true,
  example: { all: 20, background: '#ffffff' },
  options: optionsSchema,
  tag: () => 'extend',
  check(options) {
    const errors: FieldError[] = [];
    if (![...SIDES, 'all' as const].some((name) => options[name] !== undefined)) {
      errors.push({ field: 'all', message: 'give all, or at least one of top, right, bottom, left' });
    }
    return [...errors, ...checkColour('background', options.background)];
  },
  sizes(options, source) {
    const m = margins(options);
    return [{ width: source.width + m.left + m.right, height: source.height + m.top + m.bottom, capped: false }];
  },
  step: {
    background: (options) => options.background ?? '#ffffff',
    transform(options, env) {
      const fill = options.background ?? (canHoldAlpha(env.format) ? '#00000000' : '#ffffff');
      // sharp extends each frame of an animation on its own.
      return (image) => image.extend({ ...margins(options), background: fill });
    },
  },
  run: (ctx) => runSingleImage(extend, ctx, {}),
};
