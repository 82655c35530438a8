// What compress knows about a PNG's bytes without encoding it: the fewest bytes any PNG of a
// given size and bit depth can take (deflate cannot do better than 1032:1), and the chunks
// libvips writes that a smaller file can do without.
import { CHUNK_OVERHEAD, pngChunk } from '../bytes/png-chunk.js';

const SIGNATURE = 8;
/** Signature, IHDR (13 bytes of data), one IDAT holding a zlib stream (2-byte header, 4-byte Adler-32) and IEND. */
const PNG_OVERHEAD = SIGNATURE + (CHUNK_OVERHEAD + 13) + (CHUNK_OVERHEAD + 6) + CHUNK_OVERHEAD;
/**
 * Deflate's best ratio: a length-258 match at distance 1 coded in 1 + 1 bits, 258 bytes in 2 bits
 * (zlib's documentation: "the maximum compression ratio of deflate is 1032:1").
 */
const DEFLATE_MAX_RATIO = 1032;

/**
 * The fewest bytes a PNG of `width`×`height` at `bitsPerPixel` can take, whatever the pixels and
 * the encoder: its scanlines (a filter byte and the packed pixels per row) deflated at the best
 * ratio deflate has, plus the chunks every PNG carries. No encoder writes less.
 */
export function smallestPngBytes(width: number, height: number, bitsPerPixel: number): number {
  const scanlines = height * (1 + Math.ceil((width * bitsPerPixel) / 8));
  return PNG_OVERHEAD + Math.ceil(scanlines / DEFLATE_MAX_RATIO);
}

/**
 * The PNG written smaller, pixels untouched: without the pHYs chunk that libvips writes when the
 * source declared no resolution (72 dpi, 2835 pixels a metre; a declared one is kept), and with
 * its image data in one IDAT chunk rather than libvips' chunks of 8 KB. Anything it does not
 * recognise as a PNG comes back as it was.
 */
export function tidyPng(png: Buffer): Buffer {
  const chunks: { type: string; bytes: Buffer }[] = [];
  let offset = SIGNATURE;
  while (offset + CHUNK_OVERHEAD <= png.length) {
    const end = offset + CHUNK_OVERHEAD + png.readUInt32BE(offset);
    if (end > png.length) return png;
    chunks.push({ type: png.toString('latin1', offset + 4, offset + 8), bytes: png.subarray(offset, end) });
    offset = end;
  }
  const first = chunks.findIndex((c) => c.type === 'IDAT');
  let last = first;
  while (chunks[last + 1]?.type === 'IDAT') last++;
  // Not a whole PNG as libvips writes one (IEND last, the IDATs one after the other): as it was.
  if (offset !== png.length || chunks.at(-1)?.type !== 'IEND' || first === -1 || chunks.slice(last + 1).some((c) => c.type === 'IDAT')) {
    return png;
  }
  const idat = pngChunk('IDAT', Buffer.concat(chunks.slice(first, last + 1).map((c) => c.bytes.subarray(8, -4))));
  const kept = [...chunks.slice(0, first), { type: 'IDAT', bytes: idat }, ...chunks.slice(last + 1)].filter(
    (c) => !(c.type === 'pHYs' && isDefaultResolution(c.bytes.subarray(8, -4))),
  );
  return Buffer.concat([png.subarray(0, SIGNATURE), ...kept.map((c) => c.bytes)]);
}

/** 2835 × 2835 pixels a metre (72 dpi): libvips' resolution when the source declared none. */
const isDefaultResolution = (data: Buffer): boolean =>
  data.length === 9 && data.readUInt32BE(0) === 2835 && data.readUInt32BE(4) === 2835 && data[8] === 1;
