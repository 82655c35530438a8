import { buildPdf, marginProblem, ORIENTATIONS, PAGE_SIZES } from '../documents/image-to-pdf.js';
import { mimeOf, outputFilename } from '../imaging/formats.js';
import type { FieldError, Operation } from './types.js';

const optionsSchema = {
  properties: {
    pageSize: { type: 'string', enum: PAGE_SIZES, description: "Default `fit`: each page takes its image's size." },
    orientation: { type: 'string', enum: ORIENTATIONS, description: 'For fixed page sizes. Default `auto`: landscape for images wider than tall.' },
    margin: { type: 'number', minimum: 0, maximum: 1000, description: 'Points (1/72 in) on every side of the image. Default 0.' },
  },
} as const;

export const imageToPdf: Operation<typeof optionsSchema> = {
  kind: 'image-to-pdf',
  summary: 'Images to one PDF',
  description:
    'Puts 1–100 of your images into one PDF, a page each, in the order of `fileIds`; one task, not a batch. ' +
    '`pageSize` `fit` (the default) makes each page the size of its image (at the resolution the image states, else 72 dpi); ' +
    '`A4`, `Letter`, `Legal` and `A3` fit each image inside the page, centred, within `margin` points on every side, ' +
    'the page turned by `orientation` (`auto`, the default, turns it to match the image). ' +
    'JPEG images are embedded as they are, without re-encoding, unless their EXIF orientation or colour space needs work; ' +
    'other formats are embedded losslessly, alpha kept; animations contribute their first frame. ' +
    "The task's `result.pages` is the page count.",
  accepts: 'image',
  multiInput: { min: 1, max: 100 },
  batch: false,
  example: { pageSize: 'A4', orientation: 'auto', margin: 36 },
  options: optionsSchema,
  check(options) {
    const errors: FieldError[] = [];
    if ((options.orientation === 'portrait' || options.orientation === 'landscape') && (options.pageSize ?? 'fit') === 'fit') {
      errors.push({ field: 'orientation', message: "applies to fixed page sizes (A4, Letter, Legal, A3); a fit page takes its image's shape" });
    }
    const margin = marginProblem(options);
    if (margin) errors.push({ field: 'margin', message: margin });
    return errors;
  },
  async run(ctx) {
    const data = await buildPdf(
      ctx.inputs.map((input) => ({ path: input.path, format: input.file.format })),
      ctx.options,
      { limits: ctx.limits, deadline: ctx.deadline, signal: ctx.signal, progress: ctx.progress, ffmpeg: ctx.documents.ffmpeg },
    );
    return {
      outputs: [
        {
          data,
          format: 'pdf',
          mimeType: mimeOf('pdf'),
          filename: outputFilename(ctx.inputs[0]!.file.filename, 'pdf'),
          pages: ctx.inputs.length,
        },
      ],
      result: { pages: ctx.inputs.length },
    };
  },
};
