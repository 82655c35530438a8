// What a stored file is — the one identify step upload (upload.ts) and the confirmation of a
// direct upload (direct-upload.ts) share: its type sniffed from its first bytes by the format
// table's signatures (imaging/sniff.ts), a ZIP or OLE2 container told apart from its directory,
// the header's size and frames probed as the format's row says (raw decoder, libvips, an HEIF
// file's primary item or image sequence), and a safe file name.
import sharp from 'sharp';
import { AppError } from '../errors.js';
import { sha256Hex } from '../ids.js';
import type { PlanLimits } from '../accounts/plans.js';
import { storageSource } from '../bytes/sources.js';
import { containerKind, identifyPresentation, NotAPresentation } from '../documents/container.js';
import type { PdfPageCounter } from '../documents/pdf.js';
import { rawDecoderFor, readHeader } from '../imaging/decoders/raw.js';
import { isSequenceHead, readSequenceHeader, SequenceError } from '../bytes/avif-sequence.js';
import { asLibvipsAvif, primaryItemMetadata } from '../imaging/heif-items.js';
import { sniff, type Sniffed } from '../imaging/sniff.js';
import { extensionOf, FORMATS, isPopplerDocument, libvipsReadsHeader, readsHeifSequences, UPLOAD_FORMATS } from '../imaging/formats.js';
import type { ObjectStorage } from '../storage/storage.js';
import { countedKind, countFrames, type FrameCount } from '../imaging/frame-count.js';

/** Bytes kept in memory to read the header (JPEG metadata can push the frame header far in). */
export const PROBE_BYTES = 1024 * 1024;

export const fileTooLarge = (limit: number): AppError =>
  new AppError('FILE_TOO_LARGE', `The file is larger than the plan's limit of ${limit} bytes`, { limit });

/**
 * What the first bytes say while an upload still streams: an image format, a ZIP or OLE2 head
 * (perhaps a presentation, decided once the object is stored), or a refusal — so an unknown type
 * is refused before the rest of the body is stored.
 */
export function identifyHead(head: Buffer): { sniffed: Sniffed } | { container: 'zip' | 'ole' } {
  const result = sniff(head);
  if (result && !('refused' in result)) return { sniffed: result };
  const container = result ? undefined : containerKind(head);
  if (container) return { container };
  const reason = result ? result.reason : 'The file is not an image or presentation this service reads';
  throw new AppError('UNSUPPORTED_MEDIA_TYPE', reason, { accepted: UPLOAD_FORMATS });
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
  // A format libvips has no loader for (BMP, JPEG 2000, JPEG XL), or a variant its loader refuses
  // (lossless JPEG): the service's own decoder reads its header. HEIC's libvips reads.
  const decoder = rawDecoderFor(format, head);
  const ownDecoder = decoder && !(decoder === format && libvipsReadsHeader(format)) ? decoder : undefined;
  if (ownDecoder) {
    const header = await readHeader(head, ownDecoder).catch(() => undefined);
    return header ? { width: header.width, height: header.height } : {};
  }
  try {
    // An HEIF file libvips reads (AVIF) is its primary item (a grid's tiles are top-level items too).
    const input = readsHeifSequences(format) ? asLibvipsAvif(head) : head;
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
 * confirmation of a direct upload (inspectStoredObject) both decide through here.
 */
export async function identify(
  storage: ObjectStorage,
  key: string,
  size: number,
  head: Buffer,
  filename: string | undefined,
  frames: FrameCount | undefined,
  /** A PDF's page count (pdfinfo); without it a PDF is stored without `pages`. */
  pdfPages?: PdfPageCounter,
): Promise<Pick<StoredUpload, 'sniffed' | 'header' | 'filename'>> {
  const sniffed = sniff(head);
  if (sniffed && !('refused' in sniffed) && isPopplerDocument(sniffed.format)) {
    const pages = await pdfPages?.(storage, key);
    return { sniffed, header: pages ? { pages } : {}, filename: safeFilename(filename, sniffed.format) };
  }
  if (sniffed && !('refused' in sniffed)) {
    if (readsHeifSequences(sniffed.format) && isSequenceHead(head)) {
      return { sniffed, header: await sequenceHeader(storage, key, size, head), filename: safeFilename(filename, sniffed.format) };
    }
    const { unreadable, ...probed } = await probeHeader(head, sniffed.format);
    const header = withFrameCount(probed, frames);
    if (unreadable && readsHeifSequences(sniffed.format)) {
      throw new AppError(
        'UNSUPPORTED_MEDIA_TYPE',
        `The ${FORMATS[sniffed.format].title} file cannot be read: its structure is damaged or the file is cut short`,
      );
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
  const identified = await identify(storage, object.key, object.size, head, object.filename, frames, pdfPages);
  return { fileId: object.fileId, key: object.key, size: object.size, etag: uploadEtag(object.fileId), ...identified };
}

/**
 * An uploaded file's ETag. Its bytes never change and its id is never reused, so the id is as
 * strong a validator as a hash of the bytes, without reading them again (issue #28). Outputs
 * hash their bytes instead (worker/outputs.ts): a task run twice rewrites its output keys.
 */
export const uploadEtag = (fileId: string): string => sha256Hex(fileId).slice(0, 32);
