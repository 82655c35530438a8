// compress's quality searches, bounded and reported (#27): "auto" on a 12 MP photo to AVIF
// probes crops and encodes the whole image a bounded number of times (it ran past the 120 s
// limit with six), reporting progress after each encode, and its result states the quality
// chosen and the SSIM of the output delivered (measured apart from the search here); a
// target-size search reports its probes too. Run on the Operation itself; how long they take is
// measured apart (no timed tests).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import { SAMPLED_FULL_ENCODES, SIMILARITY_PROBES } from '../../src/imaging/encode.js';
import { runImageJob } from '../../src/imaging/pipeline.js';
import { reference, similarity, VISUALLY_LOSSLESS_SSIM } from '../../src/imaging/similarity.js';
import { compress } from '../../src/operations/compress.js';
import { corpusFile } from '../helpers.js';
import { operationHarness } from './harness.js';

/** A camera photo of 3000×4000 (12 MP), EXIF orientation 1. */
const PHOTO_12MP = corpusFile('images/wikimedia/Carrie.jpg');
/** A camera photo of 2725×2225 (6 MP). */
const PHOTO_6MP = corpusFile('images/sharp/2569067123_aca715a2ee_o.jpg');
const SMALL = corpusFile('images/sharp/320x240.jpg');

/** SSIM of `output` to the file's pixels as the pipeline sees them (upright, sRGB), measured apart from the search. */
async function ssimToSource(file: string, output: Buffer): Promise<number> {
  const meta = await sharp(output).metadata();
  return similarity(await reference(sharp(file).autoOrient().toColourspace('srgb'), { width: meta.width!, height: meta.height! }), output);
}

/** Progress as a task reports it: rising at every report, short of 100 (the outputs are stored after). */
function assertRising(reports: number[], atLeast: number) {
  assert.ok(reports.length >= atLeast, `${reports.length} progress reports: ${reports.join(', ')}`);
  reports.forEach((percent, index) => {
    assert.ok(Number.isInteger(percent) && percent > 0 && percent < 100, `report ${index}: ${percent}`);
    if (index > 0) assert.ok(percent > reports[index - 1]!, `progress went from ${reports[index - 1]} to ${percent}`);
  });
}

describe('compress searches are bounded and reported', () => {
  const h = operationHarness();

  // The 12 MP AVIF of the report costs about a minute of CPU: `npm run bench compress-search`
  // runs it (IMGAPI_HEAVY_TESTS=1); `npm test` runs the same search on 6 MP to WebP, the same path
  // (crops for a still image of 4.2 MP or more, in any format whose row has localCoding).
  const SEARCHES = [
    { photo: PHOTO_6MP, name: '6 MP photo to WebP', format: 'webp', size: [2725, 2225], sharpFormat: 'webp', heavy: false },
    { photo: PHOTO_12MP, name: '12 MP photo to AVIF', format: 'avif', size: [3000, 4000], sharpFormat: 'heif', heavy: true },
  ];
  for (const search of SEARCHES) {
    const skip = search.heavy && process.env.IMGAPI_HEAVY_TESTS !== '1' ? 'a minute of CPU: npm run bench compress-search' : false;
    it(
      `"auto" on a ${search.name} probes crops, encodes the whole at most a few times, reports progress per encode and states the quality and the real SSIM`,
      { skip },
      async () => {
        const reports: number[] = [];
        const done = await h.run(
          compress.kind,
          search.photo,
          { quality: 'auto', format: search.format },
          { progress: (percent) => reports.push(percent) },
        );
        assert.equal(done.meta.format, search.sharpFormat);
        assert.deepEqual([done.meta.width, done.meta.height], search.size);
        // A report after each encode: the probes and the encodes of the whole image.
        assertRising(reports, SIMILARITY_PROBES + 1);
        // Progress counts pixels encoded: a probe of the crops (about 1 MP) moves it a few points, an
        // encode of the whole tens of points. The probes come first, and the whole is encoded only a
        // bounded number of times — the six encodes of the whole that took a 12 MP AVIF past 120 s are gone.
        assert.ok(reports[0]! <= 10, `the first encode was of the whole: ${reports.join(', ')}`);
        const wholeEncodes = reports.filter((percent, index) => percent - (reports[index - 1] ?? 0) >= 20).length;
        assert.ok(wholeEncodes >= 1 && wholeEncodes <= SAMPLED_FULL_ENCODES, `${wholeEncodes} encodes of the whole: ${reports.join(', ')}`);
        const result = done.result.result as { quality: number; ssim: number; savedBytes: number };
        assert.ok(Number.isInteger(result.quality) && result.quality >= 1 && result.quality <= 100, JSON.stringify(result));
        const measured = await ssimToSource(search.photo, done.output);
        assert.ok(Math.abs(result.ssim - measured) < 0.001, `${result.ssim} reported, ${measured} measured`);
        assert.ok(result.ssim >= VISUALLY_LOSSLESS_SSIM, JSON.stringify(result));
        assert.ok(result.savedBytes > 0);
      },
    );
  }

  it('"auto" on a 6 MP photo to JPEG states the quality it chose and the SSIM of the output delivered', async () => {
    const reports: number[] = [];
    const done = await h.run(compress.kind, PHOTO_6MP, { quality: 'auto', format: 'jpeg' }, { progress: (percent) => reports.push(percent) });
    assertRising(reports, SIMILARITY_PROBES + 1);
    const result = done.result.result as { quality: number; ssim: number };
    assert.ok(Number.isInteger(result.quality), JSON.stringify(result));
    // The search's quality is the output's: encoding the same pixels at it gives the same bytes.
    const again = await sharp(PHOTO_6MP).autoOrient().toColourspace('srgb').jpeg({ quality: result.quality, mozjpeg: true }).toBuffer();
    assert.equal(again.length, done.output.length);
    const measured = await ssimToSource(PHOTO_6MP, done.output);
    assert.ok(Math.abs(result.ssim - measured) < 0.001, `${result.ssim} reported, ${measured} measured`);
    assert.ok(result.ssim >= VISUALLY_LOSSLESS_SSIM, JSON.stringify(result));
  });

  it('a targetSize search on a 6 MP photo (crops foretell the bytes) finds the highest quality that fits', async () => {
    const targetSize = 400_000;
    const reports: number[] = [];
    const done = await h.run(compress.kind, PHOTO_6MP, { targetSize, format: 'jpeg' }, { progress: (percent) => reports.push(percent) });
    assert.ok(done.output.length <= targetSize, `${done.output.length} bytes`);
    const quality = done.result.result?.quality as number;
    assert.ok(Number.isInteger(quality) && quality < 100, `quality ${quality}`);
    // The pixels the pipeline encodes, one quality up: too large.
    const above = await sharp(PHOTO_6MP)
      .autoOrient()
      .toColourspace('srgb')
      .jpeg({ quality: quality + 1, mozjpeg: true })
      .toBuffer();
    assert.ok(above.length > targetSize, `quality ${quality + 1} makes ${above.length} bytes, which fits`);
    assertRising(reports, 4);
  });

  it('a targetSize search reports progress after each probe', async () => {
    const reports: number[] = [];
    const done = await h.run(compress.kind, SMALL, { targetSize: 8000, format: 'webp' }, { progress: (percent) => reports.push(percent) });
    assert.ok(done.output.length <= 8000);
    assert.ok(Number.isInteger(done.result.result?.quality));
    // A bisection of 1–100: six or seven probes.
    assertRising(reports, 6);
  });
});

describe("the pipeline's deadline", () => {
  it('a time limit past an hour (TASK_TIMEOUT_SECONDS allows a day) still encodes: sharp takes a timeout of at most 3600 s', async () => {
    const encoded = await runImageJob({
      inputPath: SMALL,
      inputFormat: 'jpeg',
      limits: DEFAULT_PLANS.max,
      deadline: Date.now() + 2 * 3_600_000,
      format: 'webp',
    });
    assert.equal(encoded.format, 'webp');
    assert.deepEqual([encoded.width, encoded.height], [320, 240]);
  });
});
