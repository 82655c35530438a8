import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import sharp from 'sharp';
import yazl from 'yazl';
import { fileSource, identifyPresentation, NotAPresentation, verifyZipExpansion } from '../documents/container.js';
import { parsePages, runsOf, selectPages } from '../documents/pages.js';
import { PopplerMissing } from '../documents/pdf.js';
import { rewriteSvgParts } from '../documents/svg-parts.js';
import { TaskError } from '../errors.js';
import { applyEncoder } from '../imaging/encode.js';
import { asTaskError } from '../imaging/errors.js';
import { extensionOf, mimeOf, outputFilename } from '../imaging/formats.js';
import { checkPixels } from '../imaging/limits.js';
import type { FieldError, Operation, OperationOutput } from './types.js';

const FORMATS = ['png', 'jpeg', 'webp'] as const;
type SlideFormat = (typeof FORMATS)[number];

/** Pages one pdftoppm run renders, and how many such runs go at once. */
const PAGES_PER_CHUNK = 4;
const RASTER_CONCURRENCY = 2;

export const MIN_WIDTH = 16;
export const MAX_WIDTH = 8192;
const DEFAULT_WIDTH = 1920;

const optionsSchema = {
  properties: {
    format: { type: 'string', enum: FORMATS, description: 'Image format. Default png.' },
    width: { type: 'integer', minimum: MIN_WIDTH, maximum: MAX_WIDTH, description: 'Image width in pixels. Default 1920.' },
    pages: {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      description: 'Slides to render, e.g. "1-3,5" (numbers and inclusive ranges). Default: all.',
      examples: ['1-3,5'],
    },
  },
} as const;

export const presentationToImages: Operation<typeof optionsSchema> = {
  kind: 'presentation-to-images',
  summary: 'Presentation slides to images',
  description:
    'Renders each slide the presentation shows (PPTX, PPSX, PPT or ODP; hidden slides are skipped) as an image `width` pixels wide ' +
    '(default 1920; the height follows the slide\'s aspect), in `format` png (default), jpeg or webp. `pages` selects slides, e.g. "1-3,5", ' +
    'numbering the slides shown; images come in slide order. The completed task lists the images in `outputFileIds`, and `outputFileId` ' +
    'is a ZIP of them all. `result` describes the ZIP — `format` "zip", `size` (its bytes), `pages` (the number of images) — and ' +
    "the slides: `imageFormat`, the first image's `width` and `height`, `slides` (their slide numbers), `slideCount` (the slides the " +
    'presentation shows). Images are named `<deck>.slide-<n>.<ext>` and the ZIP `<deck>.slides.zip`. Macros in the presentation never run. Fails with CONVERSION_FAILED ' +
    '(a file LibreOffice cannot load), CONVERSION_TIMEOUT or DOCUMENT_ENCRYPTED (password-protected).',
  accepts: 'presentation',
  batch: false,
  example: { format: 'webp', width: 1280, pages: '1-3,5' },
  options: optionsSchema,
  result: {
    properties: {
      imageFormat: { type: 'string', enum: ['png', 'jpeg', 'webp'], description: "The slide images' format." },
      slides: { type: 'array', items: { type: 'integer', minimum: 1 }, description: 'The slide numbers rendered, in order.' },
      slideCount: { type: 'integer', minimum: 1, description: 'The slides the presentation shows (hidden ones not counted), rendered or not.' },
    },
  },
  check(options, _inputs, limits) {
    const errors: FieldError[] = [];
    if (options.pages !== undefined) {
      const parsed = parsePages(options.pages);
      if ('error' in parsed) errors.push({ field: 'pages', message: parsed.error });
    }
    // The slide's aspect is known only once converted; a 16:9 slide must fit the pixel limit.
    const width = options.width ?? DEFAULT_WIDTH;
    const height = Math.round((width * 9) / 16);
    if (width * height > limits.maxPixels) {
      errors.push({
        field: 'width',
        message: `${width} px wide slides (${width}×${height} at 16:9) exceed the plan's limit of ${limits.maxPixels} pixels`,
      });
    }
    return errors;
  },
  // LibreOffice has CONVERSION_TIMEOUT_SECONDS of its own; the rest of the task the usual limit.
  timeLimitMs: (config) => config.taskTimeoutMs + config.conversionTimeoutMs,
  async run(ctx) {
    const input = ctx.inputs[0]!;
    const { libreoffice, poppler } = ctx.documents;
    const format = ctx.options.format ?? 'png';
    const width = ctx.options.width ?? DEFAULT_WIDTH;
    const limits = { signal: ctx.signal, deadline: ctx.deadline };

    // What the file is, again from its bytes: encryption and the ZIP's real expanded size are
    // settled here, before LibreOffice sees anything, and its SVG parts are made safe.
    let deck = input.path;
    try {
      const source = await fileSource(input.path);
      const identified = await identifyPresentation(source).finally(() => source.close());
      if (identified.encrypted)
        throw new TaskError('DOCUMENT_ENCRYPTED', 'The presentation is password-protected; remove the password and upload it again');
      if (identified.format !== 'ppt') {
        const { svgParts } = await verifyZipExpansion(input.path, ctx.signal);
        if (svgParts.size > 0) {
          deck = path.join(ctx.tmpDir, `svg-safe.${input.file.format}`);
          await rewriteSvgParts(input.path, svgParts, deck, ctx.limits.maxPixels, ctx.signal);
        }
      }
    } catch (err) {
      if (err instanceof NotAPresentation) throw new TaskError('CONVERSION_FAILED', err.message);
      throw err;
    }
    if (!poppler.available()) throw new PopplerMissing('pdftoppm');
    ctx.progress(5);

    const { pdfPath } = await libreoffice.toPdf(deck, input.file.format, ctx.tmpDir, limits);
    ctx.progress(50);
    const info = await poppler.info(pdfPath, limits);
    if (info.pages < 1) throw new TaskError('CONVERSION_FAILED', 'LibreOffice produced a PDF without pages');
    const selection = selectPages(ctx.options.pages, info.pages);
    if ('error' in selection) throw new TaskError('CONVERSION_FAILED', selection.error);
    const height = Math.max(1, Math.round((width * info.height) / info.width));
    checkPixels({ width, height }, ctx.limits, 'Each slide image');

    // Rasterised a few pages at a time (pdftoppm to uncompressed TIFF, the fastest it writes),
    // two chunks at once, each encoded and its rasters deleted before the next: the temporary
    // disk stays bounded for any deck, and both cores work on one conversion.
    const rasterDir = path.join(ctx.tmpDir, 'raster');
    const outDir = path.join(ctx.tmpDir, 'slides');
    await fs.promises.mkdir(outDir, { recursive: true });
    const digits = String(info.pages).length;
    const base = input.file.filename;
    const slides = new Map<number, OperationOutput>();
    const chunks = evenChunks(selection.pages);
    let next = 0;
    const worker = async () => {
      while (next < chunks.length) {
        const chunk = chunks[next++]!;
        const files = await poppler.rasterise(pdfPath, chunk, width, 'tiff', path.join(rasterDir, String(chunk.first)), limits);
        for (let page = chunk.first; page <= chunk.last; page++) {
          if (ctx.signal.aborted) throw ctx.signal.reason;
          const number = String(page).padStart(digits, '0');
          const target = path.join(outDir, `slide-${number}.${extensionOf(format)}`);
          const written = await encodeSlide(files.get(page)!, format, target);
          await fs.promises.rm(files.get(page)!, { force: true });
          slides.set(page, {
            path: target,
            format,
            mimeType: mimeOf(format),
            filename: outputFilename(base, format, `.slide-${number}`),
            ...written,
          });
          ctx.progress(50 + Math.round((40 * slides.size) / selection.pages.length));
        }
      }
    };
    await Promise.all(
      Array.from({ length: Math.min(RASTER_CONCURRENCY, chunks.length) }, () =>
        worker().catch((err) => {
          next = chunks.length; // the other runner stops after its chunk
          throw err;
        }),
      ),
    );
    const ordered = selection.pages.map((page) => slides.get(page)!);

    // The ZIP of every image, streamed to a file: images are compressed already, so stored.
    const zipPath = path.join(ctx.tmpDir, 'slides.zip');
    const zip = new yazl.ZipFile();
    // yazl reports a failed read of an added file on the ZipFile, not on its output stream.
    zip.on('error', (err: Error) => (zip.outputStream as Readable).destroy(err));
    for (const slide of ordered) zip.addFile(slide.path!, path.basename(slide.path!), { compress: false });
    zip.end();
    await pipeline(zip.outputStream, fs.createWriteStream(zipPath));
    ctx.progress(95);

    const first = ordered[0]!;
    return {
      outputs: [
        { path: zipPath, format: 'zip', mimeType: mimeOf('zip'), filename: outputFilename(base, 'zip', '.slides'), pages: ordered.length },
        ...ordered,
      ],
      bundled: true,
      // `result` describes outputFileId, the ZIP (format, size, pages from it), and the slides.
      result: {
        imageFormat: format,
        width: first.width,
        height: first.height,
        pages: ordered.length,
        slides: selection.pages,
        slideCount: info.pages,
      },
    };
  },
};

/**
 * The pages in chunks of at most PAGES_PER_CHUNK, a multiple of RASTER_CONCURRENCY in number and
 * as even as they can be, so the runners finish together (10 pages: 3+3+2+2, where chunks of 4
 * gave 4+4+2 and one runner 6 pages); a chunk spanning a gap in the selection is cut there.
 */
function evenChunks(pages: number[]): { first: number; last: number }[] {
  const count = Math.max(1, Math.ceil(pages.length / PAGES_PER_CHUNK / RASTER_CONCURRENCY) * RASTER_CONCURRENCY);
  const out: { first: number; last: number }[] = [];
  let start = 0;
  for (let i = 0; i < count && start < pages.length; i++) {
    const size = Math.floor(pages.length / count) + (i < pages.length % count ? 1 : 0);
    if (size === 0) continue;
    out.push(...runsOf(pages.slice(start, start + size)));
    start += size;
  }
  return out;
}

/** One rasterised slide in the asked format. PNG: zlib level 6 with adaptive filters (level 9 costs 3× the time for 7% less). */
async function encodeSlide(raster: string, format: SlideFormat, target: string): Promise<{ width: number; height: number }> {
  try {
    const image = sharp(raster).removeAlpha();
    const encoder = format === 'png' ? image.png({ compressionLevel: 6, adaptiveFiltering: true }) : applyEncoder(image, { format });
    const written = await encoder.toFile(target);
    return { width: written.width, height: written.height };
  } catch (err) {
    throw asTaskError(err);
  }
}
