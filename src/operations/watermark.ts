import fs from 'node:fs';
import sharp, { type Sharp } from 'sharp';
import { invalidOption, TaskError } from '../errors.js';
import { parseColour, type Size } from '../imaging/geometry.js';
import { asTaskError } from '../imaging/errors.js';
import type { ImageLimits } from '../imaging/limits.js';
import { inspect, openUpright } from '../imaging/source.js';
import { checkColour, colourOption, exactlyOne, imageOutputOptions, runSingleImage } from './common.js';
import type { FieldError, Operation, OptionsOf } from './types.js';

const POSITIONS = ['top-left', 'top', 'top-right', 'left', 'center', 'right', 'bottom-left', 'bottom', 'bottom-right', 'tile'] as const;

/** Fonts from Debian packages the setup installs, so text renders the same on every machine. */
const WATERMARK_FONTS: Record<string, string> = {
  'DejaVu Sans': '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf',
  'DejaVu Sans Bold': '/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf',
  'DejaVu Serif': '/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf',
  'DejaVu Sans Mono': '/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf',
  'Liberation Sans': '/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf',
  'Liberation Serif': '/usr/share/fonts/truetype/liberation2/LiberationSerif-Regular.ttf',
  'Liberation Mono': '/usr/share/fonts/truetype/liberation2/LiberationMono-Regular.ttf',
};

const optionsSchema = {
  properties: {
    text: { type: 'string', minLength: 1, maxLength: 500 },
    logoFileId: { type: 'string', maxLength: 100, description: 'One of your image files to use as the mark.' },
    position: { type: 'string', enum: POSITIONS, description: 'Default bottom-right.' },
    opacity: { type: 'number', minimum: 0, maximum: 1 },
    margin: { type: 'integer', minimum: 0, maximum: 10_000, description: 'Distance from the edges (and between tiles), in pixels. Default 16.' },
    rotation: { type: 'number', minimum: -360, maximum: 360, description: 'Degrees, clockwise.' },
    fontSize: { type: 'integer', minimum: 4, maximum: 2000, description: 'Text size in pixels. Default 4% of the image width.' },
    color: colourOption('Text colour. Default white.'),
    font: { type: 'string', enum: Object.keys(WATERMARK_FONTS), description: 'Default DejaVu Sans.' },
    scale: { type: 'number', exclusiveMinimum: 0, maximum: 1, description: 'Logo width as a fraction of the image width. Default 0.25.' },
    ...imageOutputOptions,
  },
} as const;

type WatermarkOptions = OptionsOf<typeof optionsSchema>;

/** Text goes to Pango as markup inside a span: every character that markup reads is escaped. */
const escapeMarkup = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Characters that draw nothing: spaces, line breaks, format and other default-ignorable characters. */
const INVISIBLE = /[\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}]/gu;
/** Control characters other than tab and line breaks (NUL is not even valid markup). */
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/u;

/** Text measurements are taken at this font size at most (a small raster), then scaled. */
const MEASURE_FONT_PX = 32;

/** What the text watermark's options cannot ask, decided without the image. */
function checkText(text: string | undefined): FieldError[] {
  if (text === undefined) return [];
  if (CONTROL.test(text)) return [{ field: 'text', message: 'must not contain control characters (tab and line breaks are allowed)' }];
  if (text.replace(INVISIBLE, '') === '')
    return [{ field: 'text', message: 'has no character that can be drawn (only spaces, line breaks or invisible characters)' }];
  return [];
}

/** A failure to draw the text, as an error naming the option at fault. */
function textError(err: unknown, family: string): TaskError {
  const message = String((err as Error)?.message ?? err).split('\n')[0]!;
  if (/no text to render/i.test(message)) return invalidOption('text', `draws nothing in ${family}: none of its characters has a visible glyph`);
  if (/too big|too large/i.test(message)) return invalidOption('fontSize', `the text cannot be drawn at this size (${message})`);
  return invalidOption('text', `the text cannot be drawn (${message})`);
}

/**
 * The text, drawn to fit `room`: at `fontSize` when it fits, else at the size that does (the
 * mark is never larger than the image). It is measured at a small size first, so neither a
 * huge fontSize nor a long text ever makes a raster larger than the room.
 */
async function renderText(options: WatermarkOptions, base: Size, room: Size): Promise<Sharp> {
  const fontSize = options.fontSize ?? Math.max(12, Math.round(base.width * 0.04));
  const family = options.font ?? 'DejaVu Sans';
  const fontfile = WATERMARK_FONTS[family]!;
  const colour = parseColour(options.color ?? '#ffffff')!;
  const hex = `#${[colour.r, colour.g, colour.b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;
  const wrapWidth = Math.max(1, base.width - 2 * (options.margin ?? 0));
  // At `scale`, the font and the wrapping width shrink together: the same layout, smaller.
  const draw = async (scale: number) => {
    try {
      const { data, info } = await sharp({
        text: {
          text: `<span foreground="${hex}">${escapeMarkup(options.text!)}</span>`,
          font: `${family} ${Math.max(1, fontSize * scale)}`,
          ...(fs.existsSync(fontfile) ? { fontfile } : {}),
          dpi: 72,
          rgba: true,
          width: Math.max(1, Math.round(wrapWidth * scale)),
          wrap: 'word-char',
        },
      })
        .png()
        .toBuffer({ resolveWithObject: true });
      return { data, width: info.width, height: info.height };
    } catch (err) {
      throw textError(err, family);
    }
  };
  const probeScale = Math.min(1, MEASURE_FONT_PX / fontSize);
  const probe = await draw(probeScale);
  const fit = Math.min(1, room.width / (probe.width / probeScale), room.height / (probe.height / probeScale));
  const drawn = probeScale === 1 && fit === 1 ? probe : await draw(Math.max(fit, 1 / fontSize));
  return sharp(drawn.data).ensureAlpha(colour.alpha);
}

/** The mark as an RGBA PNG sized for a `base`-sized image, opacity and rotation applied. */
async function renderMark(
  options: WatermarkOptions,
  base: Size,
  logoPath: string | undefined,
  logoFormat: string | undefined,
  limits: ImageLimits,
): Promise<Buffer> {
  const margin = options.margin ?? 0;
  const room = { width: Math.max(1, base.width - 2 * margin), height: Math.max(1, base.height - 2 * margin) };
  let mark: Sharp;
  if (options.text !== undefined) {
    mark = await renderText(options, base, room);
  } else {
    const width = Math.max(1, Math.round(base.width * (options.scale ?? 0.25)));
    // The logo is an input too: the plan's limits from its header before a pixel is decoded;
    // its faults name the option that brought it.
    try {
      await inspect(logoPath!, logoFormat!, limits);
      const logo = await (await openUpright(logoPath!, logoFormat!, limits.maxPixels))(0);
      mark = sharp(await logo.resize({ width, fit: 'inside' }).ensureAlpha().png().toBuffer());
    } catch (err) {
      const failure = asTaskError(err);
      if (!(failure instanceof TaskError)) throw failure;
      throw new TaskError(failure.code, `The logo (logoFileId): ${failure.message}`, failure.transient, { field: 'logoFileId' });
    }
  }
  const opacity = options.opacity ?? 0.5;
  mark = sharp(await mark.linear([1, 1, 1, opacity], [0, 0, 0, 0]).png().toBuffer());
  if (options.rotation) mark = sharp(await mark.rotate(options.rotation, { background: '#00000000' }).png().toBuffer());
  // Never larger than the image (less its margins): composite refuses overlays that overflow.
  return mark.resize({ width: room.width, height: room.height, fit: 'inside', withoutEnlargement: true }).png().toBuffer();
}

function placement(position: string, base: Size, mark: Size, margin: number) {
  const column = position.endsWith('left') ? 'left' : position.endsWith('right') ? 'right' : 'center';
  const row = position.startsWith('top') ? 'top' : position.startsWith('bottom') ? 'bottom' : 'middle';
  const left = column === 'left' ? margin : column === 'right' ? base.width - mark.width - margin : Math.round((base.width - mark.width) / 2);
  const top = row === 'top' ? margin : row === 'bottom' ? base.height - mark.height - margin : Math.round((base.height - mark.height) / 2);
  return { left: Math.max(0, left), top: Math.max(0, top) };
}

export const watermark: Operation<typeof optionsSchema> = {
  kind: 'watermark',
  summary: 'Add a text or logo watermark',
  description:
    'Draws `text` (in a shipped font) or another of your images (`logoFileId`, scaled to `scale` × the image width) at `position`, ' +
    'or repeats it across the image with `tile`. `opacity` 0–1 (default 0.5), `margin` in pixels (default 16), `rotation` in degrees. ' +
    'The mark is never larger than the image less its margins: text that would not fit at `fontSize` is drawn smaller, to fit. ' +
    'Text is drawn as plain text (never read as markup); text with nothing visible or with control characters is a 400 naming `text`, ' +
    'and text the font cannot draw fails the task INVALID_OPTIONS with `details.field`. Animations get the mark on every frame.',
  accepts: 'image',
  batch: true,
  example: { text: '© 2026 Example', position: 'bottom-right', opacity: 0.5 },
  options: optionsSchema,
  tag: () => 'watermark',
  check(options) {
    const errors = exactlyOne(options as Record<string, unknown>, ['text', 'logoFileId']);
    if (options.logoFileId !== undefined) {
      for (const field of ['fontSize', 'color', 'font'] as const)
        if (options[field] !== undefined) errors.push({ field, message: 'applies to text watermarks only' });
    } else if (options.scale !== undefined) {
      errors.push({ field: 'scale', message: 'applies to logo watermarks only' });
    }
    return [...errors, ...checkText(options.text), ...checkColour('color', options.color)];
  },
  // Any logoFileId given is an input, the empty string too: looked up (404) when queued, never found missing when run.
  extraInputs: (options) => (options.logoFileId === undefined ? [] : [options.logoFileId]),
  step: {
    // Overlays are drawn on single images: an animation gets the mark on each frame.
    perFrame: () => true,
    transform(options, env) {
      const logo = options.logoFileId === undefined ? undefined : env.file(options.logoFileId);
      let mark: Promise<Buffer> | undefined;
      return async (image, source) => {
        mark ??= renderMark(options, source, logo?.path, logo?.file.format, env.limits);
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
        if (size.width > frame.width || size.height > frame.height) throw invalidOption('margin', 'leaves no room for the watermark on this image');
        return image.composite([{ input: overlay, ...placement(options.position ?? 'bottom-right', frame, size, margin) }]);
      };
    },
  },
  run: (ctx) => runSingleImage(watermark, ctx, {}),
};
