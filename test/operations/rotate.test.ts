// rotate's own logic on real files, through the Operation (no server).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { corpusFile } from '../helpers.js';
import { operationHarness } from './harness.js';
import { rgba } from './images.js';

describe('rotate (the operation)', () => {
  const h = operationHarness();

  it('90 then -90 returns the same pixels; the first turn swaps the sides', async () => {
    const source = corpusFile('images/sharp/with-alpha.png');
    const turned = await h.run('rotate', source, { angle: 90 });
    const original = await rgba(source);
    const once = await rgba(turned.output);
    assert.deepEqual([once.width, once.height], [original.height, original.width]);
    assert.deepEqual([turned.first.width, turned.first.height], [original.height, original.width]);
    const back = await h.run('rotate', turned.output, { angle: -90 });
    assert.ok((await rgba(back.output)).data.equals(original.data), 'pixels differ after a round trip');
  });
});
