// Every kind of the registry, as one module and one line make it: its reference page is current,
// its output names follow the one rule, and what its `run` puts in `result` is declared in its
// result schema. Then the results #27 asked to be honest, run on real files through the
// Operation itself (no HTTP): a resize that would enlarge, a target-size compress, an upscale.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { KINDS_PAGE, withKindsReference } from '../../scripts/kind-docs.js';
import { outputName } from '../../src/operations/common.js';
import { compress } from '../../src/operations/compress.js';
import { OPERATIONS, getOperation } from '../../src/operations/registry.js';
import { resize } from '../../src/operations/resize.js';
import type { AnyOperation, OperationResult } from '../../src/operations/types.js';
import { upscale } from '../../src/operations/upscale.js';
import { corpusFile } from '../helpers.js';
import { operationHarness } from './harness.js';

/** What every result says of its output; the rest must be the kind's own declared fields. */
const BASE_RESULT = ['format', 'size', 'width', 'height', 'pages'];

function assertDeclared(op: AnyOperation, done: OperationResult) {
  const declared = new Set([...BASE_RESULT, ...Object.keys(op.result?.properties ?? {})]);
  for (const field of Object.keys(done.result ?? {}))
    assert.ok(declared.has(field), `${op.kind} reports ${field} without declaring it in its result schema`);
}

const PHOTO = corpusFile('images/sharp/320x240.jpg');
const FLOWERS = corpusFile('images/sharp/flowers.jpeg');

describe('kinds: the registry is the one list', () => {
  it('docs/kinds.md is the reference generated from the registry (npm run docs:kinds rewrites it)', () => {
    const page = fs.readFileSync(KINDS_PAGE, 'utf8');
    assert.equal(page, withKindsReference(page), 'run `npm run docs:kinds` and commit docs/kinds.md');
    for (const op of OPERATIONS) {
      assert.ok(page.includes(`## \`${op.kind}\` — ${op.summary}`), `${op.kind} has a section`);
      assert.ok(page.includes(`POST /api/process/${op.kind}\n`), `${op.kind} has an example request`);
      for (const option of Object.keys(op.options.properties)) assert.ok(page.includes(`| \`${option}\` |`), `${op.kind}.${option} is listed`);
    }
  });

  it("names every kind's output <input stem>.<tag>.<ext>, the tag starting with the kind", () => {
    for (const op of OPERATIONS) {
      const name = outputName(op, 'photo.jpg', op.example as Record<string, unknown>);
      const tag = op.tag?.(op.example);
      if (!tag) {
        assert.equal(name, 'photo.jpg', op.kind);
        continue;
      }
      assert.equal(name, `photo.${tag}.jpg`, op.kind);
      assert.match(tag, /^[a-z0-9][a-z0-9.x-]*$/, `${op.kind}'s tag is safe in a file name`);
      // Its own name, or (a pipeline) its steps' kinds.
      assert.ok(tag.startsWith(op.kind) || OPERATIONS.some((other) => other.step && tag.startsWith(other.kind)), `${op.kind}: ${tag}`);
    }
  });

  it('tags say what the options did', () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ['resize', { width: 800 }, 'photo.resize-800.jpg'],
      ['resize', { width: 800, height: 600 }, 'photo.resize-800x600.jpg'],
      ['resize', { height: 600 }, 'photo.resize-x600.jpg'],
      ['crop', { left: 0, top: 0, width: 100, height: 50 }, 'photo.crop-100x50.jpg'],
      ['crop', { aspectRatio: '16:9' }, 'photo.crop.jpg'],
      ['rotate', { angle: 90 }, 'photo.rotate-90.jpg'],
      ['rotate', { angle: -90 }, 'photo.rotate-ccw90.jpg'],
      ['rotate', { angle: 12.345 }, 'photo.rotate-12.35.jpg'],
      ['flip', { direction: 'horizontal' }, 'photo.flip-horizontal.jpg'],
      ['watermark', { text: '©' }, 'photo.watermark.jpg'],
      ['upscale', { factor: 2 }, 'photo.upscale-2x.jpg'],
      ['upscale', { width: 1600, model: 'esrgan' }, 'photo.upscale-1600-esrgan.jpg'],
      ['compress', { quality: 60 }, 'photo.compress-q60.jpg'],
      ['compress', { quality: 'auto' }, 'photo.compress.jpg'],
      ['compress', { targetSize: 10_000 }, 'photo.compress.jpg'],
      [
        'pipeline',
        {
          steps: [
            { kind: 'resize', width: 800 },
            { kind: 'watermark', text: '©' },
          ],
        },
        'photo.resize-800.watermark.jpg',
      ],
      ['pipeline', { steps: [1, 2, 3, 4, 5].map((angle) => ({ kind: 'rotate', angle })) }, 'photo.rotate-1.rotate-2.rotate-3.and-2-more.jpg'],
      ['convert', { format: 'webp' }, 'photo.jpg'],
      ['image-to-pdf', {}, 'photo.jpg'],
    ];
    for (const [kind, options, expected] of cases) assert.equal(outputName(getOperation(kind), 'photo.jpg', options), expected, kind);
    assert.equal(outputName(getOperation('rotate'), 'no-extension', { angle: 180 }), 'no-extension.rotate-180');
  });

  it('a transform that decides a size says it for the pipeline and for the limits (sizes)', () => {
    const source = { width: 600, height: 400 };
    assert.deepEqual(resize.sizes!({ width: 1600 }, source), [{ width: 600, height: 400, capped: true }], 'kept: no enlargement');
    assert.deepEqual(resize.sizes!({ width: 1600, withoutEnlargement: false }, source), [{ width: 1600, height: 1067, capped: true }]);
    assert.deepEqual(resize.sizes!({ width: 300 }, source), [{ width: 300, height: 200, capped: true }]);
    const pipeline = getOperation('pipeline')!;
    assert.deepEqual(
      pipeline.sizes!(
        {
          steps: [
            { kind: 'upscale', factor: 2 },
            { kind: 'flip', direction: 'both' },
            { kind: 'rotate', angle: 90 },
          ],
        },
        source,
      ),
      [
        { width: 1200, height: 800, capped: true },
        { width: 1200, height: 800, capped: false },
        { width: 800, height: 1200, capped: false },
      ],
    );
  });
});

describe('kinds: honest results, run on real files', () => {
  const h = operationHarness();

  it('resize never enlarges unless asked, and says when it kept the size', async () => {
    const kept = (await h.run(resize.kind, PHOTO, { width: 1600, format: 'webp' })).result;
    assert.deepEqual([kept.outputs[0]!.width, kept.outputs[0]!.height], [320, 240]);
    assert.equal(kept.result?.sizeKept, true);
    assertDeclared(resize, kept);
    const meta = await sharp(kept.outputs[0]!.data).metadata();
    assert.deepEqual([meta.width, meta.height], [320, 240], 'the bytes hold the size the result says');

    const enlarged = (await h.run(resize.kind, PHOTO, { width: 1600, withoutEnlargement: false, format: 'webp' })).result;
    assert.deepEqual([enlarged.outputs[0]!.width, enlarged.outputs[0]!.height], [1600, 1200]);
    assert.equal(enlarged.result?.sizeKept, undefined);

    const smaller = (await h.run(resize.kind, PHOTO, { width: 160 })).result;
    assert.deepEqual([smaller.outputs[0]!.width, smaller.outputs[0]!.height], [160, 120]);
    assert.equal(smaller.result?.sizeKept, undefined, 'a resize that did not have to keep its size does not say so');
  });

  it('a targetSize compress reports the quality it chose, and that quality makes an output under the target', async () => {
    const targetSize = 40_000;
    const done = (await h.run(compress.kind, FLOWERS, { targetSize, format: 'jpeg' })).result;
    const output = done.outputs[0]!;
    assert.ok(output.data!.length <= targetSize, `${output.data!.length} bytes`);
    const quality = done.result?.quality;
    assert.ok(Number.isInteger(quality) && (quality as number) >= 1 && (quality as number) <= 100, `quality ${String(quality)}`);
    assert.equal(done.result?.ssim, undefined, 'no similarity was measured');
    assert.equal(done.result?.inputSize, fs.statSync(FLOWERS).size);
    assertDeclared(compress, done);
  });

  it('an auto compress reports its quality and its metric', async () => {
    const done = (await h.run(compress.kind, PHOTO, { quality: 'auto', format: 'webp' })).result;
    assert.equal(typeof done.result?.ssim, 'number');
    assert.ok((done.result!.ssim as number) >= 0.99);
    assert.ok(done.result?.quality === undefined || Number.isInteger(done.result.quality));
    assertDeclared(compress, done);
  });

  it('an upscale reports its model', async () => {
    const done = (await h.run(upscale.kind, PHOTO, { factor: 2 })).result;
    assert.equal(done.result?.model, 'lanczos');
    assert.deepEqual([done.outputs[0]!.width, done.outputs[0]!.height], [640, 480]);
    assertDeclared(upscale, done);
  });

  it('each image kind run on its example declares every result field it reports', async () => {
    for (const op of OPERATIONS) {
      if (op.accepts !== 'image' || op.multiInput || op.extraInputs?.(op.example).length || op.lane?.(op.example) === 'ai') continue;
      assertDeclared(op, (await h.run(op.kind, PHOTO, op.example as Record<string, unknown>)).result);
    }
  });
});
