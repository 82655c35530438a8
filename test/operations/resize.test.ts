// resize's own logic on real files, through the Operation (no server).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { corpusFile } from '../helpers.js';
import { operationHarness } from './harness.js';
import { countColour, rgba } from './images.js';

describe('resize (the operation)', () => {
  const h = operationHarness();
  const source = corpusFile('images/sharp/test-pattern.png');
  const background: [number, number, number] = [0x12, 0x34, 0x56];

  it('fit cover fills the box, with no letterbox', async () => {
    const out = await rgba((await h.run('resize', source, { width: 300, height: 100, fit: 'cover', background: '#123456' })).output);
    assert.deepEqual([out.width, out.height], [300, 100]);
    assert.equal(countColour(out, background), 0, 'cover must not letterbox');
  });

  it('fit contain letterboxes on the background colour', async () => {
    const out = await rgba((await h.run('resize', source, { width: 300, height: 100, fit: 'contain', background: '#123456' })).output);
    assert.deepEqual([out.width, out.height], [300, 100]);
    assert.ok(countColour(out, background) > 100 * 100, 'contain should show the background');
  });
});
