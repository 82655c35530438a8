// What GET /api/files/{fileId}/info says of an image. The header is read without decoding the
// pixels; everything about the pixels (palette, dominant colour, BlurHash, ThumbHash, perceptual
// hash) is computed from the small upright sRGB copy the previews make (preview.ts: decoded on
// libvips' threads with shrink-on-load, within the plan's limits). What is left in JavaScript
// works on at most 100 × 100 pixels, so the event loop never holds a big image.
import fs from 'node:fs';
import exifr from 'exifr';
import { encode as blurhashOf } from 'blurhash';
import sharp from 'sharp';
import { rgbaToThumbHash } from 'thumbhash';
import { hasExifInIfds } from './formats.js';
import type { SourceInfo } from './source.js';

export interface ImageInfo {
  format: string;
  width: number;
  height: number;
  pages: number;
  hasAlpha: boolean;
  colorSpace: string;
  orientation: number;
  exif: Record<string, unknown> | null;
  gps: { latitude: number; longitude: number } | null;
  palette: string[];
  dominant: string;
  blurhash: string;
  thumbhash: string;
  phash: string;
  /** The faces found, once `?faces=1` has asked for them (kept with the rest from then on). */
  faces?: { left: number; top: number; width: number; height: number; score: number }[];
}

/** Colours in the palette, at most. */
const PALETTE_SIZE = 8;
/** Sides of the copies the hashes read: BlurHash's and the palette's (small is enough), ThumbHash's (at most 100), pHash's. */
const BLURHASH_SIDE = 32;
const PALETTE_SIDE = 64;
const THUMBHASH_SIDE = 100;
const PHASH_SIDE = 32;
/** BlurHash components across and down: 4 × 3 is the library's own suggestion for a landscape. */
const BLURHASH_COMPONENTS = [4, 3] as const;

/**
 * The info of an image: `header` as source.ts read it (upright size, frames, alpha), `path` its
 * bytes (for the EXIF and the header's colour space), `thumbnail` a small upright copy of its
 * first frame (any format sharp reads).
 */
export async function imageInfo(path: string, header: SourceInfo, thumbnail: Buffer): Promise<ImageInfo> {
  const [meta, pixels] = await Promise.all([
    sharp(path, { limitInputPixels: false, ...(header.page === undefined ? {} : { page: header.page }) })
      .metadata()
      .catch(() => undefined),
    pixelInfo(thumbnail),
  ]);
  const exif = await readExif(await exifBytes(path, header.format, meta?.exif));
  return {
    format: header.format,
    width: header.width,
    height: header.height,
    pages: header.frames,
    hasAlpha: header.hasAlpha,
    colorSpace: meta?.space ?? 'srgb',
    orientation: meta?.orientation ?? 1,
    exif: exif.tags,
    gps: exif.gps,
    ...pixels,
  };
}

/** The small copy as 8-bit RGBA in a box of `side`, aspect kept (or squeezed to a square). */
async function rgba(thumbnail: Buffer, side: number, fit: 'inside' | 'fill' = 'inside') {
  const { data, info } = await sharp(thumbnail)
    .resize(side, side, { fit, withoutEnlargement: fit === 'inside' })
    .toColourspace('srgb')
    .ensureAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

async function pixelInfo(thumbnail: Buffer): Promise<Pick<ImageInfo, 'palette' | 'dominant' | 'blurhash' | 'thumbhash' | 'phash'>> {
  const [forBlurhash, forPalette, forThumbhash, grey] = await Promise.all([
    rgba(thumbnail, BLURHASH_SIDE),
    rgba(thumbnail, PALETTE_SIDE),
    rgba(thumbnail, THUMBHASH_SIDE),
    sharp(thumbnail).resize(PHASH_SIDE, PHASH_SIDE, { fit: 'fill' }).flatten({ background: '#ffffff' }).greyscale().raw().toBuffer(),
  ]);
  const palette = paletteOf(forPalette.data);
  return {
    palette,
    dominant: palette[0] ?? '#000000',
    blurhash: blurhashOf(new Uint8ClampedArray(forBlurhash.data), forBlurhash.width, forBlurhash.height, ...BLURHASH_COMPONENTS),
    thumbhash: Buffer.from(rgbaToThumbHash(forThumbhash.width, forThumbhash.height, forThumbhash.data)).toString('base64'),
    phash: perceptualHash(grey),
  };
}

const hex = (r: number, g: number, b: number) => `#${[r, g, b].map((c) => Math.round(c).toString(16).padStart(2, '0')).join('')}`;

/**
 * Up to PALETTE_SIZE colours of RGBA pixels, most frequent first: pixels are counted in boxes of
 * 16 levels a channel (transparent ones not at all), each box's colour is the mean of its pixels,
 * and a box too near one already chosen adds its pixels to that one instead of its own entry.
 */
export function paletteOf(data: Uint8Array): string[] {
  const boxes = new Map<number, { n: number; r: number; g: number; b: number }>();
  for (let i = 0; i + 3 < data.length; i += 4) {
    if (data[i + 3]! < 128) continue;
    const [r, g, b] = [data[i]!, data[i + 1]!, data[i + 2]!];
    const key = ((r >> 4) << 8) | ((g >> 4) << 4) | (b >> 4);
    const box = boxes.get(key) ?? { n: 0, r: 0, g: 0, b: 0 };
    box.n++;
    box.r += r;
    box.g += g;
    box.b += b;
    boxes.set(key, box);
  }
  const chosen: { n: number; r: number; g: number; b: number }[] = [];
  for (const box of [...boxes.values()].sort((a, b) => b.n - a.n)) {
    const colour = { n: box.n, r: box.r / box.n, g: box.g / box.n, b: box.b / box.n };
    const near = chosen.find((c) => (c.r - colour.r) ** 2 + (c.g - colour.g) ** 2 + (c.b - colour.b) ** 2 < 40 ** 2);
    if (near) near.n += colour.n;
    else chosen.push(colour);
  }
  return chosen
    .sort((a, b) => b.n - a.n)
    .slice(0, PALETTE_SIZE)
    .map((c) => hex(c.r, c.g, c.b));
}

/** The 1-D DCT-II basis for PHASH_SIDE samples (row k: frequency k). */
const DCT = Array.from({ length: 8 }, (_, k) =>
  Float64Array.from({ length: PHASH_SIDE }, (_, n) => Math.cos(((2 * n + 1) * k * Math.PI) / (2 * PHASH_SIDE))),
);

/**
 * A 64-bit perceptual hash (pHash) of a 32 × 32 grey copy: the lowest 8 × 8 frequencies of its
 * DCT, each bit set where the coefficient is above their median (the DC term left out of the
 * median, as it only says how bright the image is). A resized or recompressed copy differs in a
 * few bits; unrelated images in about half. 16 hex digits.
 */
export function perceptualHash(grey: Uint8Array): string {
  const n = PHASH_SIDE;
  // Rows first (8 frequencies of each row), then columns: an 8 × 8 block of coefficients.
  const rows = Array.from({ length: n }, (_, y) => DCT.map((basis) => basis.reduce((sum, c, x) => sum + c * grey[y * n + x]!, 0)));
  const coefficients: number[] = [];
  for (let v = 0; v < 8; v++) for (let u = 0; u < 8; u++) coefficients.push(DCT[v]!.reduce((sum, c, y) => sum + c * rows[y]![u]!, 0));
  const median = [...coefficients.slice(1)].sort((a, b) => a - b)[31]!;
  let bits = 0n;
  for (const c of coefficients) bits = (bits << 1n) | (c > median ? 1n : 0n);
  return bits.toString(16).padStart(16, '0');
}

/** Bits that differ between two perceptual hashes. */
export function hammingDistance(a: string, b: string): number {
  let x = BigInt(`0x${a}`) ^ BigInt(`0x${b}`);
  let count = 0;
  for (; x; x >>= 1n) count += Number(x & 1n);
  return count;
}

/** EXIF tags worth reading in JSON: named ones, with plain values (no thumbnails, maker notes or binary blobs). */
const EXIF_OPTIONS = {
  tiff: true,
  exif: true,
  gps: true,
  interop: false,
  ifd1: false,
  makerNote: false,
  userComment: false,
  xmp: false,
  icc: false,
  iptc: false,
  jfif: false,
  ihdr: false,
} as const;
const MAX_EXIF_TEXT = 1000;

/**
 * At most this much of a TIFF is read for its EXIF: its IFDs are usually near the start (or right
 * after the first strips); one a writer put after gigabytes of pixels is not looked for.
 */
const TIFF_EXIF_READ_BYTES = 16 * 1024 * 1024;
/** An EXIF block's own header, before the TIFF structure, as JPEG's APP1 (and libvips' exif-data) carries it. */
const EXIF_HEADER = Buffer.from('Exif\0\0', 'latin1');

/**
 * The bytes exifr reads the EXIF from, without reading the file again where libvips has read the
 * block with the header (`exif`: sharp's metadata().exif, from a JPEG's APP1 segment, a PNG's eXIf
 * chunk, a WebP's EXIF chunk, a HEIF's or JPEG XL's Exif item): that block, a few KiB, whatever the
 * file's size. A TIFF's EXIF is its own IFDs: its first TIFF_EXIF_READ_BYTES. Else none.
 */
export async function exifBytes(path: string, format: string, exif: Buffer | undefined): Promise<Buffer | undefined> {
  if (exif?.length) return exif.subarray(0, EXIF_HEADER.length).equals(EXIF_HEADER) ? exif.subarray(EXIF_HEADER.length) : exif;
  if (!hasExifInIfds(format)) return undefined;
  // Read here and handed over as bytes: exifr's own file reader can leave its file handle open
  // for the garbage collector, which Node reports as an error.
  const handle = await fs.promises.open(path, 'r');
  try {
    const { size } = await handle.stat();
    const head = Buffer.alloc(Math.min(size, TIFF_EXIF_READ_BYTES));
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    return head.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

async function readExif(bytes: Buffer | undefined): Promise<{ tags: Record<string, unknown> | null; gps: ImageInfo['gps'] }> {
  if (!bytes) return { tags: null, gps: null };
  const parsed = (await exifr.parse(bytes, EXIF_OPTIONS).catch(() => undefined)) as Record<string, unknown> | undefined;
  if (!parsed) return { tags: null, gps: null };
  const tags: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(parsed)) {
    if (/^\d+$/.test(name)) continue; // a tag exifr has no name for
    const plain = plainValue(value);
    if (plain !== undefined) tags[name] = plain;
  }
  const { latitude, longitude } = parsed;
  const gps =
    typeof latitude === 'number' && typeof longitude === 'number' && Number.isFinite(latitude) && Number.isFinite(longitude)
      ? { latitude, longitude }
      : null;
  return { tags: Object.keys(tags).length ? tags : null, gps };
}

function plainValue(value: unknown): unknown {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'string') return value.replace(/\0+$/, '').slice(0, MAX_EXIF_TEXT);
  if (typeof value === 'boolean') return value;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? undefined : value.toISOString();
  if (Array.isArray(value) && value.length <= 16 && value.every((v) => typeof v === 'number' && Number.isFinite(v))) return value;
  return undefined;
}
