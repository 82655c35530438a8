// compress: never larger than its input in the same format (the whole corpus, on the operation
// itself), and quality "auto" — the smallest output whose SSIM to the input stays at or above
// the visually-lossless threshold — on the operation and once over HTTP.
import assert from 'node:assert/strict';
import { OUTPUT_FORMATS } from '../../src/imaging/formats.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { compress } from '../../src/operations/compress.js';
import { reference, similarity, VISUALLY_LOSSLESS_SSIM } from '../../src/imaging/similarity.js';
import { CORPUS, Client, DIALECTS, corpusFile, startServer, type TestServer } from '../helpers.js';
import { compressFile, formatOf } from './compress-helpers.js';

const PHOTO = corpusFile('images/sharp/2569067123_aca715a2ee_o.jpg');

/** SSIM of `output` to the file's pixels as the pipeline sees them (upright, sRGB), measured apart from the search. */
async function ssimToSource(file: string, output: Buffer): Promise<number> {
  const meta = await sharp(output).metadata();
  return similarity(await reference(sharp(file).autoOrient().toColourspace('srgb'), { width: meta.width!, height: meta.height! }), output);
}

const bytesOf = (result: Awaited<ReturnType<typeof compressFile>>): Buffer => result.outputs[0]!.data!;

describe('compress quality "auto"', () => {
  it('on a camera photo: smaller than the default, its SSIM at or above the threshold, and result says so', async () => {
    const byDefault = await compressFile(PHOTO);
    const auto = await compressFile(PHOTO, { quality: 'auto' });
    const output = bytesOf(auto);
    assert.equal((await sharp(output).metadata()).format, 'jpeg');
    assert.ok(output.length < bytesOf(byDefault).length, `auto ${output.length} bytes, default ${bytesOf(byDefault).length}`);
    const ssim = await ssimToSource(PHOTO, output);
    assert.ok(ssim >= VISUALLY_LOSSLESS_SSIM, `SSIM ${ssim}`);
    const result = auto.result as { quality: number; ssim: number; inputSize: number; savedBytes: number };
    assert.ok(Number.isInteger(result.quality) && result.quality >= 1 && result.quality <= 100, JSON.stringify(result));
    assert.ok(result.ssim >= VISUALLY_LOSSLESS_SSIM && Math.abs(result.ssim - ssim) < 0.001, `${result.ssim} reported, ${ssim} measured`);
    assert.equal(result.inputSize, fs.statSync(PHOTO).size);
    assert.equal(result.savedBytes, result.inputSize - output.length);
  });

  it('where no palette keeps the threshold, a PNG stays lossless (here: the input itself, SSIM 1, no quality)', async () => {
    const file = corpusFile('images/wikimedia/PNG_transparency_demonstration_1.png');
    const auto = await compressFile(file, { quality: 'auto' });
    const output = bytesOf(auto);
    assert.ok(output.length <= fs.statSync(file).size);
    assert.equal(await ssimToSource(file, output), 1);
    assert.deepEqual({ ...auto.result, inputSize: undefined, savedBytes: undefined }, { inputSize: undefined, savedBytes: undefined, ssim: 1 });
  });

  it('a transparent graphic to WebP keeps its alpha within the threshold (judged over black and over white)', async () => {
    const file = corpusFile('images/wikimedia/PNG_transparency_demonstration_1.png');
    const auto = await compressFile(file, { quality: 'auto', format: 'webp' });
    const output = bytesOf(auto);
    assert.equal((await sharp(output).metadata()).hasAlpha, true);
    assert.ok((await ssimToSource(file, output)) >= VISUALLY_LOSSLESS_SSIM);
  });

  it('an animation is searched on its first frame and keeps every frame', async () => {
    const file = corpusFile('images/sharp/animated-loop-3.webp');
    const auto = await compressFile(file, { quality: 'auto' });
    const meta = await sharp(bytesOf(auto), { pages: -1 }).metadata();
    assert.equal(meta.format, 'webp');
    assert.ok(meta.pages! > 1);
    assert.equal(auto.outputs[0]!.pages, meta.pages);
    assert.ok((auto.result as { ssim: number }).ssim >= VISUALLY_LOSSLESS_SSIM);
  });

  it('"auto" excludes targetSize and lossless', () => {
    assert.deepEqual(
      compress.check!({ quality: 'auto', targetSize: 1000 }, [], undefined as never).map((e) => e.field),
      ['targetSize'],
    );
    assert.deepEqual(
      compress.check!({ quality: 'auto', lossless: true }, [], undefined as never).map((e) => e.field),
      ['lossless'],
    );
  });
});

describe('compress writes few-colour PNGs as an exact palette at the smallest bit depth', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-palette-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A 240×160 graphic of `count` colours in 10 px squares, stored as plain RGB (no palette). */
  async function graphic(count: number): Promise<string> {
    const [width, height] = [240, 160];
    const pixels = Buffer.alloc(width * height * 3);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const k = (Math.floor(x / 10) + Math.floor(y / 10) * 7) % count;
        pixels.set([(k * 37) % 256, (k * 91) % 256, (k * 53 + 11) % 256], (y * width + x) * 3);
      }
    }
    const file = path.join(dir, `${count}-colours.png`);
    await sharp(pixels, { raw: { width, height, channels: 3 } })
      .png({ compressionLevel: 6 })
      .toFile(file);
    return file;
  }

  const rgb = (image: Buffer | string) => sharp(image).removeAlpha().toColourspace('srgb').raw().toBuffer();

  // 6 colours: sharp would write 2 bits (4 colours) from `colours: 6`; they need 4.
  for (const [count, depth] of [
    [2, 1],
    [6, 4],
    [12, 4],
  ] as const) {
    it(`${count} colours: a ${depth}-bit palette PNG with the same pixels, by default and with "auto"`, async () => {
      const file = await graphic(count);
      for (const options of [{}, { quality: 'auto' }]) {
        const result = await compressFile(file, options);
        const output = bytesOf(result);
        assert.equal(output.readUInt8(24), depth, `IHDR bit depth, ${JSON.stringify(options)}`);
        assert.equal(output.readUInt8(25), 3, 'IHDR colour type: indexed');
        assert.ok((await rgb(output)).equals(await rgb(file)), `pixels differ, ${JSON.stringify(options)}`);
        assert.equal((result.result as { savedBytes: number }).savedBytes, fs.statSync(file).size - output.length);
        if (options.quality) assert.equal((result.result as { ssim: number }).ssim, 1);
      }
    });
  }
});

// "Never larger" over the corpus, on the operation itself: every decodable image in a format
// compress writes back, with the defaults and with "auto" (auto on files up to 2 MP, which keeps
// the run short; the search is the same on larger ones, only slower).
interface Entry {
  path: string;
  kind: string;
  format: string;
  expect: string;
}
const SAME_FORMAT: ReadonlySet<string> = new Set(OUTPUT_FORMATS);
const AUTO_MAX_PIXELS = 2_000_000;

// With its defaults, compress is held to "never larger" on every corpus image by the conformance
// test (test/conformance/corpus.test.ts, through the API); here "auto" on a sample of them.
describe('compress "auto" never returns a larger file in the same format (corpus sample, on the operation)', () => {
  it('every output is at most its input, savedBytes says by how much', async () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(CORPUS, 'MANIFEST.json'), 'utf8')) as Entry[];
    const problems: string[] = [];
    let checked = 0;
    let candidates = 0;
    for (const entry of manifest) {
      if (entry.kind !== 'image' || entry.expect !== 'decodable' || !SAME_FORMAT.has(entry.format)) continue;
      const file = path.join(CORPUS, entry.path);
      if (formatOf(file) !== entry.format) continue; // refused at upload (lossless JPEG, …)
      const size = fs.statSync(file).size;
      // Formats libvips does not read (this service decodes them itself) count as large.
      const meta = await sharp(file, { limitInputPixels: false })
        .metadata()
        .catch(() => ({ width: Infinity, height: 1, pageHeight: undefined, pages: undefined }));
      const pixels = meta.width! * (meta.pageHeight ?? meta.height!) * (meta.pages ?? 1);
      // "auto" (up to 7 encodes each) on every sixth small file keeps the suite short; the bench's
      // compression scenario runs it on every corpus photo and graphic. Landscape_2…8 and
      // Portrait_2…8 are _1 under the other EXIF orientations: _1 stands for them.
      if (pixels > AUTO_MAX_PIXELS || /(Landscape|Portrait)_[2-8]\.jpg$/.test(entry.path) || candidates++ % 6 !== 0) continue;
      const result = await compressFile(file, { quality: 'auto' });
      const output = result.outputs[0]!;
      const { inputSize, savedBytes } = result.result as { inputSize: number; savedBytes: number };
      if (output.format !== entry.format) problems.push(`${entry.path}: ${output.format}`);
      else if (output.data!.length > size) problems.push(`${entry.path}: ${output.data!.length} bytes from ${size}`);
      if (inputSize !== size || savedBytes !== size - Math.min(size, output.data!.length)) {
        problems.push(`${entry.path}: result ${JSON.stringify(result.result)}`);
      }
      checked++;
    }
    assert.deepEqual(problems, []);
    assert.ok(checked > 30, `${checked} compressed with "auto"`);
  });
});

for (const dialect of DIALECTS) {
  describe(`compress quality "auto" over HTTP (${dialect})`, () => {
    let server: TestServer;
    let client: Client;

    before(async () => {
      server = await startServer({ dialect });
      client = new Client(server.url, await server.newKey('pro'));
    });
    after(() => server.close());

    it('the task reports the quality and SSIM it chose, and the output keeps them', async () => {
      const file = corpusFile('images/sharp/flowers.jpeg');
      const fileId = await client.uploadOk(file);
      const response = await client.post('/api/process/compress', { fileId, quality: 'auto' });
      assert.equal(response.status, 202, JSON.stringify(response.body));
      const task = await client.waitForTask(response.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      const output = await client.download(task.outputFileId);
      assert.equal(task.result.size, output.length);
      assert.ok(Number.isInteger(task.result.quality), JSON.stringify(task.result));
      assert.ok(task.result.ssim >= VISUALLY_LOSSLESS_SSIM, JSON.stringify(task.result));
      assert.ok((await ssimToSource(file, output)) >= VISUALLY_LOSSLESS_SSIM);
      assert.equal(task.result.savedBytes, fs.statSync(file).size - output.length);
    });

    it('refuses another word, a number past 100 and "auto" with targetSize, with one error naming the field', async () => {
      const fileId = await client.uploadOk(corpusFile('images/sharp/flowers.jpeg'));
      for (const [body, field] of [
        [{ fileId, quality: 'best' }, 'quality'],
        [{ fileId, quality: 500 }, 'quality'],
        [{ fileId, quality: 'auto', targetSize: 10_000 }, 'targetSize'],
      ] as const) {
        const response = await client.post('/api/process/compress', body);
        assert.equal(response.status, 400, JSON.stringify(response.body));
        assert.equal(response.body.error.code, 'VALIDATION_ERROR');
        const fields = (response.body.error.details.fields as { field: string }[]).filter((f) => f.field === field);
        assert.equal(fields.length, 1, JSON.stringify(response.body.error));
      }
    });
  });
}
