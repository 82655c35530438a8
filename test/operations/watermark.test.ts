// watermark's own logic on real files, through the Operation (no server).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { corpusFile } from '../helpers.js';
import { operationHarness } from './harness.js';
import { changedBox, rgba } from './images.js';

describe('watermark (the operation)', () => {
  const h = operationHarness();
  const source = corpusFile('images/sharp/test-pattern.png');

  for (const position of ['bottom-right', 'top-left', 'center'] as const) {
    it(`text at ${position} changes pixels only near that position`, async () => {
      const ran = await h.run('watermark', source, { text: 'imgapi', position, fontSize: 24, margin: 10, opacity: 1, color: '#ff0000' });
      const before = await rgba(source);
      const after = await rgba(ran.output);
      assert.deepEqual([after.width, after.height], [before.width, before.height]);
      const box = changedBox(before, after);
      assert.ok(box, 'the watermark changed nothing');
      const { minX, minY, maxX, maxY } = box;
      const [w, ht] = [before.width, before.height];
      const at = `changed box ${minX},${minY}–${maxX},${maxY}`;
      // The changed area is about one line of 24 px text, within the margin of its corner.
      assert.ok(maxY - minY < 60, `changed rows ${minY}–${maxY}`);
      if (position === 'bottom-right') assert.ok(minX > w / 3 && maxX <= w - 10 && minY > ht / 2 && maxY <= ht - 10, at);
      if (position === 'top-left') assert.ok(minX >= 10 && maxX < (2 * w) / 3 && minY >= 10 && maxY < ht / 2, at);
      if (position === 'center') assert.ok(minX > w / 6 && maxX < (5 * w) / 6 && minY > ht / 3 && maxY < (2 * ht) / 3, at);
    });
  }

  const black = (width: number, height: number) =>
    sharp({ create: { width, height, channels: 3, background: '#000000' } })
      .png()
      .toBuffer();

  it('markup in the text is drawn as text: tags and entities neither apply nor break it', async () => {
    // Were the span applied, the mark would be red and huge; drawn as text, it is white.
    const text = '<span foreground="#ff0000" size="400000">X</span> &amp; &#0; <b>';
    const { output } = await h.run('watermark', await black(400, 200), { text, color: '#ffffff', opacity: 1, fontSize: 12 });
    const { data, info } = await sharp(output).raw().toBuffer({ resolveWithObject: true });
    let red = 0;
    let white = 0;
    for (let i = 0; i < data.length; i += info.channels) {
      if (data[i]! > 150 && data[i + 1]! < 80) red++;
      if (data[i]! > 200 && data[i + 1]! > 200 && data[i + 2]! > 200) white++;
    }
    assert.equal(red, 0, 'no red pixel: the markup was not applied');
    assert.ok(white > 50, `the text was drawn (${white} white pixels)`);
  });

  it('the largest fontSize with the longest text on a small image completes quickly: the text is fitted, not drawn huge', async () => {
    const small = await black(64, 48);
    const started = Date.now();
    const [, word] = await Promise.all([
      h.run('watermark', small, { text: 'W'.repeat(500), fontSize: 2000, opacity: 1 }),
      h.run('watermark', small, { text: 'MARK', fontSize: 2000, opacity: 1, position: 'center' }),
    ]).then((runs) => {
      for (const ran of runs) assert.deepEqual([ran.meta.width, ran.meta.height], [64, 48]);
      return runs;
    });
    assert.ok(Date.now() - started < 10_000, `${Date.now() - started} ms`);
    // The word, shrunk to the image's width, is legible ink in the middle.
    assert.ok((await sharp(word.output).stats()).channels[0]!.max > 200, 'the text is on the image');
  });

  it('a large fontSize on a large image is drawn at that size when it fits', async () => {
    const options = { text: 'HI', fontSize: 300, opacity: 1, margin: 0, position: 'top-left', color: '#ffffff' };
    const { output } = await h.run('watermark', await black(1600, 400), options);
    // The ink of "HI" at 300 px: about 200 px tall (cap height), well over what a shrunk mark would be.
    const { data, info } = await sharp(output).raw().toBuffer({ resolveWithObject: true });
    let top = info.height;
    let bottom = -1;
    for (let y = 0; y < info.height; y++) {
      for (let x = 0; x < info.width; x++) {
        if (data[(y * info.width + x) * info.channels]! > 128) {
          top = Math.min(top, y);
          bottom = Math.max(bottom, y);
          break;
        }
      }
    }
    assert.ok(bottom - top > 180 && bottom - top < 300, `ink ${top}–${bottom}`);
  });
});
