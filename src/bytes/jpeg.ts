// A JPEG's header from its first bytes, walked as libjpeg walks it: from SOI, segment by
// segment, to the first frame header (SOFn), noting the EXIF blocks (APP1 "Exif") met on the way.
// Truncated or malformed input gives undefined, never an exception: callers fall back to a
// decoder's own reading.

export interface JpegFrame {
  /** The SOFn marker: 0xc0 baseline, 0xc1 extended, 0xc2 progressive, 0xc3 lossless… */
  marker: number;
  precision: number;
  width: number;
  height: number;
  components: number;
}

export interface JpegHead {
  frame: JpegFrame;
  /** The bodies of the EXIF segments before the frame (after "Exif\0\0"): the TIFF structure. */
  exif: Buffer[];
}

const EXIF_MAGIC = Buffer.from('Exif\0\0', 'latin1');

/** The frame header and the EXIF blocks before it; undefined when the frame is not within `b`. */
export function readJpegHead(b: Buffer): JpegHead | undefined {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return undefined;
  const exif: Buffer[] = [];
  let i = 2;
  while (i + 4 <= b.length) {
    if (b[i] !== 0xff) return undefined;
    while (i < b.length && b[i] === 0xff) i++;
    const marker = b[i++]!;
    // Markers without a length: RSTn, SOI, TEM.
    if ((marker >= 0xd0 && marker <= 0xd8) || marker === 0x01) continue;
    // End of image, start of scan, or a stuffed FF 00 before any frame header: none here.
    if (marker === 0xd9 || marker === 0xda || marker === 0x00 || i + 2 > b.length) return undefined;
    const length = b.readUInt16BE(i);
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      if (i + 8 > b.length) return undefined;
      return { frame: { marker, precision: b[i + 2]!, height: b.readUInt16BE(i + 3), width: b.readUInt16BE(i + 5), components: b[i + 7]! }, exif };
    }
    if (length < 2) return undefined;
    if (marker === 0xe1) {
      const body = b.subarray(i + 2, i + length);
      if (body.length !== length - 2) return undefined;
      if (body.subarray(0, EXIF_MAGIC.length).equals(EXIF_MAGIC)) exif.push(body.subarray(EXIF_MAGIC.length));
    }
    i += length;
  }
  return undefined;
}

const ORIENTATION_TAG = 0x0112;
const SHORT = 3;

/**
 * The Orientation tag (1–8) of an EXIF block's first IFD; 1 when it has none; undefined when the
 * block is malformed or the value is out of range, for whoever asks to read it another way.
 */
export function exifOrientation(tiff: Buffer): number | undefined {
  if (tiff.length < 8) return undefined;
  const order = tiff.toString('latin1', 0, 2);
  if (order !== 'II' && order !== 'MM') return undefined;
  const little = order === 'II';
  const u16 = (at: number) => (little ? tiff.readUInt16LE(at) : tiff.readUInt16BE(at));
  const u32 = (at: number) => (little ? tiff.readUInt32LE(at) : tiff.readUInt32BE(at));
  if (u16(2) !== 42) return undefined;
  const ifd = u32(4);
  if (ifd < 8 || ifd + 2 > tiff.length) return undefined;
  const entries = u16(ifd);
  if (ifd + 2 + entries * 12 > tiff.length) return undefined;
  for (let n = 0; n < entries; n++) {
    const at = ifd + 2 + n * 12;
    if (u16(at) !== ORIENTATION_TAG) continue;
    if (u16(at + 2) !== SHORT || u32(at + 4) !== 1) return undefined;
    const value = u16(at + 8);
    return value >= 1 && value <= 8 ? value : undefined;
  }
  return 1;
}
