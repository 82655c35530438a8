// The images sharp's prebuilt libvips cannot decode (formats.ts: `libvips` is not 'decode'), each
// decoded by this service into raw pixels. One decoder per format; the Record makes a new
// raw-decoded row in the format table ask for its decoder.
import { TaskError } from '../../errors.js';
import { isRawDecoded, type RawDecodedFormat } from '../formats.js';
import { bmp } from './bmp.js';
import { heic } from './heic.js';
import { isLosslessJpeg, jpegLossless } from './jpeg-lossless.js';
import { jpeg2000 } from './jpeg2000.js';
import { jxl } from './jxl.js';
import type { HeaderInfo, RawDecoder, RawImage } from './pixels.js';

/**
 * What this service decodes itself: a format libvips cannot read, or a variant of one it reads
 * (lossless JPEG: a file of format `jpeg` whose frame libjpeg-turbo refuses; source.ts tells it).
 */
export type RawDecoderName = RawDecodedFormat | 'jpeg-lossless';

const DECODERS: Record<RawDecoderName, RawDecoder> = { heic, bmp, jp2: jpeg2000, jxl, 'jpeg-lossless': jpegLossless };

/** Variants of a format libvips reads that its loader refuses, told apart by the file's head: decoded here. */
const VARIANTS: readonly { of: string; decoder: RawDecoderName; test(head: Buffer): boolean }[] = [
  { of: 'jpeg', decoder: 'jpeg-lossless', test: isLosslessJpeg },
];

/** Whether a file of `format` may need one of this service's decoders, and so its head must be read to tell. */
export const mayBeRawDecoded = (format: string): boolean => isRawDecoded(format) || VARIANTS.some((variant) => variant.of === format);

/**
 * Which of this service's decoders reads a file of `format` that begins with `head`, if libvips
 * does not: by its format (the table's `libvips`), or by a variant its head shows (lossless JPEG).
 */
export function rawDecoderFor(format: string, head: Buffer): RawDecoderName | undefined {
  if (isRawDecoded(format)) return format;
  return VARIANTS.find((variant) => variant.of === format && variant.test(head))?.decoder;
}

function decoderFor(format: RawDecoderName): RawDecoder {
  const decoder = (DECODERS as Partial<Record<string, RawDecoder>>)[format];
  if (!decoder) throw new TaskError('UNSUPPORTED_FORMAT', `No raw decoder for ${String(format)} input`);
  return decoder;
}

/** Dimensions from the header only (displayed orientation applied), without decoding pixels. Throws TaskError('INVALID_IMAGE', …) for a malformed header. */
export async function readHeader(input: Buffer, format: RawDecoderName): Promise<HeaderInfo> {
  return decoderFor(format).readHeader(input);
}

/** Decodes the primary image. Checks width*height against maxPixels BEFORE allocating pixel memory (TaskError('IMAGE_TOO_LARGE', …)). Throws TaskError('INVALID_IMAGE', …) for corrupt data. */
export async function decodeRaw(input: Buffer, format: RawDecoderName, maxPixels: number): Promise<RawImage> {
  return decoderFor(format).decode(input, maxPixels);
}
