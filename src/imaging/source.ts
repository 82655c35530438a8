// The source image: what its header says (inspect), checked against the plan before any pixel
// is decoded, how to open it (openSource) and turn it upright (orient). How each format is read comes from the
// format table: libvips for most; this service's own decoders (decoders/) for HEIC, BMP, JPEG 2000
// and lossless JPEG, whose pixels sharp then takes raw; ffmpeg for AVIF image sequences (ffmpeg.ts); SVG from memory, rewritten without outside references
// (svg.ts), so it cannot reach any other file.
import fs from 'node:fs';
import sharp, { type Metadata, type Sharp } from 'sharp';
import { TaskError } from '../errors.js';
import { decodeForSharp, safeSvgOffThread } from './decode-thread.js';
import { mayBeRawDecoded, rawDecoderFor, readHeader, type RawDecoderName } from './decoders/raw.js';
import { openSharpInput } from './decoders/to-sharp.js';
import { fileSource } from '../bytes/sources.js';
import { isSequenceHead, readSequenceHeader, SequenceError, type SequenceHeader } from '../bytes/avif-sequence.js';
import { asHeaderError } from './errors.js';
import { FfmpegMissing, type Ffmpeg, type FfmpegRun } from '../programs/ffmpeg.js';
import { hasOutsideReferences, headerInHead, isAnimation, isRawDecoded, readsHeaderInHead, readsHeifSequences } from './formats.js';
import { libvipsAvifInput, primaryItemMetadata, primaryPage } from './heif-items.js';
import { checkSource, type ImageLimits } from './limits.js';
import { SNIFF_HEAD_BYTES } from './sniff.js';

// Let the worker pool, not libvips' cache, decide how much memory is in use.
sharp.cache(false);

/** What the header says about the source, before any pixel is decoded. */
export interface SourceInfo {
  format: string;
  /** Displayed size of one frame: EXIF/HEIF orientation applied. */
  width: number;
  height: number;
  frames: number;
  hasAlpha: boolean;
  delay?: number[];
  loop?: number;
  /** The page libvips reads as the image: a HEIF file's primary item, when it is not the first. */
  page?: number;
  /**
   * Set by inspect: this service's decoder that reads the file, or null when another does
   * (rawDecoderOf); openSource given it does not read the file's head again.
   */
  rawDecoder?: RawDecoderName | null;
}

/** Opens one frame (`page`), or with -1 the whole animation, as a sharp image. */
export type OpenSource = (page: number) => Sharp;

/** Reads the header and enforces the plan's pixel and frame limits before any decoding. */
export async function inspect(inputPath: string, inputFormat: string, limits: ImageLimits): Promise<SourceInfo> {
  const head = await headOf(inputPath, inputFormat);
  const decoder = isRawDecoded(inputFormat) ? inputFormat : head && rawDecoderFor(inputFormat, head);
  const sequence = !decoder && readsHeifSequences(inputFormat) ? await sequenceHeaderOf(inputPath, inputFormat) : undefined;
  const info = decoder
    ? await inspectRaw(inputPath, inputFormat, decoder)
    : sequence
      ? sequenceInfo(sequence, inputFormat)
      : (headerFromHead(inputFormat, head) ?? (await inspectWithLibvips(inputPath, inputFormat, limits)));
  checkSource(info, limits);
  return { ...info, rawDecoder: decoder ?? null };
}

/** An AVIF image sequence's header (avif-sequence.ts), or undefined when the AVIF is a still image. */
async function sequenceHeaderOf(inputPath: string, format: string): Promise<SequenceHeader | undefined> {
  const source = await fileSource(inputPath);
  try {
    if (!isSequenceHead(await source.read(0, 12))) return undefined;
    return await readSequenceHeader(source);
  } catch (err) {
    if (err instanceof SequenceError) throw new TaskError('INVALID_IMAGE', `The ${format} image sequence could not be read: ${err.message}`);
    throw err;
  } finally {
    await source.close();
  }
}

const sequenceInfo = (header: SequenceHeader, format: string): SourceInfo => ({
  format,
  width: header.width,
  height: header.height,
  frames: header.frames,
  hasAlpha: header.alphaStream !== undefined,
  delay: header.delay,
  loop: header.loop,
});

/**
 * Which of this service's decoders reads the file, if libvips does not: by its format (HEIC, BMP,
 * JPEG 2000, JPEG XL), or by a variant its head shows (a lossless JPEG: decoders/raw.ts).
 */
export async function rawDecoderOf(inputPath: string, inputFormat: string): Promise<RawDecoderName | undefined> {
  if (isRawDecoded(inputFormat)) return inputFormat;
  if (!mayBeRawDecoded(inputFormat)) return undefined;
  const head = await readHead(inputPath);
  return rawDecoderFor(inputFormat, head);
}

/** The file's head where inspect reads something in it: a variant to tell apart (lossless JPEG), or the header itself. */
function headOf(inputPath: string, inputFormat: string): Promise<Buffer | undefined> {
  const wanted = !isRawDecoded(inputFormat) && (mayBeRawDecoded(inputFormat) || readsHeaderInHead(inputFormat));
  return wanted ? readHead(inputPath) : Promise.resolve(undefined);
}

/** A file's header from its head (the format table's headerInHead), as a SourceInfo; undefined for libvips to read it. */
function headerFromHead(inputFormat: string, head: Buffer | undefined): SourceInfo | undefined {
  const header = head && headerInHead(inputFormat, head);
  return header && { format: inputFormat, ...header };
}

/** The first SNIFF_HEAD_BYTES of a file. */
async function readHead(inputPath: string): Promise<Buffer> {
  const handle = await fs.promises.open(inputPath, 'r');
  try {
    const head = Buffer.alloc(SNIFF_HEAD_BYTES);
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    return head.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

async function inspectRaw(inputPath: string, inputFormat: string, decoder: RawDecoderName): Promise<SourceInfo> {
  const header = await readHeader(await fs.promises.readFile(inputPath), decoder);
  return { format: inputFormat, width: header.width, height: header.height, frames: 1, hasAlpha: header.hasAlpha };
}

async function inspectWithLibvips(inputPath: string, inputFormat: string, limits: ImageLimits): Promise<SourceInfo> {
  let meta: Metadata;
  let page: number | undefined;
  try {
    const input = await libvipsInput(inputPath, inputFormat, limits.maxPixels);
    // A HEIF file's image is its primary item (heif-items.ts), whatever libvips reads first.
    ({ meta, page } = await primaryItemMetadata(input, await sharp(input, { limitInputPixels: false }).metadata()));
  } catch (err) {
    throw asHeaderError(err, inputFormat);
  }
  const frameWidth = meta.width ?? 0;
  const frameHeight = meta.pageHeight ?? meta.height ?? 0;
  if (!frameWidth || !frameHeight) throw new TaskError('INVALID_IMAGE', 'The image header has no dimensions');
  const swap = (meta.orientation ?? 1) >= 5;
  return {
    format: inputFormat,
    width: swap ? frameHeight : frameWidth,
    height: swap ? frameWidth : frameHeight,
    // Only GIF and WebP animations are animations here (an AVIF sequence is read from its own header, sequenceHeaderOf); TIFF pages and HEIF items are not.
    frames: isAnimation(inputFormat) ? (meta.pages ?? 1) : 1,
    hasAlpha: meta.hasAlpha ?? false,
    delay: meta.delay,
    // GIFs in the wild carry 65536; encoders take at most 65535.
    loop: meta.loop === undefined ? undefined : Math.min(meta.loop, 65_535),
    ...(page === undefined ? {} : { page }),
  };
}

/**
 * How to open a source as a sharp image, as decoded (orient() turns it upright): `page` -1 for
 * the whole animation, else one frame. HEIC, BMP, JPEG 2000 and lossless JPEG are decoded to
 * raw pixels first (sharp's libvips cannot read them); SVG is read into memory without outside references (svg.ts), so it
 * cannot reach any other file.
 */
export async function openSource(
  inputPath: string,
  inputFormat: string,
  maxPixels: number,
  animated = false,
  sequences?: SequenceDecoding,
  /** The file's rawDecoderOf when known already (SourceInfo.rawDecoder). */
  knownDecoder?: RawDecoderName | null,
): Promise<OpenSource> {
  const decoder = knownDecoder === undefined ? await rawDecoderOf(inputPath, inputFormat) : (knownDecoder ?? undefined);
  if (decoder) {
    // On a thread of its own: these decoders run to the end once started (decode-thread.ts).
    const decoded = await decodeForSharp(inputPath, decoder, maxPixels);
    return () => openSharpInput(decoded);
  }
  const sequence = sequences && readsHeifSequences(inputFormat) ? await sequenceHeaderOf(inputPath, inputFormat) : undefined;
  if (sequence) return openSequence(inputPath, sequence, animated, sequences!);
  const input = await libvipsInput(inputPath, inputFormat, maxPixels);
  // A HEIF file (AVIF) is one image, its primary item: that page whichever is asked.
  const primary = readsHeifSequences(inputFormat)
    ? primaryPage(
        await sharp(input, { limitInputPixels: false })
          .metadata()
          .catch((err) => Promise.reject(asHeaderError(err, inputFormat))),
      )
    : undefined;
  return (page) =>
    sharp(input, {
      // Limits were checked per frame from the header; libvips' own check counts all frames.
      limitInputPixels: false,
      failOn: 'error',
      ...(primary !== undefined ? { page: primary } : page === -1 ? { animated } : { page }),
    });
}

/**
 * How an AVIF image sequence's frames are decoded: by ffmpeg, within the task's deadline and
 * cancel signal. Callers that give none (a watermark's logo, a preview) read a sequence as its
 * still image, through libvips.
 */
export interface SequenceDecoding extends FfmpegRun {
  ffmpeg: Ffmpeg | undefined;
}

/**
 * An AVIF image sequence decoded by ffmpeg: every frame when `animated` (page -1 opens them one
 * below the other, as libvips opens an animation), else the first. sharp does not treat raw
 * pixels as pages, so the animation is handed over as an uncompressed multi-page TIFF.
 */
async function openSequence(inputPath: string, header: SequenceHeader, animated: boolean, { ffmpeg, ...run }: SequenceDecoding): Promise<OpenSource> {
  if (!ffmpeg?.available()) throw new FfmpegMissing(ffmpeg?.command ?? 'ffmpeg');
  const decoded = await ffmpeg.decode(inputPath, header, animated ? header.frames : 1, run);
  const frameBytes = decoded.width * decoded.height * 4;
  const frame = (page: number) =>
    sharp(decoded.data.subarray(page * frameBytes, (page + 1) * frameBytes), { raw: { width: decoded.width, height: decoded.height, channels: 4 } });
  const whole = animated
    ? await sharp(decoded.data, { raw: { width: decoded.width, height: decoded.height * decoded.frames, channels: 4, pageHeight: decoded.height } })
        .tiff({ compression: 'none' })
        .toBuffer()
    : undefined;
  return (page) =>
    page === -1 && whole ? sharp(whole, { limitInputPixels: false, animated: true }) : frame(Math.max(0, Math.min(page, decoded.frames - 1)));
}

/**
 * What libvips reads for a source it decodes: SVG from memory, rewritten without outside
 * references; an AVIF image sequence with its brand said as `avif` (heif-items.ts); else the path.
 */
export async function libvipsInput(inputPath: string, inputFormat: string, maxPixels: number): Promise<string | Buffer> {
  // Rewritten on the decoding thread: a parse of the whole document (decode-worker.ts).
  if (hasOutsideReferences(inputFormat)) return safeSvgOffThread({ file: inputPath }, maxPixels);
  if (readsHeifSequences(inputFormat)) return libvipsAvifInput(inputPath);
  return inputPath;
}

/**
 * EXIF orientation applied, once. Raw-decoded pixels carry none (the HEIC decoder applies the
 * HEIF transformations itself), so for them it changes nothing.
 */
export const orient = (image: Sharp): Sharp => image.autoOrient();

/** openSource, each frame turned upright: for the kinds that read an image outside the pipeline. */
export async function openUpright(inputPath: string, inputFormat: string, maxPixels: number, sequences?: SequenceDecoding): Promise<OpenSource> {
  const open = await openSource(inputPath, inputFormat, maxPixels, false, sequences);
  return (page) => orient(open(page));
}
