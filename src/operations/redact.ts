// `redact`: hide every face (found on the CPU by the detector of src/imaging/faces.ts, in its
// thorough mode: a missed face is a privacy failure, so it runs on tiles too and keeps faces of
// low score) and/or the regions given, by pixelating, blurring or filling them. Each face is
// covered with a margin that takes in hair, ears and chin: the detector's box runs from the brows
// to the chin. An animation is redacted frame by frame, each frame's faces found in it.
import sharp, { type OverlayOptions, type Sharp } from 'sharp';
import { invalidOption } from '../errors.js';
import { detectFaces } from '../imaging/faces.js';
import type { Size } from '../imaging/geometry.js';
import { imageOutputOptions, PIXEL_BOX_PROPERTIES, runSingleImage } from './common.js';
import type { FieldError, Operation, OptionsOf, StepEnv } from './types.js';

const METHODS = ['pixelate', 'blur', 'fill'] as const;

/** Around a face's box, as fractions of its width (sides) and height (above, below). */
const FACE_MARGIN = { sides: 0.2, above: 0.45, below: 0.2 } as const;

const px = (description: string) => ({ type: 'integer', minimum: 0, maximum: 1_000_000, description }) as const;

const optionsSchema = {
  properties: {
    faces: { type: 'boolean', description: 'Cover every face found (with a margin for hair and chin). Default true.' },
    regions: {
      type: 'array',
      maxItems: 100,
      description: 'Rectangles to cover as well, in pixels of the upright image; parts outside the image are ignored.',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['left', 'top', 'width', 'height'],
        properties: {
          left: px('Left edge.'),
          top: px('Top edge.'),
          width: { ...px('Width.'), minimum: 1 },
          height: { ...px('Height.'), minimum: 1 },
        },
      },
    },
    method: { type: 'string', enum: METHODS, description: 'How a region is hidden. Default pixelate.' },
    strength: {
      type: 'integer',
      minimum: 1,
      maximum: 100,
      description:
        'How strongly, 1–100 (default 50): the pixelation cell or the blur radius as a share of the region (at 50, a face is 8 cells across). No effect on fill.',
    },
    ...imageOutputOptions,
  },
} as const;

type RedactOptions = OptionsOf<typeof optionsSchema>;

/** A region covered: a face (with its margin, and the detector's score) or one the options gave. */
interface CoveredRegion {
  left: number;
  top: number;
  width: number;
  height: number;
  source: 'face' | 'region';
  score?: number;
}

/** A rectangle clipped to the image; undefined when nothing of it is inside. */
function clip(rect: { left: number; top: number; width: number; height: number }, size: Size) {
  const left = Math.max(0, Math.round(rect.left));
  const top = Math.max(0, Math.round(rect.top));
  const right = Math.min(size.width, Math.round(rect.left + rect.width));
  const bottom = Math.min(size.height, Math.round(rect.top + rect.height));
  return right > left && bottom > top ? { left, top, width: right - left, height: bottom - top } : undefined;
}

/** The regions to cover in one upright image (or frame) of `size`. */
async function regionsOf(options: RedactOptions, image: Sharp, size: Size, signal: AbortSignal | undefined): Promise<CoveredRegion[]> {
  const covered: CoveredRegion[] = [];
  if (options.faces ?? true) {
    for (const face of await detectFaces(image, size, { thorough: true, signal })) {
      const rect = clip(
        {
          left: face.left - face.width * FACE_MARGIN.sides,
          top: face.top - face.height * FACE_MARGIN.above,
          width: face.width * (1 + 2 * FACE_MARGIN.sides),
          height: face.height * (1 + FACE_MARGIN.above + FACE_MARGIN.below),
        },
        size,
      );
      if (rect) covered.push({ ...rect, source: 'face', score: face.score });
    }
  }
  for (const region of options.regions ?? []) {
    const rect = clip(region, size);
    if (rect) covered.push({ ...rect, source: 'region' });
  }
  return covered;
}

/** One covered region's pixels, from the image's raw pixels. */
async function patch(raw: { data: Buffer; info: sharp.OutputInfo }, region: CoveredRegion, method: (typeof METHODS)[number], strength: number) {
  const { width, height } = region;
  const channels = raw.info.channels as 1 | 2 | 3 | 4;
  if (method === 'fill') {
    return sharp({ create: { width, height, channels: 3, background: '#000000' } })
      .png()
      .toBuffer();
  }
  const cut = () => sharp(raw.data, { raw: { width: raw.info.width, height: raw.info.height, channels } }).extract(region);
  const share = strength / 400;
  if (method === 'blur') {
    // Blurred by a radius relative to the region; edges see only the region, nothing of what is outside leaks in.
    return cut()
      .blur(Math.min(1000, Math.max(0.3, Math.min(width, height) * share)))
      .png()
      .toBuffer();
  }
  const cell = Math.max(2, Math.round(Math.min(width, height) * share));
  const small = await cut()
    .resize({ width: Math.max(1, Math.round(width / cell)), height: Math.max(1, Math.round(height / cell)), fit: 'fill', kernel: 'cubic' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  return sharp(small.data, { raw: { width: small.info.width, height: small.info.height, channels: small.info.channels as 1 | 2 | 3 | 4 } })
    .resize({ width, height, fit: 'fill', kernel: 'nearest' })
    .png()
    .toBuffer();
}

/** The step: covers what `regionsOf` finds in the image; `report` hears what was covered. */
function redactStep(options: RedactOptions, env: StepEnv, report?: (covered: CoveredRegion[]) => void) {
  const method = options.method ?? 'pixelate';
  const strength = options.strength ?? 50;
  return async (image: Sharp, source: Size): Promise<Sharp> => {
    const size = { width: source.width, height: source.height };
    const covered = await regionsOf(options, image, size, env.task.signal);
    report?.(covered);
    if (!covered.length) return image;
    const raw = await image.clone().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    if (raw.info.width !== size.width || raw.info.height !== size.height) throw invalidOption('regions', 'the image is not the size its header said');
    const overlays: OverlayOptions[] = [];
    for (const region of covered) overlays.push({ input: await patch(raw, region, method, strength), left: region.left, top: region.top });
    return image.composite(overlays);
  };
}

export const redact: Operation<typeof optionsSchema> = {
  kind: 'redact',
  summary: 'Hide faces and regions',
  description:
    'Pixelates (default), blurs or fills every face — found on the CPU by a face detector shipped with the service, with a margin that takes in ' +
    'hair and chin — and/or the `regions` given. `faces: false` covers the regions only. `result.regions` lists what was covered ' +
    '(`source` `face`, with the detector’s `score`, or `region`), in pixels of the upright image. An animation is redacted frame by frame.',
  accepts: 'image',
  batch: true,
  example: { faces: true, method: 'pixelate', strength: 50 },
  options: optionsSchema,
  tag: () => 'redact',
  result: {
    properties: {
      regions: {
        type: 'array',
        description: "What was covered, in the upright image's pixels: each face found (with the detector's `score`) and each region given.",
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['left', 'top', 'width', 'height', 'source'],
          properties: {
            ...PIXEL_BOX_PROPERTIES,
            source: { type: 'string', enum: ['face', 'region'] },
            score: { type: 'number', minimum: 0, maximum: 1 },
          },
        },
      },
    },
  },
  check(options): FieldError[] {
    if (options.faces === false && !options.regions?.length) return [{ field: 'regions', message: 'with faces: false, give at least one region' }];
    return [];
  },
  step: {
    // Each frame's faces are its own.
    perFrame: () => true,
    transform: (options, env) => redactStep(options, env),
  },
  async run(ctx) {
    const regions: CoveredRegion[] = [];
    const seen = new Set<string>();
    const report = (covered: CoveredRegion[]) => {
      for (const region of covered) {
        const key = `${region.source}:${region.left},${region.top},${region.width},${region.height}`;
        if (seen.has(key)) continue;
        seen.add(key);
        regions.push(region);
      }
    };
    // The kind's own step, with an ear for what it covers: result.regions.
    const op = { ...redact, step: { ...redact.step!, transform: (options: RedactOptions, env: StepEnv) => redactStep(options, env, report) } };
    const done = await runSingleImage(redact, ctx, {}, [{ op, options: ctx.options }]);
    return { ...done, result: { ...done.result, regions } };
  },
};
