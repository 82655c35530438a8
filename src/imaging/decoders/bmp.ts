// BMP, decoded here (libvips has no BMP loader).
//
// Supported: the BITMAPCOREHEADER (12 bytes, OS/2 1.x), OS/2 2.x (16 and 64), BITMAPINFOHEADER
// (40) and its V2–V5 extensions (52, 56, 108, 124); 1, 2, 4 and 8 bits per pixel through a
// palette; 16 bits (5-5-5 unless BI_BITFIELDS gives masks); 24 bits; 32 bits (BI_RGB, or
// masks from BI_BITFIELDS / BI_ALPHABITFIELDS / the V2+ header); RLE8 and RLE4; bottom-up and
// top-down rows.
//
// Alpha follows what browsers do:
//   - 32-bit BI_RGB: Windows calls the 4th byte unused, but writers put alpha there. It is
//     alpha when any pixel has it non-zero; all zero means "unused" and the image is opaque.
//   - An explicit alpha mask (BI_BITFIELDS with a V3+ header, BI_ALPHABITFIELDS): alpha, except
//     that an image whose alpha is zero everywhere is taken as opaque (a writer that filled the
//     mask but never the alpha), as browsers do.
//   - RLE: pixels the stream skips (delta and early end-of-line / end-of-bitmap escapes) are
//     left transparent.
//   - Palette entries are opaque (their 4th byte is reserved).
// The colour profile a V4/V5 header may carry or link is ignored: pixels are taken as sRGB.
//
// Not supported (UNSUPPORTED_FORMAT): BI_JPEG and BI_PNG (an embedded JPEG/PNG), OS/2 Huffman
// 1D and RLE24, CMYK variants, 64 bits per pixel.
//
// Every offset is checked against the buffer before it is read; the pixel limit is checked
// before allocating, and uncompressed pixel data must be all there before allocating.
import { TaskError } from '../../errors.js';
import { checkPixelsToDecode } from '../limits.js';
import { stripAlpha, type HeaderInfo, type RawDecoder, type RawImage } from './pixels.js';

const BI_RGB = 0;
const BI_RLE8 = 1;
const BI_RLE4 = 2;
const BI_BITFIELDS = 3; // on an OS/2 2.x header: Huffman 1D
const BI_JPEG = 4; // on an OS/2 2.x header: RLE24
const BI_PNG = 5;
const BI_ALPHABITFIELDS = 6;
const BI_CMYK_VARIANTS = new Set([11, 12, 13]);

const FILE_HEADER_SIZE = 14;
const CORE_HEADER = 12;
const OS2_HEADERS = new Set([16, 64]);
const INFO_HEADERS = new Set([40, 52, 56, 108, 124]);

/** One colour component of a 16/32-bit pixel: where it sits and how to widen it to 8 bits. */
interface Channel {
  mask: number;
  shift: number;
  bits: number;
  /** value → 0..255 for components of at most 8 bits */
  table: Uint8Array | null;
}

interface BmpLayout {
  width: number;
  height: number;
  topDown: boolean;
  bitsPerPixel: number;
  kind: 'palette' | 'rgb24' | 'masks' | 'rle8' | 'rle4';
  /** 256 RGB triplets; entries past the file's palette stay black */
  palette: Uint8Array;
  /** For 16/32-bit pixels */
  red: Channel;
  green: Channel;
  blue: Channel;
  alpha: Channel;
  pixelOffset: number;
  /** Bytes per row of uncompressed data, padded to 4 */
  stride: number;
  mayHaveAlpha: boolean;
}

const invalidBmp = (why: string): TaskError => new TaskError('INVALID_IMAGE', `The BMP image is invalid: ${why}`);
const unsupportedBmp = (what: string): TaskError => new TaskError('UNSUPPORTED_FORMAT', `${what} BMP images are not supported`);

// Little-endian reads; callers check `offset + size <= b.length` first.
const u16 = (b: Uint8Array, o: number): number => b[o]! | (b[o + 1]! << 8);
const u32 = (b: Uint8Array, o: number): number => (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
const i32 = (b: Uint8Array, o: number): number => b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24);

const NO_CHANNEL: Channel = { mask: 0, shift: 0, bits: 0, table: null };

function channel(mask: number, bitsPerPixel: number, name: string): Channel {
  if (mask === 0) return NO_CHANNEL;
  if (bitsPerPixel < 32 && mask >= 2 ** bitsPerPixel) throw invalidBmp(`the ${name} mask has bits outside a ${bitsPerPixel}-bit pixel`);
  let shift = 0;
  while (((mask >>> shift) & 1) === 0) shift++;
  let bits = 0;
  while (shift + bits < 32 && ((mask >>> (shift + bits)) & 1) === 1) bits++;
  if (shift + bits < 32 && mask >>> (shift + bits) !== 0) throw invalidBmp(`the ${name} mask is not contiguous`);
  let table: Uint8Array | null = null;
  if (bits <= 8) {
    const max = 2 ** bits - 1;
    table = new Uint8Array(max + 1);
    for (let v = 0; v <= max; v++) table[v] = Math.round((v * 255) / max);
  }
  return { mask, shift, bits, table };
}

/** A component of a 16/32-bit pixel as 0..255 (0 for an absent component). */
function component(c: Channel, pixel: number): number {
  if (c.bits === 0) return 0;
  const v = (pixel & c.mask) >>> c.shift;
  return c.table ? c.table[v]! : v >>> (c.bits - 8);
}

function parseBmp(b: Buffer): BmpLayout {
  if (b.length < FILE_HEADER_SIZE + 4 || b[0] !== 0x42 || b[1] !== 0x4d) throw invalidBmp('not a BMP file');
  const pixelOffset = u32(b, 10);
  const headerSize = u32(b, 14);
  const isCore = headerSize === CORE_HEADER;
  const isOs2 = OS2_HEADERS.has(headerSize);
  if (!isCore && !isOs2 && !INFO_HEADERS.has(headerSize)) throw invalidBmp(`unknown header size ${headerSize}`);
  const headerEnd = FILE_HEADER_SIZE + headerSize;
  if (b.length < headerEnd) throw invalidBmp('the header is truncated');

  let width: number;
  let height: number;
  let bitsPerPixel: number;
  let compression = BI_RGB;
  let colorsUsed = 0;
  if (isCore) {
    width = u16(b, 18);
    height = u16(b, 20);
    bitsPerPixel = u16(b, 24);
  } else {
    width = i32(b, 18);
    height = i32(b, 22);
    bitsPerPixel = u16(b, 28);
    if (headerSize >= 20) compression = u32(b, 30);
    if (headerSize >= 50) colorsUsed = u32(b, 46);
  }
  const topDown = height < 0;
  height = Math.abs(height);
  if (width <= 0) throw invalidBmp('the width is not positive');
  if (height === 0) throw invalidBmp('the height is zero');

  if (isOs2 && compression === BI_BITFIELDS) throw unsupportedBmp('OS/2 Huffman-compressed');
  if (isOs2 && compression === BI_JPEG) throw unsupportedBmp('OS/2 RLE24-compressed');
  if (isOs2 && compression > BI_RLE4) throw unsupportedBmp(`OS/2 compression ${compression}`);
  if (compression === BI_JPEG) throw unsupportedBmp('JPEG-compressed');
  if (compression === BI_PNG) throw unsupportedBmp('PNG-compressed');
  if (BI_CMYK_VARIANTS.has(compression)) throw unsupportedBmp('CMYK');
  if (bitsPerPixel === 64) throw unsupportedBmp('64-bit');

  let kind: BmpLayout['kind'];
  let masksAfterHeader = 0;
  switch (compression) {
    case BI_RGB:
      if (bitsPerPixel === 1 || bitsPerPixel === 2 || bitsPerPixel === 4 || bitsPerPixel === 8) kind = 'palette';
      else if (bitsPerPixel === 24) kind = 'rgb24';
      else if (bitsPerPixel === 16 || bitsPerPixel === 32) kind = 'masks';
      else throw invalidBmp(`${bitsPerPixel} bits per pixel`);
      break;
    case BI_RLE8:
      if (bitsPerPixel !== 8) throw invalidBmp(`RLE8 with ${bitsPerPixel} bits per pixel`);
      kind = 'rle8';
      break;
    case BI_RLE4:
      if (bitsPerPixel !== 4) throw invalidBmp(`RLE4 with ${bitsPerPixel} bits per pixel`);
      kind = 'rle4';
      break;
    case BI_BITFIELDS:
    case BI_ALPHABITFIELDS:
      if (bitsPerPixel !== 16 && bitsPerPixel !== 32) throw invalidBmp(`bit fields with ${bitsPerPixel} bits per pixel`);
      kind = 'masks';
      // A BITMAPINFOHEADER has no room for masks: they follow it.
      if (headerSize === 40) masksAfterHeader = compression === BI_ALPHABITFIELDS ? 4 : 3;
      break;
    default:
      throw invalidBmp(`unknown compression ${compression}`);
  }

  // Bit masks for 16/32-bit pixels.
  let red = NO_CHANNEL;
  let green = NO_CHANNEL;
  let blue = NO_CHANNEL;
  let alpha = NO_CHANNEL;
  if (kind === 'masks') {
    let masks: number[];
    if (compression === BI_RGB) {
      masks = bitsPerPixel === 16 ? [0x7c00, 0x03e0, 0x001f, 0] : [0x00ff0000, 0x0000ff00, 0x000000ff, 0xff000000];
    } else if (masksAfterHeader > 0) {
      if (b.length < headerEnd + masksAfterHeader * 4) throw invalidBmp('the bit masks are truncated');
      masks = [0, 1, 2, 3].map((i) => (i < masksAfterHeader ? u32(b, headerEnd + i * 4) : 0));
    } else if (headerSize >= 52) {
      masks = [u32(b, 54), u32(b, 58), u32(b, 62), headerSize >= 56 ? u32(b, 66) : 0];
    } else {
      throw invalidBmp('bit fields without masks');
    }
    red = channel(masks[0]!, bitsPerPixel, 'red');
    green = channel(masks[1]!, bitsPerPixel, 'green');
    blue = channel(masks[2]!, bitsPerPixel, 'blue');
    alpha = channel(masks[3]!, bitsPerPixel, 'alpha');
    if (red.bits + green.bits + blue.bits === 0) throw invalidBmp('the colour masks are all zero');
  }

  // Palette: right after the header (and any masks), before the pixels.
  const paletteStart = headerEnd + masksAfterHeader * 4;
  if (pixelOffset < paletteStart) throw invalidBmp('the pixel data overlaps the header');
  if (pixelOffset >= b.length) throw invalidBmp('there is no pixel data');
  const palette = new Uint8Array(256 * 3);
  if (bitsPerPixel <= 8) {
    const entrySize = isCore ? 3 : 4;
    let entries = colorsUsed > 0 && colorsUsed < 2 ** bitsPerPixel ? colorsUsed : 2 ** bitsPerPixel;
    // Writers that list fewer colours than the bit depth allows say so through the pixel offset.
    entries = Math.min(entries, Math.floor((pixelOffset - paletteStart) / entrySize));
    if (entries === 0) throw invalidBmp('the palette is missing');
    for (let i = 0; i < entries; i++) {
      const at = paletteStart + i * entrySize;
      palette[i * 3] = b[at + 2]!;
      palette[i * 3 + 1] = b[at + 1]!;
      palette[i * 3 + 2] = b[at]!;
    }
  }

  return {
    width,
    height,
    topDown,
    bitsPerPixel,
    kind,
    palette,
    red,
    green,
    blue,
    alpha,
    pixelOffset,
    stride: Math.floor((bitsPerPixel * width + 31) / 32) * 4,
    mayHaveAlpha: alpha.bits > 0 || kind === 'rle8' || kind === 'rle4',
  };
}

export const bmp: RawDecoder = {
  async readHeader(input: Buffer): Promise<HeaderInfo> {
    const layout = parseBmp(input);
    return { width: layout.width, height: layout.height, hasAlpha: layout.mayHaveAlpha, frames: 1 };
  },
  decode: async (input: Buffer, maxPixels: number) => decodeBmp(input, maxPixels),
};

function decodeBmp(b: Buffer, maxPixels: number): RawImage {
  const bmp = parseBmp(b);
  const { width, height } = bmp;
  checkPixelsToDecode(width, height, bmp.mayHaveAlpha ? 4 : 3, maxPixels);
  if (bmp.kind === 'rle8' || bmp.kind === 'rle4') return decodeRle(b, bmp);

  // Uncompressed: every row must be there (the last one's padding may be missing).
  const needed = bmp.stride * (height - 1) + Math.ceil((bmp.bitsPerPixel * width) / 8);
  if (b.length - bmp.pixelOffset < needed) {
    throw invalidBmp(`the pixel data is truncated (${b.length - bmp.pixelOffset} of ${needed} bytes)`);
  }
  const channels = bmp.kind === 'masks' && usesAlpha(b, bmp) ? 4 : 3;
  const out = Buffer.alloc(width * height * channels);
  for (let row = 0; row < height; row++) {
    const src = bmp.pixelOffset + row * bmp.stride;
    const dst = (bmp.topDown ? row : height - 1 - row) * width * channels;
    switch (bmp.kind) {
      case 'palette':
        decodePaletteRow(b, src, bmp, out, dst);
        break;
      case 'rgb24':
        for (let x = 0, s = src, d = dst; x < width; x++, s += 3, d += 3) {
          out[d] = b[s + 2]!;
          out[d + 1] = b[s + 1]!;
          out[d + 2] = b[s]!;
        }
        break;
      case 'masks':
        decodeMaskedRow(b, src, bmp, out, dst, channels);
        break;
    }
  }
  return { data: out, width, height, channels };
}

function decodePaletteRow(b: Buffer, src: number, bmp: BmpLayout, out: Buffer, dst: number): void {
  const { bitsPerPixel: bpp, palette } = bmp;
  const indexMask = (1 << bpp) - 1;
  for (let x = 0, d = dst; x < bmp.width; x++, d += 3) {
    const bit = x * bpp;
    const index = (b[src + (bit >>> 3)]! >>> (8 - bpp - (bit & 7))) & indexMask; // leftmost pixel in the high bits
    out[d] = palette[index * 3]!;
    out[d + 1] = palette[index * 3 + 1]!;
    out[d + 2] = palette[index * 3 + 2]!;
  }
}

const readPixel = (b: Buffer, at: number, bitsPerPixel: number): number => (bitsPerPixel === 16 ? u16(b, at) : u32(b, at));

const byteAligned = (c: Channel): boolean => c.bits === 8 && c.shift % 8 === 0;

function decodeMaskedRow(b: Buffer, src: number, bmp: BmpLayout, out: Buffer, dst: number, channels: number): void {
  const bytes = bmp.bitsPerPixel / 8;
  if (bytes === 4 && byteAligned(bmp.red) && byteAligned(bmp.green) && byteAligned(bmp.blue) && (channels === 3 || byteAligned(bmp.alpha))) {
    // The common layouts (BGRA, BGRX, RGBA...): plain byte copies.
    const [r, g, bl, a] = [bmp.red.shift >>> 3, bmp.green.shift >>> 3, bmp.blue.shift >>> 3, bmp.alpha.shift >>> 3];
    for (let x = 0, s = src, d = dst; x < bmp.width; x++, s += 4, d += channels) {
      out[d] = b[s + r]!;
      out[d + 1] = b[s + g]!;
      out[d + 2] = b[s + bl]!;
      if (channels === 4) out[d + 3] = b[s + a]!;
    }
    return;
  }
  for (let x = 0, s = src, d = dst; x < bmp.width; x++, s += bytes, d += channels) {
    const pixel = readPixel(b, s, bmp.bitsPerPixel);
    out[d] = component(bmp.red, pixel);
    out[d + 1] = component(bmp.green, pixel);
    out[d + 2] = component(bmp.blue, pixel);
    if (channels === 4) out[d + 3] = component(bmp.alpha, pixel);
  }
}

/**
 * Whether the alpha mask carries alpha: some pixel is not opaque, and not every pixel is zero
 * (all-zero alpha is a writer that never filled it). Scans before allocating the output, and
 * stops as soon as it knows.
 */
function usesAlpha(b: Buffer, bmp: BmpLayout): boolean {
  if (bmp.alpha.bits === 0) return false;
  const bytes = bmp.bitsPerPixel / 8;
  let nonZero = false;
  let notOpaque = false;
  for (let row = 0; row < bmp.height; row++) {
    const src = bmp.pixelOffset + row * bmp.stride;
    for (let x = 0, s = src; x < bmp.width; x++, s += bytes) {
      const a = component(bmp.alpha, readPixel(b, s, bmp.bitsPerPixel));
      if (a !== 0) nonZero = true;
      if (a !== 255) notOpaque = true;
      if (nonZero && notOpaque) return true;
    }
  }
  return false;
}

/**
 * RLE8 / RLE4. The stream is pairs of bytes: (count > 0, value) repeats value count times (RLE4:
 * two alternating 4-bit indices); (0, 0) ends the line; (0, 1) ends the bitmap; (0, 2, dx, dy)
 * moves the cursor right and on by rows; (0, n ≥ 3) is followed by n literal indices, padded to
 * an even byte count. The cursor only moves forward, so no pixel is written twice: pixels it
 * skips stay transparent, pixels past the right edge are dropped, and rows past the last end
 * the decode. Work is bounded by the stream length and the image size.
 */
function decodeRle(b: Buffer, bmp: BmpLayout): RawImage {
  const { width, height, palette } = bmp;
  const rle4 = bmp.kind === 'rle4';
  const out = Buffer.alloc(width * height * 4); // transparent black until written
  let written = 0;
  let x = 0;
  let row = 0;
  let p = bmp.pixelOffset;

  const paint = (d: number, index: number): void => {
    out[d] = palette[index * 3]!;
    out[d + 1] = palette[index * 3 + 1]!;
    out[d + 2] = palette[index * 3 + 2]!;
    out[d + 3] = 255;
  };

  decode: while (row < height) {
    if (p + 2 > b.length) {
      if (written === width * height) break; // complete image, only the end-of-bitmap missing
      throw invalidBmp('the RLE data is truncated');
    }
    const count = b[p]!;
    const value = b[p + 1]!;
    p += 2;
    if (count > 0) {
      const visible = Math.min(count, Math.max(0, width - x));
      const d = ((bmp.topDown ? row : height - 1 - row) * width + x) * 4;
      for (let i = 0; i < visible; i++) paint(d + i * 4, rle4 ? (i & 1 ? value & 0x0f : value >>> 4) : value);
      written += visible;
      x += count;
      continue;
    }
    switch (value) {
      case 0: // end of line
        x = 0;
        row++;
        break;
      case 1: // end of bitmap
        break decode;
      case 2: // delta
        if (p + 2 > b.length) throw invalidBmp('the RLE data is truncated');
        x += b[p]!;
        row += b[p + 1]!;
        p += 2;
        break;
      default: {
        // absolute run of `value` indices
        const bytes = rle4 ? Math.ceil(value / 2) : value;
        if (p + bytes > b.length) throw invalidBmp('the RLE data is truncated');
        const visible = Math.min(value, Math.max(0, width - x));
        const d = ((bmp.topDown ? row : height - 1 - row) * width + x) * 4;
        for (let i = 0; i < visible; i++) paint(d + i * 4, rle4 ? (i & 1 ? b[p + (i >>> 1)]! & 0x0f : b[p + (i >>> 1)]! >>> 4) : b[p + i]!);
        written += visible;
        x += value;
        p += bytes + (bytes & 1);
      }
    }
  }

  if (written === width * height) return { data: stripAlpha(out, width * height), width, height, channels: 3 };
  return { data: out, width, height, channels: 4 };
}
