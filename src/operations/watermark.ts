import fs from 'node:fs';
import sharp, { type Sharp } from 'sharp';
import { TaskError } from '../errors.js';
import { parseColour, type Size } from '../imaging/geometry.js';
import { openUpright } from '../imaging/pipeline.js';
import { checkColour, colourOption, exactlyOne, formatOption, qualityOption, runSingleImage, type ImageOutputOptions } from './common.js';
import type { Operation } from './types.js';

const POSITIONS = ['top-left', 'top', 'top-right', 'left', 'center', 'right', 'bottom-left', 'bottom', 'bottom-right', 'tile'] as const;

/** Fonts from Debian packages the setup installs, so text renders the same on every machine. */
export const WATERMARK_FONTS: Record<string, string> = {
  'DejaVu Sans': '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf',
  'DejaVu Sans Bold': '/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf',
  'DejaVu Serif': '/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf',
  'DejaVu Sans Mono': '/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf',
  'Liberation Sans': '/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf',
  'Liberation Serif': '/usr/share/fonts/truetype/liberation2/LiberationSerif-Regular.ttf',
  'Liberation Mono': '/usr/share/fonts/truetype/liberation2/LiberationMono-Regular.ttf',
};

export interface WatermarkOptions extends ImageOutputOptions {
  text?: string;
  logoFileId?: string;
  position?: (typeof POSITIONS)[number];
  opacity?: number;
  margin?: number;
  rotation?: number;
  fontSize?: number;
  color?: string;
  font?: string;
  scale?: number;
}

const escapeMarkup = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The mark as an RGBA PNG sized for a `base`-sized image, opacity and rotation applied. */
async function renderMark(options: WatermarkOptions, base: Size, logoPath: string | undefined, logoFormat: string | undefined, maxPixels: number): Promise<Buffer> {
  let mark: Sharp;
  if (options.text !== undefined) {
    const fontSize = options.fontSize ?? Math.max(12, Math.round(base.width * 0.04));
    const family = options.font ?? 'DejaVu Sans';
    const fontfile = WATERMARK_FONTS[family]!;
    const colour = parseColour(options.color ?? '#ffffff')!;
    const hex = `#${[colour.r, colour.g, colour.b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;
    const rendered = await sharp({
      text: {
        text: `<span foreground="${hex}">${escapeMarkup(options.text)}</span>`,
        font: `${family.replace(/ Bold$/, '')}${family.endsWith('Bold') ? ' Bold' : ''} ${fontSize}`,
        ...(fs.existsSync(fontfile) ? { fontfile } : {}),
        dpi: 72,
        rgba: true,
        width: Math.max(1, base.width - 2 * (options.margin ?? 0)),
        wrap: 'word-char',
      },
    })
      .png()
      .toBuffer();
    mark = sharp(rendered).ensureAlpha(colour.alpha);
  } else {
    const width = Math.max(1, Math.round(base.width * (options.scale ?? 0.25)));
    const logo = await (await openUpright(logoPath!, logoFormat!, maxPixels))(0);
    mark = sharp(await logo.resize({ width, fit: 'inside' }).ensureAlpha().png().toBuffer());
  }
  const opacity = options.opacity ?? 0.5;
  mark = sharp(await mark.linear([1, 1, 1, opacity], [0, 0, 0, 0]).png().toBuffer());
  if (options.rotation) mark = sharp(await mark.rotate(options.rotation, { background: '#00000000' }).png().toBuffer());
  // Never larger than the image (less its margins): composite refuses overlays that overflow.
  const margin = options.margin ?? 0;
  const room = { width: Math.max(1, base.width - 2 * margin), height: Math.max(1, base.height - 2 * margin) };
  return mark.resize({ width: room.width, height: room.height, fit: 'inside', withoutEnlargement: true }).png().toBuffer();
}

function placement(position: string, base: Size, mark: Size, margin: number) {
  const column = position.endsWith('left') ? 'left' : position.endsWith('right') ? 'right' : 'center';
  const row = position.startsWith('top') ? 'top' : position.startsWith('bottom') ? 'bottom' : 'middle';
  const left = column === 'left' ? margin : column === 'right' ? base.width - mark.width - margin : Math.round((base.width - mark.width) / 2);
  const top = row === 'top' ? margin : row === 'bottom' ? base.height - mark.height - margin : Math.round((base.height - mark.height) / 2);
  return { left: Math.max(0, left), top: Math.max(0, top) };
}

export const watermark: Operation<WatermarkOptions> = {
  kind: 'watermark',
  summary: 'Add a text or logo watermark',
  description:
    'Draws `text` (in a shipped font) or another of your images (`logoFileId`, scaled to `scale` × the image width) at `position`, ' +
    'or repeats it across the image with `tile`. `opacity` 0–1 (default 0.5), `margin` in pixels (default 16), `rotation` in degrees. ' +
    'Animations get the mark on every frame.',
  accepts: 'image',
  batch: true,
  options: {
    properties: {
      text: { type: 'string', minLength: 1, maxLength: 500 },
      logoFileId: { type: 'string', maxLength: 100, description: 'One of your image files to use as the mark.' },
      position: { type: 'string', enum: [...POSITIONS], description: 'Default bottom-right.' },
      opacity: { type: 'number', minimum: 0, maximum: 1 },
      margin: { type: 'integer', minimum: 0, maximum: 10_000, description: 'Distance from the edges (and between tiles), in pixels. Default 16.' },
      rotation: { type: 'number', minimum: -360, maximum: 360, description: 'Degrees, clockwise.' },
      fontSize: { type: 'integer', minimum: 4, maximum: 2000, description: 'Text size in pixels. Default 4% of the image width.' },
      color: colourOption('Text colour. Default white.'),
      font: { type: 'string', enum: Object.keys(WATERMARK_FONTS), description: 'Default DejaVu Sans.' },
      scale: { type: 'number', exclusiveMinimum: 0, maximum: 1, description: 'Logo width as a fraction of the image width. Default 0.25.' },
      format: formatOption,
      quality: qualityOption,
    },
  },
  check(options) {
    const errors = exactlyOne(options as Record<string, unknown>, ['text', 'logoFileId']);
    if (options.logoFileId !== undefined) {
      for (const field of ['fontSize', 'color', 'font'] as const) if (options[field] !== undefined) errors.push({ field, message: 'applies to text watermarks only' });
    } else if (options.scale !== undefined) {
      errors.push({ field: 'scale', message: 'applies to logo watermarks only' });
    }
    return [...errors, ...checkColour('color', options.color)];
  },
  extraInputs: (options) => (options.logoFileId ? [options.logoFileId] : []),
  run(ctx) {
    const options = ctx.options;
    const logo = ctx.inputs[1];
    let mark: Promise<Buffer> | undefined;
    return runSingleImage(watermark, ctx, {
      perFrame: true,
      transform: async (image, source) => {
        mark ??= renderMark(options, source, logo?.path, logo?.file.format, ctx.limits.maxPixels);
        const overlay = await mark;
        const meta = await sharp(overlay).metadata();
        const size = { width: meta.width!, height: meta.height! };
        const margin = options.margin ?? 16;
        if ((options.position ?? 'bottom-right') === 'tile') {
          const tile = await sharp(overlay).extend({ right: margin, bottom: margin, background: '#00000000' }).png().toBuffer();
          return image.composite([{ input: tile, tile: true, gravity: 'northwest' }]);
        }
        // The frame is the upright source (the pipeline orients before this step).
        const frame = { width: source.width, height: source.height };
        if (size.width > frame.width || size.height > frame.height) throw new TaskError('INVALID_IMAGE', 'The image is too small for the watermark');
        return image.composite([{ input: overlay, ...placement(options.position ?? 'bottom-right', frame, size, margin) }]);
      },
    });
  },
};
