// image-to-pdf over real HTTP: pages, their aspect and order, JPEG streams kept byte for byte,
// other formats embedded losslessly, layouts, validation, and the PDF's preview.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { decodePDFRawStream, PDFArray, PDFDict, PDFDocument, PDFName, PDFNumber, PDFRawStream, PDFRef, type PDFPage } from 'pdf-lib';
import sharp from 'sharp';
import { Client, corpusFile, startServer, tempDir, type TestServer } from '../helpers.js';

interface PageImage {
  bytes: Buffer;
  filter: string | undefined;
  width: number;
  height: number;
  colourSpace: string | undefined;
  smask: PDFRawStream | undefined;
}

/** The image XObjects a page draws, as stored in the file. */
function pageImages(page: PDFPage): PageImage[] {
  const resources = page.node.Resources();
  const xobjects = resources?.lookupMaybe(PDFName.of('XObject'), PDFDict);
  if (!xobjects) return [];
  const out: PageImage[] = [];
  for (const [, ref] of xobjects.entries()) {
    const stream = page.doc.context.lookup(ref as PDFRef) as PDFRawStream;
    const dict = stream.dict;
    const name = (key: string) => dict.lookupMaybe(PDFName.of(key), PDFName)?.decodeText();
    const smaskRef = dict.get(PDFName.of('SMask'));
    out.push({
      bytes: Buffer.from(stream.contents),
      filter: name('Filter'),
      width: dict.lookup(PDFName.of('Width'), PDFNumber).asNumber(),
      height: dict.lookup(PDFName.of('Height'), PDFNumber).asNumber(),
      colourSpace: name('ColorSpace'),
      smask: smaskRef ? (page.doc.context.lookup(smaskRef as PDFRef) as PDFRawStream) : undefined,
    });
  }
  return out;
}

describe('image-to-pdf', () => {
  let server: TestServer;
  let client: Client;
  let scratch: string;

  before(async () => {
    server = await startServer({ dialect: 'sqlite' });
    client = new Client(server.url, await server.newKey('pro'));
    scratch = tempDir('imgapi-pdf-');
  });
  after(async () => {
    await server?.close();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  async function makePdf(files: string[], options: Record<string, unknown> = {}) {
    const fileIds: string[] = [];
    for (const file of files) fileIds.push(await client.uploadOk(corpusFile(file)));
    const job = await client.post('/api/process/image-to-pdf', { fileIds, ...options });
    assert.equal(job.status, 202, JSON.stringify(job.body));
    const task = await client.waitForTask(job.body.data.taskId);
    assert.equal(task.status, 'completed', JSON.stringify(task.error));
    assert.deepEqual(task.input, { fileIds });
    const bytes = await client.download(task.outputFileId);
    return { task, bytes, pdf: await PDFDocument.load(bytes) };
  }

  it('three JPEGs: three pages of their aspect, in order, opened by poppler, the JPEG streams byte-identical', async () => {
    const sources = ['images/sharp/Landscape_1.jpg', 'images/sharp/Portrait_1.jpg', 'images/sharp/flowers.jpeg'];
    const { task, bytes, pdf } = await makePdf(sources);
    assert.equal(task.result.pages, 3);
    assert.equal(task.result.format, 'pdf');
    const meta = (await client.get(`/api/files/${task.outputFileId}`)).body.data;
    assert.equal(meta.mimeType, 'application/pdf');
    assert.equal(meta.pages, 3);
    assert.equal(meta.filename, 'Landscape_1.pdf');

    const file = path.join(scratch, 'three.pdf');
    fs.writeFileSync(file, bytes);
    const info = spawnSync('pdfinfo', [file], { encoding: 'utf8' });
    assert.equal(info.status, 0, info.stderr);
    assert.match(info.stdout, /^Pages:\s+3$/m);

    assert.equal(pdf.getPageCount(), 3);
    for (const [i, page] of pdf.getPages().entries()) {
      const source = fs.readFileSync(corpusFile(sources[i]!));
      const { width, height } = await sharp(source).metadata();
      const size = page.getSize();
      assert.ok(
        Math.abs(size.width / size.height - width! / height!) < 0.005,
        `page ${i + 1} aspect ${size.width}/${size.height} vs ${width}/${height}`,
      );
      const images = pageImages(page);
      assert.equal(images.length, 1);
      assert.equal(images[0]!.filter, 'DCTDecode');
      assert.ok(images[0]!.bytes.equals(source), `page ${i + 1} embeds ${sources[i]} byte for byte`);
      assert.deepEqual([images[0]!.width, images[0]!.height], [width, height]);
    }
  });

  it('embeds other formats losslessly (alpha as a soft mask), animations by their first frame, and turns EXIF-oriented JPEGs upright', async () => {
    const sources = [
      'images/sharp/test-pattern.png',
      'images/sharp/rotating-squares.gif',
      'images/sharp/Landscape_6.jpg',
      'images/sharp/grey-8bit-alpha.png',
    ];
    const { pdf, task } = await makePdf(sources);
    assert.equal(task.result.pages, 4);
    const [png, gif, oriented, grey] = pdf
      .getPages()
      .map(pageImages)
      .map((images) => images[0]!);

    // RGBA PNG: deflated RGB samples equal to the source's, alpha in the SMask.
    const source = await sharp(corpusFile(sources[0]!)).raw().toBuffer({ resolveWithObject: true });
    assert.equal(png!.filter, 'FlateDecode');
    assert.equal(png!.colourSpace, 'DeviceRGB');
    const rgb = zlib.inflateSync(png!.bytes);
    const alpha = zlib.inflateSync(Buffer.from(png!.smask!.contents));
    assert.equal(source.info.channels, 4);
    let mismatches = 0;
    for (let p = 0; p < source.info.width * source.info.height; p++) {
      for (let c = 0; c < 3; c++) if (rgb[p * 3 + c] !== source.data[p * 4 + c]) mismatches++;
      if (alpha[p] !== source.data[p * 4 + 3]) mismatches++;
    }
    assert.equal(mismatches, 0, 'lossless');

    // Animated GIF: one page, the first frame's size.
    const first = await sharp(corpusFile(sources[1]!)).metadata();
    assert.deepEqual([gif!.width, gif!.height], [first.width, first.pageHeight ?? first.height]);

    // Orientation 6: re-encoded upright (600×450 displayed from 450×600 stored).
    assert.equal(oriented!.filter, 'DCTDecode');
    assert.deepEqual([oriented!.width, oriented!.height], [600, 450]);
    assert.ok(!oriented!.bytes.equals(fs.readFileSync(corpusFile(sources[2]!))));
    const size = pdf.getPage(2).getSize();
    assert.ok(size.width > size.height, 'the page is landscape, as the photo displays');

    // Grey + alpha: one grey channel and a mask.
    assert.equal(grey!.colourSpace, 'DeviceGray');
    assert.ok(grey!.smask);
  });

  it('a lossless JPEG becomes a JPEG stream a PDF reader decodes (not its own bytes), a JPEG 2000 deflated samples', async () => {
    const sources = ['images/sharp/testimgl.jpg', 'images/sharp/relax.jp2'];
    const { pdf } = await makePdf(sources);
    const [lossless, jp2] = pdf
      .getPages()
      .map(pageImages)
      .map((images) => images[0]!);
    assert.equal(lossless!.filter, 'DCTDecode');
    assert.ok(!lossless!.bytes.equals(fs.readFileSync(corpusFile(sources[0]!))), 'process 14 is no DCT stream');
    const reencoded = await sharp(lossless!.bytes).metadata();
    assert.deepEqual([reencoded.format, reencoded.width, reencoded.height], ['jpeg', 227, 149]);
    assert.deepEqual([jp2!.filter, jp2!.colourSpace, jp2!.width, jp2!.height], ['FlateDecode', 'DeviceRGB', 320, 240]);
  });

  it('fixed page sizes: A4 turned by orientation, the image fitted inside the margin', async () => {
    const { pdf } = await makePdf(['images/sharp/Landscape_1.jpg', 'images/sharp/Portrait_1.jpg', 'images/sharp/Landscape_1.jpg'], {
      pageSize: 'A4',
      margin: 36,
    });
    const sizes = pdf.getPages().map((p) => p.getSize());
    assert.deepEqual(
      sizes.map((s) => [Math.round(s.width), Math.round(s.height)]),
      [
        [842, 595],
        [595, 842],
        [842, 595],
      ],
    );
    const letter = await makePdf(['images/sharp/Landscape_1.jpg'], { pageSize: 'Letter', orientation: 'portrait' });
    const page = letter.pdf.getPage(0);
    assert.deepEqual([page.getWidth(), page.getHeight()], [612, 792]);
    // The drawing places the image (cm operator) inside the page, centred, its aspect kept.
    const contents = page.node.Contents();
    const streams = contents instanceof PDFArray ? contents.asArray().map((ref) => page.doc.context.lookup(ref)) : [contents];
    const content = streams.map((stream) => Buffer.from(decodePDFRawStream(stream as PDFRawStream).decode()).toString('latin1')).join('\n');
    // The matrices drawing the image, composed (PDF: CTM' = M × CTM): the unit square's image.
    let ctm = [1, 0, 0, 1, 0, 0];
    for (const m of content.matchAll(/(-?[\d.]+) (-?[\d.]+) (-?[\d.]+) (-?[\d.]+) (-?[\d.]+) (-?[\d.]+) cm/g)) {
      const [a, b, c, d, e, f] = m.slice(1).map(Number) as [number, number, number, number, number, number];
      const [A, B, C, D, E, F] = ctm as [number, number, number, number, number, number];
      ctm = [a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D, e * A + f * C + E, e * B + f * D + F];
    }
    const [w, , , h, x, y] = ctm as [number, number, number, number, number, number];
    assert.ok(Math.abs(w - 612) < 0.01 && Math.abs(x) < 0.01, `full width: ${ctm}`);
    assert.ok(Math.abs(y - (792 - h) / 2) < 0.01, `centred vertically: ${ctm}`);
    const { width, height } = await sharp(corpusFile('images/sharp/Landscape_1.jpg')).metadata();
    assert.ok(Math.abs(w / h - width! / height!) < 0.001);
  });

  it("previews the PDF's first page", async () => {
    const { task, pdf } = await makePdf(['images/sharp/Portrait_1.jpg', 'images/sharp/Landscape_1.jpg']);
    const preview = await client.get(`/api/preview/${task.outputFileId}`);
    assert.equal(preview.status, 200);
    assert.equal(preview.headers.get('content-type'), 'image/jpeg');
    const meta = await sharp(preview.body as Buffer).metadata();
    const page = pdf.getPage(0).getSize();
    assert.equal(Math.max(meta.width!, meta.height!), 1024);
    assert.ok(meta.height! > meta.width!, 'the first page (portrait)');
    assert.ok(Math.abs(meta.width! / meta.height! - page.width / page.height) < 0.01);
    const boxed = await client.get(`/api/preview/${task.outputFileId}?width=200`);
    assert.equal((await sharp(boxed.body as Buffer).metadata()).width, 200);
  });

  it('validates when queueing: fileIds 1–100, layout options, inputs that are images', async () => {
    const image = await client.uploadOk(corpusFile('images/sharp/Landscape_1.jpg'));
    const deck = await client.uploadOk(corpusFile('presentations/poi/SampleShow.pptx'));
    const expect = async (body: unknown, status: number, code: string, field?: string) => {
      const response = await client.post('/api/process/image-to-pdf', body);
      assert.equal(response.status, status, `${JSON.stringify(body)} → ${JSON.stringify(response.body)}`);
      assert.equal(response.body.error.code, code);
      if (field) assert.ok(JSON.stringify(response.body.error.details).includes(field), JSON.stringify(response.body.error));
    };
    await expect({ fileIds: [] }, 400, 'VALIDATION_ERROR', 'fileIds');
    await expect({ fileIds: Array(101).fill(image) }, 400, 'VALIDATION_ERROR', 'fileIds');
    // `fileId` is the one-input form (API.md); both at once, or neither, is a 400.
    await expect({ fileId: image, fileIds: [image] }, 400, 'VALIDATION_ERROR', 'fileId');
    await expect({ pageSize: 'A4' }, 400, 'VALIDATION_ERROR', 'fileIds');
    await expect({ fileIds: [image], pageSize: 'A5' }, 400, 'VALIDATION_ERROR', 'pageSize');
    await expect({ fileIds: [image], orientation: 'landscape' }, 400, 'VALIDATION_ERROR', 'orientation');
    await expect({ fileIds: [image], pageSize: 'A4', margin: 300 }, 400, 'VALIDATION_ERROR', 'margin');
    await expect({ fileIds: [image], margin: -1 }, 400, 'VALIDATION_ERROR', 'margin');
    await expect({ fileIds: [image], format: 'png' }, 400, 'VALIDATION_ERROR', 'format');
    await expect({ fileIds: [image, 'file_doesnotexist0000000000'] }, 404, 'NOT_FOUND');
    await expect({ fileIds: [image, deck] }, 409, 'INPUT_NOT_SUPPORTED');
    assert.equal((await client.post('/api/process/batch/image-to-pdf', { fileIds: [image] })).status, 404);
    // The same image twice is two pages.
    const twice = await client.post('/api/process/image-to-pdf', { fileIds: [image, image] });
    assert.equal(twice.status, 202);
    const task = await client.waitForTask(twice.body.data.taskId);
    assert.equal(task.result.pages, 2);
  });

  it("an input over the plan's pixel limit fails the task at once (IMAGE_TOO_LARGE)", async () => {
    const small = await startServer({ dialect: 'sqlite', plans: { pro: { maxPixels: 300_000 } }, workers: 1 });
    try {
      const limited = new Client(small.url, await small.newKey('pro'));
      const fits = await limited.uploadOk(corpusFile('images/sharp/2x2_fdcce6.png'));
      const big = await limited.uploadOk(corpusFile('images/sharp/Landscape_1.jpg')); // 600×450 = 270,000
      const bigger = await limited.uploadOk(corpusFile('images/sharp/flowers.jpeg')); // 1920×1080
      const job = await limited.post('/api/process/image-to-pdf', { fileIds: [fits, big, bigger] });
      assert.equal(job.status, 202);
      const task = await limited.waitForTask(job.body.data.taskId);
      assert.equal(task.status, 'failed');
      assert.equal(task.error.code, 'IMAGE_TOO_LARGE');
    } finally {
      await small.close();
    }
  });
});
