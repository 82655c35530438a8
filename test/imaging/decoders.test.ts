import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

import { TaskError, type TaskErrorCode } from '../../src/errors.js';
import { decodeForSharp, safeSvgOffThread } from '../../src/imaging/decode-thread.js';
import { decodeRaw, readHeader } from '../../src/imaging/decoders/raw.js';
import { openSharpInput, rawToSharp } from '../../src/imaging/decoders/to-sharp.js';
import type { RawImage } from '../../src/imaging/decoders/pixels.js';
import { IMAGE_FORMATS, isRawDecoded } from '../../src/imaging/formats.js';
import { safeSvg } from '../../src/imaging/svg.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const corpusDir = path.resolve(repoRoot, '../shared/corpus/images');
const corpus = (relative: string): Promise<Buffer> => readFile(path.join(corpusDir, relative));

const MAX_PIXELS = 50_000_000;
const sha256 = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

async function rejectsWith(promise: Promise<unknown>, codes: TaskErrorCode[]): Promise<TaskError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof TaskError, `expected a TaskError, got ${String(err)}`);
    assert.ok(codes.includes(err.code), `expected ${codes.join(' or ')}, got ${err.code}: ${err.message}`);
    return err;
  }
  assert.fail(`expected a rejection with ${codes.join(' or ')}`);
}

/** The pixel at (x, y) as an array of its channels. */
function pixelAt(image: RawImage, x: number, y: number): number[] {
  const at = (y * image.width + x) * image.channels;
  return [...image.data.subarray(at, at + image.channels)];
}

// ---------------------------------------------------------------------------------------------
// Test patterns, rendered by sharp (librsvg) so they are independent of the decoder under test.

const W = 37; // odd: exercises row padding at every bit depth
const H = 23;

/** Opaque RGB: a red→blue gradient with a half-transparent green disc composited on it. */
async function opaquePattern(): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">
    <defs><linearGradient id="g" x1="0" x2="1" y1="0" y2="1"><stop offset="0" stop-color="#ff2000"/><stop offset="1" stop-color="#0030ff"/></linearGradient></defs>
    <rect width="${W}" height="${H}" fill="url(#g)"/>
    <circle cx="18" cy="11" r="9" fill="#00ff40" fill-opacity="0.5"/></svg>`;
  return sharp(Buffer.from(svg)).removeAlpha().raw().toBuffer();
}

/** RGBA with fully transparent, translucent and opaque pixels. */
async function translucentPattern(): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">
    <rect x="4" y="3" width="20" height="15" fill="#c03060" fill-opacity="0.6"/>
    <circle cx="24" cy="12" r="8" fill="#2080ff"/></svg>`;
  const rgba = await sharp(Buffer.from(svg)).ensureAlpha().raw().toBuffer();
  // Fully transparent pixels keep whatever colour the encoder stored; make them a known one.
  for (let i = 0; i < rgba.length; i += 4) if (rgba[i + 3] === 0) rgba.fill(0, i, i + 3);
  return rgba;
}

const rgbOf = (rgba: Buffer): Buffer => {
  const out = Buffer.alloc((rgba.length / 4) * 3);
  for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) rgba.copy(out, j, i, i + 3);
  return out;
};

/** A palette of n distinct colours, and the RGB image an index pattern maps to through it. */
function makePalette(n: number): Buffer {
  const palette = Buffer.alloc(n * 3);
  for (let i = 0; i < n; i++) palette.set([(i * 37 + 11) & 255, (i * 91 + 200) & 255, (i * 53 + 7) & 255], i * 3);
  return palette;
}
const indexPattern =
  (colours: number) =>
  (x: number, y: number): number =>
    (x * 3 + y * 7 + ((x * y) >> 2)) % colours;
function expandPalette(palette: Buffer, index: (x: number, y: number) => number, width = W, height = H): Buffer {
  const out = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) palette.copy(out, (y * width + x) * 3, index(x, y) * 3, index(x, y) * 3 + 3);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// A small BMP encoder, written from the format description, to build every variant we decode.

interface BmpSpec {
  width: number;
  height: number;
  bpp: number;
  headerSize?: 12 | 16 | 40 | 52 | 56 | 64 | 108 | 124;
  compression?: number;
  topDown?: boolean;
  /** Written into a V2+ header, or after a 40-byte header when the compression is 3 or 6. */
  masks?: number[];
  /** RGB triplets */
  palette?: Buffer;
  colorsUsed?: number;
  /** Rows in storage order (bottom-up unless topDown) */
  pixelData: Buffer;
}

function makeBmp(spec: BmpSpec): Buffer {
  const headerSize = spec.headerSize ?? 40;
  const compression = spec.compression ?? 0;
  const entrySize = headerSize === 12 ? 3 : 4;
  const masksAfter = headerSize === 40 && (compression === 3 || compression === 6) ? (spec.masks?.length ?? 0) * 4 : 0;
  const paletteBytes = spec.palette ? (spec.palette.length / 3) * entrySize : 0;
  const offset = 14 + headerSize + masksAfter + paletteBytes;
  const b = Buffer.alloc(offset + spec.pixelData.length);
  b.write('BM', 0, 'latin1');
  b.writeUInt32LE(b.length, 2);
  b.writeUInt32LE(offset, 10);
  b.writeUInt32LE(headerSize, 14);
  if (headerSize === 12) {
    b.writeUInt16LE(spec.width, 18);
    b.writeUInt16LE(spec.height, 20);
    b.writeUInt16LE(1, 22);
    b.writeUInt16LE(spec.bpp, 24);
  } else {
    b.writeInt32LE(spec.width, 18);
    b.writeInt32LE(spec.topDown ? -spec.height : spec.height, 22);
    b.writeUInt16LE(1, 26);
    b.writeUInt16LE(spec.bpp, 28);
    if (headerSize >= 40) {
      b.writeUInt32LE(compression, 30);
      b.writeUInt32LE(spec.pixelData.length, 34);
      b.writeInt32LE(2835, 38);
      b.writeInt32LE(2835, 42);
      b.writeUInt32LE(spec.colorsUsed ?? 0, 46);
    }
    if (headerSize >= 52 && headerSize !== 64 && spec.masks) {
      spec.masks.slice(0, headerSize >= 56 ? 4 : 3).forEach((m, i) => b.writeUInt32LE(m >>> 0, 54 + i * 4));
    }
    if (headerSize >= 108) b.writeUInt32LE(0x73524742, 70); // LCS_sRGB
  }
  if (masksAfter) spec.masks!.forEach((m, i) => b.writeUInt32LE(m >>> 0, 14 + headerSize + i * 4));
  if (spec.palette) {
    for (let i = 0; i < spec.palette.length / 3; i++) {
      const at = 14 + headerSize + masksAfter + i * entrySize;
      b[at] = spec.palette[i * 3 + 2]!;
      b[at + 1] = spec.palette[i * 3 + 1]!;
      b[at + 2] = spec.palette[i * 3]!;
    }
  }
  spec.pixelData.copy(b, offset);
  return b;
}

/** Uncompressed rows, padded to 4 bytes: `value` is a palette index, a 16/32-bit pixel, or [r, g, b]. */
function packRows(width: number, height: number, bpp: number, topDown: boolean, value: (x: number, y: number) => number | number[]): Buffer {
  const stride = Math.floor((bpp * width + 31) / 32) * 4;
  const out = Buffer.alloc(stride * height);
  for (let row = 0; row < height; row++) {
    const y = topDown ? row : height - 1 - row;
    const base = row * stride;
    for (let x = 0; x < width; x++) {
      const v = value(x, y);
      if (bpp <= 8) {
        const bit = x * bpp;
        out[base + (bit >> 3)]! |= (v as number) << (8 - bpp - (bit & 7));
      } else if (bpp === 16) {
        out.writeUInt16LE(v as number, base + x * 2);
      } else if (bpp === 24) {
        const [r, g, b] = v as number[];
        out.set([b!, g!, r!], base + x * 3);
      } else {
        out.writeUInt32LE((v as number) >>> 0, base + x * 4);
      }
    }
  }
  return out;
}

/**
 * RLE8/RLE4 of palette indices: runs of 3 or more as encoded runs, other stretches as absolute
 * runs (or single-pixel runs when shorter than 3), an end-of-line after every row, then an
 * end-of-bitmap.
 */
function rleEncode(width: number, height: number, index: (x: number, y: number) => number, rle4: boolean): Buffer {
  const bytes: number[] = [];
  const pair = (v: number): number => (rle4 ? (v << 4) | v : v);
  for (let row = 0; row < height; row++) {
    const y = height - 1 - row;
    const line = Array.from({ length: width }, (_, x) => index(x, y));
    const runAt = (i: number): number => {
      let n = 1;
      while (i + n < line.length && line[i + n] === line[i] && n < 255) n++;
      return n;
    };
    let i = 0;
    while (i < line.length) {
      const run = runAt(i);
      if (run >= 3) {
        bytes.push(run, pair(line[i]!));
        i += run;
        continue;
      }
      let n = 0;
      while (i + n < line.length && n < 255 && runAt(i + n) < 3) n++;
      const literal = line.slice(i, i + n);
      if (n < 3) {
        for (const v of literal) bytes.push(1, pair(v));
      } else {
        bytes.push(0, n);
        const packed = rle4 ? Array.from({ length: Math.ceil(n / 2) }, (_, k) => (literal[2 * k]! << 4) | (literal[2 * k + 1] ?? 0)) : literal;
        bytes.push(...packed);
        if (packed.length % 2) bytes.push(0);
      }
      i += n;
    }
    bytes.push(0, 0);
  }
  bytes.push(0, 1);
  return Buffer.from(bytes);
}

/** Expected channel value of an n-bit component widened to 8 bits. */
const widen = (v: number, bits: number): number => Math.round((v * 255) / (2 ** bits - 1));

async function decodeBmp(file: Buffer): Promise<RawImage> {
  const image = await decodeRaw(file, 'bmp', MAX_PIXELS);
  const header = await readHeader(file, 'bmp');
  assert.equal(header.width, image.width);
  assert.equal(header.height, image.height);
  assert.equal(header.frames, 1);
  if (image.channels === 4) assert.ok(header.hasAlpha, 'a 4-channel decode must have been announced by the header');
  assert.equal(image.data.length, image.width * image.height * image.channels);
  return image;
}

function assertPixels(image: RawImage, expected: Buffer, channels: 3 | 4, width = W, height = H): void {
  assert.equal(image.width, width);
  assert.equal(image.height, height);
  assert.equal(image.channels, channels);
  assert.ok(image.data.equals(expected), 'decoded pixels differ from the encoded ones');
}

// ---------------------------------------------------------------------------------------------

describe('raw decoders: API', () => {
  it('lists exactly the formats sharp cannot read', () => {
    assert.deepEqual([...IMAGE_FORMATS].filter(isRawDecoded).sort(), ['bmp', 'heic', 'jp2', 'jxl']);
  });

  it('refuses a format it does not decode', async () => {
    await rejectsWith(decodeRaw(Buffer.alloc(10), 'png' as 'bmp', MAX_PIXELS), ['UNSUPPORTED_FORMAT']);
    await rejectsWith(readHeader(Buffer.alloc(10), 'png' as 'bmp'), ['UNSUPPORTED_FORMAT']);
  });
});

describe('BMP: corpus files', () => {
  // Expected values were produced once, independently, with Pillow 9.4 (Debian python3-pil:
  // Image.open(f).convert('RGB').tobytes() / getpixel) and ImageMagick 6.9.11
  // (convert f.bmp -depth 8 rgb:- | sha256sum); both tools gave the same bytes.
  it('rgb24.bmp: 24-bit, 127×64, odd width', async () => {
    const image = await decodeBmp(await corpus('image-rs/rgb24.bmp'));
    assert.deepEqual([image.width, image.height, image.channels], [127, 64, 3]);
    assert.equal(sha256(image.data), 'e2fb8640bc5fdb2c74bed4ea1fe494991a366b1808828c88bdc4ca27459602b3');
    assert.deepEqual(pixelAt(image, 0, 0), [255, 0, 0]);
    assert.deepEqual(pixelAt(image, 126, 0), [159, 159, 189]);
    assert.deepEqual(pixelAt(image, 0, 63), [0, 0, 0]);
    assert.deepEqual(pixelAt(image, 10, 20), [174, 82, 82]);
  });

  it('pal8rle.bmp: RLE8, 127×64', async () => {
    const image = await decodeBmp(await corpus('image-rs/pal8rle.bmp'));
    assert.deepEqual([image.width, image.height, image.channels], [127, 64, 3]);
    assert.equal(sha256(image.data), '0e623e8b8909b1f884690726ca4ae9e1be44cc240a1cbf2c2ba980814c76c149');
    assert.deepEqual(pixelAt(image, 126, 0), [153, 170, 204]);
    assert.deepEqual(pixelAt(image, 63, 32), [255, 255, 255]);
    assert.deepEqual(pixelAt(image, 10, 20), [204, 85, 102]);
  });
});

describe('BMP: round trips through the test encoder', () => {
  it('24-bit, bottom-up and top-down', async () => {
    const rgb = await opaquePattern();
    const value = (x: number, y: number) => [...rgb.subarray((y * W + x) * 3, (y * W + x) * 3 + 3)];
    for (const topDown of [false, true]) {
      const file = makeBmp({ width: W, height: H, bpp: 24, topDown, pixelData: packRows(W, H, 24, topDown, value) });
      assertPixels(await decodeBmp(file), rgb, 3);
    }
  });

  it('24-bit with the OS/2 headers (12 and 16 bytes)', async () => {
    const rgb = await opaquePattern();
    const value = (x: number, y: number) => [...rgb.subarray((y * W + x) * 3, (y * W + x) * 3 + 3)];
    for (const headerSize of [12, 16] as const) {
      const file = makeBmp({ width: W, height: H, bpp: 24, headerSize, pixelData: packRows(W, H, 24, false, value) });
      assertPixels(await decodeBmp(file), rgb, 3);
    }
  });

  it('32-bit BI_RGB: an all-zero 4th byte is unused, so the image is opaque', async () => {
    const rgb = await opaquePattern();
    const value = (x: number, y: number) => {
      const i = (y * W + x) * 3;
      return (rgb[i]! << 16) | (rgb[i + 1]! << 8) | rgb[i + 2]!;
    };
    const file = makeBmp({ width: W, height: H, bpp: 32, pixelData: packRows(W, H, 32, false, value) });
    assertPixels(await decodeBmp(file), rgb, 3);
    assert.equal((await readHeader(file, 'bmp')).hasAlpha, true, '32-bit BI_RGB may carry alpha');
  });

  it('32-bit BI_RGB: a non-zero 4th byte is alpha', async () => {
    const rgba = await translucentPattern();
    const value = (x: number, y: number) => {
      const i = (y * W + x) * 4;
      return (rgba[i + 3]! << 24) | (rgba[i]! << 16) | (rgba[i + 1]! << 8) | rgba[i + 2]!;
    };
    const file = makeBmp({ width: W, height: H, bpp: 32, topDown: true, pixelData: packRows(W, H, 32, true, value) });
    assertPixels(await decodeBmp(file), rgba, 4);
  });

  it('32-bit BI_BITFIELDS with an alpha mask (V4 and V5 headers, any mask order)', async () => {
    const rgba = await translucentPattern();
    const layouts = [
      { headerSize: 108 as const, masks: [0x00ff0000, 0x0000ff00, 0x000000ff, 0xff000000], shifts: [16, 8, 0, 24] },
      { headerSize: 124 as const, masks: [0xff000000, 0x00ff0000, 0x0000ff00, 0x000000ff], shifts: [24, 16, 8, 0] },
      { headerSize: 56 as const, masks: [0x000000ff, 0x0000ff00, 0x00ff0000, 0xff000000], shifts: [0, 8, 16, 24] },
    ];
    for (const { headerSize, masks, shifts } of layouts) {
      const value = (x: number, y: number) => {
        const i = (y * W + x) * 4;
        return shifts.reduce((px, shift, c) => px | (rgba[i + c]! << shift), 0);
      };
      const file = makeBmp({ width: W, height: H, bpp: 32, headerSize, compression: 3, masks, pixelData: packRows(W, H, 32, false, value) });
      assertPixels(await decodeBmp(file), rgba, 4);
    }
  });

  it('32-bit with an alpha mask but opaque (all 255) or unfilled (all 0) alpha gives 3 channels', async () => {
    const rgb = await opaquePattern();
    for (const a of [0xff, 0x00]) {
      const value = (x: number, y: number) => {
        const i = (y * W + x) * 3;
        return (a << 24) | (rgb[i]! << 16) | (rgb[i + 1]! << 8) | rgb[i + 2]!;
      };
      const masks = [0x00ff0000, 0x0000ff00, 0x000000ff, 0xff000000];
      const file = makeBmp({ width: W, height: H, bpp: 32, headerSize: 124, compression: 3, masks, pixelData: packRows(W, H, 32, false, value) });
      assertPixels(await decodeBmp(file), rgb, 3);
    }
  });

  it('32-bit BI_BITFIELDS after a 40-byte header (3 masks), and BI_ALPHABITFIELDS (4 masks)', async () => {
    const rgba = await translucentPattern();
    const value = (x: number, y: number) => {
      const i = (y * W + x) * 4;
      return (rgba[i + 3]! << 24) | (rgba[i + 2]! << 16) | (rgba[i + 1]! << 8) | rgba[i]!; // ABGR
    };
    const pixelData = packRows(W, H, 32, false, value);
    const three = makeBmp({ width: W, height: H, bpp: 32, compression: 3, masks: [0xff, 0xff00, 0xff0000], pixelData });
    assertPixels(await decodeBmp(three), rgbOf(rgba), 3);
    const four = makeBmp({ width: W, height: H, bpp: 32, compression: 6, masks: [0xff, 0xff00, 0xff0000, 0xff000000], pixelData });
    assertPixels(await decodeBmp(four), rgba, 4);
  });

  it('16-bit: 5-5-5 by default, 5-6-5 and 4-4-4-4 through masks', async () => {
    const rgba = await translucentPattern();
    const at = (x: number, y: number, c: number) => rgba[(y * W + x) * 4 + c]!;
    const expected = (bits: number[], alpha: boolean): Buffer => {
      const channels = alpha ? 4 : 3;
      const out = Buffer.alloc(W * H * channels);
      for (let p = 0; p < W * H; p++) {
        for (let c = 0; c < channels; c++) out[p * channels + c] = widen(rgba[p * 4 + c]! >> (8 - bits[c]!), bits[c]!);
      }
      return out;
    };

    const rgb555 = (x: number, y: number) => ((at(x, y, 0) >> 3) << 10) | ((at(x, y, 1) >> 3) << 5) | (at(x, y, 2) >> 3);
    const plain = makeBmp({ width: W, height: H, bpp: 16, pixelData: packRows(W, H, 16, false, rgb555) });
    assertPixels(await decodeBmp(plain), expected([5, 5, 5], false), 3);

    const rgb565 = (x: number, y: number) => ((at(x, y, 0) >> 3) << 11) | ((at(x, y, 1) >> 2) << 5) | (at(x, y, 2) >> 3);
    const masked = makeBmp({
      width: W,
      height: H,
      bpp: 16,
      compression: 3,
      masks: [0xf800, 0x07e0, 0x001f],
      pixelData: packRows(W, H, 16, false, rgb565),
    });
    assertPixels(await decodeBmp(masked), expected([5, 6, 5], false), 3);

    const argb4444 = (x: number, y: number) =>
      ((at(x, y, 3) >> 4) << 12) | ((at(x, y, 0) >> 4) << 8) | ((at(x, y, 1) >> 4) << 4) | (at(x, y, 2) >> 4);
    const withAlpha = makeBmp({
      width: W,
      height: H,
      bpp: 16,
      headerSize: 56,
      compression: 3,
      masks: [0x0f00, 0x00f0, 0x000f, 0xf000],
      pixelData: packRows(W, H, 16, false, argb4444),
    });
    assertPixels(await decodeBmp(withAlpha), expected([4, 4, 4, 4], true), 4);
  });

  it('palettes at 8, 4, 2 and 1 bits per pixel, bottom-up and top-down', async () => {
    for (const bpp of [8, 4, 2, 1]) {
      const colours = bpp === 8 ? 200 : 2 ** bpp; // 200: a palette shorter than the bit depth allows
      const palette = makePalette(colours);
      const index = indexPattern(colours);
      for (const topDown of [false, true]) {
        const file = makeBmp({
          width: W,
          height: H,
          bpp,
          topDown,
          palette,
          colorsUsed: colours === 2 ** bpp ? 0 : colours,
          pixelData: packRows(W, H, bpp, topDown, index),
        });
        assertPixels(await decodeBmp(file), expandPalette(palette, index), 3);
      }
    }
  });

  it('palettes with the OS/2 headers: 3-byte entries (12) and 4-byte entries (64)', async () => {
    const palette = makePalette(16);
    const index = indexPattern(16);
    for (const headerSize of [12, 64] as const) {
      const file = makeBmp({ width: W, height: H, bpp: 4, headerSize, palette, pixelData: packRows(W, H, 4, false, index) });
      assertPixels(await decodeBmp(file), expandPalette(palette, index), 3);
    }
  });

  it('indices past the end of the palette are black', async () => {
    const palette = makePalette(4);
    const index = indexPattern(16); // uses indices 0..15 with only 4 colours
    const file = makeBmp({ width: W, height: H, bpp: 4, palette, colorsUsed: 4, pixelData: packRows(W, H, 4, false, index) });
    const padded = Buffer.concat([palette, Buffer.alloc(12 * 3)]);
    assertPixels(await decodeBmp(file), expandPalette(padded, index), 3);
  });

  it('RLE8 and RLE4 with encoded and absolute runs', async () => {
    for (const rle4 of [false, true]) {
      const colours = rle4 ? 16 : 180;
      const palette = makePalette(colours);
      // Long runs on some rows, literal stretches on others.
      const index = (x: number, y: number) => (y % 3 === 0 ? (x >> 3) % colours : indexPattern(colours)(x, y));
      const file = makeBmp({ width: W, height: H, bpp: rle4 ? 4 : 8, compression: rle4 ? 2 : 1, palette, pixelData: rleEncode(W, H, index, rle4) });
      const image = await decodeBmp(file);
      assertPixels(image, expandPalette(palette, index), 3);
    }
  });

  it('RLE4: an encoded run alternates its two indices', async () => {
    const palette = makePalette(16);
    // 5×1: run of 5 from 0x12 → 1 2 1 2 1, end of bitmap.
    const file = makeBmp({ width: 5, height: 1, bpp: 4, compression: 2, palette, pixelData: Buffer.from([5, 0x12, 0, 1]) });
    const image = await decodeBmp(file);
    assertPixels(
      image,
      expandPalette(palette, (x) => (x % 2 ? 2 : 1), 5, 1),
      3,
      5,
      1,
    );
  });

  it('RLE8: delta and early end-of-line / end-of-bitmap leave skipped pixels transparent', async () => {
    const palette = makePalette(8);
    // 6×4, stored bottom-up: storage row 0 is image row 3.
    const stream = Buffer.from([
      3,
      1,
      0,
      0, // row 3: three pixels of colour 1, end of line
      0,
      2,
      2,
      1, // delta: right 2, one row on (row 2 skipped; now row 1, x = 2)
      0,
      4,
      2,
      3,
      2,
      3, // absolute run: 2 3 2 3 at x = 2..5
      0,
      0, // end of line
      6,
      4, // row 0: six pixels of colour 4
      0,
      1, // end of bitmap
    ]);
    const file = makeBmp({ width: 6, height: 4, bpp: 8, compression: 1, palette, pixelData: stream });
    const image = await decodeBmp(file);
    assert.deepEqual([image.width, image.height, image.channels], [6, 4, 4]);
    const colour = (i: number) => [...palette.subarray(i * 3, i * 3 + 3), 255];
    const T = [0, 0, 0, 0];
    const rows = [
      [4, 4, 4, 4, 4, 4].map(colour),
      [T, T, colour(2), colour(3), colour(2), colour(3)],
      [T, T, T, T, T, T],
      [colour(1), colour(1), colour(1), T, T, T],
    ];
    rows.forEach((row, y) => row.forEach((px, x) => assert.deepEqual(pixelAt(image, x, y), px, `pixel ${x},${y}`)));
  });
});

describe('BMP: malformed and unsupported files', () => {
  const palette = makePalette(16);
  const rgb24 = (width: number, height: number) =>
    makeBmp({ width, height, bpp: 24, pixelData: packRows(width, height, 24, false, (x, y) => [x, y, x ^ y]) });

  /** A header claiming any size, followed by `extra` bytes of "pixel data". */
  function lyingHeader(width: number, height: number, bpp = 24, compression = 0, extra = 6): Buffer {
    const file = makeBmp({ width: 1, height: 1, bpp, compression, pixelData: Buffer.alloc(extra) });
    file.writeInt32LE(width, 18);
    file.writeInt32LE(height, 22);
    return file;
  }

  it('truncated pixel data is INVALID_IMAGE (the header alone still reads)', async () => {
    const file = rgb24(W, H);
    const truncated = file.subarray(0, file.length - 100);
    await rejectsWith(decodeRaw(truncated, 'bmp', MAX_PIXELS), ['INVALID_IMAGE']);
    assert.deepEqual(await readHeader(truncated, 'bmp'), { width: W, height: H, hasAlpha: false, frames: 1 });
    // Only the last row's padding missing is tolerated.
    const unpadded = file.subarray(0, file.length - 1);
    assert.equal((await decodeRaw(unpadded, 'bmp', MAX_PIXELS)).width, W);
  });

  it('zero width or height is INVALID_IMAGE', async () => {
    for (const [w, h] of [
      [0, 10],
      [10, 0],
      [-5, 10],
    ]) {
      const file = lyingHeader(w!, h!);
      await rejectsWith(readHeader(file, 'bmp'), ['INVALID_IMAGE']);
      await rejectsWith(decodeRaw(file, 'bmp', MAX_PIXELS), ['INVALID_IMAGE']);
    }
  });

  it('absurd dimensions in a 60-byte file fail fast, without allocating', async () => {
    const file = lyingHeader(100_000, 100_000);
    assert.equal(file.length, 60);
    assert.deepEqual(await readHeader(file, 'bmp'), { width: 100_000, height: 100_000, hasAlpha: false, frames: 1 });
    const started = performance.now();
    await rejectsWith(decodeRaw(file, 'bmp', MAX_PIXELS), ['IMAGE_TOO_LARGE']);
    await rejectsWith(decodeRaw(file, 'bmp', 1e12), ['IMAGE_TOO_LARGE', 'INVALID_IMAGE']);
    // Within the pixel limit but not within the file: refused before the 1.2 GB allocation.
    await rejectsWith(decodeRaw(lyingHeader(20_000, 20_000), 'bmp', 1e9), ['INVALID_IMAGE']);
    await rejectsWith(decodeRaw(lyingHeader(20_000, -20_000, 32), 'bmp', 1e9), ['INVALID_IMAGE']);
    // (Refusing at all shows the length check ran first: a decode would have read past the end.)
    assert.ok(performance.now() - started < 2000, 'refused without touching pixel memory');
  });

  it('the pixel limit applies to RLE images before allocating', async () => {
    const file = makeBmp({ width: 30_000, height: 30_000, bpp: 8, compression: 1, palette, pixelData: Buffer.from([0, 1]) });
    await rejectsWith(decodeRaw(file, 'bmp', MAX_PIXELS), ['IMAGE_TOO_LARGE']);
  });

  it('RLE runs and deltas past the image are clipped', async () => {
    const stream = Buffer.from([200, 1, 0, 0, 0, 2, 255, 255, 9, 2, 0, 1]);
    const file = makeBmp({ width: 4, height: 2, bpp: 8, compression: 1, palette, pixelData: stream });
    const image = await decodeBmp(file);
    assert.deepEqual([image.width, image.height, image.channels], [4, 2, 4]);
    for (let x = 0; x < 4; x++) {
      assert.deepEqual(pixelAt(image, x, 1), [...palette.subarray(3, 6), 255]); // bottom row, written
      assert.deepEqual(pixelAt(image, x, 0), [0, 0, 0, 0]); // top row, skipped
    }
    // An RLE4 absolute run longer than the row.
    const rle4 = makeBmp({ width: 5, height: 1, bpp: 4, compression: 2, palette, pixelData: Buffer.from([0, 7, 0x12, 0x34, 0x56, 0x70, 0, 1]) });
    const clipped = await decodeBmp(rle4);
    assertPixels(
      clipped,
      expandPalette(palette, (x) => x + 1, 5, 1),
      3,
      5,
      1,
    );
  });

  it('RLE data that ends before the image does is INVALID_IMAGE', async () => {
    for (const stream of [
      [4, 1, 0, 0], // one row of two, then nothing
      [4, 1, 0, 0, 0, 6, 1, 2], // absolute run of 6 with 2 bytes left
      [4, 1, 0, 0, 0, 2, 1], // delta without its offsets
      [4], // half a pair
    ]) {
      const file = makeBmp({ width: 4, height: 2, bpp: 8, compression: 1, palette, pixelData: Buffer.from(stream) });
      await rejectsWith(decodeRaw(file, 'bmp', MAX_PIXELS), ['INVALID_IMAGE']);
    }
    // A complete image whose end-of-bitmap is missing is fine.
    const complete = makeBmp({ width: 4, height: 1, bpp: 8, compression: 1, palette, pixelData: Buffer.from([4, 1]) });
    assert.equal((await decodeRaw(complete, 'bmp', MAX_PIXELS)).channels, 3);
  });

  it('embedded JPEG/PNG, OS/2 Huffman and RLE24, CMYK and 64-bit are UNSUPPORTED_FORMAT', async () => {
    const os2 = (compression: number) => {
      const file = makeBmp({ width: 4, height: 4, bpp: 24, headerSize: 64, pixelData: Buffer.alloc(64) });
      file.writeUInt32LE(compression, 30);
      return file;
    };
    for (const file of [lyingHeader(4, 4, 24, 4), lyingHeader(4, 4, 24, 5), lyingHeader(4, 4, 32, 11), lyingHeader(4, 4, 64), os2(3), os2(4)]) {
      await rejectsWith(readHeader(file, 'bmp'), ['UNSUPPORTED_FORMAT']);
      await rejectsWith(decodeRaw(file, 'bmp', MAX_PIXELS), ['UNSUPPORTED_FORMAT']);
    }
  });

  it('inconsistent headers are INVALID_IMAGE', async () => {
    const good = rgb24(4, 4);
    const edit = (change: (b: Buffer) => void, from = good): Buffer => {
      const b = Buffer.from(from);
      change(b);
      return b;
    };
    const cases: Record<string, Buffer> = {
      'not BM': edit((b) => b.write('XX', 0, 'latin1')),
      'too short': good.subarray(0, 20),
      'header truncated': good.subarray(0, 40),
      'unknown header size': edit((b) => b.writeUInt32LE(41, 14)),
      'pixel offset past the end': edit((b) => b.writeUInt32LE(good.length + 10, 10)),
      'pixel offset inside the header': edit((b) => b.writeUInt32LE(30, 10)),
      '7 bits per pixel': edit((b) => b.writeUInt16LE(7, 28)),
      'RLE8 at 24 bits': edit((b) => b.writeUInt32LE(1, 30)),
      'bit fields at 24 bits': edit((b) => b.writeUInt32LE(3, 30)),
      'unknown compression': edit((b) => b.writeUInt32LE(99, 30)),
      'palette missing': makeBmp({ width: 4, height: 4, bpp: 8, pixelData: Buffer.alloc(16) }),
      'masks truncated': makeBmp({ width: 1, height: 1, bpp: 32, compression: 3, masks: [0xff0000], pixelData: Buffer.alloc(0) }),
      'non-contiguous mask': makeBmp({ width: 1, height: 1, bpp: 32, compression: 3, masks: [0xf0f000, 0xff00, 0xff], pixelData: Buffer.alloc(4) }),
      'mask wider than the pixel': makeBmp({
        width: 1,
        height: 1,
        bpp: 16,
        compression: 3,
        masks: [0x1f0000, 0x7e0, 0x1f],
        pixelData: Buffer.alloc(4),
      }),
      'all masks zero': makeBmp({ width: 1, height: 1, bpp: 32, compression: 3, masks: [0, 0, 0], pixelData: Buffer.alloc(4) }),
    };
    for (const [name, file] of Object.entries(cases)) {
      const err = await rejectsWith(decodeRaw(file, 'bmp', MAX_PIXELS), ['INVALID_IMAGE']);
      assert.ok(err.message.length > 0, name);
    }
  });

  it('random corruption never escapes as anything but a TaskError', async () => {
    const bases = [
      rgb24(W, H),
      makeBmp({ width: W, height: H, bpp: 8, palette: makePalette(256), pixelData: packRows(W, H, 8, false, indexPattern(256)) }),
      makeBmp({ width: W, height: H, bpp: 4, headerSize: 12, palette, pixelData: packRows(W, H, 4, false, indexPattern(16)) }),
      makeBmp({ width: W, height: H, bpp: 8, compression: 1, palette: makePalette(64), pixelData: rleEncode(W, H, indexPattern(64), false) }),
      makeBmp({ width: W, height: H, bpp: 4, compression: 2, palette, pixelData: rleEncode(W, H, indexPattern(16), true) }),
      makeBmp({
        width: W,
        height: H,
        bpp: 32,
        headerSize: 124,
        compression: 3,
        masks: [0xff0000, 0xff00, 0xff, 0xff000000],
        pixelData: packRows(W, H, 32, true, (x, y) => x * 0x01020304 + y),
      }),
      makeBmp({
        width: W,
        height: H,
        bpp: 16,
        compression: 3,
        masks: [0xf800, 0x07e0, 0x001f],
        pixelData: packRows(W, H, 16, false, (x, y) => x * 1800 + y),
      }),
    ];
    let seed = 12345;
    const random = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return Math.floor((seed / 2 ** 32) * n);
    };
    const outcomes = { decoded: 0, rejected: 0 };
    for (let round = 0; round < 3000; round++) {
      const base = bases[round % bases.length]!;
      let file = Buffer.from(base);
      const edits = 1 + random(4);
      for (let e = 0; e < edits; e++) {
        // Mostly the headers, where a lie does the most damage.
        const at = random(3) === 0 ? random(file.length) : random(Math.min(file.length, 80));
        file[at] = random(2) === 0 ? random(256) : [0, 0xff, 0x7f, 0x80][random(4)]!;
      }
      if (random(4) === 0) file = file.subarray(0, random(file.length));
      try {
        const image = await decodeRaw(file, 'bmp', 1_000_000);
        assert.equal(image.data.length, image.width * image.height * image.channels);
        outcomes.decoded++;
      } catch (err) {
        assert.ok(err instanceof TaskError, `round ${round}: ${String(err)}`);
        assert.ok(['INVALID_IMAGE', 'IMAGE_TOO_LARGE', 'UNSUPPORTED_FORMAT'].includes(err.code), err.code);
        outcomes.rejected++;
      }
    }
    assert.ok(outcomes.decoded > 100 && outcomes.rejected > 100, JSON.stringify(outcomes));
  });
});

// ---------------------------------------------------------------------------------------------
// HEIC

interface BoxRef {
  type: string;
  start: number;
  size: number;
}

/** Child boxes of the box body [from, to) (32-bit sizes only: enough for these small files). */
function boxes(file: Buffer, from: number, to: number): BoxRef[] {
  const found: BoxRef[] = [];
  for (let at = from; at + 8 <= to;) {
    const size = file.readUInt32BE(at);
    found.push({ type: file.toString('latin1', at + 4, at + 8), start: at, size });
    if (size < 8) break;
    at += size;
  }
  return found;
}
const child = (list: BoxRef[], type: string): BoxRef => {
  const box = list.find((b) => b.type === type);
  assert.ok(box, `no ${type} box`);
  return box;
};

function metaBoxes(file: Buffer): { meta: BoxRef; children: BoxRef[] } {
  const meta = child(boxes(file, 0, file.length), 'meta');
  return { meta, children: boxes(file, meta.start + 12, meta.start + meta.size) }; // meta is a full box
}

/** Point 'pitm' (the primary item) at another item. */
function withPrimaryItem(file: Buffer, itemId: number): Buffer {
  const copy = Buffer.from(file);
  const pitm = child(metaBoxes(copy).children, 'pitm');
  assert.equal(copy[pitm.start + 8], 0, 'pitm version 0');
  copy.writeUInt16BE(itemId, pitm.start + 12);
  return copy;
}

/**
 * Give item `itemId` one more property (a 9-byte box such as irot): append it to 'ipco', list
 * it in the item's 'ipma' entry, fix the enclosing box sizes, and shift 'iloc' file offsets
 * past the insertion. Handles the layouts of the libheif test files (ipma v0 with 1-byte
 * indices, iloc v0/v1 with offsets into the file).
 */
function withExtraProperty(file: Buffer, itemId: number, property: Buffer): Buffer {
  const copy = Buffer.from(file);
  const { meta, children } = metaBoxes(copy);
  const iprp = child(children, 'iprp');
  const inIprp = boxes(copy, iprp.start + 8, iprp.start + iprp.size);
  const ipco = child(inIprp, 'ipco');
  const ipma = child(inIprp, 'ipma');
  const iloc = child(children, 'iloc');
  const propertyIndex = boxes(copy, ipco.start + 8, ipco.start + ipco.size).length + 1;
  assert.equal(copy.readUInt32BE(ipma.start + 8), 0, 'ipma version 0, 1-byte indices');
  assert.ok(propertyIndex < 128);

  // The item's ipma entry: where its association list ends.
  let at = ipma.start + 16;
  let entryEnd = -1;
  for (let n = copy.readUInt32BE(ipma.start + 12); n > 0; n--) {
    const id = copy.readUInt16BE(at);
    const count = copy[at + 2]!;
    if (id === itemId) {
      copy[at + 2] = count + 1;
      entryEnd = at + 3 + count;
    }
    at += 3 + count;
  }
  assert.ok(entryEnd > 0, `item ${itemId} has no ipma entry`);

  const grow = property.length + 1;
  const mdatAfterMeta = meta.start < child(boxes(copy, 0, copy.length), 'mdat').start;
  if (mdatAfterMeta) shiftIlocOffsets(copy, iloc, grow);
  for (const [box, by] of [
    [meta, grow],
    [iprp, grow],
    [ipco, property.length],
    [ipma, 1],
  ] as const) {
    copy.writeUInt32BE(box.size + by, box.start);
  }
  const ipcoEnd = ipco.start + ipco.size;
  assert.ok(ipcoEnd <= entryEnd);
  return Buffer.concat([
    copy.subarray(0, ipcoEnd),
    property,
    copy.subarray(ipcoEnd, entryEnd),
    Buffer.from([propertyIndex]),
    copy.subarray(entryEnd),
  ]);
}

function shiftIlocOffsets(file: Buffer, iloc: BoxRef, by: number): void {
  const version = file[iloc.start + 8]!;
  assert.ok(version <= 1, 'iloc v0/v1');
  let at = iloc.start + 12;
  const offsetSize = file[at]! >> 4;
  const lengthSize = file[at]! & 15;
  const baseSize = file[at + 1]! >> 4;
  const indexSize = version === 1 ? file[at + 1]! & 15 : 0;
  at += 2;
  const read = (pos: number, n: number) => (n === 0 ? 0 : n === 4 ? file.readUInt32BE(pos) : Number(file.readBigUInt64BE(pos)));
  const write = (pos: number, n: number, v: number) => (n === 4 ? file.writeUInt32BE(v, pos) : file.writeBigUInt64BE(BigInt(v), pos));
  let items = file.readUInt16BE(at);
  at += 2;
  for (; items > 0; items--) {
    at += 2; // item id
    let method = 0;
    if (version === 1) {
      method = file[at + 1]! & 15;
      at += 2;
    }
    at += 2; // data reference index
    const fileOffsets = method === 0;
    if (baseSize > 0 && fileOffsets) write(at, baseSize, read(at, baseSize) + by);
    at += baseSize;
    let extents = file.readUInt16BE(at);
    at += 2;
    for (; extents > 0; extents--) {
      at += indexSize;
      if (baseSize === 0 && fileOffsets) write(at, offsetSize, read(at, offsetSize) + by);
      at += offsetSize + lengthSize;
    }
  }
}

function meanAbsDiff(a: Uint8Array, b: Uint8Array): number {
  assert.equal(a.length, b.length);
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs(a[i]! - b[i]!);
  return sum / a.length;
}

/** irot: rotation anticlockwise by `quarterTurns` × 90°. */
const irot = (quarterTurns: number): Buffer => Buffer.from([0, 0, 0, 9, ...Buffer.from('irot', 'latin1'), quarterTurns & 3]);

describe('HEIC', () => {
  it('decodes the corpus at the sizes libheif reports for the primary image', async () => {
    const expected = [
      // example.heic holds two top-level 1280×854 images (items 20004, the primary, and 20006), each
      // with a 320×212 thumbnail, and no irot/imir. The corpus manifest's "1280x1708" is both
      // heights added up; heif-info (libheif 1.15) and sharp's metadata agree on 1280×854.
      { file: 'example.heic', width: 1280, height: 854, channels: 3 },
      { file: 'rainbow-451x461.heic', width: 451, height: 461, channels: 3 }, // ispe 452×462, clap-cropped
      { file: 'with-alpha-512x512.heic', width: 512, height: 512, channels: 4 },
    ];
    for (const { file, width, height, channels } of expected) {
      const input = await corpus(`libheif/${file}`);
      const header = await readHeader(input, 'heic');
      assert.deepEqual(header, { width, height, hasAlpha: channels === 4, frames: 1 }, file);
      const image = await decodeRaw(input, 'heic', MAX_PIXELS);
      assert.deepEqual([image.width, image.height, image.channels], [width, height, channels], file);
      assert.equal(image.data.length, width * height * channels);
    }
  });

  it('keeps real alpha', async () => {
    const image = await decodeRaw(await corpus('libheif/with-alpha-512x512.heic'), 'heic', MAX_PIXELS);
    let transparent = 0;
    let opaque = 0;
    for (let i = 3; i < image.data.length; i += 4) {
      if (image.data[i] === 0) transparent++;
      if (image.data[i] === 255) opaque++;
    }
    assert.ok(transparent > 10_000 && opaque > 10_000, `transparent ${transparent}, opaque ${opaque}`);
    // And the pixels sharp gets from it are usable as they are.
    const png = await sharp(image.data, { raw: { width: 512, height: 512, channels: 4 } })
      .png()
      .toBuffer();
    assert.equal((await sharp(png).metadata()).hasAlpha, true);
  });

  it('decodes the primary item, not the first one', async () => {
    const input = await corpus('libheif/example.heic');
    const first = await decodeRaw(input, 'heic', MAX_PIXELS);
    const second = await decodeRaw(withPrimaryItem(input, 20006), 'heic', MAX_PIXELS);
    assert.deepEqual([second.width, second.height, second.channels], [1280, 854, 3]);
    assert.ok(!first.data.equals(second.data), 'pitm 20006 selects the other picture');
  });

  it('applies irot: the header size is already the displayed one', async () => {
    const input = await corpus('libheif/rainbow-451x461.heic');
    const upright = await decodeRaw(input, 'heic', MAX_PIXELS);
    for (const [quarterTurns, sharpAngle] of [
      [1, 270],
      [2, 180],
      [3, 90],
    ] as const) {
      const rotated = withExtraProperty(input, 1, irot(quarterTurns));
      const swap = quarterTurns % 2 === 1;
      const [width, height] = swap ? [461, 451] : [451, 461];
      assert.deepEqual(await readHeader(rotated, 'heic'), { width, height, hasAlpha: false, frames: 1 });
      const image = await decodeRaw(rotated, 'heic', MAX_PIXELS);
      assert.deepEqual([image.width, image.height], [width, height]);
      // irot turns anticlockwise, sharp's rotate clockwise. Not bit-exact: libheif crops (clap)
      // and turns before converting 4:2:0 chroma to RGB, which shifts chroma at the cut edge.
      const turned = (angle: number) =>
        sharp(upright.data, { raw: { width: 451, height: 461, channels: 3 } })
          .rotate(angle)
          .raw()
          .toBuffer();
      const expected = meanAbsDiff(image.data, await turned(sharpAngle));
      assert.ok(expected < 1, `irot ${quarterTurns}: the upright pixels turned (mean difference ${expected})`);
      if (swap) assert.ok(meanAbsDiff(image.data, await turned(360 - sharpAngle)) > 20, 'and not the other way');
    }
  });

  it('reads a Buffer that is a view into a larger ArrayBuffer', async () => {
    const input = await corpus('libheif/rainbow-451x461.heic');
    const view = Buffer.concat([Buffer.alloc(1000, 7), input]).subarray(1000);
    assert.ok(view.byteOffset > 0);
    assert.ok((await decodeRaw(view, 'heic', MAX_PIXELS)).data.equals((await decodeRaw(input, 'heic', MAX_PIXELS)).data));
    const bmp = makeBmp({ width: 3, height: 2, bpp: 24, pixelData: packRows(3, 2, 24, false, (x, y) => [x, y, 9]) });
    const bmpView = Buffer.concat([Buffer.alloc(33), bmp]).subarray(33);
    assert.ok((await decodeRaw(bmpView, 'bmp', MAX_PIXELS)).data.equals((await decodeRaw(bmp, 'bmp', MAX_PIXELS)).data));
  });

  it('checks the pixel limit before decoding', async () => {
    const input = await corpus('libheif/example.heic');
    await readHeader(input, 'heic'); // the WebAssembly module is loaded
    let started = performance.now();
    await rejectsWith(decodeRaw(input, 'heic', 1280 * 854 - 1), ['IMAGE_TOO_LARGE']);
    const refused = performance.now() - started;
    started = performance.now();
    await decodeRaw(input, 'heic', 1280 * 854);
    const decoded = performance.now() - started;
    assert.ok(refused < decoded / 3, `refused in ${refused} ms, a decode takes ${decoded} ms: no HEVC decode happened`);
  });

  it('a 16-byte garbage file is INVALID_IMAGE, and the next good file still decodes', async () => {
    const good = await corpus('libheif/rainbow-451x461.heic');
    const before = await decodeRaw(good, 'heic', MAX_PIXELS);
    const garbage = await corpus('libheif/github_15.heic');
    assert.equal(garbage.length, 16);
    await rejectsWith(readHeader(garbage, 'heic'), ['INVALID_IMAGE']);
    await rejectsWith(decodeRaw(garbage, 'heic', MAX_PIXELS), ['INVALID_IMAGE']);
    const after = await decodeRaw(good, 'heic', MAX_PIXELS);
    assert.ok(after.data.equals(before.data));
  });

  it('other broken inputs fail cleanly and leave the decoder working', async () => {
    const example = await corpus('libheif/example.heic');
    const good = await corpus('libheif/with-alpha-512x512.heic');
    const baseline = sha256((await decodeRaw(good, 'heic', MAX_PIXELS)).data);
    const broken = [
      Buffer.alloc(0),
      example.subarray(0, 2000), // header intact, image data missing
      example.subarray(0, 600), // cut inside the meta box
      Buffer.concat([example.subarray(0, 32), Buffer.alloc(4000, 0xff)]),
      await corpus('sharp/with-alpha.png'), // not HEIF at all
    ];
    for (const input of broken) {
      await rejectsWith(decodeRaw(input, 'heic', MAX_PIXELS), ['INVALID_IMAGE']);
      assert.equal(sha256((await decodeRaw(good, 'heic', MAX_PIXELS)).data), baseline);
    }
    // AV1 in a HEIF container: valid, but this libheif build has no AV1 decoder.
    await rejectsWith(decodeRaw(await corpus('libheif/example.avif'), 'heic', MAX_PIXELS), ['UNSUPPORTED_FORMAT']);

    // Random damage to a small file: any outcome but a crash, a hang or a foreign exception.
    const rainbow = await corpus('libheif/rainbow-451x461.heic');
    let seed = 777;
    const random = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return Math.floor((seed / 2 ** 32) * n);
    };
    for (let round = 0; round < 150; round++) {
      const damaged = Buffer.from(rainbow);
      for (let e = 1 + random(6); e > 0; e--) damaged[random(damaged.length)] = random(256);
      try {
        const image = await decodeRaw(damaged, 'heic', MAX_PIXELS);
        assert.equal(image.data.length, image.width * image.height * image.channels);
      } catch (err) {
        assert.ok(err instanceof TaskError, String(err));
      }
    }
    assert.equal(sha256((await decodeRaw(good, 'heic', MAX_PIXELS)).data), baseline);
  });
});

/** `work`'s value, and how many times the event loop turned while it ran. */
async function turnsDuring<T>(work: Promise<T>): Promise<{ value: T; turns: number }> {
  let turns = 0;
  let turning = true;
  const turn = () => {
    turns++;
    if (turning) setImmediate(turn);
  };
  setImmediate(turn);
  try {
    return { value: await work, turns };
  } finally {
    turning = false;
  }
}

describe('the decoding thread: raw decoders and the SVG rewrite off the event loop', () => {
  const file = (relative: string) => path.join(corpusDir, relative);

  it('a HEIC decodes off the event loop, to the same pixels as on it', async () => {
    const onLoop = await rawToSharp(await decodeRaw(await corpus('libheif/example.heic'), 'heic', MAX_PIXELS))
      .raw()
      .toBuffer({ resolveWithObject: true });
    const { value: decoded, turns } = await turnsDuring(decodeForSharp(file('libheif/example.heic'), 'heic', MAX_PIXELS));
    // On the event loop the decode (about 0.1 s of WebAssembly) would run between two turns.
    assert.ok(turns >= 10, `the event loop turned ${turns} times while the HEIC decoded`);
    const offLoop = await openSharpInput(decoded).raw().toBuffer({ resolveWithObject: true });
    assert.deepEqual(offLoop.info, onLoop.info);
    assert.equal(sha256(offLoop.data), sha256(onLoop.data));
  });

  it('an SVG is rewritten off the event loop, to the same bytes as on it; a malformed one is INVALID_IMAGE', async () => {
    const rects = Array.from(
      { length: 20_000 },
      (_, i) => `<rect x="${i % 500}" y="${(i * 7) % 500}" width="3" height="3" fill="#${(i % 4096).toString(16).padStart(3, '0')}"/>`,
    );
    const svg = Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="500" height="500">${rects.join('')}</svg>`);
    const onLoop = await safeSvg(svg, MAX_PIXELS);
    const { value: offLoop, turns } = await turnsDuring(safeSvgOffThread({ bytes: svg }, MAX_PIXELS));
    // On the event loop the parse (about 0.1 s) would run between two turns.
    assert.ok(turns >= 10, `the event loop turned ${turns} times while the SVG was rewritten`);
    assert.ok(offLoop.equals(onLoop));
    await rejectsWith(safeSvgOffThread({ bytes: Buffer.from('<svg><rect></svg>') }, MAX_PIXELS), ['INVALID_IMAGE']);
  });

  it("the decoders' errors come back with their codes", async () => {
    await rejectsWith(decodeForSharp(file('libheif/example.heic'), 'heic', 1000), ['IMAGE_TOO_LARGE']);
    const truncated = path.join(await mkdtemp(path.join(tmpdir(), 'decode-')), 'cut.jp2');
    await writeFile(truncated, (await corpus('sharp/relax.jp2')).subarray(0, 2000));
    await rejectsWith(decodeForSharp(truncated, 'jp2', MAX_PIXELS), ['INVALID_IMAGE']);
    // A decode after a failure still works: the thread is the same or a new one.
    const meta = await openSharpInput(await decodeForSharp(file('sharp/relax.jp2'), 'jp2', MAX_PIXELS)).metadata();
    assert.deepEqual([meta.width, meta.height], [320, 240]);
  });
});
