// pdf-to-images: each page of an uploaded PDF as an image, and a ZIP of them (as
// presentation-to-images returns a deck's slides). poppler reads the PDF in the converter
// sandbox; the page count and every selected page's size are read (pdfinfo) and checked
// against the plan before a pixel is rendered, so a page-count bomb or a page the size of a
// field costs a few milliseconds of pdfinfo, not a render.
import { PAGE_FORMAT_OPTION, PAGE_WIDTH, renderPageImages } from '../documents/page-images.js';
import { parsePages, runsOf, selectPages } from '../documents/pages.js';
import { TaskError } from '../errors.js';
import { checkPixels } from '../imaging/limits.js';
import { PopplerMissing } from '../programs/poppler.js';
import type { FieldError, Operation } from './types.js';

/** A PDF's unit: 72 points to the inch. */
const POINTS_PER_INCH = 72;

const optionsSchema = {
  properties: {
    format: PAGE_FORMAT_OPTION,
    width: {
      type: 'integer',
      minimum: PAGE_WIDTH.min,
      maximum: PAGE_WIDTH.max,
      description: "Image width in pixels (the height follows each page's aspect). Default 1920; exclusive with dpi.",
    },
    dpi: {
      type: 'integer',
      minimum: 10,
      maximum: 1200,
      description: 'Resolution in dots per inch, instead of a width: each page at its printed size.',
    },
    pages: {
      type: 'string',
      minLength: 1,
      maxLength: 200,
      description: 'Pages to render, e.g. "1-3,5" (numbers and inclusive ranges, from 1). Default: all.',
      examples: ['1-3,5'],
    },
  },
} as const;

export const pdfToImages: Operation<typeof optionsSchema> = {
  kind: 'pdf-to-images',
  summary: 'PDF pages to images',
  description:
    'Renders pages of a PDF as images `width` pixels wide (default 1920; the height follows the page) or at `dpi`, in `format` png ' +
    '(default), jpeg or webp. `pages` selects pages, e.g. "1-3,5"; images come in page order. The completed task lists the images in ' +
    '`outputFileIds`, and `outputFileId` is a ZIP of them all. `result` describes the ZIP — `format` "zip", `size`, `pages` (the number ' +
    "of images) — and the pages: `imageFormat`, the first image's `width` and `height`, `pageNumbers`. More pages than the plan's " +
    '`maxFrames`, or a page past `maxPixels` at the asked size, fail IMAGE_TOO_LARGE before anything is rendered. Fails with ' +
    'DOCUMENT_ENCRYPTED (a password is needed to open it), INVALID_IMAGE (a PDF poppler cannot read) or INVALID_OPTIONS (`pages` past the end).',
  accepts: 'pdf',
  batch: false,
  example: { format: 'png', width: 1600, pages: '1-3,5' },
  options: optionsSchema,
  result: {
    properties: {
      imageFormat: { type: 'string', enum: ['png', 'jpeg', 'webp'], description: "The page images' format." },
      pageNumbers: { type: 'array', items: { type: 'integer', minimum: 1 }, description: 'The page numbers rendered, in order.' },
      pageCount: { type: 'integer', minimum: 1, description: 'The pages the PDF has, rendered or not.' },
    },
  },
  check(options) {
    const errors: FieldError[] = [];
    if (options.width !== undefined && options.dpi !== undefined) errors.push({ field: 'dpi', message: 'give width or dpi, not both' });
    if (options.pages !== undefined) {
      const parsed = parsePages(options.pages);
      if ('error' in parsed) errors.push({ field: 'pages', message: parsed.error });
    }
    return errors;
  },
  async run(ctx) {
    const input = ctx.inputs[0]!;
    const { poppler } = ctx.documents;
    const format = ctx.options.format ?? 'png';
    const { dpi } = ctx.options;
    const width = ctx.options.width ?? PAGE_WIDTH.default;
    const limits = { signal: ctx.signal, deadline: ctx.deadline };
    if (!poppler.available()) throw new PopplerMissing('pdftoppm');
    try {
      const info = await poppler.info(input.path, limits);
      if (info.pages < 1) throw new TaskError('INVALID_IMAGE', 'The PDF has no pages');
      const selection = selectPages(ctx.options.pages, info.pages);
      if ('error' in selection) throw new TaskError('INVALID_OPTIONS', selection.error, false, { field: 'pages' });
      if (selection.pages.length > ctx.limits.maxFrames) {
        throw new TaskError(
          'IMAGE_TOO_LARGE',
          `${selection.pages.length} pages would be rendered; the plan allows ${ctx.limits.maxFrames} per task (select fewer with pages)`,
        );
      }
      ctx.progress(5);
      // Every selected page's size at the asked scale, before any is rendered.
      for (const run of runsOf(selection.pages)) {
        for (const [page, size] of await poppler.pageSizes(input.path, run, limits)) {
          const pixels =
            dpi === undefined
              ? { width, height: Math.max(1, Math.ceil((width * size.height) / size.width)) }
              : { width: Math.ceil((size.width * dpi) / POINTS_PER_INCH), height: Math.ceil((size.height * dpi) / POINTS_PER_INCH) };
          checkPixels(pixels, ctx.limits, `Page ${page}'s image`);
        }
      }
      ctx.progress(10);
      const { outputs, first } = await renderPageImages({
        poppler,
        pdf: input.path,
        pages: selection.pages,
        pageCount: info.pages,
        scale: dpi === undefined ? width : { dpi },
        format,
        filename: input.file.filename,
        noun: 'page',
        tmpDir: await ctx.scratchDir(),
        limits,
        progress: (fraction) => ctx.progress(10 + Math.round(85 * fraction)),
      });
      return {
        outputs,
        bundled: true,
        // `result` describes outputFileId, the ZIP (format, size, pages from it), and the pages.
        result: {
          imageFormat: format,
          width: first.width,
          height: first.height,
          pages: selection.pages.length,
          pageNumbers: selection.pages,
          pageCount: info.pages,
        },
      };
    } catch (err) {
      // poppler's failures to read the file are the input's fault, not the converter's.
      if (err instanceof TaskError && err.code === 'CONVERSION_FAILED' && !(err instanceof PopplerMissing))
        throw new TaskError('INVALID_IMAGE', err.message.replace('The converted PDF', 'The PDF'));
      throw err;
    }
  },
};
