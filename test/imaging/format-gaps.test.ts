// The formats and variants libvips alone reads wrong or not at all: an AVIF grid (its primary
// item), an AVIF image sequence (its header), lossless JPEG (process 14), JPEG 2000, and a
// HEIC's ICC profile and EXIF. Each is checked against an independent decode and the limits.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { TaskError } from '../../src/errors.js';
import { exifTiff } from '../../src/imaging/decoders/heic.js';
import { rawToSharp } from '../../src/imaging/decoders/to-sharp.js';
import { runImageJob, type ImageJob } from '../../src/imaging/pipeline.js';
import { inspect } from '../../src/imaging/source.js';
import { corpusFile } from '../helpers.js';

const LIMITS = { maxPixels: 50_000_000, maxFrames: 1000, maxTotalPixels: 500_000_000 };
const job = (inputPath: string, inputFormat: string, options: Partial<ImageJob> = {}): ImageJob => ({
  inputPath,
  inputFormat,
  limits: LIMITS,
  deadline: Date.now() + 120_000,
  ...options,
});
/** The pipeline's output as 8-bit sRGB pixels. */
const pixelsOf = (data: Buffer) => sharp(data).removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });

async function rejectsWithCode(promise: Promise<unknown>, code: string): Promise<TaskError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof TaskError, `expected a TaskError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    return err;
  }
  assert.fail(`expected ${code}`);
}

describe('AVIF: the primary item', () => {
  const grid = corpusFile('images/sharp/pitm.avif');

  it('a grid is its primary item, 4096×800, one image (not its first tile, not 5 pages)', async () => {
    const info = await inspect(grid, 'avif', LIMITS);
    assert.deepEqual([info.width, info.height, info.frames], [4096, 800, 1]);
    const out = await runImageJob(job(grid, 'avif', { format: 'png', lossless: true }));
    assert.deepEqual([out.width, out.height, out.frames], [4096, 800, 1]);
  });

  it("its pixels are libheif's own decode of the four tiles, side by side", async () => {
    const out = await runImageJob(job(grid, 'avif', { format: 'png', lossless: true }));
    const decoded = await pixelsOf(out.data);
    // The four 1024×800 tiles are top-level items too (pages 0–3): libheif decodes each alone.
    const tiles = await Promise.all([0, 1, 2, 3].map((page) => sharp(grid, { page }).removeAlpha().raw().toBuffer()));
    const joined = await sharp(tiles, { join: { across: 4, raw: { width: 1024, height: 800, channels: 3 } } } as never)
      .raw()
      .toBuffer()
      .catch(async () => {
        // Older join options: lay the tiles out by hand.
        const rows = Buffer.alloc(4096 * 800 * 3);
        for (let y = 0; y < 800; y++) for (let t = 0; t < 4; t++) tiles[t]!.copy(rows, (y * 4096 + t * 1024) * 3, y * 1024 * 3, (y + 1) * 1024 * 3);
        return rows;
      });
    assert.deepEqual([decoded.info.width, decoded.info.height], [4096, 800]);
    let differing = 0;
    for (let i = 0; i < joined.length; i++) if (Math.abs(joined[i]! - decoded.data[i]!) > 1) differing++;
    assert.equal(differing, 0, `${differing} samples differ from the tiles`);
  });

  /**
   * `file` (an AVIF whose ipma is version 0 with 8-bit indices) with `properties` appended to its
   * ipco and associated, as essential, with item 1 after its own. The new meta box goes to the end
   * and the old one becomes a free box, so no data offset moves.
   */
  function withTransformations(file: Buffer, properties: Buffer[]): Buffer {
    const box = (type: string, payload: Buffer) => {
      const head = Buffer.alloc(8);
      head.writeUInt32BE(8 + payload.length);
      head.write(type, 4, 'latin1');
      return Buffer.concat([head, payload]);
    };
    const children = (b: Buffer, from: number, to: number) => {
      const list: { at: number; type: string; body: Buffer }[] = [];
      for (let at = from; at + 8 <= to; at += b.readUInt32BE(at))
        list.push({ at, type: b.toString('latin1', at + 4, at + 8), body: b.subarray(at + 8, at + b.readUInt32BE(at)) });
      return list;
    };
    const meta = children(file, 0, file.length).find((t) => t.type === 'meta')!;
    const rebuild = (list: { type: string; body: Buffer }[], change: (type: string, body: Buffer) => Buffer): Buffer[] =>
      list.map(({ type, body }) => change(type, body));
    let count = 0;
    const iprp = (body: Buffer) =>
      Buffer.concat(
        rebuild(children(body, 0, body.length), (type, inner) => {
          if (type === 'ipco') {
            count = children(inner, 0, inner.length).length;
            return box(type, Buffer.concat([inner, ...properties]));
          }
          if (type !== 'ipma') return box(type, inner);
          assert.equal(inner[0], 0, 'ipma version 0');
          assert.equal(inner[3]! & 1, 0, '8-bit indices');
          assert.equal(inner.readUInt32BE(4), 1, 'one item');
          assert.equal(inner.readUInt16BE(8), 1, 'item 1');
          const own = inner[10]!;
          const added = properties.map((_, i) => 0x80 | (count + 1 + i));
          return box(
            type,
            Buffer.concat([inner.subarray(0, 10), Buffer.from([own + added.length]), inner.subarray(11, 11 + own), Buffer.from(added)]),
          );
        }),
      );
    const body = Buffer.concat([
      meta.body.subarray(0, 4),
      ...rebuild(children(meta.body, 4, meta.body.length), (type, inner) => box(type, type === 'iprp' ? iprp(inner) : inner)),
    ]);
    const original = Buffer.from(file);
    original.write('free', meta.at + 4, 'latin1');
    return Buffer.concat([original, box('meta', body)]);
  }

  it('irot and clap of the primary item are applied, by libheif, before the limits and the job see it', async () => {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'imgapi-avif-'));
    try {
      const source = corpusFile('images/libheif/example.avif'); // 800×533
      const bytes = fs.readFileSync(source);
      const rotated = path.join(dir, 'irot.avif');
      fs.writeFileSync(rotated, withTransformations(bytes, [Buffer.from([0, 0, 0, 9, 0x69, 0x72, 0x6f, 0x74, 1])])); // irot: 90° anticlockwise
      const info = await inspect(rotated, 'avif', LIMITS);
      assert.deepEqual([info.width, info.height], [533, 800]);
      const out = await runImageJob(job(rotated, 'avif', { format: 'png', lossless: true }));
      const expected = await sharp(source).rotate(270).removeAlpha().raw().toBuffer();
      assert.ok((await pixelsOf(out.data)).data.equals(expected), 'the pixels are not the source turned 90° anticlockwise');

      // clap: a 400×300 clean aperture about the centre.
      const clap = Buffer.alloc(8 + 32);
      clap.writeUInt32BE(40, 0);
      clap.write('clap', 4, 'latin1');
      [400, 1, 300, 1, 0, 1, 0, 1].forEach((v, i) => clap.writeUInt32BE(v, 8 + i * 4));
      const cropped = path.join(dir, 'clap.avif');
      fs.writeFileSync(cropped, withTransformations(bytes, [clap]));
      assert.deepEqual(await inspect(cropped, 'avif', LIMITS).then((i) => [i.width, i.height]), [400, 300]);
      const croppedOut = await runImageJob(job(cropped, 'avif', { format: 'png' }));
      assert.deepEqual([croppedOut.width, croppedOut.height], [400, 300]);
    } finally {
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  });

  it('a grid larger than the plan is refused from its header, though each tile would pass', async () => {
    const limits = { ...LIMITS, maxPixels: 4096 * 800 - 1 };
    await rejectsWithCode(inspect(grid, 'avif', limits), 'IMAGE_TOO_LARGE');
    await rejectsWithCode(runImageJob({ ...job(grid, 'avif'), limits }), 'IMAGE_TOO_LARGE');
  });

  it('an alpha auxiliary image is read as alpha', async () => {
    const info = await inspect(corpusFile('images/crabbyavif/alpha.avif'), 'avif', LIMITS);
    assert.equal(info.hasAlpha, true);
    const out = await runImageJob(job(corpusFile('images/crabbyavif/alpha.avif'), 'avif', { format: 'png' }));
    const stats = await sharp(out.data).stats();
    assert.ok(stats.channels[3]!.min < 255, 'some pixel is not opaque');
  });

  it('an image sequence (brand avis) is its frames, which ffmpeg decodes (test/bytes/avif-sequence.test.ts)', async () => {
    const anim = corpusFile('images/crabbyavif/anim.avif');
    const info = await inspect(anim, 'avif', LIMITS);
    assert.deepEqual([info.width, info.height, info.frames], [120, 120, 150]);
    // A job given no ffmpeg cannot decode them, and says so.
    const err = await rejectsWithCode(runImageJob(job(anim, 'avif', { format: 'webp' })), 'CONVERSION_FAILED');
    assert.match(err.message, /ffmpeg/);
  });
});

describe('lossless JPEG (process 14)', () => {
  const file = corpusFile('images/sharp/testimgl.jpg');

  it("decodes to jpeg-lossless-decoder-js's very samples", async () => {
    const info = await inspect(file, 'jpeg', LIMITS);
    assert.deepEqual([info.width, info.height], [227, 149]);
    const out = await runImageJob(job(file, 'jpeg', { format: 'png', lossless: true }));
    const decoded = await pixelsOf(out.data);
    const bytes = fs.readFileSync(file);
    const { Decoder } = createRequire(import.meta.url)('jpeg-lossless-decoder-js') as {
      Decoder: new () => { decompress(b: ArrayBuffer): ArrayBuffer };
    };
    const reference = Buffer.from(new Decoder().decompress(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer));
    assert.ok(decoded.data.equals(reference), 'the pixels differ from the reference decode');
  });

  it('the frame header is held to the limits before decoding', async () => {
    await rejectsWithCode(runImageJob({ ...job(file, 'jpeg'), limits: { ...LIMITS, maxPixels: 227 * 149 - 1 } }), 'IMAGE_TOO_LARGE');
  });

  it('an option the image cannot honour names the option (INVALID_OPTIONS), not the image', async () => {
    const err = await rejectsWithCode(runImageJob(job(file, 'jpeg', { format: 'jpeg', lossless: true })), 'INVALID_OPTIONS');
    assert.deepEqual(err.details, { field: 'lossless' });
  });
});

describe('JPEG 2000', () => {
  let dir: string;
  before(async () => {
    dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'imgapi-jp2-'));
  });
  after(async () => {
    await fs.promises.rm(dir, { recursive: true, force: true });
  });

  it('a raw codestream decodes at its size', async () => {
    const file = corpusFile('images/sharp/relax.jp2');
    const info = await inspect(file, 'jp2', LIMITS);
    assert.deepEqual([info.width, info.height, info.hasAlpha], [320, 240, false]);
    const out = await runImageJob(job(file, 'jp2'));
    assert.deepEqual([out.format, out.width, out.height], ['jpeg', 320, 240]);
    const stats = await sharp(out.data).stats();
    assert.ok(
      stats.channels.every((c) => c.max > c.min),
      'the image is not blank',
    );
  });

  it('reversibly coded samples decode exactly, 8-bit RGB and 16-bit grey, and the size is held to the limits', async () => {
    interface Encoder {
      getDecodedBuffer(info: { width: number; height: number; bitsPerSample: number; componentCount: number; isSigned: boolean }): Uint8Array;
      getEncodedBuffer(): Uint8Array;
      setDecompositions(levels: number): void;
      encode(): void;
      delete(): void;
    }
    const factory = createRequire(import.meta.url)('@cornerstonejs/codec-openjpeg/wasmjs') as () => Promise<{ J2KEncoder: new () => Encoder }>;
    const codec = await factory();
    const encode = (samples: Uint8Array, width: number, height: number, bitsPerSample: number, componentCount: number): Buffer => {
      const encoder = new codec.J2KEncoder();
      try {
        encoder.getDecodedBuffer({ width, height, bitsPerSample, componentCount, isSigned: false }).set(samples);
        encoder.setDecompositions(2); // the default 5 needs more than 33×17 pixels
        encoder.encode(); // reversible (lossless) by default
        return Buffer.from(encoder.getEncodedBuffer());
      } finally {
        encoder.delete();
      }
    };
    const [w, h] = [33, 17];
    const rgb = new Uint8Array(w * h * 3).map((_, i) => (i * 37) % 251);
    const rgbFile = path.join(dir, 'rgb.j2c');
    fs.writeFileSync(rgbFile, encode(rgb, w, h, 8, 3));
    const out = await runImageJob(job(rgbFile, 'jp2', { format: 'png', lossless: true }));
    assert.ok((await pixelsOf(out.data)).data.equals(Buffer.from(rgb)), '8-bit RGB samples changed');

    const grey = new Uint16Array(w * h).map((_, i) => (i * 977) % 4096); // 12 bits
    const greyFile = path.join(dir, 'grey.j2c');
    fs.writeFileSync(greyFile, encode(new Uint8Array(grey.buffer), w, h, 12, 1));
    const decoded = await runImageJob(job(greyFile, 'jp2', { format: 'png', lossless: true }));
    // Grey in, grey out (the pipeline ends in sRGB: three equal channels, 16 or 8 bits).
    const meta = await sharp(decoded.data).metadata();
    const wide = meta.depth === 'ushort';
    const first = await sharp(decoded.data)
      .extractChannel(0)
      .raw({ depth: wide ? 'ushort' : 'uchar' })
      .toBuffer();
    const samples = wide ? new Uint16Array(first.buffer, first.byteOffset, w * h) : first;
    const scale = wide ? 65535 : 255;
    for (let i = 0; i < w * h; i++) assert.ok(Math.abs(samples[i]! - (grey[i]! * scale) / 4095) <= 1, `sample ${i}: ${samples[i]}`);

    await rejectsWithCode(runImageJob({ ...job(rgbFile, 'jp2'), limits: { ...LIMITS, maxPixels: w * h - 1 } }), 'IMAGE_TOO_LARGE');
  });

  it("a JP2 file's ICC profile is kept as a JPEG's; sYCC is refused as unsupported", async () => {
    const codestream = fs.readFileSync(corpusFile('images/sharp/relax.jp2'));
    const box = (type: string, payload: Buffer) => {
      const head = Buffer.alloc(8);
      head.writeUInt32BE(8 + payload.length);
      head.write(type, 4, 'latin1');
      return Buffer.concat([head, payload]);
    };
    const ihdr = Buffer.alloc(14);
    ihdr.writeUInt32BE(240, 0);
    ihdr.writeUInt32BE(320, 4);
    ihdr.writeUInt16BE(3, 8);
    ihdr.set([7, 7, 0, 0], 10);
    const jp2 = (colr: Buffer) =>
      Buffer.concat([
        Buffer.from([0, 0, 0, 0x0c, 0x6a, 0x50, 0x20, 0x20, 0x0d, 0x0a, 0x87, 0x0a]),
        box('ftyp', Buffer.from('jp2 \0\0\0\0jp2 ', 'latin1')),
        box('jp2h', Buffer.concat([box('ihdr', ihdr), box('colr', colr)])),
        box('jp2c', codestream),
      ]);
    const p3 = (
      await sharp(
        await sharp({ create: { width: 2, height: 2, channels: 3, background: '#808080' } })
          .withIccProfile('p3')
          .jpeg()
          .toBuffer(),
      ).metadata()
    ).icc!;
    const withIcc = path.join(dir, 'icc.jp2');
    fs.writeFileSync(withIcc, jp2(Buffer.concat([Buffer.from([2, 0, 0]), p3])));
    const kept = await runImageJob(job(withIcc, 'jp2', { format: 'jpeg', keepMetadata: true }));
    assert.ok((await sharp(kept.data).metadata()).icc?.equals(p3), 'the profile is kept');

    const sycc = path.join(dir, 'sycc.jp2');
    fs.writeFileSync(sycc, jp2(Buffer.from([1, 0, 0, 0, 0, 0, 18])));
    await rejectsWithCode(runImageJob(job(sycc, 'jp2')), 'UNSUPPORTED_FORMAT');
  });

  it('a truncated codestream fails INVALID_IMAGE', async () => {
    const file = path.join(dir, 'cut.j2c');
    fs.writeFileSync(file, fs.readFileSync(corpusFile('images/sharp/relax.jp2')).subarray(0, 30));
    await rejectsWithCode(runImageJob(job(file, 'jp2')), 'INVALID_IMAGE');
  });
});

describe("HEIC: the ICC profile and EXIF, carried as a JPEG's", () => {
  /** A TIFF-structured EXIF with orientation 6 and a make. */
  function exifWithOrientation(orientation: number): Buffer {
    const tiff = Buffer.alloc(8 + 2 + 12 * 2 + 4 + 8);
    tiff.write('II', 0, 'latin1');
    tiff.writeUInt16LE(42, 2);
    tiff.writeUInt32LE(8, 4);
    tiff.writeUInt16LE(2, 8);
    // Make (0x010f), ASCII, 6 bytes at offset 38.
    tiff.writeUInt16LE(0x010f, 10);
    tiff.writeUInt16LE(2, 12);
    tiff.writeUInt32LE(6, 14);
    tiff.writeUInt32LE(38, 18);
    // Orientation (0x0112), SHORT, 1.
    tiff.writeUInt16LE(0x0112, 22);
    tiff.writeUInt16LE(3, 24);
    tiff.writeUInt32LE(1, 26);
    tiff.writeUInt16LE(orientation, 30);
    tiff.write('Maker\0', 38, 'latin1');
    return tiff;
  }

  it('a HEIF Exif block becomes its TIFF structure with orientation 1 (libheif applied irot)', () => {
    const block = Buffer.concat([Buffer.from([0, 0, 0, 6]), Buffer.from('Exif\0\0', 'latin1'), exifWithOrientation(6)]);
    const tiff = exifTiff(block)!;
    assert.equal(tiff.toString('latin1', 0, 2), 'II');
    assert.equal(tiff.readUInt16LE(30), 1);
    assert.equal(exifTiff(Buffer.from([0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])), undefined);
  });

  /** `file` with an Exif item (the TIFF `exif`) describing its primary item 1: ISO/IEC 23008-12 A.2.1. */
  function withExifItem(file: Buffer, exif: Buffer): Buffer {
    const box = (type: string, payload: Buffer) => Buffer.concat([u32(8 + payload.length), Buffer.from(type, 'latin1'), payload]);
    const u16 = (n: number) => Buffer.from([n >> 8, n & 0xff]);
    const u32 = (n: number) => Buffer.from([n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
    const children = (b: Buffer, from: number, to: number) => {
      const list: { type: string; body: Buffer }[] = [];
      for (let at = from; at + 8 <= to; at += b.readUInt32BE(at))
        list.push({ type: b.toString('latin1', at + 4, at + 8), body: b.subarray(at + 8, at + b.readUInt32BE(at)) });
      return list;
    };
    const top = children(file, 0, file.length);
    const metaAt = top
      .slice(
        0,
        top.findIndex((t) => t.type === 'meta'),
      )
      .reduce((n, t) => n + 8 + t.body.length, 0);
    const meta = top.find((t) => t.type === 'meta')!;
    // The Exif data in a box of its own after the file, so no offset already in the file moves.
    const payload = Buffer.concat([u32(6), Buffer.from('Exif\0\0', 'latin1'), exif]);
    const exifAt = file.length + 8;
    const rebuilt = children(meta.body, 4, meta.body.length).map(({ type, body }) => {
      if (type === 'iloc') {
        assert.equal(body[0], 0, 'iloc version 0');
        const [offsetSize, lengthSize, baseSize] = [body[4]! >> 4, body[4]! & 15, body[5]! >> 4];
        const sized = (n: number, size: number) => (size === 4 ? u32(n) : size === 0 ? Buffer.alloc(0) : assert.fail(`size ${size}`));
        const entry = Buffer.concat([u16(3), u16(0), sized(0, baseSize), u16(1), sized(exifAt, offsetSize), sized(payload.length, lengthSize)]);
        return box(type, Buffer.concat([body.subarray(0, 6), u16(body.readUInt16BE(6) + 1), body.subarray(8), entry]));
      }
      if (type === 'iinf') {
        assert.equal(body[0], 0, 'iinf version 0');
        const infe = box('infe', Buffer.concat([Buffer.from([2, 0, 0, 0]), u16(3), u16(0), Buffer.from('Exif\0', 'latin1')]));
        return box(type, Buffer.concat([body.subarray(0, 4), u16(body.readUInt16BE(4) + 1), body.subarray(6), infe]));
      }
      if (type === 'iref') return box(type, Buffer.concat([body, box('cdsc', Buffer.concat([u16(3), u16(1), u16(1)]))]));
      return box(type, body);
    });
    const original = Buffer.from(file);
    original.write('free', metaAt + 4, 'latin1'); // the old meta box, skipped where it stands
    return Buffer.concat([original, box('mdat', payload), box('meta', Buffer.concat([meta.body.subarray(0, 4), ...rebuilt]))]);
  }

  it("a HEIC's ICC profile and EXIF reach the output as a JPEG's; EXIF orientation does not turn it again", async () => {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'imgapi-heic-'));
    try {
      const source = fs.readFileSync(corpusFile('images/libheif/rainbow-451x461.heic'));
      // Its colr box is an ICC profile ('prof'): the profile is what follows the box's type and colour type.
      const colr = source.indexOf('colrprof', 0, 'latin1');
      const profile = source.subarray(colr + 8, colr - 4 + source.readUInt32BE(colr - 4));
      const file = path.join(dir, 'exif.heic');
      fs.writeFileSync(file, withExifItem(source, exifWithOrientation(6)));

      const kept = await runImageJob(job(file, 'heic', { format: 'jpeg', keepMetadata: true }));
      const meta = await sharp(kept.data).metadata();
      assert.deepEqual([meta.width, meta.height], [451, 461], 'EXIF orientation 6 was applied on top of the HEIF transformations');
      assert.ok(meta.icc?.equals(profile), "keepMetadata keeps the HEIC's ICC profile");
      assert.ok(meta.exif?.includes(Buffer.from('Maker')), "keepMetadata keeps the HEIC's EXIF");
      assert.equal(meta.orientation ?? 1, 1);

      // Without keepMetadata, as for a JPEG: converted to sRGB from the profile, metadata dropped.
      const converted = await runImageJob(job(file, 'heic', { format: 'png' }));
      const plain = await sharp(converted.data).metadata();
      assert.equal(plain.icc, undefined);
      assert.equal(plain.exif, undefined);
    } finally {
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  });

  it('decoded pixels with a profile and EXIF reach sharp with both, as a JPEG would', async () => {
    const icc = (
      await sharp({ create: { width: 2, height: 2, channels: 3, background: '#808080' } })
        .withIccProfile('p3')
        .jpeg()
        .toBuffer({ resolveWithObject: true })
    ).data;
    const p3 = (await sharp(icc).metadata()).icc!;
    const data = Buffer.from(Array.from({ length: 16 }, () => [200, 100, 50]).flat());
    const image = rawToSharp({ data, width: 4, height: 4, channels: 3, icc: p3, exif: exifWithOrientation(1) });
    const meta = await image.metadata();
    assert.ok(meta.icc?.equals(p3), 'the ICC profile is attached');
    assert.ok(meta.exif && meta.exif.length > 0, 'the EXIF is attached');
    const kept = await rawToSharp({ data, width: 4, height: 4, channels: 3, icc: p3, exif: exifWithOrientation(1) })
      .keepMetadata()
      .jpeg()
      .toBuffer();
    const keptMeta = await sharp(kept).metadata();
    assert.ok(keptMeta.icc?.equals(p3), 'keepMetadata keeps the profile');
    assert.ok(keptMeta.exif && keptMeta.exif.includes(Buffer.from('Maker')), 'keepMetadata keeps the EXIF');
    // Without keepMetadata the pixels are converted from the profile to sRGB, as a JPEG's are.
    const converted = await rawToSharp({ data, width: 4, height: 4, channels: 3, icc: p3 }).toColourspace('srgb').raw().toBuffer();
    const untouched = await rawToSharp({ data, width: 4, height: 4, channels: 3 }).toColourspace('srgb').raw().toBuffer();
    assert.ok(!converted.equals(untouched), 'the profile took part in the conversion');
  });
});
