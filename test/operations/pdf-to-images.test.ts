// pdf-to-images run as the worker runs it (the Operation directly, poppler for real, no HTTP, no
// database): every option on a real PDF (image-to-pdf's own output of corpus photos), the limits
// checked before rendering, and the PDFs that must fail with a code.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import yauzl from 'yauzl';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import type { FileRecord } from '../../src/files/files.js';
import { pdfToImages } from '../../src/operations/pdf-to-images.js';
import type { OperationResult } from '../../src/operations/types.js';
import { Poppler } from '../../src/programs/poppler.js';
import { Sandbox } from '../../src/programs/sandbox.js';
import { TaskError } from '../../src/errors.js';
import { encryptedPdf, photoPdf, PHOTO_PAGES, simplePdf } from '../documents/pdf-fixtures.js';
import { corpusFile } from '../helpers.js';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-pdf-to-images-'));
const poppler = new Poppler({
  pdftoppm: 'pdftoppm',
  pdfinfo: 'pdfinfo',
  timeoutMs: 60_000,
  sandbox: new Sandbox({ mode: 'off', command: 'bwrap', hidden: [] }),
});
let photos: string;

function write(name: string, bytes: Buffer): string {
  const file = path.join(scratch, name);
  fs.writeFileSync(file, bytes);
  return file;
}

async function run(
  pdf: string,
  options: Record<string, unknown>,
  limits = DEFAULT_PLANS.max,
  tmpDir = fs.mkdtempSync(path.join(scratch, 'task-')),
): Promise<OperationResult & { result: Record<string, unknown> }> {
  const file = { id: 'file_test', filename: 'report.pdf', format: 'pdf', size: fs.statSync(pdf).size } as FileRecord;
  const result = await pdfToImages.run({
    taskId: 'task_test',
    options: options as never,
    inputs: [{ file, path: pdf }],
    limits,
    deadline: Date.now() + 120_000,
    signal: new AbortController().signal,
    scratchDir: async () => tmpDir,
    progress: () => {},
    documents: { poppler } as never,
  });
  assert.ok(result.result, 'pdf-to-images reports its pages');
  return { ...result, result: result.result };
}

const failsWith = (code: string) => (err: unknown) => {
  assert.ok(err instanceof TaskError, String(err));
  assert.equal(err.code, code, err.message);
  return true;
};

async function zipNames(file: string): Promise<string[]> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(file, { lazyEntries: true }, (err, z) => (err ? reject(err) : resolve(z!))),
  );
  const names: string[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('entry', (entry: yauzl.Entry) => {
      names.push(entry.fileName);
      zip.readEntry();
    });
    zip.on('end', resolve);
    zip.on('error', reject);
    zip.readEntry();
  });
  return names;
}

/** The decoded format and size of each image output (all but the first, the ZIP). */
const images = (result: OperationResult) => Promise.all(result.outputs.slice(1).map(async (output) => sharp(output.path!).metadata()));

describe('pdf-to-images (the operation)', () => {
  before(async () => {
    photos = write('photos.pdf', await photoPdf());
  });
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  it('by default: every page as a 1920 px PNG, in order, and a ZIP of them as the first output', async () => {
    const result = await run(photos, {});
    assert.equal(result.bundled, true);
    const [zip, ...pages] = result.outputs;
    assert.equal(zip!.format, 'zip');
    assert.equal(zip!.pages, 3);
    assert.deepEqual(await zipNames(zip!.path!), ['page-1.png', 'page-2.png', 'page-3.png']);
    assert.deepEqual(
      pages.map((p) => p.filename),
      ['report.page-1.png', 'report.page-2.png', 'report.page-3.png'],
    );
    const decoded = await images(result);
    assert.deepEqual(
      decoded.map((m) => [m.format, m.width, m.height]),
      PHOTO_PAGES.map((page) => ['png', 1920, Math.ceil((1920 * page.height) / page.width)]),
    );
    assert.deepEqual(result.result, { imageFormat: 'png', width: 1920, height: 1440, pages: 3, pageNumbers: [1, 2, 3], pageCount: 3 });
  });

  it('draws the page: the photo comes out, not a blank page', async () => {
    const result = await run(photos, { width: 600, pages: '1' });
    const rendered = await sharp(result.outputs[1]!.path!).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    const photo = await sharp(corpusFile('images/sharp/Landscape_1.jpg')).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    assert.equal(rendered.info.width, photo.info.width);
    let difference = 0;
    for (let i = 0; i < photo.data.length; i++) difference += Math.abs(photo.data[i]! - rendered.data[i]!);
    // Resampled twice (JPEG in the PDF, then poppler's scaling): close, where a blank page is ~100 apart.
    assert.ok(difference / photo.data.length < 16, `mean difference ${difference / photo.data.length} per channel`);
  });

  for (const format of ['jpeg', 'webp', 'png'] as const) {
    it(`format ${format}: every image is one`, async () => {
      const result = await run(photos, { format, width: 300 });
      assert.deepEqual(
        (await images(result)).map((m) => m.format),
        [format, format, format],
      );
      assert.equal(result.result.imageFormat, format);
      assert.match(result.outputs[1]!.filename, new RegExp(`\\.page-1\\.${format === 'jpeg' ? 'jpg' : format}$`));
    });
  }

  it("width: each image that wide, its height by the page's aspect (rounded up, as pdftoppm does)", async () => {
    const result = await run(photos, { width: 400 });
    assert.deepEqual(
      (await images(result)).map((m) => [m.width, m.height]),
      [
        [400, 300],
        [400, 534],
        [400, 300],
      ],
    );
  });

  it('dpi: each page at its printed size (72 dpi: a point a pixel; 144: twice)', async () => {
    assert.deepEqual(
      (await images(await run(photos, { dpi: 72 }))).map((m) => [m.width, m.height]),
      PHOTO_PAGES.map((p) => [p.width, p.height]),
    );
    assert.deepEqual(
      (await images(await run(photos, { dpi: 144, pages: '2' }))).map((m) => [m.width, m.height]),
      [[900, 1200]],
    );
  });

  it('pages: the chosen pages, in page order, named by their numbers', async () => {
    const result = await run(photos, { pages: '3,1', width: 100 });
    assert.deepEqual(result.result.pageNumbers, [1, 3]);
    assert.deepEqual(await zipNames(result.outputs[0]!.path!), ['page-1.png', 'page-3.png']);
    const portrait = await run(photos, { pages: '2', width: 100 });
    assert.deepEqual(
      (await images(portrait)).map((m) => [m.width, m.height]),
      [[100, 134]],
    );
  });

  it('pages past the end fail INVALID_OPTIONS naming pages', async () => {
    await assert.rejects(run(photos, { pages: '2-5' }), (err: unknown) => {
      failsWith('INVALID_OPTIONS')(err);
      assert.deepEqual((err as TaskError).details, { field: 'pages' });
      return true;
    });
  });

  it('check: width and dpi together, and a malformed pages, are refused before queueing', () => {
    assert.deepEqual(
      pdfToImages.check!({ width: 800, dpi: 150 }, [], DEFAULT_PLANS.free).map((e) => e.field),
      ['dpi'],
    );
    assert.deepEqual(
      pdfToImages.check!({ pages: '3-1' }, [], DEFAULT_PLANS.free).map((e) => e.field),
      ['pages'],
    );
    assert.deepEqual(pdfToImages.check!({ dpi: 150, pages: '1-3,5' }, [], DEFAULT_PLANS.free), []);
  });

  it("more pages than the plan's maxFrames fail IMAGE_TOO_LARGE before any is rendered", async () => {
    const many = write('many.pdf', simplePdf({ pages: DEFAULT_PLANS.free.maxFrames + 1, mediaBox: [100, 100] }));
    const tmpDir = fs.mkdtempSync(path.join(scratch, 'task-'));
    await assert.rejects(run(many, { width: 100 }, DEFAULT_PLANS.free, tmpDir), failsWith('IMAGE_TOO_LARGE'));
    assert.deepEqual(fs.readdirSync(tmpDir), [], 'nothing was rendered');
    // A selection within the limit renders.
    const some = await run(many, { width: 100, pages: '1-2' }, DEFAULT_PLANS.free);
    assert.equal(some.result.pages, 2);
  });

  it('a page past maxPixels at the asked width or dpi fails IMAGE_TOO_LARGE before rendering', async () => {
    // 3 × 14 400 pt: at 1920 px wide, 9 216 000 px tall.
    const tall = write('tall.pdf', simplePdf({ mediaBox: [3, 14_400] }));
    await assert.rejects(run(tall, {}), failsWith('IMAGE_TOO_LARGE'));
    // 200 in square (14 400 pt): fine at 1920 px wide, 60 000 px square at 300 dpi.
    const field = write('field.pdf', simplePdf({ mediaBox: [14_400, 14_400] }));
    assert.equal((await run(field, { width: 64 })).result.width, 64);
    await assert.rejects(run(field, { dpi: 300 }), failsWith('IMAGE_TOO_LARGE'));
  });

  it('a password-protected PDF fails DOCUMENT_ENCRYPTED', async () => {
    await assert.rejects(run(write('locked.pdf', encryptedPdf()), {}), failsWith('DOCUMENT_ENCRYPTED'));
  });

  it('a truncated PDF, garbage after the magic bytes, and a page count that lies fail INVALID_IMAGE', async () => {
    const bytes = fs.readFileSync(photos);
    await assert.rejects(run(write('cut.pdf', bytes.subarray(0, Math.floor(bytes.length / 3))), {}), failsWith('INVALID_IMAGE'));
    await assert.rejects(
      run(write('garbage.pdf', Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(4096, 0x5a)])), {}),
      failsWith('INVALID_IMAGE'),
    );
    await assert.rejects(run(write('liar.pdf', simplePdf({ pages: 1, count: 10_000_000 })), {}), failsWith('INVALID_IMAGE'));
  });
});
