// JPEG 2000: JP2 files (ISO/IEC 15444-1 annex I boxes) and raw codestreams (J2K), decoded with
// OpenJPEG's WebAssembly build (@cornerstonejs/codec-openjpeg, the decoder DICOM viewers use).
// sharp's prebuilt libvips has no OpenJPEG.
//
// The size comes from the codestream's SIZ marker, read here and checked against the limits
// before the decoder is called. Components: 1 grey, 2 grey and alpha, 3 RGB (OpenJPEG undoes the
// codestream's colour transform), 4 RGBA; all of the same precision and not subsampled, else
// UNSUPPORTED_FORMAT. More than 8 bits are kept at 16; signed samples are offset to unsigned.
// A JP2 file's ICC profile (its colr box) is carried as a JPEG's; enumerated sRGB and grey are
// taken as they are; sYCC is UNSUPPORTED_FORMAT.
//
// The decode is synchronous WebAssembly: it blocks the event loop for its duration. As for
// libheif (heic.ts), an instance whose memory grew past a bound is dropped after use.
import { createRequire } from 'node:module';
import { TaskError } from '../../errors.js';
import { checkPixelsToDecode } from '../limits.js';
import type { HeaderInfo, RawDecoder, RawImage } from './pixels.js';

interface FrameInfo {
  width: number;
  height: number;
  bitsPerSample: number;
  componentCount: number;
  isSigned: boolean;
}
interface J2KDecoder {
  getEncodedBuffer(length: number): Uint8Array;
  getDecodedBuffer(): Uint8Array;
  decode(): void;
  getFrameInfo(): FrameInfo;
  delete(): void;
}
interface OpenJpeg {
  HEAPU8?: Uint8Array;
  J2KDecoder: new () => J2KDecoder;
}
type OpenJpegFactory = (options: { print: (text: string) => void; printErr: (text: string) => void }) => Promise<OpenJpeg>;

const RECYCLE_BYTES = 256 * 1024 * 1024;
let factory: OpenJpegFactory | undefined;
let instance: Promise<OpenJpeg> | undefined;

function openJpeg(): Promise<OpenJpeg> {
  if (!factory) {
    try {
      const require = createRequire(import.meta.url);
      factory = require('@cornerstonejs/codec-openjpeg/decodewasmjs') as OpenJpegFactory;
    } catch (err) {
      throw new TaskError('INTERNAL_ERROR', `The JPEG 2000 decoder could not be loaded: ${(err as Error).message}`);
    }
  }
  instance ??= factory({ print: () => {}, printErr: () => {} });
  return instance;
}

interface Siz {
  width: number;
  height: number;
  components: { precision: number; signed: boolean; dx: number; dy: number }[];
}

/** The boxes of `input` between `from` and `to`: type and contents. */
function boxes(input: Buffer, from: number, to: number): { type: string; body: Buffer }[] {
  const list: { type: string; body: Buffer }[] = [];
  let at = from;
  while (at + 8 <= to) {
    let size = input.readUInt32BE(at);
    const type = input.toString('latin1', at + 4, at + 8);
    let header = 8;
    if (size === 1) {
      if (at + 16 > to) break;
      size = Number(input.readBigUInt64BE(at + 8));
      header = 16;
    } else if (size === 0) {
      size = to - at;
    }
    if (size < header) break;
    list.push({ type, body: input.subarray(at + header, Math.min(to, at + size)) });
    at += size;
  }
  return list;
}

const isCodestream = (input: Buffer): boolean =>
  input.length >= 4 && input[0] === 0xff && input[1] === 0x4f && input[2] === 0xff && input[3] === 0x51;

/** The codestream of a JP2 file (its jp2c box), or the input itself when it is a raw codestream. */
function codestreamOf(input: Buffer): Buffer {
  if (isCodestream(input)) return input;
  const jp2c = boxes(input, 0, input.length).find((box) => box.type === 'jp2c');
  if (!jp2c) throw new TaskError('INVALID_IMAGE', 'The JPEG 2000 file has no codestream');
  return jp2c.body;
}

/** Enumerated colour spaces of a JP2 colr box (15444-1 I.5.3.3): sRGB, greyscale, sYCC. */
const SYCC = 18;

/**
 * A JP2 file's colour (its first colr box in jp2h): an ICC profile (methods 2 and 3), carried as
 * a JPEG's; enumerated sRGB or greyscale, taken as they are. sYCC samples would need converting
 * and are UNSUPPORTED_FORMAT. A raw codestream has no colour box.
 */
function jp2Colour(input: Buffer): { icc?: Buffer } {
  if (isCodestream(input)) return {};
  const jp2h = boxes(input, 0, input.length).find((box) => box.type === 'jp2h');
  const colr = jp2h && boxes(jp2h.body, 0, jp2h.body.length).find((box) => box.type === 'colr');
  if (!colr || colr.body.length < 7) return {};
  const method = colr.body[0];
  if (method === 1 && colr.body.readUInt32BE(3) === SYCC)
    throw new TaskError('UNSUPPORTED_FORMAT', 'JPEG 2000 in the sYCC colour space is not supported');
  if ((method === 2 || method === 3) && colr.body.length > 3 + 128) return { icc: Buffer.from(colr.body.subarray(3)) };
  return {};
}

/** The SIZ marker segment, which must follow SOC (ISO/IEC 15444-1 A.5.1). */
function readSiz(codestream: Buffer): Siz {
  if (codestream.length < 42 || codestream.readUInt16BE(0) !== 0xff4f || codestream.readUInt16BE(2) !== 0xff51) {
    throw new TaskError('INVALID_IMAGE', 'The JPEG 2000 codestream has no SIZ marker');
  }
  const count = codestream.readUInt16BE(40);
  if (count < 1 || 42 + count * 3 > codestream.length) throw new TaskError('INVALID_IMAGE', 'The JPEG 2000 SIZ marker is cut short');
  const width = codestream.readUInt32BE(8) - codestream.readUInt32BE(16);
  const height = codestream.readUInt32BE(12) - codestream.readUInt32BE(20);
  if (!(width > 0 && height > 0)) throw new TaskError('INVALID_IMAGE', 'The JPEG 2000 image has no dimensions');
  const components = Array.from({ length: count }, (_, c) => {
    const ssiz = codestream[42 + c * 3]!;
    return { precision: (ssiz & 0x7f) + 1, signed: (ssiz & 0x80) !== 0, dx: codestream[43 + c * 3]!, dy: codestream[44 + c * 3]! };
  });
  return { width, height, components };
}

/** The size and layout this service decodes, or UNSUPPORTED_FORMAT. */
function supported(siz: Siz): { channels: 1 | 2 | 3 | 4; precision: number } {
  const [first] = siz.components;
  const channels = siz.components.length;
  if (channels > 4) throw new TaskError('UNSUPPORTED_FORMAT', `A JPEG 2000 image of ${channels} components is not supported (1 to 4)`);
  if (siz.components.some((c) => c.dx !== 1 || c.dy !== 1))
    throw new TaskError('UNSUPPORTED_FORMAT', 'JPEG 2000 with subsampled components is not supported');
  if (siz.components.some((c) => c.precision !== first!.precision || c.signed !== first!.signed) || first!.precision > 16) {
    throw new TaskError('UNSUPPORTED_FORMAT', 'JPEG 2000 components of different or more than 16-bit precisions are not supported');
  }
  return { channels: channels as 1 | 2 | 3 | 4, precision: first!.precision };
}

export const jpeg2000: RawDecoder = {
  async readHeader(input: Buffer): Promise<HeaderInfo> {
    const siz = readSiz(codestreamOf(input));
    const { channels } = supported(siz);
    return { width: siz.width, height: siz.height, hasAlpha: channels === 2 || channels === 4, frames: 1 };
  },

  async decode(input: Buffer, maxPixels: number): Promise<RawImage> {
    const codestream = codestreamOf(input);
    const siz = readSiz(codestream);
    const { channels, precision } = supported(siz);
    const colour = jp2Colour(input);
    const wide = precision > 8;
    checkPixelsToDecode(siz.width, siz.height, channels * (wide ? 2 : 1), maxPixels);

    const pending = openJpeg();
    const m = await pending;
    let decoder: J2KDecoder | undefined;
    try {
      decoder = new m.J2KDecoder();
      decoder.getEncodedBuffer(codestream.length).set(codestream);
      decoder.decode();
      const info = decoder.getFrameInfo();
      if (info.width !== siz.width || info.height !== siz.height || info.componentCount !== channels) {
        throw new TaskError('INVALID_IMAGE', 'The JPEG 2000 decoder returned an image of an unexpected size');
      }
      const decoded = decoder.getDecodedBuffer();
      const samples = siz.width * siz.height * channels;
      if (decoded.length < samples * (wide ? 2 : 1)) throw new TaskError('INVALID_IMAGE', 'The JPEG 2000 decoder returned too few samples');
      return { ...toSamples(decoded, samples, precision, info.isSigned), width: siz.width, height: siz.height, channels, ...colour };
    } catch (err) {
      if (err instanceof TaskError) throw err;
      if (instance === pending) instance = undefined; // its memory is in an unknown state
      throw new TaskError('INVALID_IMAGE', 'The JPEG 2000 image could not be decoded');
    } finally {
      try {
        decoder?.delete();
      } catch {
        if (instance === pending) instance = undefined;
      }
      if ((m.HEAPU8?.length ?? 0) > RECYCLE_BYTES && instance === pending) instance = undefined;
    }
  },
};

/** The decoder's samples (8-bit, or 16-bit little-endian) copied out as 8 or full-range 16 bits. */
function toSamples(decoded: Uint8Array, samples: number, precision: number, signed: boolean): Pick<RawImage, 'data' | 'depth'> {
  if (precision <= 8) {
    const data = Buffer.from(decoded.subarray(0, samples));
    if (signed) for (let i = 0; i < samples; i++) data[i] = (data[i]! + 128) & 0xff;
    if (precision < 8) for (let i = 0; i < samples; i++) data[i] = Math.round((data[i]! * 255) / (2 ** precision - 1));
    return { data };
  }
  const view = new DataView(decoded.buffer, decoded.byteOffset, samples * 2);
  const out = new Uint16Array(samples);
  const max = 2 ** precision - 1;
  const offset = signed ? 2 ** (precision - 1) : 0;
  for (let i = 0; i < samples; i++) {
    const value = signed ? view.getInt16(i * 2, true) + offset : view.getUint16(i * 2, true);
    out[i] = Math.round((Math.min(Math.max(value, 0), max) * 65535) / max);
  }
  return { data: Buffer.from(out.buffer), depth: 'ushort' };
}
