// The streaming frame count agrees with libvips on every GIF and WebP of the corpus, whatever
// the chunk sizes the bytes arrive in, and gives no count for a file cut short.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { FrameCounter } from '../../src/imaging/frame-count.js';
import { CORPUS } from '../helpers.js';

const manifest: { path: string; format?: string }[] = JSON.parse(fs.readFileSync(`${CORPUS}/MANIFEST.json`, 'utf8'));
const animatable = manifest.filter((entry) => entry.format === 'gif' || entry.format === 'webp').map((entry) => `${CORPUS}/${entry.path}`);

function count(bytes: Buffer, chunkSize: number) {
  const counter = new FrameCounter();
  for (let at = 0; at < bytes.length; at += chunkSize) counter.push(bytes.subarray(at, at + chunkSize));
  return counter.result();
}

describe('frame count while streaming', () => {
  it('finds GIF and WebP files in the corpus', () => {
    assert.ok(animatable.length >= 10, `${animatable.length} files`);
  });

  it('matches libvips on every corpus GIF and WebP that libvips reads, in any chunk size', async () => {
    let compared = 0;
    for (const file of animatable) {
      const bytes = fs.readFileSync(file);
      const meta = await sharp(bytes, { limitInputPixels: false, pages: -1 })
        .metadata()
        .catch(() => undefined);
      if (!meta) continue;
      const expected = meta.pages ?? 1;
      for (const chunkSize of [1, 7, 4096, bytes.length]) {
        const result = count(bytes, chunkSize);
        // A damaged file may have no count; a count given is the decoder's.
        if (result) assert.equal(result.frames, expected, `${file} in chunks of ${chunkSize}`);
        if (chunkSize === bytes.length && result) compared++;
      }
    }
    assert.ok(compared >= 10, `${compared} files compared`);
  });

  it('gives no count for a file cut short, and none for other formats', () => {
    const gif = animatable.find((file) => file.endsWith('.gif'))!;
    const bytes = fs.readFileSync(gif);
    assert.equal(count(bytes.subarray(0, Math.floor(bytes.length / 2)), 512), undefined);
    assert.equal(count(Buffer.from('\x89PNG\r\n\x1a\n0000000000000000', 'latin1'), 3), undefined);
  });
});
