// The facts info computes from pixels (src/imaging/info.ts), on corpus photos: the perceptual hash
// keeps a resized or recompressed copy within a few bits and puts different photos far apart;
// the palette and the placeholders describe what is there.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import sharp from 'sharp';
import { decode as decodeBlurhash } from 'blurhash';
import { thumbHashToApproximateAspectRatio } from 'thumbhash';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import { exifBytes, hammingDistance, imageInfo, paletteOf, perceptualHash } from '../../src/imaging/info.js';
import { inspect } from '../../src/imaging/source.js';
import { corpusFile } from '../helpers.js';
import { formatOf } from './compress-helpers.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-info-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Info as the service computes it: the header, and a 320 px upright copy as the previews make it. */
async function infoOf(file: string) {
  const header = await inspect(file, formatOf(file)!, DEFAULT_PLANS.max);
  const thumbnail = await sharp(file).autoOrient().resize(320, 320, { fit: 'inside', withoutEnlargement: true }).jpeg({ quality: 82 }).toBuffer();
  return imageInfo(file, header, thumbnail);
}

// Not flowers.jpeg: a smooth, nearly symmetric picture whose low frequencies are all close to their
// median, so noise flips many bits (up to 28 for a recompressed copy) — pHash's known weak spot (docs/info.md).
const PHOTOS = [
  'images/sharp/2569067123_aca715a2ee_o.jpg',
  'images/sharp/Channel_digital_image_CMYK_color.jpg',
  'images/wikimedia/Cerkiew.jpg',
  'images/wikimedia/Carrie.jpg',
  'images/sharp/Landscape_1.jpg',
  'images/sharp/4.webp',
  'images/sharp/Crash_test.gif',
  'images/sharp/embedgravitybird.png',
].map(corpusFile);

describe('perceptual hash', () => {
  it('a resized, recompressed or slightly brightened copy is within a few bits; different photos are far apart', async () => {
    const hashes: string[] = [];
    const near: number[] = [];
    for (const [index, file] of PHOTOS.entries()) {
      const original = (await infoOf(file)).phash;
      hashes.push(original);
      const copies = [
        await sharp(file).autoOrient().resize({ width: 500 }).jpeg({ quality: 40 }).toBuffer(),
        await sharp(file).autoOrient().resize({ width: 1200, withoutEnlargement: true }).webp({ quality: 60 }).toBuffer(),
        await sharp(file).autoOrient().modulate({ brightness: 1.1 }).png().toBuffer(),
      ];
      for (const [n, copy] of copies.entries()) {
        // Copies are written upright (their EXIF orientation is not kept).
        const copyPath = path.join(tmp, `copy-${index}-${n}`);
        fs.writeFileSync(copyPath, copy);
        near.push(hammingDistance(original, (await infoOf(copyPath)).phash));
      }
    }
    const far: number[] = [];
    for (let a = 0; a < hashes.length; a++) for (let b = a + 1; b < hashes.length; b++) far.push(hammingDistance(hashes[a]!, hashes[b]!));
    console.log(`pHash: copies ${Math.max(...near)} bits at most; different photos ${Math.min(...far)} at least`);
    assert.ok(Math.max(...near) <= 8, `copies differ in at most 8 bits: ${near.join(', ')}`);
    assert.ok(Math.min(...far) >= 16, `different photos differ in at least 16 bits: ${far.join(', ')}`);
  });

  it('is 16 hex digits; a flat image and its negative are far apart', () => {
    const ramp = Buffer.alloc(32 * 32);
    for (let i = 0; i < ramp.length; i++) ramp[i] = (i % 32) * 8;
    const inverse = Buffer.from(ramp.map((v) => 255 - v));
    assert.match(perceptualHash(ramp), /^[0-9a-f]{16}$/);
    assert.ok(hammingDistance(perceptualHash(ramp), perceptualHash(inverse)) > 20, 'a negative is another image');
  });
});

describe('info from pixels and header', () => {
  it('a photo: its size, EXIF and GPS, a palette led by the dominant colour, placeholders of its shape', async () => {
    const info = await infoOf(corpusFile('images/wikimedia/Cerkiew.jpg'));
    assert.deepEqual([info.format, info.width, info.height, info.pages, info.hasAlpha], ['jpeg', 1914, 2565, 1, false]);
    assert.equal(typeof info.exif?.Model, 'string');
    assert.ok(info.gps && Math.abs(info.gps.latitude) > 1, `gps ${JSON.stringify(info.gps)}`);
    assert.ok(info.palette.length >= 3 && info.palette.length <= 8, info.palette.join(' '));
    assert.equal(info.dominant, info.palette[0]);
    const ratio = thumbHashToApproximateAspectRatio(Buffer.from(info.thumbhash, 'base64'));
    assert.ok(Math.abs(ratio - 1914 / 2565) < 0.1, `thumbhash aspect ${ratio}`);
    assert.equal(decodeBlurhash(info.blurhash, 4, 3).length, 4 * 3 * 4, 'a valid BlurHash');
  });

  it('EXIF is read from the block libvips found, not from the file: a photo of several MiB yields its EXIF and GPS from a few KiB', async () => {
    const photo = corpusFile('images/wikimedia/Cerkiew.jpg');
    // Its EXIF (with GPS) kept at the front, then megabytes of pixels.
    const big = path.join(tmp, 'big-exif.jpg');
    await sharp(photo).resize({ width: 4000 }).keepExif().jpeg({ quality: 100 }).toFile(big);
    assert.ok(fs.statSync(big).size > 4 * 1024 * 1024, `${fs.statSync(big).size} bytes`);
    const bytes = await exifBytes(big, 'jpeg', (await sharp(big).metadata()).exif);
    assert.ok(bytes && bytes.length < 64 * 1024, `EXIF read: ${bytes?.length} bytes`);
    const [info, original] = [await infoOf(big), await infoOf(photo)];
    assert.equal(info.exif?.Model, original.exif?.Model);
    assert.deepEqual(info.gps, original.gps);
    assert.ok(info.gps && Math.abs(info.gps.latitude) > 1, `gps ${JSON.stringify(info.gps)}`);
  });

  it("a TIFF's EXIF is its own IFDs, read from the file; an image without EXIF reads nothing for it", async () => {
    const tiff = await infoOf(corpusFile('images/sharp/G31D.TIF'));
    assert.ok(tiff.exif && Object.keys(tiff.exif).length > 3, JSON.stringify(tiff.exif));
    const gif = corpusFile('images/sharp/Crash_test.gif');
    assert.equal(await exifBytes(gif, 'gif', undefined), undefined);
  });

  it('orientation is the stored tag; width and height are upright', async () => {
    const info = await infoOf(corpusFile('images/sharp/Landscape_6.jpg'));
    assert.equal(info.orientation, 6);
    assert.ok(info.width > info.height, `upright landscape ${info.width}×${info.height}`);
  });

  it('the palette counts the most frequent colours first and skips transparent pixels', () => {
    const pixels = Buffer.alloc(100 * 4);
    for (let i = 0; i < 100; i++) pixels.set(i < 60 ? [200, 30, 30, 255] : i < 90 ? [20, 20, 220, 255] : [0, 255, 0, 0], i * 4);
    assert.deepEqual(paletteOf(pixels), ['#c81e1e', '#1414dc']);
  });
});
