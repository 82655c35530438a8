// convert's own logic on real files, through the Operation (no server).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { corpusFile } from '../helpers.js';
import { operationHarness } from './harness.js';
import { meanDifference } from './images.js';

describe('convert (the operation)', () => {
  const h = operationHarness();

  for (const set of ['Landscape', 'Portrait'] as const) {
    it(`EXIF-rotated inputs come out upright (${set} 1–8)`, async () => {
      // Orientation 1 stores the picture upright: it is the reference for the other seven.
      const reference = corpusFile(`images/sharp/${set}_1.jpg`);
      const upright = await sharp(reference).metadata();
      for (let orientation = 2; orientation <= 8; orientation++) {
        const { output, meta } = await h.run('convert', corpusFile(`images/sharp/${set}_${orientation}.jpg`), { format: 'png' });
        assert.deepEqual([meta.width, meta.height], [upright.width, upright.height], `${set}_${orientation} dimensions`);
        assert.equal(meta.orientation ?? 1, 1);
        const difference = await meanDifference(output, reference);
        // JPEG noise is a few levels; a wrong orientation differs by tens.
        assert.ok(difference < 8, `${set}_${orientation} differs from upright by ${difference.toFixed(1)}`);
      }
    });
  }
});
