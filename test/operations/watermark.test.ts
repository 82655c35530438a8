// watermark's own logic on real files, through the Operation (no server).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
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
});
