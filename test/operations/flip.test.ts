// flip's own logic on real files, through the Operation (no server).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { corpusFile } from '../helpers.js';
import { operationHarness } from './harness.js';
import { rgba } from './images.js';

describe('flip (the operation)', () => {
  const h = operationHarness();

  it('both ways, twice, is the identity; once, it is a 180° turn', async () => {
    const source = corpusFile('images/sharp/test-pattern.png');
    const once = await h.run('flip', source, { direction: 'both' });
    const twice = await h.run('flip', once.output, { direction: 'both' });
    assert.ok((await rgba(twice.output)).data.equals((await rgba(source)).data));
    const turned = await sharp(source).rotate(180).png().toBuffer();
    assert.ok((await rgba(once.output)).data.equals((await rgba(turned)).data));
  });
});
