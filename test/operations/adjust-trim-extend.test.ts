// adjust, trim and extend run as the worker runs them, on real corpus files, each option checked
// on the decoded output.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import { adjust } from '../../src/operations/adjust.js';
import { extend } from '../../src/operations/extend.js';
import { trim } from '../../src/operations/trim.js';
import type { AnyOperation, OperationResult } from '../../src/operations/types.js';
import Ajv from 'ajv';
import { corpusFile, tempDir } from '../helpers.js';
import { operationHarness } from './harness.js';

const h = operationHarness();
/** Made-up images the tests write (removed after). */
const tmpRoot = tempDir('imgapi-parity-ops-');
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

/** `op.run` on `file` (a path) with `options`, as the worker calls it (test/operations/harness.ts), its outputs' bytes in memory. */
async function run(op: AnyOperation, file: string, options: Record<string, unknown>): Promise<OperationResult> {
  assert.deepEqual(await h.check(op.kind, options), [], 'the options pass the kind’s own checks');
  const { result, outputs } = await h.run(op.kind, file, options);
  return { ...result, outputs: result.outputs.map((output, i) => ({ ...output, data: outputs[i]!, path: undefined })) };
}

async function raw(data: Buffer | string, channels: 3 | 4 = 3) {
  const image = sharp(data).toColourspace('srgb');
  const out = await (channels === 3 ? image.removeAlpha() : image.ensureAlpha()).raw().toBuffer({ resolveWithObject: true });
  return out;
}

/** Mean of each of the first three channels. */
async function means(data: Buffer | string): Promise<[number, number, number]> {
  const { channels } = await sharp(data).toColourspace('srgb').removeAlpha().stats();
  return [channels[0]!.mean, channels[1]!.mean, channels[2]!.mean];
}

const lum = ([r, g, b]: number[]) => 0.299 * r! + 0.587 * g! + 0.114 * b!;
const photo = corpusFile('images/sharp/flowers.jpeg'); // 1920×1080
const small = corpusFile('images/sharp/320x240.jpg');
const alphaPng = corpusFile('images/wikimedia/PNG_transparency_demonstration_1.png'); // 800×600, soft alpha
// 30 frames of 80×80, 9 of them distinct: the GIF encoder merges a frame that repeats the one before, so 9 come out.
const animated = corpusFile('images/sharp/rotating-squares.gif');
const FRAMES_OUT = 9;

/** The fields the kind's JSON Schema refuses in `options` (as the routes' Ajv does: strict, no coercion). */
function validateOptions(op: AnyOperation, options: Record<string, unknown>): { field: string }[] {
  const validate = new Ajv.default({ strict: false, allErrors: true }).compile({ type: 'object', additionalProperties: false, ...op.options });
  if (validate(options)) return [];
  return (validate.errors ?? []).map((e) => ({ field: e.instancePath.replace(/^\//, '') }));
}

// assert.ok without a message reads the test's source to make one: always say what failed, with the figures.
const more = (value: number, than: number, what: string) => assert.ok(value > than, `${what}: ${value} is not above ${than}`);
const less = (value: number, than: number, what: string) => assert.ok(value < than, `${what}: ${value} is not below ${than}`);

/** The first output's bytes. */
const bytesOf = (result: OperationResult) => result.outputs[0]!.data!;

describe('adjust', () => {
  it('refuses options without any adjustment, and values out of sharp’s ranges (400, not a libvips failure)', () => {
    assert.equal(adjust.check!({}, [], DEFAULT_PLANS.max)[0]?.field, 'brightness');
    assert.equal(adjust.check!({ tint: 'not-a-colour' }, [], DEFAULT_PLANS.max)[0]?.field, 'tint');
    for (const [field, value] of [
      ['brightness', -0.1],
      ['saturation', 11],
      ['contrast', 1.5],
      ['gamma', 0.5],
      ['gamma', 3.1],
      ['blur', 0.1],
      ['blur', 101],
      ['sharpen', 11],
      ['pixelate', 1],
      ['pixelate', 2.5],
      ['pixelate', 257],
      ['grayscale', 'yes'],
    ] as const) {
      const errors = validateOptions(adjust, { [field]: value });
      assert.ok(
        errors.some((e) => e.field === field),
        `${field}: ${value} is refused (${JSON.stringify(errors)})`,
      );
    }
  });

  it('brightness scales the lightness, and keeps the size and format', async () => {
    const before = lum(await means(photo));
    const brighter = await run(adjust, photo, { brightness: 1.5 });
    const darker = await run(adjust, photo, { brightness: 0.5 });
    assert.equal(brighter.outputs[0]!.format, 'jpeg');
    assert.deepEqual([brighter.outputs[0]!.width, brighter.outputs[0]!.height], [1920, 1080]);
    more(lum(await means(bytesOf(brighter))), before + 20, 'brighter');
    less(lum(await means(bytesOf(darker))), before - 20, 'darker');
    less(lum(await means(bytesOf(await run(adjust, small, { brightness: 0 })))), 3, 'brightness 0 is black');
  });

  it('saturation 0 leaves no colour; 2 spreads the channels further apart', async () => {
    const spread = async (data: Buffer | string) => {
      const { data: px } = await raw(data);
      let sum = 0;
      for (let i = 0; i < px.length; i += 3) sum += Math.max(px[i]!, px[i + 1]!, px[i + 2]!) - Math.min(px[i]!, px[i + 1]!, px[i + 2]!);
      return sum / (px.length / 3);
    };
    const before = await spread(photo);
    less(await spread(bytesOf(await run(adjust, photo, { saturation: 0 }))), 3, 'saturation 0');
    more(await spread(bytesOf(await run(adjust, photo, { saturation: 2 }))), before * 1.4, 'saturation 2');
  });

  it('hue turns the colours: 120° moves a red square to green, and 480° is the same turn', async () => {
    const red = path.join(tmpRoot, 'red.png');
    await sharp({ create: { width: 32, height: 32, channels: 3, background: '#c83232' } })
      .png()
      .toFile(red);
    const [r, g] = await means(bytesOf(await run(adjust, red, { hue: 120 })));
    assert.ok(g > r + 50, `green now dominates (${r}, ${g})`);
    assert.deepEqual(await means(bytesOf(await run(adjust, red, { hue: 480 }))), await means(bytesOf(await run(adjust, red, { hue: 120 }))));
  });

  it('contrast widens or narrows the spread around mid-grey; −1 is flat grey', async () => {
    const stdev = async (data: Buffer | string) => (await sharp(data).greyscale().stats()).channels[0]!.stdev;
    const before = await stdev(photo);
    more(await stdev(bytesOf(await run(adjust, photo, { contrast: 0.5 }))), before * 1.1, 'contrast 0.5');
    less(await stdev(bytesOf(await run(adjust, photo, { contrast: -0.5 }))), before * 0.7, 'contrast -0.5');
    const flat = await means(bytesOf(await run(adjust, small, { contrast: -1 })));
    for (const c of flat) assert.ok(Math.abs(c - 128) < 3, `flat grey (${flat})`);
  });

  it('gamma brightens the mid-tones and keeps black and white', async () => {
    const ramp = path.join(tmpRoot, 'ramp.png');
    const data = Buffer.alloc(256 * 4 * 3);
    for (let x = 0; x < 256; x++) for (let y = 0; y < 4; y++) data.fill(x, (y * 256 + x) * 3, (y * 256 + x) * 3 + 3);
    await sharp(data, { raw: { width: 256, height: 4, channels: 3 } })
      .png()
      .toFile(ramp);
    const { data: out } = await raw(bytesOf(await run(adjust, ramp, { gamma: 2.2, format: 'png' })));
    assert.equal(out[0], 0);
    assert.equal(out[255 * 3], 255);
    const mid = out[128 * 3]!;
    assert.ok(Math.abs(mid - 255 * Math.pow(128 / 255, 1 / 2.2)) < 4, `128 → ${mid}`);
  });

  it('grayscale, tint, negate and normalize do what they say', async () => {
    const grey = await means(bytesOf(await run(adjust, photo, { grayscale: true })));
    assert.ok(Math.abs(grey[0] - grey[1]) < 1 && Math.abs(grey[1] - grey[2]) < 1, `grey ${grey}`);
    const [r, g, b] = await means(bytesOf(await run(adjust, photo, { tint: '#0000ff' })));
    assert.ok(b > r && b > g, `blue tint ${[r, g, b]}`);
    const before = await means(small);
    const negated = await means(bytesOf(await run(adjust, small, { negate: true, format: 'png' })));
    for (let c = 0; c < 3; c++) assert.ok(Math.abs(negated[c]! - (255 - before[c]!)) < 1.5, `negated ${negated} of ${before}`);
    // A low-contrast copy, stretched back to the full range.
    const dull = path.join(tmpRoot, 'dull.png');
    await sharp(small).linear(0.3, 90).png().toFile(dull);
    const { channels } = await sharp(bytesOf(await run(adjust, dull, { normalize: true })))
      .greyscale()
      .stats();
    assert.ok(channels[0]!.min < 15 && channels[0]!.max > 240, `normalized ${channels[0]!.min}…${channels[0]!.max}`);
  });

  it('blur removes detail, sharpen adds it', async () => {
    // Detail: the mean difference between neighbouring grey pixels.
    const detail = async (data: Buffer | string) => {
      const { data: px } = await sharp(data).greyscale().raw().toBuffer({ resolveWithObject: true });
      let sum = 0;
      for (let i = 1; i < px.length; i++) sum += Math.abs(px[i]! - px[i - 1]!);
      return sum / px.length;
    };
    const detailed = corpusFile('images/sharp/4.webp'); // a 1024×772 photo
    const before = await detail(detailed);
    less(await detail(bytesOf(await run(adjust, detailed, { blur: 5 }))), before * 0.5, 'blur 5');
    more(await detail(bytesOf(await run(adjust, detailed, { sharpen: 2, format: 'png' }))), before * 1.1, 'sharpen 2');
  });

  it('pixelate makes uniform square blocks of the size asked', async () => {
    const { data, info } = await raw(bytesOf(await run(adjust, small, { pixelate: 16, format: 'png' })));
    assert.deepEqual([info.width, info.height], [320, 240]);
    // Every pixel of a 16×16 block equals the block's top-left pixel.
    for (const [bx, by] of [
      [0, 0],
      [5, 3],
      [19, 14],
    ] as const) {
      const at = (x: number, y: number) => data.subarray((y * 320 + x) * 3, (y * 320 + x) * 3 + 3).toString('hex');
      for (let y = 0; y < 16; y++) for (let x = 0; x < 16; x++) assert.equal(at(bx * 16 + x, by * 16 + y), at(bx * 16, by * 16));
    }
  });

  it('applies the adjustments in the stated order: grayscale before tint keeps the tint', async () => {
    const [r, g, b] = await means(bytesOf(await run(adjust, photo, { grayscale: true, tint: '#ff0000' })));
    assert.ok(r > g + 10 && r > b + 10, `the tint comes after grayscale (${[r, g, b]})`);
  });

  it('keeps alpha, and adjusts an animation frame by frame', async () => {
    const withAlpha = await run(adjust, alphaPng, { brightness: 1.2, negate: true });
    const meta = await sharp(bytesOf(withAlpha)).metadata();
    assert.equal(meta.hasAlpha, true);
    const alphaOf = async (data: Buffer | string) => {
      const { data: px } = await sharp(data).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
      return px.filter((_, i) => i % 4 === 3);
    };
    assert.ok(
      (await alphaOf(alphaPng)).some((a) => a < 255),
      'the input has transparency',
    );
    assert.deepEqual(await alphaOf(bytesOf(withAlpha)), await alphaOf(alphaPng), 'brightness and negate leave alpha alone');
    const anim = await run(adjust, animated, { brightness: 1.3, hue: 90 });
    assert.equal(anim.outputs[0]!.pages, FRAMES_OUT);
    assert.deepEqual([anim.outputs[0]!.width, anim.outputs[0]!.height], [80, 80]);
  });
});

describe('trim', () => {
  it('cuts a uniform border and reports the offsets; an image that is all border comes back whole', async () => {
    const framed = path.join(tmpRoot, 'framed.png');
    await sharp(small).extend({ top: 30, bottom: 10, left: 25, right: 5, background: '#ffffff' }).png().toFile(framed);
    const cut = await run(trim, framed, {});
    assert.deepEqual([cut.outputs[0]!.width, cut.outputs[0]!.height], [320, 240]);
    assert.deepEqual(cut.result, { trimmed: true, offsetLeft: 25, offsetTop: 30 });

    const blank = path.join(tmpRoot, 'blank.png');
    await sharp({ create: { width: 60, height: 40, channels: 3, background: '#336699' } })
      .png()
      .toFile(blank);
    const whole = await run(trim, blank, {});
    assert.deepEqual([whole.outputs[0]!.width, whole.outputs[0]!.height], [60, 40]);
    assert.equal(whole.result!.trimmed, false);
  });

  it('threshold decides how near the border colour counts as border', async () => {
    // A near-white (#f0f0f0) inner frame inside a white one: threshold 10 stops at it, 30 cuts it too.
    const nested = path.join(tmpRoot, 'nested.png');
    const inner = await sharp(small).extend({ top: 8, bottom: 8, left: 8, right: 8, background: '#f0f0f0' }).png().toBuffer();
    await sharp(inner).extend({ top: 12, bottom: 12, left: 12, right: 12, background: '#ffffff' }).png().toFile(nested);
    const strict = await run(trim, nested, { threshold: 10 });
    assert.deepEqual([strict.outputs[0]!.width, strict.result!.offsetLeft], [336, 12]);
    const loose = await run(trim, nested, { threshold: 30 });
    assert.deepEqual([loose.outputs[0]!.width, loose.result!.offsetLeft], [320, 20]);
  });

  it('background names the border colour when the top-left pixel is not it', async () => {
    // The top-left pixel is the photo's own; the black bar on the right is what to cut.
    const barred = path.join(tmpRoot, 'barred.png');
    await sharp(small).extend({ right: 40, background: '#000000' }).png().toFile(barred);
    const cut = await run(trim, barred, { background: 'black' });
    assert.equal(cut.outputs[0]!.width, 320);
    assert.deepEqual(cut.result, { trimmed: true, offsetLeft: 0, offsetTop: 0 });
    assert.equal((await run(trim, barred, {})).result!.trimmed, false);
    assert.equal(trim.check!({ background: 'nope' }, [], DEFAULT_PLANS.max)[0]?.field, 'background');
    assert.ok(
      validateOptions(trim, { threshold: 256 }).some((e) => e.field === 'threshold'),
      'threshold 256 refused',
    );
  });

  it('cuts a transparent border, and an animation by one box for every frame', async () => {
    const padded = path.join(tmpRoot, 'padded.png');
    await sharp(alphaPng).extend({ top: 20, left: 20, background: '#00000000' }).png().toFile(padded);
    const cut = await run(trim, padded, {});
    assert.equal(cut.result!.trimmed, true);
    assert.ok(
      cut.outputs[0]!.width! <= 800 && cut.outputs[0]!.height! <= 600,
      `the transparent border is cut (${cut.outputs[0]!.width}×${cut.outputs[0]!.height})`,
    );

    const anim = await run(trim, animated, {});
    assert.equal(anim.outputs[0]!.pages, FRAMES_OUT, 'every frame kept');
    const meta = await sharp(bytesOf(anim), { animated: true }).metadata();
    assert.equal(meta.pageHeight, anim.outputs[0]!.height);
  });
});

describe('extend', () => {
  it('adds each side, `all` for the sides not given, on the background asked', async () => {
    const out = await run(extend, small, { top: 10, left: 5, all: 2, background: '#ff0000' });
    assert.deepEqual([out.outputs[0]!.width, out.outputs[0]!.height], [320 + 5 + 2, 240 + 10 + 2]);
    const { data } = await raw(bytesOf(await run(extend, small, { top: 10, left: 5, all: 2, background: '#ff0000', format: 'png' })));
    assert.deepEqual([...data.subarray(0, 3)], [255, 0, 0]);
    assert.deepEqual(extend.sizes!({ all: 7, right: 0 }, { width: 100, height: 50 }), [{ width: 107, height: 64, capped: false }]);
  });

  it('defaults to transparent where the format has alpha, else white', async () => {
    const png = await raw(bytesOf(await run(extend, small, { all: 4, format: 'png' })), 4);
    assert.equal(png.data[3], 0, 'transparent corner');
    const jpeg = await raw(bytesOf(await run(extend, small, { all: 4 })));
    assert.ok(jpeg.data[0]! >= 245 && jpeg.data[1]! >= 245 && jpeg.data[2]! >= 245, `white corner (${[...jpeg.data.subarray(0, 3)]})`);
  });

  it('extends every frame of an animation', async () => {
    const anim = await run(extend, animated, { all: 10 });
    assert.deepEqual([anim.outputs[0]!.width, anim.outputs[0]!.height, anim.outputs[0]!.pages], [100, 100, FRAMES_OUT]);
  });

  it('refuses no side, a negative or fractional side, or one past its bound', () => {
    assert.equal(extend.check!({}, [], DEFAULT_PLANS.max)[0]?.field, 'all');
    for (const [field, value] of [
      ['top', -1],
      ['left', 1.5],
      ['all', 1_000_000],
    ] as const) {
      assert.ok(
        validateOptions(extend, { [field]: value }).some((e) => e.field === field),
        `${field}: ${value}`,
      );
    }
  });
});
