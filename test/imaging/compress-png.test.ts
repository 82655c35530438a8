// compress on PNGs: the answer before any pixel is decoded when no PNG can be smaller than the
// input (png-size.ts's bound), the chunks a smaller PNG does without, and the lossless optimiser
// (png-optimise.ts) — the same pixels in fewer bytes, never more.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import type { FileRecord } from '../../src/files/files.js';
import { OPTIMISE_MAX_PIXELS, optimisePng } from '../../src/imaging/png-optimise.js';
import { smallestPngBytes, tidyPng } from '../../src/imaging/png-size.js';
import { compress } from '../../src/operations/compress.js';
import { corpusFile } from '../helpers.js';
import { compressFile } from './compress-helpers.js';

/** A PNG's chunks, in order: type and data. */
function chunksOf(png: Buffer): { type: string; data: Buffer }[] {
  const chunks: { type: string; data: Buffer }[] = [];
  for (let offset = 8; offset < png.length;) {
    const length = png.readUInt32BE(offset);
    chunks.push({ type: png.toString('latin1', offset + 4, offset + 8), data: png.subarray(offset + 8, offset + 8 + length) });
    offset += 12 + length;
  }
  return chunks;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(Buffer.concat([head.subarray(4), data])));
  return Buffer.concat([head, data, crc]);
}

/** A `size`×`size` PNG of one grey, 1 bit a pixel, zlib at its best: a few KB for millions of pixels. */
function flatPng(size: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr.set([1, 0, 0, 0, 0], 8); // bit depth 1, greyscale, deflate, filter 0, no interlace
  const scanlines = Buffer.alloc(size * (1 + Math.ceil(size / 8)));
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(scanlines, { level: 9 })), chunk('IEND', Buffer.alloc(0))]);
}

const rgba = (image: Buffer | string) => sharp(image).ensureAlpha().toColourspace('srgb').raw().toBuffer();

describe('compress on PNGs', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-compress-png-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('no PNG is smaller than the bound: deflate at its best on a flat image stays above it', () => {
    for (const size of [1, 100, 4000]) {
      const png = flatPng(size);
      assert.ok(png.length >= smallestPngBytes(size, size, 1), `${size}²: ${png.length} bytes, bound ${smallestPngBytes(size, size, 1)}`);
    }
    // At 8 bits a pixel, a 16-megapixel PNG takes at least 15.5 KB whatever its pixels.
    assert.ok(smallestPngBytes(4000, 4000, 8) > 15_500);
  });

  it('a huge flat PNG that no encode can make smaller is its own bytes, before any pixel is decoded', async () => {
    const file = path.join(dir, 'flat.png');
    fs.writeFileSync(file, flatPng(4000));
    const size = fs.statSync(file).size;
    assert.ok(size < smallestPngBytes(4000, 4000, 8), `${size} bytes`);
    const record = { id: 'file_flat', filename: 'flat.png', format: 'png', size, width: 4000, height: 4000, pages: null } as FileRecord;
    for (const options of [{}, { quality: 'auto' }]) {
      // No time left: any decode or encode would fail the task with PROCESSING_TIMEOUT.
      const result = await compress.run({
        taskId: 'task_flat',
        options: options as never,
        inputs: [{ file: record, path: file }],
        limits: DEFAULT_PLANS.max,
        deadline: Date.now() - 1,
        signal: new AbortController().signal,
        scratchDir: async () => dir,
        progress: () => {},
        documents: { ffmpeg: undefined } as never,
      });
      const output = result.outputs[0]!;
      assert.ok(output.data!.equals(fs.readFileSync(file)), JSON.stringify(options));
      assert.deepEqual(
        { format: output.format, mimeType: output.mimeType, filename: output.filename, width: output.width, height: output.height },
        { format: 'png', mimeType: 'image/png', filename: 'flat.png', width: 4000, height: 4000 },
      );
      assert.deepEqual(result.result, { inputSize: size, savedBytes: 0, ...(options.quality ? { ssim: 1 } : {}) });
    }
  });

  it('a PNG stored loosely still gets smaller, its pixels kept where they are few', async () => {
    // 1000×1000, four colours in bands, written without compression: 3 MB.
    const pixels = Buffer.alloc(1000 * 1000 * 3);
    for (let i = 0; i < 1000 * 1000; i++) pixels.set([[200, 30, 30][(i >> 8) % 3]!, 60 * (i % 4), 90], i * 3);
    const file = path.join(dir, 'loose.png');
    await sharp(pixels, { raw: { width: 1000, height: 1000, channels: 3 } })
      .png({ compressionLevel: 0 })
      .toFile(file);
    const result = await compressFile(file);
    const output = result.outputs[0]!.data!;
    assert.ok(output.length < fs.statSync(file).size / 100, `${output.length} bytes`);
    assert.ok((await rgba(output)).equals(await rgba(file)));
    assert.equal((result.result as { savedBytes: number }).savedBytes, fs.statSync(file).size - output.length);
  });

  it("drops libvips' default 72 dpi pHYs and keeps a declared resolution; one IDAT", async () => {
    const file = path.join(dir, 'graphic.png');
    const graphic = sharp(corpusFile('images/sharp/test-pattern.png'));
    for (const [density, kept] of [
      [undefined, false],
      [300, true],
    ] as const) {
      await (density ? graphic.clone().withMetadata({ density }) : graphic.clone()).png({ compressionLevel: 0 }).toFile(file);
      const output = (await compressFile(file)).outputs[0]!.data!;
      const types = chunksOf(output).map((c) => c.type);
      assert.equal(types.includes('pHYs'), kept, `${density} dpi: ${types.join(' ')}`);
      assert.equal(types.filter((t) => t === 'IDAT').length, 1, types.join(' '));
      if (density) assert.equal(Math.round((await sharp(output).metadata()).density!), density);
    }
    // Not a PNG as libvips writes one: unchanged.
    const cut = fs.readFileSync(file).subarray(0, 100);
    assert.equal(tidyPng(cut), cut);
  });

  it('the optimiser keeps every pixel in fewer bytes, and leaves alone what it may not touch', async () => {
    const source = corpusFile('images/sharp/blackbug.png');
    const png = await sharp(source).png({ compressionLevel: 9, adaptiveFiltering: true }).toBuffer();
    const bounds = { deadline: Date.now() + 60_000 };
    const optimised = await optimisePng(png, 2048 * 1536, bounds);
    assert.ok(optimised.length < png.length, `${optimised.length} of ${png.length} bytes`);
    assert.ok((await rgba(optimised)).equals(await rgba(png)));
    // Past its pixels, out of time, or not a PNG: the bytes as given.
    assert.equal(await optimisePng(png, OPTIMISE_MAX_PIXELS + 1, bounds), png);
    assert.equal(await optimisePng(png, 2048 * 1536, { deadline: Date.now() - 1 }), png);
    const junk = Buffer.from('not a PNG at all');
    assert.equal(await optimisePng(junk, 16, bounds), junk);
    // A canceled task: the worker is ended and the reason comes back.
    const abort = new AbortController();
    const pending = optimisePng(png, 2048 * 1536, { ...bounds, signal: abort.signal });
    abort.abort(new Error('canceled'));
    await assert.rejects(pending, /canceled/);
  });
});
