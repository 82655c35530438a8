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
// that libheif reads. Its bytes are handed to libvips with the major brand `avif`; the sequence's
// frames themselves are not decoded (the README's table of formats says why).
import fs from 'node:fs';
import sharp, { type Metadata } from 'sharp';

/** Whether the bytes are an ISO-BMFF file whose major brand is `avis`. */
const isSequenceBrand = (bytes: Buffer): boolean => bytes.length >= 12 && bytes.toString('latin1', 4, 12) === 'ftypavis';

/** The bytes libvips reads an AVIF from: a sequence's major brand said as `avif`, else as they are. */
export function asLibvipsAvif(bytes: Buffer): Buffer {
  if (!isSequenceBrand(bytes)) return bytes;
  const copy = Buffer.from(bytes);
  copy.write('avif', 8, 'latin1');
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
