// The pages of a PDF as images and a ZIP of them: what presentation-to-images (the PDF
// LibreOffice made of a deck) and pdf-to-images (an uploaded PDF) both return. Pages are
// rasterised by poppler a few at a time, two chunks at once, each encoded and its rasters
// deleted before the next: the temporary disk stays bounded for any document, and both cores
// work on one task.
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import sharp from 'sharp';
import yazl from 'yazl';
import { applyEncoder } from '../imaging/encode.js';
import { asTaskError } from '../imaging/errors.js';
import { canonicalFormat, extensionOf, mimeOf, OUTPUT_FORMAT_NAMES, outputFilename } from '../imaging/formats.js';
import type { Poppler, RunLimits } from '../programs/poppler.js';
import { runsOf } from './pages.js';

/** The formats a page's image may be written in. */
const PAGE_IMAGE_FORMATS = ['png', 'jpeg', 'webp'] as const;
type PageImageFormat = (typeof PAGE_IMAGE_FORMATS)[number];

/** The `format` option of the page-image kinds, with its aliases (`jpg`), which the routes put back as the format's own name before a kind sees them. */
export const PAGE_FORMAT_OPTION = {
  type: 'string',
  enum: [
    ...PAGE_IMAGE_FORMATS,
    ...OUTPUT_FORMAT_NAMES.filter(
      (name) => name !== canonicalFormat(name) && (PAGE_IMAGE_FORMATS as readonly string[]).includes(canonicalFormat(name)),
    ),
  ] as PageImageFormat[],
  description: 'Image format. Default png. `jpg` is taken as jpeg.',
} as const;

/** The width of a page's image in pixels: its range and default. */
export const PAGE_WIDTH = { min: 16, max: 8192, default: 1920 } as const;

/** Pages one pdftoppm run renders, and how many such runs go at once. */
const PAGES_PER_CHUNK = 4;
const RASTER_CONCURRENCY = 2;

/** One output file, as an operation returns it (operations/types.ts's OperationOutput). */
interface PageFile {
  path: string;
  format: string;
  mimeType: string;
  filename: string;
  width?: number;
  height?: number;
  pages?: number;
}

export interface PageImagesRequest {
  poppler: Poppler;
  pdf: string;
  /** The page numbers to render, in order. */
  pages: number[];
  /** How many pages the document has (the numbers in the images' names are padded to it). */
  pageCount: number;
  /** Pixels wide (the height by each page's aspect), or dots per inch. */
  scale: number | { dpi: number };
  format: PageImageFormat;
  /** The input's file name, the outputs' names are made from; `noun` names each image ("slide", "page"). */
  filename: string;
  noun: string;
  tmpDir: string;
  limits: RunLimits & { signal: AbortSignal };
  /** Progress over the rendering, 0–1. */
  progress(fraction: number): void;
}

/**
 * Renders `pages` and zips them: `outputs` is the ZIP (outputFileId) followed by the images in
 * page order (outputFileIds); `first` is the first image.
 */
export async function renderPageImages(request: PageImagesRequest): Promise<{ outputs: PageFile[]; first: PageFile }> {
  const { poppler, pdf, format, limits } = request;
  const rasterDir = path.join(request.tmpDir, 'raster');
  const outDir = path.join(request.tmpDir, `${request.noun}s`);
  await fs.promises.mkdir(outDir, { recursive: true });
  const digits = String(request.pageCount).length;
  const images = new Map<number, PageFile>();
  const chunks = evenChunks(request.pages);
  let next = 0;
  const worker = async () => {
    while (next < chunks.length) {
      const chunk = chunks[next++]!;
      const files = await poppler.rasterise(pdf, chunk, request.scale, 'tiff', path.join(rasterDir, String(chunk.first)), limits);
      for (let page = chunk.first; page <= chunk.last; page++) {
        if (limits.signal.aborted) throw limits.signal.reason;
        const number = String(page).padStart(digits, '0');
        const target = path.join(outDir, `${request.noun}-${number}.${extensionOf(format)}`);
        const written = await encodePage(files.get(page)!, format, target);
        await fs.promises.rm(files.get(page)!, { force: true });
        images.set(page, {
          path: target,
          format,
          mimeType: mimeOf(format),
          filename: outputFilename(request.filename, format, `.${request.noun}-${number}`),
          ...written,
        });
        request.progress(images.size / request.pages.length);
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
  const ordered = request.pages.map((page) => images.get(page)!);

  // The ZIP of every image, streamed to a file: images are compressed already, so stored.
  const zipPath = path.join(request.tmpDir, `${request.noun}s.zip`);
  const zip = new yazl.ZipFile();
  // yazl reports a failed read of an added file on the ZipFile, not on its output stream.
  zip.on('error', (err: Error) => (zip.outputStream as Readable).destroy(err));
  for (const image of ordered) zip.addFile(image.path, path.basename(image.path), { compress: false });
  zip.end();
  await pipeline(zip.outputStream, fs.createWriteStream(zipPath));
  const bundle: PageFile = {
    path: zipPath,
    format: 'zip',
    mimeType: mimeOf('zip'),
    filename: outputFilename(request.filename, 'zip', `.${request.noun}s`),
    pages: ordered.length,
  };
  return { outputs: [bundle, ...ordered], first: ordered[0]! };
}

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

/** One rasterised page in the asked format. PNG: zlib level 6 with adaptive filters (level 9 costs 3× the time for 7% less). */
async function encodePage(raster: string, format: PageImageFormat, target: string): Promise<{ width: number; height: number }> {
  try {
    const image = sharp(raster).removeAlpha();
    const encoder = format === 'png' ? image.png({ compressionLevel: 6, adaptiveFiltering: true }) : applyEncoder(image, { format });
    const written = await encoder.toFile(target);
    return { width: written.width, height: written.height };
  } catch (err) {
    throw asTaskError(err);
  }
}
