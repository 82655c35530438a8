// AVIF through libvips: which top-level item is the image, and an image sequence's still image.
//
// libvips numbers a HEIF file's top-level items as pages and reads page 0 unless told otherwise.
// The image is the primary item (pitm), which need not be the first: a grid whose tiles are
// top-level items as well (pitm.avif: four 1024×800 tiles, then the 4096×800 grid) would be read
// as its first tile, and its header would say "5 pages". Asked for the primary item, libheif
// (under libvips) assembles the grid, applies clap, irot and imir, and reads the item's alpha
// auxiliary image and its ICC or nclx colour. The items are not frames: an AVIF is one image.
//
// libvips 8.17 recognises HEIF by the major brand at offset 8, and `avis` (an AV1 image sequence)
// is not among its brands, although such a file carries a primary still image (MIAF requires one)
// that libheif reads. Its bytes are handed to libvips with the major brand `avif` and its tracks
// hidden, for what reads the still image alone (a preview, a logo); the sequence's frames are
// decoded by ffmpeg (avif-sequence.ts, ffmpeg.ts).
import fs from 'node:fs';
import sharp, { type Metadata } from 'sharp';

/** Whether the bytes are an ISO-BMFF file whose major brand is `avis`. */
const isSequenceBrand = (bytes: Buffer): boolean => bytes.length >= 12 && bytes.toString('latin1', 4, 12) === 'ftypavis';

/**
 * The bytes libvips reads an AVIF's still image from: a sequence's brands said as a still's
 * (`avif`, `mif1`) and its movie box (its tracks) said as `free`, else the bytes as they are. libheif 1.20 reads
 * tracks too, and refuses a sequence whose alpha track has the auxiliary handler (`auxv`, as
 * ffmpeg and libavif write it); the still image is an item, which it reads either way.
 */
export function asLibvipsAvif(bytes: Buffer): Buffer {
  if (!isSequenceBrand(bytes)) return bytes;
  const copy = Buffer.from(bytes);
  copy.write('avif', 8, 'latin1');
  // Nor may a compatible brand promise a sequence (libheif then looks for the tracks).
  const ftypEnd = Math.min(copy.readUInt32BE(0), copy.length);
  for (let at = 16; at + 4 <= ftypEnd; at += 4) {
    const brand = copy.toString('latin1', at, at + 4);
    if (brand === 'avis' || brand === 'msf1') copy.write(brand === 'avis' ? 'avif' : 'mif1', at, 'latin1');
  }
  // Top-level boxes, as far as `bytes` goes (an upload's head may end inside the media data).
  for (let at = 0; at + 8 <= copy.length;) {
    const size = copy.readUInt32BE(at);
    if (copy.toString('latin1', at + 4, at + 8) === 'moov') copy.write('free', at + 4, 'latin1');
    // 0: to the end; 1: a 64-bit size, only ever the media data's, after which nothing matters here.
    if (size < 8) break;
    at += size;
  }
  return copy;
}

/** What libvips is handed for an AVIF file: its path, or its bytes when the brand must be said otherwise. */
export async function libvipsAvifInput(inputPath: string): Promise<string | Buffer> {
  const handle = await fs.promises.open(inputPath, 'r');
  try {
    const head = Buffer.alloc(12);
    await handle.read(head, 0, 12, 0);
    return isSequenceBrand(head) ? asLibvipsAvif(await handle.readFile()) : inputPath;
  } finally {
    await handle.close();
  }
}

/** The page libvips must read for a HEIF file's primary item, when it is not the first. */
export const primaryPage = (meta: Metadata): number | undefined =>
  meta.format === 'heif' && (meta.pages ?? 1) > 1 && meta.pagePrimary ? meta.pagePrimary : undefined;

/**
 * The header of the image a HEIF file holds: its primary item's, as one page. Read from the
 * item's properties (ispe, irot, clap), without decoding a pixel: a hostile grid of huge size is
 * refused by the limits before libheif assembles it.
 */
export async function primaryItemMetadata(input: string | Buffer, meta: Metadata): Promise<{ meta: Metadata; page?: number }> {
  const page = primaryPage(meta);
  if (page === undefined) return { meta: meta.format === 'heif' ? { ...meta, pages: 1 } : meta };
  const primary = await sharp(input, { limitInputPixels: false, page }).metadata();
  return { meta: { ...primary, pages: 1 }, page };
}
