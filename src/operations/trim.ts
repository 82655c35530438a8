import sharp, { type Sharp } from 'sharp';
import { parseColour } from '../imaging/geometry.js';
import { openPixels, pixelsOf, type Pixels } from '../imaging/materialise.js';
import type { SourceInfo } from '../imaging/source.js';
import { checkColour, colourOption, imageOutputOptions, runSingleImage } from './common.js';
import type { AnyOperation, Operation, OptionsOf, StepEnv } from './types.js';

const optionsSchema = {
  properties: {
    threshold: {
      type: 'number',
      minimum: 0,
      maximum: 255,
      description: 'How far (0–255) a pixel may be from the border colour and still count as border. Default 10.',
    },
    background: colourOption("The border's colour. Default: the top-left pixel's."),
    ...imageOutputOptions,
  },
} as const;

type TrimOptions = OptionsOf<typeof optionsSchema>;

/** The area kept, in pixels of the step's input. */
interface Box {
  left: number;
  top: number;
  width: number;
  height: number;
}

/** The box of one frame's content: sharp's trim, which leaves an image that is all border whole. */
async function contentBox(frame: Pixels, options: TrimOptions, deadline: number): Promise<Box> {
  // libvips' trim refuses images under 3×3 pixels: one that small is kept whole.
  if (frame.width < 3 || frame.height < 3) return { left: 0, top: 0, width: frame.width, height: frame.height };
  const background = options.background === undefined ? undefined : parseColour(options.background);
  const trimmed = await pixelsOf(openPixels(frame).trim({ threshold: options.threshold ?? 10, ...(background ? { background } : {}) }), deadline);
  // sharp reports the offsets as where the input sits relative to the output: negative (or -0).
  return { left: Math.abs(trimmed.trimOffsetLeft ?? 0), top: Math.abs(trimmed.trimOffsetTop ?? 0), width: trimmed.width, height: trimmed.height };
}

/** The smallest box holding both. */
const union = (a: Box, b: Box): Box => {
  const left = Math.min(a.left, b.left);
  const top = Math.min(a.top, b.top);
  return {
    left,
    top,
    width: Math.max(a.left + a.width, b.left + b.width) - left,
    height: Math.max(a.top + a.height, b.top + b.height) - top,
  };
};

/** What a trim did, for the task's result. */
interface Outcome {
  trimmed: boolean;
  offsetLeft: number;
  offsetTop: number;
}

/** The step, telling `outcome` (when given) the box it kept. */
function trimStep(options: TrimOptions, env: StepEnv, outcome?: Outcome) {
  const deadline = env.task.deadline;
  return async (image: Sharp, source: SourceInfo): Promise<Sharp> => {
    const whole = await pixelsOf(image, deadline);
    // An animation is every frame one below the other: trim them all by the box that holds every frame's content.
    const frameHeight = Math.min(source.height, whole.height);
    const frames = Math.max(1, Math.round(whole.height / frameHeight));
    const frameBytes = whole.width * frameHeight * whole.channels;
    let box: Box | undefined;
    for (let page = 0; page < frames; page++) {
      const frame = { ...whole, height: frameHeight, data: whole.data.subarray(page * frameBytes, (page + 1) * frameBytes) };
      const found = await contentBox(frame, options, deadline);
      box = box ? union(box, found) : found;
    }
    const kept = box!;
    const trimmed = kept.width < whole.width || kept.height < frameHeight;
    if (outcome) Object.assign(outcome, { trimmed, offsetLeft: kept.left, offsetTop: kept.top });
    // Untrimmed, an animation stays one (its frame height said), not one frame as tall as them all.
    if (!trimmed)
      return frames === 1
        ? openPixels(whole)
        : sharp(whole.data, { raw: { width: whole.width, height: whole.height, channels: whole.channels, pageHeight: frameHeight } });
    if (frames === 1) return openPixels(whole).extract(kept);
    const cut = await Promise.all(
      Array.from({ length: frames }, (_, page) =>
        openPixels(whole)
          .extract({ ...kept, top: page * frameHeight + kept.top })
          .png({ compressionLevel: 0 })
          .toBuffer(),
      ),
    );
    return sharp(cut, { join: { animated: true } });
  };
}

export const trim: Operation<typeof optionsSchema> = {
  kind: 'trim',
  summary: 'Cut away a uniform border',
  description:
    'Cuts away the border of one colour — the top-left pixel’s, or `background` — where pixels differ from it by at most `threshold` ' +
    '(0–255, default 10); transparent borders are cut too. An image that is all border is returned whole. `result.trimmed` says whether ' +
    'anything was cut, and `result.offsetLeft`, `result.offsetTop` where the kept area was in the (upright) input. An animation is cut ' +
    'by one box that holds the content of every frame.',
  accepts: 'image',
  batch: true,
  example: { threshold: 10 },
  options: optionsSchema,
  tag: () => 'trim',
  result: {
    properties: {
      trimmed: { type: 'boolean', description: 'Whether a border was cut (false when the image is all border and came back whole).' },
      offsetLeft: { type: 'integer', minimum: 0, description: 'Where the kept area starts in the upright input, from its left edge, in pixels.' },
      offsetTop: { type: 'integer', minimum: 0, description: 'Where the kept area starts in the upright input, from its top edge, in pixels.' },
    },
  },
  check: (options) => checkColour('background', options.background),
  // No outputSize: the pixels decide the size, never larger than the input's, which the plan keeps as its bound.
  step: { transform: (options, env) => trimStep(options, env) },
  async run(ctx) {
    const outcome: Outcome = { trimmed: false, offsetLeft: 0, offsetTop: 0 };
    const op: AnyOperation = { ...trim, step: { transform: (options: TrimOptions, env: StepEnv) => trimStep(options, env, outcome) } };
    const done = await runSingleImage(op, ctx, {});
    return { ...done, result: { ...done.result, ...outcome } };
  },
};
