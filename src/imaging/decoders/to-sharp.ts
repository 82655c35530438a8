// A raw decoder's pixels as a sharp image. sharp takes raw pixels but cannot attach an ICC profile
// or EXIF to them (withIccProfile names a file or a built-in profile, withExif takes strings), so
// an image that carries either is handed over as a PNG made here (and so is one of 16-bit samples:
// sharp 0.34 reads raw input as 8-bit whatever its depth): the pixels deflated at zlib's
// fastest level, with an iCCP chunk for the profile and an eXIf chunk for the EXIF. libvips reads
// both back as it does a JPEG's, so colour conversion to sRGB and `keepMetadata` treat a HEIC's
// profile and EXIF exactly as a JPEG's.
import zlib from 'node:zlib';
import sharp, { type Sharp } from 'sharp';
import { pngChunk } from '../../bytes/png-chunk.js';
import type { RawImage } from './pixels.js';

/** Decoded pixels as sharp is handed them: as they are, or as a PNG made of them. */
export type SharpInput = { kind: 'raw'; image: RawImage } | { kind: 'png'; png: Buffer };

/**
 * What sharp is handed for `raw`. Making the PNG deflates every pixel (and swaps the bytes of
 * 16-bit samples), so it runs where the decoding ran: on the decoding thread (decode-thread.ts).
 */
export function sharpInputOf(raw: RawImage): SharpInput {
  return !raw.icc && !raw.exif && !raw.depth ? { kind: 'raw', image: raw } : { kind: 'png', png: pngWithMetadata(raw) };
}

export function openSharpInput(input: SharpInput): Sharp {
  if (input.kind === 'png') return sharp(input.png, { limitInputPixels: false });
  const { data, width, height, channels } = input.image;
  return sharp(data, { raw: { width, height, channels } });
}

export const rawToSharp = (raw: RawImage): Sharp => openSharpInput(sharpInputOf(raw));

/** PNG colour types by channel count: grey, grey+alpha, RGB, RGBA. */
const COLOUR_TYPE = { 1: 0, 2: 4, 3: 2, 4: 6 } as const;

function pngWithMetadata(raw: RawImage): Buffer {
  const bytesPerSample = raw.depth === 'ushort' ? 2 : 1;
  const rowBytes = raw.width * raw.channels * bytesPerSample;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(raw.width, 0);
  ihdr.writeUInt32BE(raw.height, 4);
  ihdr[8] = bytesPerSample * 8;
  ihdr[9] = COLOUR_TYPE[raw.channels];
  // Rows with filter type 0 (none) before each; PNG's 16-bit samples are big-endian.
  const rows = Buffer.alloc((rowBytes + 1) * raw.height);
  for (let y = 0; y < raw.height; y++) {
    const row = raw.data.subarray(y * rowBytes, (y + 1) * rowBytes);
    const at = y * (rowBytes + 1) + 1;
    if (bytesPerSample === 1) row.copy(rows, at);
    else for (let i = 0; i < rowBytes; i += 2) rows.writeUInt16BE(row.readUInt16LE(i), at + i);
  }
  const chunks = [pngChunk('IHDR', ihdr)];
  if (raw.icc) chunks.push(pngChunk('iCCP', Buffer.concat([Buffer.from('icc\0\0', 'latin1'), zlib.deflateSync(raw.icc)])));
  if (raw.exif) chunks.push(pngChunk('eXIf', raw.exif));
  chunks.push(pngChunk('IDAT', zlib.deflateSync(rows, { level: 1 })), pngChunk('IEND', Buffer.alloc(0)));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), ...chunks]);
}
