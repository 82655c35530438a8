// JPEG XL, run through the image pipeline directly on real files (no HTTP, no database): the
// corpus has no JPEG XL, so cjxl (libjxl's reference encoder) makes them from corpus photos, and
// what this service writes is read back by djxl (libjxl's reference decoder).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import sharp from 'sharp';
import { TaskError } from '../../src/errors.js';
import { decodeRaw, readHeader } from '../../src/imaging/decoders/raw.js';
import { runImageJob } from '../../src/imaging/pipeline.js';
import { sniff } from '../../src/imaging/sniff.js';
import { corpusFile, tempDir } from '../helpers.js';
import { cjxl, djxl, jxlDeclaring } from './jxl-files.js';

const PHOTO = 'images/sharp/Portrait_1.jpg';
const LIMITS = { maxPixels: 50_000_000, maxFrames: 100, maxTotalPixels: 100_000_000 };
const dir = tempDir('jxl-ops-');
after(() => fs.rmSync(dir, { recursive: true, force: true }));

let n = 0;
function saved(bytes: Buffer): string {
  const file = path.join(dir, `${n++}`);
  fs.writeFileSync(file, bytes);
  return file;
}
const job = (inputPath: string, inputFormat: string, extra: Partial<Parameters<typeof runImageJob>[0]> = {}) =>
  runImageJob({ inputPath, inputFormat, limits: LIMITS, deadline: Date.now() + 120_000, ...extra });

describe('JPEG XL input', async () => {
  const photo = await sharp(corpusFile(PHOTO)).metadata();
  const bare = cjxl(await sharp(corpusFile(PHOTO)).png().toBuffer());
  const container = cjxl(PHOTO, ['--container=1']);

  it('a bare codestream and a container are both sniffed as jxl, and their header gives the size', async () => {
    assert.deepEqual(bare.subarray(0, 2), Buffer.from([0xff, 0x0a]));
    assert.equal(container.toString('latin1', 4, 8), 'JXL ');
    for (const file of [bare, container]) {
      assert.deepEqual(sniff(file), { format: 'jxl', mimeType: 'image/jxl' });
      const header = await readHeader(file, 'jxl');
      assert.deepEqual([header.width, header.height], [photo.width, photo.height]);
    }
  });

  it('decodes to the pixels libjxl gives (djxl), near the photo it was made from', async () => {
    const own = await decodeRaw(container, 'jxl', LIMITS.maxPixels);
    assert.deepEqual([own.width, own.height, own.channels], [photo.width, photo.height, 3]);
    const reference = await sharp(djxl(container)).removeAlpha().raw().toBuffer();
    let diff = 0;
    for (let i = 0; i < reference.length; i++) diff = Math.max(diff, Math.abs(reference[i]! - own.data[i]!));
    assert.ok(diff <= 2, `differs from djxl by ${diff}`);
  });

  it('resize of a JPEG XL to PNG keeps its aspect', async () => {
    const out = await job(saved(bare), 'jxl', { format: 'png', steps: [{ transform: (image) => image.resize({ width: 200 }) }] });
    assert.equal(out.format, 'png');
    assert.deepEqual([out.width, out.height], [200, Math.round((200 * photo.height!) / photo.width!)]);
  });

  it('the pixel limit holds from the header, before a pixel is decoded', async () => {
    await assert.rejects(decodeRaw(bare, 'jxl', 1000), (err: TaskError) => err.code === 'IMAGE_TOO_LARGE');
    const bomb = jxlDeclaring(20_000, 20_000);
    assert.deepEqual([(await readHeader(bomb, 'jxl')).width, (await readHeader(bomb, 'jxl')).height], [20_000, 20_000]);
    await assert.rejects(job(saved(bomb), 'jxl'), (err: TaskError) => err.code === 'IMAGE_TOO_LARGE');
  });

  it('a cut-short file fails INVALID_IMAGE', async () => {
    await assert.rejects(job(saved(bare.subarray(0, bare.length >> 1)), 'jxl', { format: 'png' }), (err: TaskError) => err.code === 'INVALID_IMAGE');
  });
});

describe('JPEG XL output', () => {
  it('quality: smaller at a lower quality, and djxl decodes it to the size written', async () => {
    const input = corpusFile(PHOTO);
    const high = await job(input, 'jpeg', { format: 'jxl', quality: 90 });
    const low = await job(input, 'jpeg', { format: 'jxl', quality: 40 });
    assert.deepEqual(sniff(high.data), { format: 'jxl', mimeType: 'image/jxl' });
    assert.ok(low.data.length < high.data.length, `${low.data.length} ≥ ${high.data.length}`);
    const decoded = await sharp(djxl(low.data)).metadata();
    assert.deepEqual([decoded.width, decoded.height], [low.width, low.height]);
  });

  it('lossless: djxl decodes the very pixels, alpha included', async () => {
    const png = await sharp(corpusFile('images/sharp/5_webp_a.webp')).resize({ width: 64 }).png().toBuffer();
    const out = await job(saved(png), 'png', { format: 'jxl', lossless: true });
    const source = await sharp(png).ensureAlpha().raw().toBuffer();
    const decoded = await sharp(djxl(out.data)).ensureAlpha().raw().toBuffer();
    assert.ok(decoded.equals(source), 'the pixels changed');
    assert.ok(
      source.some((value, i) => i % 4 === 3 && value < 255),
      'the sample has transparent pixels',
    );
  });

  it('an animation to JPEG XL is its first frame', async () => {
    const out = await job(corpusFile('images/sharp/rotating-squares.gif'), 'gif', { format: 'jxl' });
    assert.equal(out.frames, 1);
    assert.ok((await sharp(djxl(out.data)).metadata()).width === out.width);
  });
});
