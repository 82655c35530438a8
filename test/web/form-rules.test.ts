// The playground's form rules without a browser: which options exclude, need or stand in for each
// other (read from each kind's own check, src/http/routes/dashboard/option-rules.ts), the plain
// words the browser's check uses (web/src/validation.ts), and the CLI words the "API request"
// panel writes (web/src/api-snippets.ts), read back by the CLI's own parser.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import { optionName } from '../../src/cli/job-options.js';
import { optionRules } from '../../src/http/routes/dashboard/option-rules.js';
import { getOperation } from '../../src/operations/registry.js';
import { cliOptions, shellQuote } from '../../web/src/api-snippets.js';
import type { JsonSchema } from '../../web/src/schema-form.js';
import { checkField, disabledFields, validateForm } from '../../web/src/validation.js';

const rulesOf = (kind: string) => optionRules(getOperation(kind)!, DEFAULT_PLANS.pro);
const schemaOf = (kind: string) => getOperation(kind)!.options.properties as Record<string, JsonSchema>;

describe('form rules', () => {
  it("are read from each kind's own check", () => {
    const compress = rulesOf('compress');
    for (const pair of [
      ['quality', 'targetSize'],
      ['quality', 'lossless'],
      ['targetSize', 'lossless'],
    ])
      assert.ok(
        compress.exclusive.some(([a, b]) => a === pair[0] && b === pair[1]),
        `compress: ${pair.join(' / ')}`,
      );
    const watermark = rulesOf('watermark');
    assert.deepEqual(watermark.oneOf, [['text', ['text', 'logoFileId']]]);
    assert.ok(watermark.exclusive.some(([a, b]) => a === 'text' && b === 'logoFileId'));
    assert.ok(watermark.requires.some(([a, b]) => a === 'scale' && b === 'logoFileId'));
    assert.ok(rulesOf('crop').requires.some(([a, b]) => a === 'gravity' && b === 'aspectRatio'));
    assert.deepEqual(rulesOf('rotate'), { exclusive: [], requires: [], oneOf: [] }, 'no false rules');
  });

  it('say what is wrong in plain words, once per field', () => {
    const compress = schemaOf('compress');
    assert.equal(checkField('quality', compress.quality!, '500', false), 'Enter a number from 1 to 100, or "auto".');
    assert.equal(checkField('quality', compress.quality!, 'best', false), 'Enter a number from 1 to 100 or "auto".');
    assert.equal(checkField('quality', compress.quality!, 'auto', false), undefined);
    assert.equal(checkField('targetSize', compress.targetSize!, '1.5', false), 'Enter a whole number of at least 1.');
    assert.equal(
      checkField('format', compress.format!, 'bmp', false),
      'Choose one of "jpeg", "png", "webp", "avif", "gif", "tiff", "jxl", "jpg" or "tif".',
    );
    assert.equal(checkField('aspectRatio', schemaOf('crop').aspectRatio!, '16x9', false), 'Write it like 16:9.');
    assert.equal(checkField('angle', schemaOf('rotate').angle!, '', true), 'Angle is required.');

    const watermark = rulesOf('watermark');
    const properties = schemaOf('watermark');
    assert.deepEqual(validateForm(properties, [], {}, watermark), { text: 'Give Text or Logo file.' });
    assert.deepEqual(validateForm(properties, [], { text: '©', logoFileId: 'file_x' }, watermark), {
      logoFileId: 'Give either Text or Logo file, not both.',
    });
    assert.deepEqual(validateForm(properties, [], { text: '©', scale: '0.5' }, watermark), { scale: 'Scale applies only with Logo file.' });
    const off = disabledFields({ logoFileId: 'file_x' }, watermark);
    assert.deepEqual([...off.keys()].sort(), ['color', 'font', 'fontSize', 'text']);
    assert.equal(off.get('text'), 'Not together with Logo file.');
    assert.equal(disabledFields({}, watermark).get('scale'), 'Only with Logo file.');
  });

  it("write the CLI's own words", () => {
    const words = cliOptions({ quality: 50, withoutEnlargement: true, lossless: false, background: '#fff', text: "it's" });
    assert.deepEqual(words, ['--quality', '50', '--without-enlargement', '--background', "'#fff'", '--text', `'it'\\''s'`]);
    assert.deepEqual(
      words.filter((w) => w.startsWith('--')).map((w) => optionName(w.slice(2))),
      ['quality', 'withoutEnlargement', 'background', 'text'],
    );
    assert.deepEqual(
      cliOptions({
        steps: [
          { kind: 'rotate', angle: 90 },
          { kind: 'watermark', text: 'a, b', opacity: 0.5 },
        ],
      }),
      ['--step', 'rotate:angle=90', '--step', "'watermark:text=a, b,opacity=0.5'"],
    );
    assert.equal(shellQuote('photo.jpg'), 'photo.jpg');
    assert.equal(shellQuote('my photo.jpg'), "'my photo.jpg'");
  });
});
