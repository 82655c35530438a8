// A JPEG's header read from its head (signatures.ts jpegHeader, which inspect asks before libvips)
// must say what libvips says, or nothing: every JPEG of the corpus, and made ones for the cases
// the corpus lacks (orientations, CMYK, grey, progressive, the frame beyond the head, two EXIF
// blocks, malformed EXIF, cut heads).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { inspect } from '../../src/imaging/source.js';
import { jpegHeader } from '../../src/imaging/signatures.js';
import { SNIFF_HEAD_BYTES } from '../../src/imaging/sniff.js';
import { CORPUS, tempDir } from '../helpers.js';

interface ManifestEntry {
  path: string;
  format: string;
  expect: 'decodable' | 'reject';
}

const LIMITS = { maxPixels: 400_000_000, maxFrames: 1000, maxTotalPixels: 4_000_000_000, maxFileBytes: 1 << 30 };

/** What libvips says of the whole file, upright. */
async function libvipsHeader(input: Buffer) {
  const meta = await sharp(input, { limitInputPixels: false }).metadata();
  const swap = (meta.orientation ?? 1) >= 5;
  return { width: swap ? meta.height : meta.width, height: swap ? meta.width : meta.height, frames: 1, hasAlpha: meta.hasAlpha };
}

const headOf = (file: Buffer) => file.subarray(0, SNIFF_HEAD_BYTES);

/** A JPEG segment: marker, length, body. */
function segment(marker: number, body: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt16BE(0xff00 | marker, 0);
  head.writeUInt16BE(body.length + 2, 2);
  return Buffer.concat([head, body]);
}

/** `jpeg` with `extra` segments inserted right after SOI. */
const withSegments = (jpeg: Buffer, ...extra: Buffer[]) => Buffer.concat([jpeg.subarray(0, 2), ...extra, jpeg.subarray(2)]);

/** An EXIF APP1 body whose IFD0 holds one Orientation entry of `type` and `value` (big-endian TIFF). */
function exifBody(value: number, type = 3): Buffer {
  const tiff = Buffer.alloc(8 + 2 + 12 + 4);
  tiff.write('MM', 0, 'latin1');
  tiff.writeUInt16BE(42, 2);
  tiff.writeUInt32BE(8, 4);
  tiff.writeUInt16BE(1, 8);
  tiff.writeUInt16BE(0x0112, 10);
  tiff.writeUInt16BE(type, 12);
  tiff.writeUInt32BE(1, 14);
  tiff.writeUInt16BE(value, 18);
  return Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), tiff]);
}

describe('a JPEG header read from the head', () => {
  it('says what libvips says of every JPEG in the corpus, or leaves it to libvips', async () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(CORPUS, 'MANIFEST.json'), 'utf8')) as ManifestEntry[];
    const jpegs = manifest.filter((entry) => entry.format === 'jpeg' && entry.expect === 'decodable');
    assert.ok(jpegs.length >= 30, `the corpus has ${jpegs.length} decodable JPEGs`);
    let readHere = 0;
    for (const entry of jpegs) {
      const file = fs.readFileSync(path.join(CORPUS, entry.path));
      const header = jpegHeader(headOf(file));
      if (!header) continue;
      readHere++;
      assert.deepEqual(header, await libvipsHeader(file), entry.path);
    }
    // Not a test of nothing: most real JPEGs are read here.
    assert.ok(readHere >= jpegs.length * 0.7, `read here: ${readHere} of ${jpegs.length}`);
  });

  it('turns the size by the EXIF orientation, for each of the eight, as libvips does', async () => {
    const base = await sharp({ create: { width: 30, height: 20, channels: 3, background: '#808080' } })
      .jpeg()
      .toBuffer();
    for (let orientation = 1; orientation <= 8; orientation++) {
      const file = await sharp(base).withMetadata({ orientation }).jpeg().toBuffer();
      assert.deepEqual(jpegHeader(file), await libvipsHeader(file), `orientation ${orientation}`);
    }
  });

  it('reads grey, CMYK and progressive frames, none of them with alpha', async () => {
    const rgb = sharp({ create: { width: 24, height: 16, channels: 3, background: '#336699' } });
    const files = [
      await rgb.clone().greyscale().jpeg().toBuffer(),
      await rgb.clone().toColourspace('cmyk').jpeg().toBuffer(),
      await rgb.clone().jpeg({ progressive: true }).toBuffer(),
    ];
    for (const file of files) {
      const header = jpegHeader(file);
      assert.ok(header, 'read here');
      assert.deepEqual(header, await libvipsHeader(file));
    }
  });

  it('leaves to libvips what the head cannot settle', async () => {
    const jpeg = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#aa2200' } })
      .jpeg()
      .toBuffer();
    const comment = segment(0xfe, Buffer.alloc(60_000, 0x20));
    const cases: Record<string, Buffer> = {
      'the frame beyond the head': headOf(withSegments(jpeg, comment, comment)),
      'two EXIF blocks': withSegments(jpeg, segment(0xe1, exifBody(6)), segment(0xe1, exifBody(1))),
      'an orientation out of range': withSegments(jpeg, segment(0xe1, exifBody(9))),
      'an orientation of another type': withSegments(jpeg, segment(0xe1, exifBody(6, 4))),
      'an EXIF block cut short': withSegments(jpeg, segment(0xe1, exifBody(6).subarray(0, 20))),
      'a head cut inside a segment': jpeg.subarray(0, 10),
      'no SOI': jpeg.subarray(2),
      'random bytes after SOI': Buffer.concat([jpeg.subarray(0, 2), Buffer.from('not a marker at all')]),
    };
    for (const [name, head] of Object.entries(cases)) assert.equal(jpegHeader(head), undefined, name);
    // Lossless (SOF3) and 12-bit frames: a made frame header of each.
    const sof = (marker: number, precision: number) =>
      Buffer.concat([Buffer.from([0xff, 0xd8]), segment(marker, Buffer.from([precision, 0, 10, 0, 10, 3, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0]))]);
    assert.equal(jpegHeader(sof(0xc3, 8)), undefined, 'lossless');
    assert.equal(jpegHeader(sof(0xc1, 12)), undefined, '12-bit');
    assert.deepEqual(jpegHeader(sof(0xc1, 8)), { width: 10, height: 10, frames: 1, hasAlpha: false }, 'extended 8-bit');
  });

  it('is what inspect answers, the plan checked against it', async () => {
    const dir = tempDir();
    try {
      const file = path.join(dir, 'turned.jpg');
      const jpeg = await sharp({ create: { width: 300, height: 100, channels: 3, background: '#123456' } })
        .withMetadata({ orientation: 6 })
        .jpeg()
        .toBuffer();
      fs.writeFileSync(file, jpeg);
      const info = await inspect(file, 'jpeg', LIMITS);
      assert.deepEqual([info.width, info.height, info.frames, info.hasAlpha, info.rawDecoder], [100, 300, 1, false, null]);
      await assert.rejects(inspect(file, 'jpeg', { ...LIMITS, maxPixels: 300 * 100 - 1 }), { code: 'IMAGE_TOO_LARGE' });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
