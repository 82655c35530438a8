// Builders of decompression bombs made of animation frames: a few bytes per frame, a huge
// canvas. Each frame passes the per-frame pixel limit; all frames together do not.
import sharp from 'sharp';

const u16 = (value: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(value);
  return b;
};
const u24 = (value: number) => {
  const b = Buffer.alloc(3);
  b.writeUIntLE(value, 0, 3);
  return b;
};

function riffChunk(tag: string, data: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.write(tag, 0, 'ascii');
  header.writeUInt32LE(data.length, 4);
  return Buffer.concat([header, data, Buffer.alloc(data.length % 2)]);
}

/**
 * An animated WebP of `frames` frames on a `canvas`×`canvas` canvas, each frame a 1×1 lossless
 * image that sharp encodes. 500 frames on 10000×10000 is a 24 KB file. `padBytes` adds an
 * unknown chunk (ignored by decoders) after the frames: past 1 MiB, the upload's header probe
 * cannot read the file, so only the worker's own header check sees the frames.
 */
export async function webpFrameBomb(frames: number, canvas: number, padBytes = 0, frameSize = 1): Promise<Buffer> {
  const still = await sharp({ create: { width: frameSize, height: frameSize, channels: 4, background: '#ff000080' } })
    .webp({ lossless: true })
    .toBuffer();
  const bitstream = still.subarray(12); // the VP8L chunk after "RIFF", size, "WEBP"
  const frame = riffChunk('ANMF', Buffer.concat([u24(0), u24(0), u24(frameSize - 1), u24(frameSize - 1), u24(100), Buffer.from([0]), bitstream]));
  const body = Buffer.concat([
    Buffer.from('WEBP'),
    riffChunk('VP8X', Buffer.concat([Buffer.from([0x12, 0, 0, 0]), u24(canvas - 1), u24(canvas - 1)])), // animation + alpha
    riffChunk('ANIM', Buffer.from([0, 0, 0, 0, 0, 0])),
    ...Array<Buffer>(frames).fill(frame),
    ...(padBytes ? [riffChunk('XPAD', Buffer.alloc(padBytes))] : []),
  ]);
  const header = Buffer.alloc(8);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(body.length, 4);
  return Buffer.concat([header, body]);
}

/**
 * An animated GIF whose 1×1 frames alternate between the top-left and bottom-right pixel of a
 * `canvas`×`canvas` screen (libvips sizes a GIF's canvas by its frames, up to its own caps).
 * `padBytes` of comment after the first `framesBeforePad` frames pushes the rest of them past
 * the first MiB, where the upload's header probe stops reading.
 */
export function gifFrameBomb(frames: number, canvas: number, padBytes = 0, framesBeforePad = frames): Buffer {
  const head = Buffer.concat([
    Buffer.from('GIF89a'),
    u16(canvas),
    u16(canvas),
    Buffer.from([0x80, 0, 0, 0, 0, 0, 255, 255, 255]), // a global table of two colours
    Buffer.from([0x21, 0xff, 0x0b]),
    Buffer.from('NETSCAPE2.0'),
    Buffer.from([3, 1, 0, 0, 0]), // loop forever
  ]);
  const frame = (x: number, y: number) =>
    Buffer.concat([
      Buffer.from([0x21, 0xf9, 4, 0, 10, 0, 0, 0]), // 100 ms
      Buffer.from([0x2c]),
      u16(x),
      u16(y),
      u16(1),
      u16(1),
      Buffer.from([0]),
      Buffer.from([2, 2, 0x44, 0x01, 0]), // LZW: clear, index 0, end
    ]);
  const comment: Buffer[] = [];
  for (let left = padBytes; left > 0; left -= 255) comment.push(Buffer.from([Math.min(255, left)]), Buffer.alloc(Math.min(255, left), 0x20));
  const frameAt = (i: number) => (i % 2 ? frame(canvas - 1, canvas - 1) : frame(0, 0));
  return Buffer.concat([
    head,
    ...Array.from({ length: framesBeforePad }, (_, i) => frameAt(i)),
    ...(padBytes ? [Buffer.from([0x21, 0xfe]), ...comment, Buffer.from([0])] : []),
    ...Array.from({ length: frames - framesBeforePad }, (_, i) => frameAt(framesBeforePad + i)),
    Buffer.from([0x3b]),
  ]);
}
