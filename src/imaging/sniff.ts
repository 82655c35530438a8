/**
 * Content sniffing for uploaded files.
 *
 * The format of an upload is decided from its leading bytes only. File names
 * and client-supplied Content-Type headers are attacker-controlled and often
 * simply wrong (a PNG saved as .jpg is common), so they are never consulted.
 *
 * `sniff` answers one of three things:
 *   - a `Sniffed` format we hand to the decoder;
 *   - a `SniffRefusal` for inputs we recognise but deliberately do not accept,
 *     so the caller can give a precise error instead of a vague "unknown format";
 *   - `null` for bytes we do not recognise at all.
 *
 * Sniffing is a cheap gate, not validation: a file that sniffs as PNG may
 * still be corrupt, and the decoder remains responsible for rejecting it.
 */
import { FORMATS, type ImageFormat } from './formats.js';

/** Sniffing tells the images and PDF apart; a ZIP or OLE2 container is told apart by documents/container.ts. */
type SniffedFormat = ImageFormat | 'pdf';

export interface Sniffed {
  format: SniffedFormat;
  mimeType: string;
}

/** Recognised but not accepted (differential or arithmetic-coded lossless JPEG, JPX, ...). */
export type SniffRefusal = { refused: true; reason: string };

/**
 * How many leading bytes callers must supply (or the whole file if shorter).
 * 64 KiB covers the metadata segments most JPEGs put before their frame header
 * and any realistic SVG prolog, while staying cheap to buffer per upload.
 */
export const SNIFF_HEAD_BYTES = 64 * 1024;

/** HEIF images whose brands name no HEVC codec are stored as `heic` with this type. */
const HEIF_MIME = FORMATS.heic.otherMimes[0];

const accept = (format: SniffedFormat, mimeType: string = FORMATS[format].mime): Sniffed => ({ format, mimeType });
const refuse = (reason: string): SniffRefusal => ({ refused: true, reason });

/** True if `bytes` occur in `b` at `offset` (false, never a throw, past the end). */
function hasBytes(b: Buffer, offset: number, bytes: readonly number[]): boolean {
  if (offset + bytes.length > b.length) return false;
  return bytes.every((x, i) => b[offset + i] === x);
}

function hasAscii(b: Buffer, offset: number, text: string): boolean {
  return b.length >= offset + text.length && b.toString('latin1', offset, offset + text.length) === text;
}

export function sniff(head: Buffer): Sniffed | SniffRefusal | null {
  // Look at exactly the window callers promise to supply, so the answer does
  // not depend on whether a caller happened to pass the whole file.
  const b = head.subarray(0, SNIFF_HEAD_BYTES);

  if (hasBytes(b, 0, [0xff, 0xd8, 0xff])) return sniffJpeg(b);
  if (hasBytes(b, 0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return accept('png');
  if (hasAscii(b, 0, 'GIF87a') || hasAscii(b, 0, 'GIF89a')) return accept('gif');
  if (hasAscii(b, 0, 'RIFF') && hasAscii(b, 8, 'WEBP')) return accept('webp');
  if (hasAscii(b, 4, 'ftyp')) return sniffIsoBmff(b);
  if (hasAscii(b, 0, 'II*\0') || hasAscii(b, 0, 'MM\0*') || hasAscii(b, 0, 'II+\0') || hasAscii(b, 0, 'MM\0+')) {
    return accept('tiff');
  }
  if (hasAscii(b, 0, 'BM')) return sniffBmp(b);

  if (hasBytes(b, 0, [0x00, 0x00, 0x00, 0x0c, 0x6a, 0x50, 0x20, 0x20, 0x0d, 0x0a, 0x87, 0x0a])) return sniffJp2(b);
  if (hasBytes(b, 0, [0xff, 0x4f, 0xff, 0x51])) return accept('jp2', FORMATS.jp2.otherMimes[0]); // raw J2K codestream (SOC + SIZ)

  if (hasAscii(b, 0, '%PDF-')) return accept('pdf');

  // Text formats last: they have no magic number, only structure.
  return isSvg(b) ? accept('svg') : null;
}

// ---------------------------------------------------------------------------
// JPEG

/**
 * A JPEG's coding process is only declared by its SOF marker, which can sit
 * behind many kilobytes of EXIF/ICC/XMP segments. We walk segment by segment
 * rather than searching for the byte pair, because APPn payloads (notably EXIF
 * thumbnails) routinely contain other JPEGs' markers.
 *
 * Lossless JPEG of process 14 (SOF3) is accepted as JPEG and decoded by this
 * service (libjpeg-turbo in sharp's libvips cannot); the differential and
 * arithmetic-coded lossless processes are refused. Anything we cannot conclude from the
 * head (truncated, SOF beyond the window, malformed segments) is accepted as
 * JPEG: the decoder will produce the real error if there is one.
 */
function sniffJpeg(b: Buffer): Sniffed | SniffRefusal {
  let i = 2; // just past SOI (FF D8)
  while (i < b.length) {
    if (b[i] !== 0xff) break; // not at a marker: malformed, let the decoder judge
    while (i < b.length && b[i] === 0xff) i++; // any number of FF fill bytes may precede a marker
    if (i >= b.length) break;
    const marker = b[i++]!;

    // Standalone markers (RSTn, TEM, a stray SOI) carry no length field.
    if ((marker >= 0xd0 && marker <= 0xd8) || marker === 0x01) continue;
    // End of image or start of scan before any frame header, or a stuffed
    // FF 00 outside entropy-coded data: malformed, nothing more to learn here.
    if (marker === 0xd9 || marker === 0xda || marker === 0x00) break;

    // SOF0..SOF15, excluding DHT (C4), JPG (C8) and DAC (CC), which share the range.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      // Process 14 (SOF3) is decoded by decoders/jpeg-lossless.ts; the other lossless processes are refused.
      const lossless = marker === 0xc7 || marker === 0xcb || marker === 0xcf;
      return lossless ? refuse('lossless JPEG other than process 14 (SOF3) is not supported') : accept('jpeg');
    }

    if (i + 2 > b.length) break; // head ends inside the length field
    const length = b.readUInt16BE(i); // counts itself, not the marker
    if (length < 2) break;
    i += length;
  }
  return accept('jpeg');
}

// ---------------------------------------------------------------------------
// ISO base media file format (HEIF / AVIF share the container with MP4/MOV)

const HEIC_BRANDS = new Set(['heic', 'heix', 'hevc', 'hevx', 'heim', 'heis', 'hevm', 'hevs']);
const GENERIC_HEIF_BRANDS = new Set(['mif1', 'msf1']);

/**
 * Writers put the specific brand in different places (libavif writes major
 * "avif", some encoders write major "mif1" and list "heic" as compatible), so
 * the major brand and every compatible brand are considered together.
 * AVIF wins over HEIC because AVIF files routinely also list mif1/miaf.
 */
function sniffIsoBmff(b: Buffer): Sniffed | null {
  if (b.length < 12) return null;
  let boxSize = b.readUInt32BE(0);
  let brandsAt = 8; // major brand follows the 8-byte box header
  if (boxSize === 1) {
    // 64-bit "largesize" header; an ftyp box is tiny, so only the low word matters.
    if (b.length < 24) return null;
    boxSize = b.readUInt32BE(12);
    brandsAt = 16;
  } else if (boxSize === 0) {
    boxSize = b.length; // "extends to end of file"
  }

  const brands = [b.toString('latin1', brandsAt, brandsAt + 4)];
  // Compatible brands start after major brand (4) and minor version (4).
  const end = Math.min(boxSize, b.length);
  for (let o = brandsAt + 8; o + 4 <= end; o += 4) brands.push(b.toString('latin1', o, o + 4));

  if (brands.some((x) => x === 'avif' || x === 'avis')) return accept('avif');
  if (brands.some((x) => HEIC_BRANDS.has(x))) return accept('heic');
  // Only the generic HEIF brands: the codec is unknown, so do not claim HEVC.
  if (brands.some((x) => GENERIC_HEIF_BRANDS.has(x))) return accept('heic', HEIF_MIME);
  return null; // MP4, QuickTime, 3GP, ... are not images
}

// ---------------------------------------------------------------------------
// JPEG 2000

/**
 * A JP2 file: the signature box, then `ftyp`, whose brands say JP2 (`jp2 `) or an extension
 * (`jpx `: JPX, `jpm `: compound documents) that OpenJPEG does not read as such.
 */
function sniffJp2(b: Buffer): Sniffed | SniffRefusal {
  if (hasAscii(b, 16, 'jp2 ')) return accept('jp2');
  // A JPX that lists jp2 among its compatible brands is readable as JP2 (15444-2 I.7.1).
  const ftypSize = b.length >= 16 ? b.readUInt32BE(12) : 0;
  for (let o = 28; o + 4 <= Math.min(b.length, 12 + ftypSize); o += 4) if (hasAscii(b, o, 'jp2 ')) return accept('jp2');
  return refuse('JPEG 2000 extensions (JPX, JPM) without JP2 compatibility are not supported');
}

// ---------------------------------------------------------------------------
// BMP

/** The only DIB header sizes real-world writers produce (OS/2 1.x and 2.x, BITMAPINFOHEADER..V5). */
const BMP_DIB_SIZES = new Set([12, 16, 40, 52, 56, 64, 108, 124]);

/** "BM" alone is too weak (it starts plenty of text), so also require a known DIB header size. */
function sniffBmp(b: Buffer): Sniffed | null {
  if (b.length < 26) return null;
  return BMP_DIB_SIZES.has(b.readUInt32LE(14)) ? accept('bmp') : null;
}

// ---------------------------------------------------------------------------
// SVG

const UTF8_BOM = [0xef, 0xbb, 0xbf];

/**
 * SVG is XML, so it is recognised by structure: the first element of the
 * document must be <svg> (optionally namespace-prefixed). Merely containing
 * "<svg" is not enough: HTML pages embed inline SVG, and a browser-facing
 * response that we label image/svg+xml must really be an SVG document.
 *
 * Only the prolog is parsed (whitespace, processing instructions such as the
 * XML declaration, comments, a DOCTYPE). Binary data (any NUL) and UTF-16
 * text are not SVG for our purposes.
 */
function isSvg(b: Buffer): boolean {
  if (b.length === 0 || b.includes(0)) return false;
  const start = hasBytes(b, 0, UTF8_BOM) ? UTF8_BOM.length : 0;
  // latin1 maps bytes 1:1, so offsets stay byte offsets; the markup we look
  // for is ASCII and multi-byte UTF-8 text in comments is simply skipped.
  const s = b.toString('latin1', start);

  let i = 0;
  for (;;) {
    while (i < s.length && isXmlSpace(s[i]!)) i++;
    if (s.startsWith('<?', i)) {
      i = skipPast(s, i + 2, '?>');
    } else if (s.startsWith('<!--', i)) {
      i = skipPast(s, i + 4, '-->');
    } else if (s.startsWith('<!DOCTYPE', i)) {
      i = skipDoctype(s, i + '<!DOCTYPE'.length);
    } else {
      break;
    }
    if (i < 0) return false; // head ended inside the prolog
  }

  // Root element name: "svg" or "prefix:svg", followed by whitespace, ">" or "/>".
  const root = /^<(?:[A-Za-z_][\w.-]*:)?svg[ \t\r\n/>]/.exec(s.slice(i, i + 256));
  return root !== null;
}

function isXmlSpace(c: string): boolean {
  return c === ' ' || c === '\t' || c === '\r' || c === '\n';
}

/** Index just past the next `terminator` at or after `from`, or -1 if the head ends first. */
function skipPast(s: string, from: number, terminator: string): number {
  const at = s.indexOf(terminator, from);
  return at < 0 ? -1 : at + terminator.length;
}

/**
 * Skip a DOCTYPE declaration. Its closing ">" is ambiguous on a naive search:
 * quoted public/system identifiers and the internal subset ("[ ... ]", holding
 * ENTITY/ELEMENT declarations and comments) can all contain ">" themselves.
 */
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
