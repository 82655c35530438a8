// What a raw decoder (decoders/raw.ts) hands sharp, and the helpers its decoders share.
//
// Conventions every raw decoder keeps:
//   - `RawImage.channels` is 4 only when some pixel is not fully opaque. An alpha channel that
//     turns out to be opaque everywhere is dropped, so JPEG outputs need no flattening and the
//     buffer is a quarter smaller.
//   - `HeaderInfo.hasAlpha` comes from the header alone, so it means "may have alpha": whenever
//     decode returns 4 channels, readHeader said hasAlpha (the converse need not hold).
//   - Every failure is a TaskError: INVALID_IMAGE (corrupt or truncated), IMAGE_TOO_LARGE (over
//     the caller's pixel limit; checked from the header before any pixel memory is allocated) or
//     UNSUPPORTED_FORMAT (a valid file in a variant we do not decode).
//   - Only the primary image is decoded, so `frames` is always 1.

/** Pixels for `sharp(data, { raw: { width, height, channels, depth } })`. */
export interface RawImage {
  data: Buffer;
  width: number;
  height: number;
  /** 1 or 2 (grey, with alpha) for greyscale sources that have no colour (lossless JPEG, JPEG 2000). */
  channels: 1 | 2 | 3 | 4;
  /** 16-bit samples (native byte order) where the source has more than 8 bits; 8-bit by default. */
  depth?: 'ushort';
  /** The source's ICC profile, to be converted from (or kept) as a JPEG's is. */
  icc?: Buffer;
  /** The source's EXIF (a TIFF structure), its orientation already applied to the pixels (set to 1). */
  exif?: Buffer;
}

export interface HeaderInfo {
  width: number;
  height: number;
  hasAlpha: boolean;
  frames: number;
}

export interface RawDecoder {
  /** Dimensions from the header only (displayed orientation applied), without decoding pixels. */
  readHeader(input: Buffer): Promise<HeaderInfo>;
  /** The primary image; width × height is checked against maxPixels before pixel memory is allocated. */
  decode(input: Buffer, maxPixels: number): Promise<RawImage>;
}

/** Drop an opaque alpha channel in place: RGBA → RGB over the first 3/4 of the same memory. */
export function stripAlpha(rgba: Buffer, pixels: number): Buffer {
  for (let i = 0, j = 0; i < pixels * 4; i += 4, j += 3) {
    rgba[j] = rgba[i]!;
    rgba[j + 1] = rgba[i + 1]!;
    rgba[j + 2] = rgba[i + 2]!;
  }
  return rgba.subarray(0, pixels * 3);
}

export function isOpaque(rgba: Buffer): boolean {
  for (let i = 3; i < rgba.length; i += 4) if (rgba[i] !== 255) return false;
  return true;
}
