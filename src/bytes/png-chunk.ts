// One PNG chunk as bytes: the few places that write PNGs by hand (raw pixels with metadata for
// libvips, frames for ffmpeg, compress's tidied output) share it.
import zlib from 'node:zlib';

/** Length, type and CRC around every chunk's data. */
export const CHUNK_OVERHEAD = 12;

/** The chunk `type` holding `data`: its length, type, data and the CRC-32 of type and data. */
export function pngChunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(CHUNK_OVERHEAD + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(zlib.crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}
