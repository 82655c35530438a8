// What a format's first bytes look like: the magic bytes and the closer looks each row of the
// format table (formats.ts) carries as its `signature`, the way imgproxy's `imagetype` keeps the
// magic bytes beside each type. sniff.ts walks the table's rows and asks each; nothing here
// knows of another row. Pure functions of the head: no decoding, never a throw past its end.
import { exifOrientation, readJpegHead } from '../bytes/jpeg.js';

/** Bytes at an offset, written as a latin1 string ('\xff\xd8\xff'); a pattern is a list of them, all required. */
type Pattern = readonly (readonly [offset: number, bytes: string])[];

/**
 * A closer look at a head whose magic bytes matched: true (this format, its own media type),
 * 'other' (this format, served as the first of its row's `otherMimes`), a refusal (recognised,
 * not accepted: the reason), or false (not this format after all; the next row is asked).
 */
type Verdict = boolean | 'other' | { reason: string };

export interface Signature {
  /** Any one of these patterns begins a file of the format; none: only `check` can tell (text formats, asked last). */
  magic?: readonly Pattern[];
  check?: (head: Buffer) => Verdict;
}

export function matches(head: Buffer, pattern: Pattern): boolean {
  return pattern.every(([offset, bytes]) => head.length >= offset + bytes.length && head.toString('latin1', offset, offset + bytes.length) === bytes);
}

// ---------------------------------------------------------------------------
// JPEG

/**
 * A JPEG's coding process is only declared by its SOF marker, which can sit behind many
 * kilobytes of EXIF/ICC/XMP segments: walked segment by segment (APPn payloads, notably EXIF
 * thumbnails, hold other JPEGs' markers). Lossless process 14 (SOF3) is decoded by this
 * service (decoders/jpeg-lossless.ts); the differential and arithmetic-coded lossless processes
 * are refused. What the head cannot settle (truncated, SOF beyond it) is a JPEG: its decoder
 * will say what is wrong.
 */
export function jpegProcess(b: Buffer): Verdict {
  const marker = readJpegHead(b)?.frame.marker;
  const lossless = marker === 0xc7 || marker === 0xcb || marker === 0xcf;
  return lossless ? { reason: 'lossless JPEG other than process 14 (SOF3) is not supported' } : true;
}

/** What a header read from the head says of an image: its upright size, frames and alpha. */
export interface HeadHeader {
  width: number;
  height: number;
  frames: number;
  hasAlpha: boolean;
}

/** SOF0–SOF2: Huffman-coded baseline, extended and progressive frames. */
const JPEG_PROCESSES_READ_HERE = new Set([0xc0, 0xc1, 0xc2]);
/** Grey, YCbCr or RGB, CMYK or YCCK: none of them alpha. */
const JPEG_COMPONENTS_READ_HERE = new Set([1, 3, 4]);

/**
 * A JPEG's header as libvips reports it, read from the head: 8-bit baseline, extended or
 * progressive frames of 1, 3 or 4 components, with at most one EXIF block, whose orientation
 * reads cleanly. Anything else (the frame beyond the head, another process or depth, several
 * EXIF blocks, a malformed one) is undefined, for libvips to read.
 */
export function jpegHeader(b: Buffer): HeadHeader | undefined {
  const read = readJpegHead(b);
  if (!read) return undefined;
  const { frame, exif } = read;
  if (!JPEG_PROCESSES_READ_HERE.has(frame.marker) || frame.precision !== 8 || !JPEG_COMPONENTS_READ_HERE.has(frame.components)) return undefined;
  if (!frame.width || !frame.height || exif.length > 1) return undefined;
  const orientation = exif.length === 0 ? 1 : exifOrientation(exif[0]!);
  if (orientation === undefined) return undefined;
  const upright = orientation >= 5 ? { width: frame.height, height: frame.width } : { width: frame.width, height: frame.height };
  return { ...upright, frames: 1, hasAlpha: false };
}

// ---------------------------------------------------------------------------
// ISO base media file format (HEIF and AVIF share the container with MP4/MOV)

/**
 * The major brand and every compatible brand of an `ftyp` box at the start (writers put the
 * specific brand in different places: libavif writes major "avif", some encoders major "mif1"
 * with "heic" compatible).
 */
function brands(b: Buffer): string[] {
  if (b.length < 12) return [];
  let boxSize = b.readUInt32BE(0);
  let brandsAt = 8; // the major brand follows the 8-byte box header
  if (boxSize === 1) {
    // 64-bit "largesize" header; an ftyp box is tiny, so only the low word matters.
    if (b.length < 24) return [];
    boxSize = b.readUInt32BE(12);
    brandsAt = 16;
  } else if (boxSize === 0) {
    boxSize = b.length; // "extends to end of file"
  }
  const found = [b.toString('latin1', brandsAt, brandsAt + 4)];
  // Compatible brands start after the major brand (4) and the minor version (4).
  for (let o = brandsAt + 8; o + 4 <= Math.min(boxSize, b.length); o += 4) found.push(b.toString('latin1', o, o + 4));
  return found;
}

/** ISO-BMFF files whose brands include one of `specific` (true), else one of `generic` ('other'). */
export const hasBrand =
  (specific: ReadonlySet<string>, generic?: ReadonlySet<string>) =>
  (b: Buffer): Verdict => {
    const found = brands(b);
    if (found.some((x) => specific.has(x))) return true;
    // Only the generic brands: the codec is unknown, so do not claim it.
    if (generic && found.some((x) => generic.has(x))) return 'other';
    return false;
  };

// ---------------------------------------------------------------------------
// JPEG 2000

/**
 * A JP2 file (signature box, then `ftyp` whose brands say `jp2 `; a JPX that lists jp2 among
 * its compatible brands is readable as JP2, 15444-2 I.7.1), or a raw codestream (SOC + SIZ).
 */
export function jpeg2000(b: Buffer): Verdict {
  if (matches(b, [[0, '\xff\x4f\xff\x51']])) return 'other';
  if (matches(b, [[16, 'jp2 ']])) return true;
  const ftypSize = b.length >= 16 ? b.readUInt32BE(12) : 0;
  for (let o = 28; o + 4 <= Math.min(b.length, 12 + ftypSize); o += 4) if (matches(b, [[o, 'jp2 ']])) return true;
  return { reason: 'JPEG 2000 extensions (JPX, JPM) without JP2 compatibility are not supported' };
}

// ---------------------------------------------------------------------------
// BMP

/** The only DIB header sizes real-world writers produce (OS/2 1.x and 2.x, BITMAPINFOHEADER..V5). */
const BMP_DIB_SIZES = new Set([12, 16, 40, 52, 56, 64, 108, 124]);

/** "BM" alone is too weak (it starts plenty of text), so a known DIB header size is required too. */
export const bmpHeader = (b: Buffer): Verdict => b.length >= 26 && BMP_DIB_SIZES.has(b.readUInt32LE(14));

// ---------------------------------------------------------------------------
// SVG

const UTF8_BOM = '\xef\xbb\xbf';

/**
 * SVG is XML, recognised by structure: the first element of the document must be <svg>
 * (optionally namespace-prefixed). Merely containing "<svg" is not enough: HTML pages embed
 * inline SVG, and a response labelled image/svg+xml must really be an SVG document. Only the
 * prolog is parsed (whitespace, processing instructions, comments, a DOCTYPE). Binary data
 * (any NUL) and UTF-16 text are not SVG here.
 */
export function isSvg(b: Buffer): boolean {
  if (b.length === 0 || b.includes(0)) return false;
  const start = matches(b, [[0, UTF8_BOM]]) ? UTF8_BOM.length : 0;
  // latin1 maps bytes 1:1; the markup looked for is ASCII and UTF-8 text in comments is skipped.
  const s = b.toString('latin1', start);
  let i = 0;
  for (;;) {
    while (i < s.length && isXmlSpace(s[i]!)) i++;
    if (s.startsWith('<?', i)) i = skipPast(s, i + 2, '?>');
    else if (s.startsWith('<!--', i)) i = skipPast(s, i + 4, '-->');
    else if (s.startsWith('<!DOCTYPE', i)) i = skipDoctype(s, i + '<!DOCTYPE'.length);
    else break;
    if (i < 0) return false; // the head ended inside the prolog
  }
  // Root element name: "svg" or "prefix:svg", followed by whitespace, ">" or "/>".
  return /^<(?:[A-Za-z_][\w.-]*:)?svg[ \t\r\n/>]/.test(s.slice(i, i + 256));
}

const isXmlSpace = (c: string): boolean => c === ' ' || c === '\t' || c === '\r' || c === '\n';

/** Index just past the next `terminator` at or after `from`, or -1 if the head ends first. */
function skipPast(s: string, from: number, terminator: string): number {
  const at = s.indexOf(terminator, from);
  return at < 0 ? -1 : at + terminator.length;
}

/** Past a DOCTYPE: quoted identifiers and the internal subset ("[ ... ]") may hold ">" themselves. */
function skipDoctype(s: string, from: number): number {
  let inSubset = false;
  let i = from;
  while (i < s.length) {
    const c = s[i]!;
    if (c === '"' || c === "'") {
      const close = s.indexOf(c, i + 1);
      if (close < 0) return -1;
      i = close + 1;
    } else if (inSubset && s.startsWith('<!--', i)) {
      i = skipPast(s, i + 4, '-->');
      if (i < 0) return -1;
    } else if (c === '[') {
      inSubset = true;
      i++;
    } else if (c === ']') {
      inSubset = false;
      i++;
    } else if (c === '>' && !inSubset) {
      return i + 1;
    } else {
      i++;
    }
  }
  return -1;
}
