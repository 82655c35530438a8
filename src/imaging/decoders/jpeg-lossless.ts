// Lossless JPEG (ITU T.81 process 14, SOF3: Huffman-coded, predictive), which libjpeg-turbo as
// built into sharp's libvips refuses ("Unsupported JPEG process: SOF type 0xc3"). It turns up in
// scans and medical exports (DICOM's 1.2.840.10008.1.2.4.57 and .70). Decoded with
// jpeg-lossless-decoder-js (pure JavaScript, the decoder DICOM viewers use), after the frame
// header read here is checked against the limits: the library allocates its output first.
//
// One component is grey, three are RGB (process 14 has no colour transform). Samples of more than
// 8 bits (up to 16) are kept at 16 bits, scaled to the full range. The other lossless processes
// (SOF7, SOF11, SOF15: differential or arithmetic-coded) are UNSUPPORTED_FORMAT.
// The decode is synchronous JavaScript (about 0.1 s for 227×149 RGB): it blocks the event loop.
import { createRequire } from 'node:module';
import { readJpegHead, type JpegFrame } from '../../bytes/jpeg.js';
import { TaskError } from '../../errors.js';
import { checkPixelsToDecode } from '../limits.js';
import type { HeaderInfo, RawDecoder, RawImage } from './pixels.js';

interface LosslessDecoder {
  decompress(buffer: ArrayBuffer, offset?: number, length?: number): ArrayBuffer;
}
type LosslessDecoderClass = new () => LosslessDecoder;

let Decoder: LosslessDecoderClass | undefined;

function loadDecoder(): LosslessDecoderClass {
  if (!Decoder) {
    try {
      const require = createRequire(import.meta.url);
      Decoder = (require('jpeg-lossless-decoder-js') as { Decoder: LosslessDecoderClass }).Decoder;
    } catch (err) {
      throw new TaskError('INTERNAL_ERROR', `The lossless JPEG decoder could not be loaded: ${(err as Error).message}`);
    }
  }
  return Decoder;
}

/** The frame header (SOFn), walking the segments before it; undefined when there is none. */
const jpegFrame = (b: Buffer): JpegFrame | undefined => readJpegHead(b)?.frame;

/** Whether a JPEG's frame is lossless (process 14 and its relatives): libvips cannot decode it. */
export function isLosslessJpeg(head: Buffer): boolean {
  const marker = jpegFrame(head)?.marker;
  return marker === 0xc3 || marker === 0xc7 || marker === 0xcb || marker === 0xcf;
}

function losslessFrame(input: Buffer): JpegFrame {
  const frame = jpegFrame(input);
  if (!frame || !frame.width || !frame.height) throw new TaskError('INVALID_IMAGE', 'The lossless JPEG has no readable frame header');
  if (frame.marker !== 0xc3) {
    throw new TaskError('UNSUPPORTED_FORMAT', 'Only lossless JPEG of process 14 (SOF3, Huffman-coded, not differential) is supported');
  }
  if (frame.components !== 1 && frame.components !== 3) {
    throw new TaskError('UNSUPPORTED_FORMAT', `A lossless JPEG of ${frame.components} components is not supported (1 or 3)`);
  }
  if (frame.precision < 2 || frame.precision > 16) throw new TaskError('INVALID_IMAGE', `The lossless JPEG declares ${frame.precision}-bit samples`);
  return frame;
}

export const jpegLossless: RawDecoder = {
  async readHeader(input: Buffer): Promise<HeaderInfo> {
    const { width, height } = losslessFrame(input);
    return { width, height, hasAlpha: false, frames: 1 };
  },
  async decode(input: Buffer, maxPixels: number): Promise<RawImage> {
    const frame = losslessFrame(input);
    const { width, height, components, precision } = frame;
    const wide = precision > 8;
    checkPixelsToDecode(width, height, components * (wide ? 2 : 1), maxPixels);
    let output: ArrayBuffer;
    try {
      const copy = input.buffer.slice(input.byteOffset, input.byteOffset + input.length);
      output = new (loadDecoder())().decompress(copy as ArrayBuffer);
    } catch (err) {
      if (err instanceof TaskError) throw err;
      throw new TaskError('INVALID_IMAGE', `The lossless JPEG could not be decoded: ${String((err as Error)?.message ?? err).slice(0, 200)}`);
    }
    const samples = width * height * components;
    if (output.byteLength !== samples * (wide ? 2 : 1)) throw new TaskError('INVALID_IMAGE', 'The lossless JPEG decoded to an unexpected size');
    const channels = components as 1 | 3;
    if (!wide) return { data: Buffer.from(output), width, height, channels };
    // Scale to 16 bits (native byte order, as sharp's raw input takes it).
    const source = new Uint16Array(output);
    const scaled = new Uint16Array(samples);
    const max = 2 ** precision - 1;
    for (let i = 0; i < samples; i++) scaled[i] = Math.round((Math.min(source[i]!, max) * 65535) / max);
    return { data: Buffer.from(scaled.buffer), width, height, channels, depth: 'ushort' };
  },
};
