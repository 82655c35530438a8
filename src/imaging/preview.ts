// Inline previews (GET /api/preview): the first frame or page, upright, sRGB, fitted inside a
// box and never enlarged. They are made inside the API process, so each one is bounded:
//   - at most `concurrency` renders at once per process and `queueLength` more waiting their
//     turn; past that a request is refused at once with 503 SERVICE_UNAVAILABLE and Retry-After
//     (a client retries in a moment; an unbounded line would only move the overload into memory);
//   - the plan's limits (pixels per frame, frames, all frames together) are checked from the
//     header before any pixel is decoded, as for a task (source.ts inspect);
//   - decoding shrinks on load where the format can (JPEG, WebP, SVG rendered at the target
//     scale) and streams row by row where it cannot (PNG, TIFF), so memory follows the preview's
//     size, not the image's; a render has RENDER_TIMEOUT_SECONDS;
//   - a rendition is made once: stored at previewKey(fileId, side) for the few sides of
//     PREVIEW_SIDES, and the asked box is served from the smallest one that covers it (as it is
//     when it fits, else shrunk from it). forgetPreviews() deletes them with their file.
// SVG is rendered from memory without outside references (svg.ts). The formats this service
// decodes itself (HEIC, JPEG 2000, BMP, lossless JPEG) are decoded whole, on the decoding thread
// (decode-thread.ts), after the same header check.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Counter } from 'prom-client';
import type { Selectable } from 'kysely';
import sharp, { type Sharp } from 'sharp';
import type { PlanLimits } from '../accounts/plans.js';
import { pdfFirstPage } from '../programs/preview.js';
import type { Poppler } from '../programs/poppler.js';
import { AppError, TaskError } from '../errors.js';
import type { FilesTable } from '../db/schema.js';
import { isObjectNotFound, previewKey, type ObjectStorage } from '../storage/storage.js';
import { decodeForSharp } from './decode-thread.js';
import { openSharpInput } from './decoders/to-sharp.js';
import { isPopplerDocument, mimeOf, readsHeifSequences } from './formats.js';
import type { Ffmpeg } from '../programs/ffmpeg.js';
import { inspect, libvipsInput, openSource, rawDecoderOf } from './source.js';
import { ownedTempPrefix } from '../temp-files.js';

/** Previews are PNG where alpha matters, else JPEG. */
export const PREVIEW_MEDIA_TYPES = [mimeOf('png'), mimeOf('jpeg')] as const;

/** The stored file a preview is made of: a files row (files/ imports this module, so not its FileRecord). */
type FileRecord = Selectable<FilesTable>;

export interface Preview {
  data: Buffer;
  mimeType: (typeof PREVIEW_MEDIA_TYPES)[number];
}

export interface Box {
  width: number;
  height: number;
}

/** Sides of the stored renditions: 320 is the dashboard's thumbnail, 1024 the default preview. */
const PREVIEW_SIDES = [128, 320, 640, 1024, 2048] as const;
const DEFAULT_SIDE = 1024;
const MAX_SIDE = 2048;
const RENDER_TIMEOUT_SECONDS = 20;
/** What a refused client is told to wait before it retries. */
const RETRY_AFTER_SECONDS = 2;

export interface PreviewOptions {
  storage: ObjectStorage;
  poppler: Poppler;
  /** Decodes the first frame of an AVIF image sequence whose still image libvips cannot read. */
  ffmpeg?: Ffmpeg;
  /** Renders at once in this process. */
  concurrency: number;
  /** Renders waiting for a slot; one more is refused with 503. */
  queueLength: number;
  events?: Counter<'event'>;
}

/** The box a query asks for: 1024 × 1024 when it names no side, else a missing side is 2048. */
function previewBox(query: { width?: number; height?: number }): Box {
  if (!query.width && !query.height) return { width: DEFAULT_SIDE, height: DEFAULT_SIDE };
  return { width: query.width ?? MAX_SIDE, height: query.height ?? MAX_SIDE };
}

/** Deletes every stored rendition of a file (when the file is deleted or expires). */
export async function forgetPreviews(storage: ObjectStorage, fileId: string): Promise<void> {
  await Promise.all(PREVIEW_SIDES.map((side) => storage.delete(previewKey(fileId, side))));
}

export class Previews {
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  /** Renditions being read or made, so parallel requests for one share a single render. */
  private readonly pending = new Map<string, Promise<Buffer>>();

  constructor(private readonly options: PreviewOptions) {}

  get stats(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  /** The preview of `file` inside the box `query` asks for. AppError PREVIEW_UNAVAILABLE or SERVICE_UNAVAILABLE. */
  async preview(file: FileRecord, limits: PlanLimits, query: { width?: number; height?: number }): Promise<Preview> {
    const box = previewBox(query);
    try {
      const rendition = await this.rendition(file, limits, renditionSide(file, box, query));
      const meta = await sharp(rendition).metadata();
      const fits = meta.width! <= box.width && meta.height! <= box.height;
      const data = fits ? rendition : await this.withSlot(() => encode(sharp(rendition), meta.format === 'png', box));
      return { data, mimeType: mimeOf(meta.format === 'png' ? 'png' : 'jpeg') };
    } catch (err) {
      if (err instanceof AppError && err.code === 'PREVIEW_UNAVAILABLE') this.options.events?.inc({ event: 'unavailable' });
      throw err;
    }
  }

  private rendition(file: FileRecord, limits: PlanLimits, side: number): Promise<Buffer> {
    const key = previewKey(file.id, side);
    let rendition = this.pending.get(key);
    if (!rendition) {
      rendition = this.storedOrRendered(file, limits, side, key).finally(() => this.pending.delete(key));
      this.pending.set(key, rendition);
    }
    return rendition;
  }

  private async storedOrRendered(file: FileRecord, limits: PlanLimits, side: number, key: string): Promise<Buffer> {
    const { storage, events } = this.options;
    const stored = await readObject(storage, key);
    if (stored) {
      events?.inc({ event: 'cached' });
      return stored;
    }
    const data = await this.withSlot(() => this.render(file, limits, { width: side, height: side }));
    await storage.put(key, data);
    events?.inc({ event: 'rendered' });
    return data;
  }

  /** Runs `work` in a render slot, after waiting in line; refuses when the line is full. */
  private async withSlot<T>(work: () => Promise<T>): Promise<T> {
    if (this.running < this.options.concurrency) {
      this.running++;
    } else if (this.waiting.length < this.options.queueLength) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.options.events?.inc({ event: 'busy' });
      throw new AppError(
        'SERVICE_UNAVAILABLE',
        'Too many previews are being made right now; retry in a moment',
        { retryAfterSeconds: RETRY_AFTER_SECONDS },
        { 'retry-after': String(RETRY_AFTER_SECONDS) },
      );
    }
    try {
      return await work();
    } finally {
      // The slot passes straight to the next in line; `running` only drops when nobody waits.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }

  private async render(file: FileRecord, limits: PlanLimits, box: Box): Promise<Buffer> {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), ownedTempPrefix('imgapi-preview-')));
    try {
      const source = await this.localCopy(file, dir);
      if (isPopplerDocument(file.format)) return await encode(sharp(await pdfFirstPage(this.options.poppler, source, box, dir)), false, box);
      const header = await inspect(source, file.format, limits);
      const decoder = await rawDecoderOf(source, file.format);
      // Upright already: these decoders apply the orientation to the pixels.
      if (decoder) return await encode(openSharpInput(await decodeForSharp(source, decoder, limits.maxPixels)), header.hasAlpha, box);
      const input = await libvipsInput(source, file.format, limits.maxPixels);
      const still = sharp(input, {
        limitInputPixels: limits.maxPixels,
        failOn: 'none',
        sequentialRead: true,
        ...(header.page === undefined ? {} : { page: header.page }),
      }).autoOrient();
      return await encode(still, header.hasAlpha, box).catch(async (err: unknown) => {
        // An AVIF image sequence without a still image libvips reads: its first frame, decoded as the jobs decode it.
        if (!readsHeifSequences(file.format) || !this.options.ffmpeg) throw err;
        const open = await openSource(source, file.format, limits.maxPixels, false, {
          ffmpeg: this.options.ffmpeg,
          deadline: Date.now() + RENDER_TIMEOUT_SECONDS * 1000,
        });
        return encode(open(0), header.hasAlpha, box);
      });
    } catch (err) {
      throw unavailable(err, file.format);
    } finally {
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  }

  /** A path to the file's bytes: the object itself on local storage, else a copy in `dir`. */
  async localCopy(file: FileRecord, dir: string): Promise<string> {
    const { storage } = this.options;
    if (storage.localPath) return storage.localPath(file.storage_key);
    const copy = path.join(dir, 'source');
    await pipeline(await storage.get(file.storage_key), fs.createWriteStream(copy));
    return copy;
  }
}

/**
 * The side of the rendition to serve `box` from: the smallest that holds the preview, judged
 * from the stored header's size; without one (PDFs), from the sides the query gave.
 */
function renditionSide(file: FileRecord, box: Box, query: { width?: number; height?: number }): number {
  let longest = Math.max(query.width ?? 0, query.height ?? 0) || Math.max(box.width, box.height);
  if (file.width && file.height) {
    const scale = Math.min(1, box.width / file.width, box.height / file.height);
    longest = Math.max(Math.round(file.width * scale), Math.round(file.height * scale));
  }
  return PREVIEW_SIDES.find((side) => side >= longest) ?? MAX_SIDE;
}

/** Fitted inside `box`, never enlarged: PNG where alpha matters, else JPEG. */
async function encode(image: Sharp, png: boolean, box: Box): Promise<Buffer> {
  const fitted = image
    .resize({ width: box.width, height: box.height, fit: 'inside', withoutEnlargement: true })
    .toColourspace('srgb')
    .timeout({ seconds: RENDER_TIMEOUT_SECONDS });
  return (png ? fitted.png({ compressionLevel: 6 }) : fitted.jpeg({ quality: 82, mozjpeg: true })).toBuffer();
}

/** A render's failure as the client sees it: the limit it passed, or that it cannot be decoded. */
function unavailable(err: unknown, format: string): unknown {
  if (err instanceof AppError) return err;
  if (err instanceof TaskError && err.code === 'IMAGE_TOO_LARGE') {
    return new AppError('PREVIEW_UNAVAILABLE', `No preview: ${err.message}`, { reason: 'IMAGE_TOO_LARGE' });
  }
  const message = String((err as Error)?.message);
  if (err instanceof TaskError || !(err as NodeJS.ErrnoException)?.code) {
    if (/timeout/i.test(message)) return new AppError('PREVIEW_UNAVAILABLE', `This ${format} file takes too long to render for a preview`);
    return new AppError('PREVIEW_UNAVAILABLE', `This ${format} file cannot be previewed: it could not be decoded`);
  }
  return err; // a fault of the disk or the store, not of the file
}

async function readObject(storage: ObjectStorage, key: string): Promise<Buffer | undefined> {
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of await storage.get(key)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  } catch (err) {
    if (isObjectNotFound(err)) return undefined;
    throw err;
  }
}
