// Images to one PDF with pdf-lib, a page each. A JPEG that needs no change is embedded as it is
// (its bytes become the page's DCTDecode stream: no re-encoding, no loss); one whose EXIF
// orientation or colour space needs work is re-encoded upright in sRGB. Every other format is
// embedded losslessly: its pixels (first frame, upright, sRGB or grey) deflated, alpha as a
// soft mask. Pixels stream from sharp through zlib, so only compressed bytes are held.
import fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { PDFDocument, concatTransformationMatrix, drawObject, popGraphicsState, pushGraphicsState, type PDFRef } from 'pdf-lib';
import type { Sharp } from 'sharp';
import { TaskError } from '../errors.js';
import { asTaskError } from '../imaging/errors.js';
import type { Ffmpeg } from '../programs/ffmpeg.js';
import type { ImageLimits } from '../imaging/limits.js';
import { inspect, openUpright } from '../imaging/source.js';

export const PAGE_SIZES = ['fit', 'A4', 'Letter', 'Legal', 'A3'] as const;
type PageSize = (typeof PAGE_SIZES)[number];
export const ORIENTATIONS = ['portrait', 'landscape', 'auto'] as const;
type Orientation = (typeof ORIENTATIONS)[number];

/** Portrait sizes in points (1/72 in). */
const PAGE_POINTS: Record<Exclude<PageSize, 'fit'>, [number, number]> = {
  A4: [595.28, 841.89],
  Letter: [612, 792],
  Legal: [612, 1008],
  A3: [841.89, 1190.55],
};

/** The largest page side most readers open (Acrobat's limit); `fit` pages are scaled under it. */
const MAX_PAGE_POINTS = 14_400;
/** The PDF is built in memory: this bounds it. */
const MAX_PDF_BYTES = 1024 * 1024 * 1024;

export interface PdfLayout {
  pageSize?: PageSize;
  orientation?: Orientation;
  /** Points, on every side. */
  margin?: number;
}

export interface PdfImage {
  path: string;
  format: string;
}

export interface BuildLimits {
  limits: ImageLimits;
  deadline: number;
  signal?: AbortSignal;
  progress?: (percent: number) => void;
  /** Decodes an AVIF image sequence's first frame. */
  ffmpeg?: Ffmpeg;
}

/** Pages of `layout` the margin leaves room in; undefined when it does. */
export function marginProblem(layout: PdfLayout): string | undefined {
  const margin = layout.margin ?? 0;
  if (!layout.pageSize || layout.pageSize === 'fit' || margin === 0) return undefined;
  const shortest = Math.min(...PAGE_POINTS[layout.pageSize]);
  return 2 * margin >= shortest
    ? `a margin of ${margin} pt leaves no room on a ${layout.pageSize} page (${Math.floor(shortest)} pt across)`
    : undefined;
}

/** Where the image goes: the page's size and the image's box on it, in points. */
function placeImage(image: { width: number; height: number; density?: number }, layout: PdfLayout) {
  const margin = layout.margin ?? 0;
  if (!layout.pageSize || layout.pageSize === 'fit') {
    // The page takes the image's size at its resolution (72 dpi when it states none).
    const dpi = image.density && image.density >= 1 && image.density <= 10_000 ? image.density : 72;
    let width = (image.width * 72) / dpi;
    let height = (image.height * 72) / dpi;
    const shrink = Math.min(1, (MAX_PAGE_POINTS - 2 * margin) / Math.max(width, height));
    width *= shrink;
    height *= shrink;
    return { page: [width + 2 * margin, height + 2 * margin] as [number, number], box: { x: margin, y: margin, width, height } };
  }
  const [short, long] = PAGE_POINTS[layout.pageSize];
  const landscape = layout.orientation === 'landscape' || ((layout.orientation ?? 'auto') === 'auto' && image.width > image.height);
  const page: [number, number] = landscape ? [long, short] : [short, long];
  // Fitted inside the margins, centred, keeping the image's aspect.
  const room = { width: page[0] - 2 * margin, height: page[1] - 2 * margin };
  const scale = Math.min(room.width / image.width, room.height / image.height);
  const width = image.width * scale;
  const height = image.height * scale;
  return { page, box: { x: (page[0] - width) / 2, y: (page[1] - height) / 2, width, height } };
}

/** Builds the PDF; one page per image, in order. */
export async function buildPdf(images: PdfImage[], layout: PdfLayout, run: BuildLimits): Promise<Buffer> {
  const doc = await PDFDocument.create();
  doc.setProducer('imgapi');
  doc.setCreator('imgapi image-to-pdf');
  let embedded = 0;
  const account = (bytes: number) => {
    embedded += bytes;
    if (embedded > MAX_PDF_BYTES) throw new TaskError('IMAGE_TOO_LARGE', `The PDF would be larger than ${MAX_PDF_BYTES / 1024 / 1024} MiB`);
  };
  for (const [index, image] of images.entries()) {
    checkRun(run);
    // The plan's limits from the header, as for every image job (only the first frame is used).
    const source = await inspect(image.path, image.format, run.limits);
    const open = await openUpright(image.path, image.format, run.limits.maxPixels, {
      ffmpeg: run.ffmpeg,
      signal: run.signal,
      deadline: run.deadline,
    });
    const meta = await open(0)
      .metadata()
      .catch((err) => Promise.reject(asTaskError(err)));
    const { page, box } = placeImage({ width: source.width, height: source.height, density: meta.density }, layout);
    const pdfPage = doc.addPage(page);

    if (image.format === 'jpeg' && (await embeddableAsIs(open(0), meta))) {
      const bytes = await fs.promises.readFile(image.path);
      account(bytes.length);
      const jpeg = await doc.embedJpg(bytes);
      pdfPage.drawImage(jpeg, box);
    } else if (image.format === 'jpeg') {
      // Upright and sRGB first; still a JPEG stream, at a quality that keeps the detail.
      const bytes = await open(0)
        .toColourspace('srgb')
        .jpeg({ quality: 92, chromaSubsampling: '4:4:4' })
        .toBuffer()
        .catch((err) => Promise.reject(asTaskError(err)));
      account(bytes.length);
      pdfPage.drawImage(await doc.embedJpg(bytes), box);
    } else {
      const grey = meta.space === 'b-w' || (meta.channels ?? 3) <= 2;
      const colour = await deflatePixels(
        open(0)
          .removeAlpha()
          .toColourspace(grey ? 'b-w' : 'srgb'),
        grey ? 1 : 3,
      );
      account(colour.data.length);
      let smask: PDFRef | undefined;
      if (meta.hasAlpha) {
        const alpha = await deflatePixels(open(0).ensureAlpha().extractChannel('alpha'), 1);
        account(alpha.data.length);
        smask = doc.context.register(doc.context.stream(alpha.data, imageDict(alpha.width, alpha.height, 'DeviceGray')));
      }
      const ref = doc.context.register(
        doc.context.stream(colour.data, {
          ...imageDict(colour.width, colour.height, grey ? 'DeviceGray' : 'DeviceRGB'),
          ...(smask ? { SMask: smask } : {}),
        }),
      );
      const name = pdfPage.node.newXObject('Im', ref);
      pdfPage.pushOperators(
        pushGraphicsState(),
        concatTransformationMatrix(box.width, 0, 0, box.height, box.x, box.y),
        drawObject(name),
        popGraphicsState(),
      );
    }
    run.progress?.(Math.round((90 * (index + 1)) / images.length));
  }
  checkRun(run);
  const bytes = await doc.save({ useObjectStreams: false });
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

const imageDict = (width: number, height: number, colourSpace: 'DeviceGray' | 'DeviceRGB') => ({
  Type: 'XObject',
  Subtype: 'Image',
  Width: width,
  Height: height,
  ColorSpace: colourSpace,
  BitsPerComponent: 8,
  Filter: 'FlateDecode',
});

/** 8-bit samples of `image` (expected to have `channels` bands), deflated as they stream out. */
async function deflatePixels(image: Sharp, channels: number): Promise<{ data: Buffer; width: number; height: number }> {
  const pixels = image.raw({ depth: 'uchar' });
  let info: { width: number; height: number; channels: number } | undefined;
  pixels.on('info', (i: { width: number; height: number; channels: number }) => (info = i));
  const chunks: Buffer[] = [];
  try {
    // pipeline, not pipe: a decoder error mid-stream must reach us (and end zlib), not escape
    // as an unhandled 'error' event that ends the process.
    await pipeline(pixels, zlib.createDeflate({ level: 6 }), async (deflated: AsyncIterable<Buffer>) => {
      for await (const chunk of deflated) chunks.push(chunk);
    });
  } catch (err) {
    throw asTaskError(err);
  }
  if (!info || info.channels !== channels) throw new TaskError('INVALID_IMAGE', 'The image could not be decoded into the expected channels');
  return { data: Buffer.concat(chunks), width: info.width, height: info.height };
}

/**
 * A JPEG goes in untouched when it is upright already, 8-bit RGB (or grey) in sRGB (no profile,
 * or an sRGB one), and decodes (a broken file fails the task here, not in the reader's hands).
 */
async function embeddableAsIs(image: Sharp, meta: Awaited<ReturnType<Sharp['metadata']>>): Promise<boolean> {
  // Only what libvips reads as a JPEG: a lossless one (process 14) is decoded by this service, and
  // a PDF reader's DCTDecode cannot read it.
  if (meta.format !== 'jpeg') return false;
  if ((meta.orientation ?? 1) !== 1) return false;
  if (!((meta.space === 'srgb' && meta.channels === 3) || (meta.space === 'b-w' && meta.channels === 1))) return false;
  if (meta.depth && meta.depth !== 'uchar') return false;
  if (meta.icc && !isSrgbProfile(meta.icc)) return false;
  // Decoding proves the stream is whole; shrink-on-load keeps it cheap.
  await image
    .resize({ width: 64, height: 64, fit: 'inside' })
    .raw()
    .toBuffer()
    .catch((err) => Promise.reject(asTaskError(err)));
  return true;
}

/** Whether an ICC profile describes sRGB (IEC 61966-2-1), judged by its description tag. */
function isSrgbProfile(icc: Buffer): boolean {
  if (icc.length < 132 || icc.toString('latin1', 16, 20) !== 'RGB ') return false;
  const count = icc.readUInt32BE(128);
  for (let i = 0; i < count && 132 + 12 * (i + 1) <= icc.length; i++) {
    const at = 132 + 12 * i;
    if (icc.toString('latin1', at, at + 4) !== 'desc') continue;
    const offset = icc.readUInt32BE(at + 4);
    const size = icc.readUInt32BE(at + 8);
    // 'desc' holds ASCII, 'mluc' UTF-16BE: without the zero bytes both read as text.
    const text = icc
      .subarray(offset, offset + Math.min(size, 4096))
      .toString('latin1')
      .replace(/\0/g, '');
    return /sRGB|61966-2[.-]1/i.test(text);
  }
  return false;
}

function checkRun(run: BuildLimits): void {
  if (run.signal?.aborted) throw run.signal.reason instanceof Error ? run.signal.reason : new Error('aborted');
  if (Date.now() > run.deadline) throw new TaskError('PROCESSING_TIMEOUT', 'The task ran past its time limit');
}
