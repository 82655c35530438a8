import path from 'node:path';
import { fileSource } from '../bytes/sources.js';
import { identifyPresentation, NotAPresentation, verifyZipExpansion } from '../documents/container.js';
import { PAGE_FORMAT_OPTION, PAGE_WIDTH, renderPageImages } from '../documents/page-images.js';
import { parsePages, selectPages } from '../documents/pages.js';
import { PopplerMissing } from '../programs/poppler.js';
import { rewriteSvgParts } from '../documents/svg-parts.js';
import { TaskError } from '../errors.js';
import { extensionOf } from '../imaging/formats.js';
import { checkPixels } from '../imaging/limits.js';
import type { FieldError, Operation } from './types.js';

const optionsSchema = {
  properties: {
    format: PAGE_FORMAT_OPTION,
    width: { type: 'integer', minimum: PAGE_WIDTH.min, maximum: PAGE_WIDTH.max, description: 'Image width in pixels. Default 1920.' },
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
    const width = options.width ?? PAGE_WIDTH.default;
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
    const width = ctx.options.width ?? PAGE_WIDTH.default;
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
          deck = path.join(await ctx.scratchDir(), `svg-safe.${input.file.format}`);
          await rewriteSvgParts(input.path, svgParts, deck, ctx.limits.maxPixels, ctx.signal);
        }
      }
    } catch (err) {
      if (err instanceof NotAPresentation) throw new TaskError('CONVERSION_FAILED', err.message);
      throw err;
    }
    if (!poppler.available()) throw new PopplerMissing('pdftoppm');
    ctx.progress(5);

    const { pdfPath } = await libreoffice.toPdf(deck, extensionOf(input.file.format), await ctx.scratchDir(), limits);
    ctx.progress(50);
    const info = await poppler.info(pdfPath, limits);
    if (info.pages < 1) throw new TaskError('CONVERSION_FAILED', 'LibreOffice produced a PDF without pages');
    const selection = selectPages(ctx.options.pages, info.pages);
    if ('error' in selection) throw new TaskError('CONVERSION_FAILED', selection.error);
    const height = Math.max(1, Math.round((width * info.height) / info.width));
    checkPixels({ width, height }, ctx.limits, 'Each slide image');

    const { outputs, first } = await renderPageImages({
      poppler,
      pdf: pdfPath,
      pages: selection.pages,
      pageCount: info.pages,
      scale: width,
      format,
      filename: input.file.filename,
      noun: 'slide',
      tmpDir: await ctx.scratchDir(),
      limits,
      progress: (fraction) => ctx.progress(50 + Math.round(45 * fraction)),
    });
    return {
      outputs,
      bundled: true,
      // `result` describes outputFileId, the ZIP (format, size, pages from it), and the slides.
      result: {
        imageFormat: format,
        width: first.width,
        height: first.height,
        pages: selection.pages.length,
        slides: selection.pages,
        slideCount: info.pages,
      },
    };
  },
};
