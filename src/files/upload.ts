// Uploads: streamed to storage while a meter counts bytes (the plan's size limit holds while
// streaming), hashes them, and sniffs the type from the first bytes — refusing an unknown type
// before the rest of the body is stored. A ZIP or OLE2 head passes as a provisional container:
// which presentation it is (if any) is decided from the stored object's directory.
import crypto from 'node:crypto';
import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import sharp from 'sharp';
import type { Clock } from '../clock.js';
import type { Tx } from '../db/database.js';
import { AppError } from '../errors.js';
import { newId, sha256Hex } from '../ids.js';
import type { PlanLimits } from '../accounts/plans.js';
import { chargeStorage } from '../accounts/quota.js';
import { storageSource } from '../bytes/sources.js';
import { containerKind, identifyPresentation, NotAPresentation } from '../documents/container.js';
import type { PdfPageCounter } from '../documents/pdf.js';
import { isLosslessJpeg } from '../imaging/decoders/jpeg-lossless.js';
import { readHeader } from '../imaging/decoders/raw.js';
import { isSequenceHead, readSequenceHeader, SequenceError } from '../bytes/avif-sequence.js';
import { asLibvipsAvif, primaryItemMetadata } from '../imaging/heif-items.js';
import { sniff, SNIFF_HEAD_BYTES, type Sniffed } from '../imaging/sniff.js';
import { extensionOf, isRawDecoded, libvipsReadsHeader, UPLOAD_FORMATS } from '../imaging/formats.js';
import { uploadKey, type ObjectStorage } from '../storage/storage.js';
import type { FileRecord } from './files.js';
import { hashFileOffThread } from './file-hash.js';
import { countedKind, countFrames, FrameCounter, type FrameCount } from '../imaging/frame-count.js';

/** Bytes kept in memory to read the header (JPEG metadata can push the frame header far in). */
const PROBE_BYTES = 1024 * 1024;

export const fileTooLarge = (limit: number): AppError =>
  new AppError('FILE_TOO_LARGE', `The file is larger than the plan's limit of ${limit} bytes`, { limit });

export class UploadMeter extends Transform {
  size = 0;
  sniffed: Sniffed | undefined;
  /** A ZIP or OLE2 head: perhaps a presentation, decided once the object is stored. */
  container: 'zip' | 'ole' | undefined;
  /** Frames of a GIF or WebP over the whole file: the head alone may not show them all. */
  readonly frameCounter = new FrameCounter();
  /** Undefined when the caller hashes the stored file instead (off the event loop: src/files/file-hash.ts). */
  private readonly hash: crypto.Hash | undefined;
  private readonly headChunks: Buffer[] = [];
  private headLength = 0;

  constructor(
    private readonly maxBytes: number,
    options: { hash?: boolean } = {},
  ) {
    super();
    this.hash = options.hash === false ? undefined : crypto.createHash('sha256');
  }

  get head(): Buffer {
    return Buffer.concat(this.headChunks);
  }

  /** The bytes' SHA-256 (hex); undefined when made with `hash: false`. */
  get sha256(): string | undefined {
    return this.hash?.copy().digest('hex');
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      callback(fileTooLarge(this.maxBytes));
      return;
    }
    if (this.headLength < PROBE_BYTES) {
      const part = chunk.subarray(0, PROBE_BYTES - this.headLength);
      this.headChunks.push(part);
      this.headLength += part.length;
    }
    this.hash?.update(chunk);
    this.frameCounter.push(chunk);
    // Refuse an unknown type as soon as enough bytes arrived, not after storing everything.
    if (!this.sniffed && !this.container && this.headLength >= SNIFF_HEAD_BYTES) {
      const error = this.identify();
      if (error) return callback(error);
    }
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    if (this.size === 0) return callback(new AppError('VALIDATION_ERROR', 'The file is empty', { fields: [{ field: 'file', message: 'is empty' }] }));
    callback(this.sniffed || this.container ? null : this.identify());
  }

  private identify(): AppError | null {
    const result = sniff(this.head);
    if (result && !('refused' in result)) {
      this.sniffed = result;
      return null;
    }
    if (!result) {
      this.container = containerKind(this.head);
      if (this.container) return null;
    }
    const reason = result ? result.reason : 'The file is not an image or presentation this service reads';
    return new AppError('UNSUPPORTED_MEDIA_TYPE', reason, { accepted: UPLOAD_FORMATS });
  }
}

/**
 * What is never kept in a file name: control characters, Unicode format characters (the bidi
 * overrides and isolates U+202A–U+202E and U+2066–U+2069 that make "gpj.exe" read "exe.jpg",
 * zero-width characters, U+FEFF…), line and paragraph separators, lone surrogates, the quote.
 */
const UNSAFE_IN_NAMES = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}"]/gu;

/** A name safe to store and echo: no path, none of UNSAFE_IN_NAMES, at most 200 characters. */
export function safeFilename(name: string | undefined, format: string): string {
  const base = (name ?? '').split(/[\\/]/).pop()!.replace(UNSAFE_IN_NAMES, '').trim();
  // By code point, so a cut never leaves half a surrogate pair.
  return Array.from(base).slice(0, 200).join('') || `upload.${extensionOf(format)}`;
}

/**
 * Dimensions from the header alone (orientation applied); undefined where it cannot tell.
 * `unreadable` marks an AVIF whose structure libheif cannot read at all: no job could decode
 * it, so it is refused at upload.
 */
async function probeHeader(head: Buffer, format: string): Promise<{ width?: number; height?: number; pages?: number; unreadable?: boolean }> {
  // A format libvips has no loader for (BMP, JPEG 2000), or a lossless JPEG that its loader
  // refuses: the service's own decoder reads its header.
  const ownDecoder =
    isRawDecoded(format) && !libvipsReadsHeader(format) ? format : format === 'jpeg' && isLosslessJpeg(head) ? 'jpeg-lossless' : undefined;
  if (ownDecoder) {
    const header = await readHeader(head, ownDecoder).catch(() => undefined);
    return header ? { width: header.width, height: header.height } : {};
  }
  try {
    // An AVIF is its primary item (a grid's tiles are top-level items too).
    const input = format === 'avif' ? asLibvipsAvif(head) : head;
    const { meta } = await primaryItemMetadata(input, await sharp(input, { limitInputPixels: false }).metadata());
    const frameHeight = meta.pageHeight ?? meta.height;
    const swap = (meta.orientation ?? 1) >= 5;
    return {
      width: swap ? frameHeight : meta.width,
      height: swap ? meta.width : frameHeight,
      pages: meta.pages && meta.pages > 1 ? meta.pages : undefined,
    };
  } catch (err) {
    return /unsupported image format/i.test(String((err as Error).message)) ? { unreadable: true } : {};
  }
}

type Header = { width?: number; height?: number; pages?: number };

/**
 * The probe's header completed by the frame count of the whole file: the frames the head alone
 * showed may be fewer, and a head cut inside a WebP's first frame shows no size at all (the
 * canvas from its VP8X chunk stands in).
 */
function withFrameCount(header: Header, count: FrameCount | undefined): Header {
  if (!count) return header;
  const size = header.width === undefined && count.canvas ? count.canvas : {};
  return { ...header, ...size, pages: count.frames > 1 ? count.frames : undefined };
}

/**
 * An AVIF image sequence's size and frames, from its movie header (avif-sequence.ts): read from
 * the head where it lies there, else from storage by ranges. A sequence whose header cannot be
 * read (damaged, or cut short before its frames end) is refused: no job could decode it.
 */
async function sequenceHeader(storage: ObjectStorage, key: string, size: number, head: Buffer): Promise<Header> {
  const stored = storageSource(storage, key, size);
  const source = {
    size,
    read: (offset: number, length: number) =>
      offset + length <= head.length ? Promise.resolve(head.subarray(offset, offset + length)) : stored.read(offset, length),
  };
  try {
    const sequence = await readSequenceHeader(source);
    return { width: sequence.width, height: sequence.height, pages: sequence.frames > 1 ? sequence.frames : undefined };
  } catch (err) {
    if (err instanceof SequenceError) throw new AppError('UNSUPPORTED_MEDIA_TYPE', `The AVIF image sequence cannot be read: ${err.message}`);
    throw err;
  } finally {
    await stored.close();
  }
}

export interface StoredUpload {
  fileId: string;
  key: string;
  size: number;
  /** The download's strong validator. */
  etag: string;
  sniffed: { format: string; mimeType: string };
  filename: string;
  header: Header;
}

/**
 * What a stored object is, from its first bytes (`head`, up to PROBE_BYTES) and, for a ZIP or
 * OLE2 container, its directory read from storage: the type, the header's dimensions and a safe
 * file name. Throws UNSUPPORTED_MEDIA_TYPE for what this service does not read. Upload and the
 * confirmation of a direct upload both decide through here.
 */
async function identifyStored(
  storage: ObjectStorage,
  key: string,
  size: number,
  head: Buffer,
  filename: string | undefined,
  frames: FrameCount | undefined,
  pdfPages: PdfPageCounter | undefined,
): Promise<Pick<StoredUpload, 'sniffed' | 'header' | 'filename'>> {
  const sniffed = sniff(head);
  if (sniffed && !('refused' in sniffed) && sniffed.format === 'pdf') {
    const pages = await pdfPages?.(storage, key);
    return { sniffed, header: pages ? { pages } : {}, filename: safeFilename(filename, sniffed.format) };
  }
  if (sniffed && !('refused' in sniffed)) {
    if (sniffed.format === 'avif' && isSequenceHead(head)) {
      return { sniffed, header: await sequenceHeader(storage, key, size, head), filename: safeFilename(filename, sniffed.format) };
    }
    const { unreadable, ...probed } = await probeHeader(head, sniffed.format);
    const header = withFrameCount(probed, frames);
    if (unreadable && sniffed.format === 'avif') {
      throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'The AVIF file cannot be read: its structure is damaged or the file is cut short');
    }
    return { sniffed, header, filename: safeFilename(filename, sniffed.format) };
  }
  if (!sniffed && containerKind(head)) {
    // Which presentation, from the ZIP's central directory or the OLE2 directory (random reads).
    const source = storageSource(storage, key, size);
    try {
      const identified = await identifyPresentation(source);
      return {
        sniffed: { format: identified.format, mimeType: identified.mimeType },
        header: {},
        filename: safeFilename(filename, identified.format),
      };
    } catch (err) {
      if (err instanceof NotAPresentation) throw new AppError('UNSUPPORTED_MEDIA_TYPE', err.message, { accepted: UPLOAD_FORMATS });
      throw err;
    } finally {
      await source.close();
    }
  }
  const reason = sniffed ? sniffed.reason : 'The file is not an image or presentation this service reads';
  throw new AppError('UNSUPPORTED_MEDIA_TYPE', reason, { accepted: UPLOAD_FORMATS });
}

/**
 * Streams the body into storage under a fresh id. Nothing is left behind when it fails, nor
 * when the body ends unfinished (its client went away): the storage write fails with it.
 */
export async function storeUpload(
  storage: ObjectStorage,
  body: Readable,
  filename: string | undefined,
  limits: PlanLimits,
  /** A PDF's page count (pdfinfo); without it a PDF is stored without `pages`. */
  pdfPages?: PdfPageCounter,
): Promise<StoredUpload & { sha256: string }> {
  const fileId = newId('file');
  const key = uploadKey(fileId);
  // On local disk the stored file is hashed afterwards on a thread of its own, not on the event loop as it streams.
  const localFile = storage.localPath?.(key);
  const meter = new UploadMeter(limits.maxFileBytes, { hash: localFile === undefined });
  try {
    // pipeline, not pipe: a body destroyed half-way (a client that disconnected) fails the
    // meter and so the write, which then removes its temporary file and closes it.
    await storage.put(
      key,
      pipeline(body, meter, () => {}),
    );
  } catch (err) {
    await storage.delete(key).catch(() => {});
    // The multipart parser truncates a part past its limit; the meter's own error says why.
    throw err;
  }
  try {
    const [identified, sha256] = await Promise.all([
      identifyStored(storage, key, meter.size, meter.head, filename, meter.frameCounter.result(), pdfPages),
      localFile === undefined ? meter.sha256! : storedSha256(localFile, meter.size),
    ]);
    return { fileId, key, size: meter.size, sha256, etag: sha256.slice(0, 32), ...identified };
  } catch (err) {
    await storage.delete(key).catch(() => {});
    throw err;
  }
}

/** The SHA-256 of the stored file of `size` bytes, hashed off the event loop. */
async function storedSha256(file: string, size: number): Promise<string> {
  const hashed = await hashFileOffThread(file);
  if (hashed.size !== size) throw new Error(`the stored upload ${file} has ${hashed.size} bytes, ${size} were written`);
  return hashed.sha256;
}

/**
 * Inspects an object that arrived without passing through this service (a direct upload) as an
 * upload is inspected while it streams: the plan's size limit, then what it is from its first
 * bytes — one ranged read, never the whole object. Throws the same errors as an upload.
 */
export async function inspectStoredObject(
  storage: ObjectStorage,
  object: { fileId: string; key: string; size: number; filename: string },
  limits: PlanLimits,
  pdfPages?: PdfPageCounter,
): Promise<StoredUpload> {
  if (object.size === 0) throw new AppError('VALIDATION_ERROR', 'The file is empty', { fields: [{ field: 'file', message: 'is empty' }] });
  if (object.size > limits.maxFileBytes) {
    throw fileTooLarge(limits.maxFileBytes);
  }
  const chunks: Buffer[] = [];
  for await (const chunk of await storage.get(object.key, { start: 0, end: Math.min(object.size, PROBE_BYTES) - 1 })) chunks.push(chunk as Buffer);
  const head = Buffer.concat(chunks).subarray(0, PROBE_BYTES);
  // A GIF or WebP larger than the head: its frames are counted over the whole object.
  const frames = object.size > head.length && countedKind(head) ? await countFrames(await storage.get(object.key)) : undefined;
  const identified = await identifyStored(storage, object.key, object.size, head, object.filename, frames, pdfPages);
  // The bytes were not streamed through this service to hash them; a file's bytes never change,
  // so its id is as strong a validator.
  return { fileId: object.fileId, key: object.key, size: object.size, etag: sha256Hex(object.fileId).slice(0, 32), ...identified };
}

/**
 * Records an upload in the caller's transaction and charges its bytes to the account's storage,
 * unless they are already `reserved` (a confirmed direct upload: its reservation becomes the file).
 */
export async function recordUpload(
  tx: Tx,
  clock: Clock,
  accountId: string,
  limits: PlanLimits,
  upload: StoredUpload,
  options: { reserved?: boolean } = {},
): Promise<FileRecord> {
  if (!options.reserved) await chargeStorage(tx, accountId, limits, upload.size);
  const now = clock.now();
  const row: FileRecord = {
    id: upload.fileId,
    account_id: accountId,
    origin: 'upload',
    storage_key: upload.key,
    filename: upload.filename,
    mime_type: upload.sniffed.mimeType,
    format: upload.sniffed.format,
    size: upload.size,
    width: upload.header.width ?? null,
    height: upload.header.height ?? null,
    pages: upload.header.pages ?? null,
    etag: upload.etag,
    task_id: null,
    output_index: null,
    created_at: now,
    expires_at: now + limits.retentionSeconds * 1000,
    deleted_at: null,
  };
  await tx.insertInto('files').values(row).execute();
  return row;
}
