import type { Sharp } from 'sharp';
import { parseColour } from '../imaging/geometry.js';
import { materialise, openPixels, pixelsOf } from '../imaging/materialise.js';
import { checkColour, colourOption, imageOutputOptions, runSingleImage } from './common.js';
import type { FieldError, Operation, OptionsOf } from './types.js';

// Ranges mirror what sharp takes (blur up to 1000 and sharpen's sigma up to 10 in sharp; blur is
// held to 100 here, already a smear), so a value out of range is a 400, never a libvips failure.
const optionsSchema = {
  properties: {
    brightness: { type: 'number', minimum: 0, maximum: 10, description: 'Brightness multiplier, 0–10 (1 leaves it, 0 is black).' },
    saturation: { type: 'number', minimum: 0, maximum: 10, description: 'Saturation multiplier, 0–10 (1 leaves it, 0 is grey).' },
    hue: { type: 'number', description: 'Hue rotation in degrees: any number (turned modulo 360, rounded to a whole degree).' },
    contrast: {
      type: 'number',
      minimum: -1,
      maximum: 1,
      description: 'Contrast, −1–1: 0 leaves it, 1 doubles the distance of every value from mid-grey, −1 makes the image flat mid-grey.',
    },
    gamma: {
      type: 'number',
      minimum: 1,
      maximum: 3,
      description: 'Gamma, 1–3: each value v (0–1) becomes v^(1/gamma), brightening the mid-tones (1 leaves it).',
    },
    grayscale: { type: 'boolean', description: 'Turn to shades of grey.' },
    tint: colourOption('Tint: keep the luminance, take the chroma of this colour.'),
    blur: { type: 'number', minimum: 0.3, maximum: 100, description: 'Gaussian blur, sigma in pixels, 0.3–100.' },
    sharpen: { type: 'number', minimum: 0.3, maximum: 10, description: 'Sharpen (unsharp mask on the lightness), sigma in pixels, 0.3–10.' },
    pixelate: { type: 'integer', minimum: 2, maximum: 256, description: 'Pixelate into square blocks of this many pixels a side, 2–256.' },
    normalize: { type: 'boolean', description: 'Stretch the lightness so the darkest 1% is black and the brightest 1% white.' },
    negate: { type: 'boolean', description: 'Invert the colours (alpha is kept).' },
    ...imageOutputOptions,
  },
} as const;

type AdjustOptions = OptionsOf<typeof optionsSchema>;

/** The adjustments, in the order they are applied. */
const ADJUSTMENTS = [
  'brightness',
  'saturation',
  'hue',
  'contrast',
  'gamma',
  'grayscale',
  'tint',
  'blur',
  'sharpen',
  'pixelate',
  'normalize',
  'negate',
] as const satisfies readonly (keyof AdjustOptions)[];

type Adjustment = (image: Sharp) => Sharp | Promise<Sharp>;

/** The adjustments asked for, in order; a boolean set to false asks for nothing. */
function adjustments(options: AdjustOptions, deadline: number): Adjustment[] {
  const list: Adjustment[] = [];
  const { brightness, saturation, hue, contrast, gamma, grayscale, tint, blur, sharpen, pixelate, normalize, negate } = options;
  if (brightness !== undefined || saturation !== undefined || hue !== undefined) {
    // One libvips operation: brightness, then saturation, then hue (sharp takes whole degrees).
    const degrees = hue === undefined ? undefined : Math.round(((hue % 360) + 360) % 360) % 360;
    // sharp refuses a key present with no value: only those given.
    const modulate = Object.fromEntries(Object.entries({ brightness, saturation, hue: degrees }).filter(([, v]) => v !== undefined));
    list.push((image) => image.modulate(modulate));
  }
  if (contrast !== undefined) {
    // Scale around mid-grey: v' = a·v + 128·(1 − a), alpha untouched (sharp keeps it apart).
    const a = 1 + contrast;
    list.push((image) => image.linear(a, 128 * (1 - a)));
  }
  // sharp's gamma(in, out) darkens by 1/in before a resize and brightens by out after: out alone is v^(1/gamma).
  if (gamma !== undefined) list.push((image) => image.gamma(1, gamma));
  if (grayscale) list.push((image) => image.grayscale());
  if (tint !== undefined) list.push((image) => image.tint(parseColour(tint)!));
  if (blur !== undefined) list.push((image) => image.blur(blur));
  if (sharpen !== undefined) list.push((image) => image.sharpen({ sigma: sharpen }));
  if (pixelate !== undefined) {
    list.push(async (image) => {
      // Each block the mean of its pixels (shrunk), then blown up again without smoothing.
      const pixels = await pixelsOf(image, deadline);
      const { width, height } = pixels;
      const small = openPixels(pixels).resize(Math.max(1, Math.round(width / pixelate)), Math.max(1, Math.round(height / pixelate)), {
        fit: 'fill',
        kernel: 'cubic',
      });
      return (await materialise(small, deadline)).resize(width, height, { fit: 'fill', kernel: 'nearest' });
    });
  }
  if (normalize) list.push((image) => image.normalise());
  if (negate) list.push((image) => image.negate({ alpha: false }));
  return list;
}

export const adjust: Operation<typeof optionsSchema> = {
  kind: 'adjust',
  summary: 'Adjust colours, tones and detail',
  description:
    'Applies, in this order, each adjustment given (at least one): `brightness` and `saturation` (multipliers 0–10, 1 leaves it), ' +
    '`hue` (degrees, turned around the colour wheel), `contrast` (−1–1, 0 leaves it), `gamma` (1–3, brightens the mid-tones), ' +
    '`grayscale`, `tint` (a CSS colour whose chroma the image takes), `blur` (Gaussian, sigma 0.3–100 px), `sharpen` (sigma 0.3–10 px), ' +
    '`pixelate` (square blocks of 2–256 px), `normalize` (stretch the lightness to the full range) and `negate` (invert the colours; alpha ' +
    'is kept). The size does not change. Animations are adjusted frame by frame. Colours are worked in 8-bit sRGB.',
  accepts: 'image',
  batch: true,
  example: { brightness: 1.1, saturation: 1.2, contrast: 0.1 },
  options: optionsSchema,
  tag: () => 'adjust',
  check(options) {
    const errors: FieldError[] = [];
    if (!ADJUSTMENTS.some((name) => options[name] !== undefined)) {
      errors.push({ field: 'brightness', message: `give at least one adjustment: ${ADJUSTMENTS.join(', ')}` });
    }
    return [...errors, ...checkColour('tint', options.tint)];
  },
  step: {
    perFrame: () => true,
    transform(options, env) {
      const list = adjustments(options, env.task.deadline);
      return async (image) => {
        // Each adjustment but the last is computed before the next: sharp's own order is not the one stated.
        for (const [index, step] of list.entries()) {
          image = await step(image);
          if (index < list.length - 1) image = await materialise(image, env.task.deadline);
        }
        return image;
      };
    },
  },
  run: (ctx) => runSingleImage(adjust, ctx, {}),
};
