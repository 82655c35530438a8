// Faces on real photos (test/fixtures/faces.json): the detector's recall and false positives on a
// few labelled photos (a floor; the whole set is measured by `npm run bench`), boxes in the
// upright image's pixels, cancel; `redact` (pixels changed inside each face, unchanged far from
// them, regions, fill); `face` gravity for crop and resize (the face is kept; attention when none);
// then through the API on both databases: redact single, batch and as a pipeline step, a face crop.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import type { FileRecord } from '../../src/files/files.js';
import { closeFaceDetector, detectFaces, detectFacesInFile, type FaceBox } from '../../src/imaging/faces.js';
import { crop } from '../../src/operations/crop.js';
import { redact } from '../../src/operations/redact.js';
import { resize } from '../../src/operations/resize.js';
import type { AnyOperation, OperationResult } from '../../src/operations/types.js';
import { Client, DIALECTS, REPO_ROOT, startServer, type TestServer } from '../helpers.js';
import { formatOf } from './compress-helpers.js';
import { labelledPhotos, sameFace, score, type Box } from './face-labels.js';

const PHOTOS = labelledPhotos(REPO_ROOT);
const photo = (name: string) => PHOTOS.find((p) => p.path.endsWith(name))!;
const SAMPLE = photo('sample1.jpg');
const CARRIE = photo('Carrie.jpg');
const CAT = photo('progressive-cat.jpg');

/** `op.run` on `file`, as the worker calls it, on the Max plan's limits. */
async function runOn(op: AnyOperation, file: string, options: Record<string, unknown>): Promise<OperationResult> {
  const meta = await sharp(file).metadata();
  const record = {
    id: 'file_test',
    filename: path.basename(file),
    format: formatOf(file)!,
    size: fs.statSync(file).size,
    width: meta.width ?? null,
    height: meta.height ?? null,
    pages: null,
  } as FileRecord;
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-faces-'));
  try {
    return await op.run({
      taskId: 'task_test',
      options,
      inputs: [{ file: record, path: file }],
      limits: DEFAULT_PLANS.max,
      deadline: Date.now() + 300_000,
      signal: new AbortController().signal,
      scratchDir: async () => tmpDir,
      progress: () => {},
      documents: { ffmpeg: undefined } as never,
    });
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
}

type Raw = { data: Buffer; width: number; height: number; channels: number };
async function pixels(input: string | Buffer): Promise<Raw> {
  const { data, info } = await sharp(input).autoOrient().toColourspace('srgb').removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/** Mean absolute difference of two same-sized images inside `box`. */
function meanDiff(a: Raw, b: Raw, box: Box): number {
  let sum = 0;
  let n = 0;
  for (let y = box.top; y < box.top + box.height; y++)
    for (let x = box.left; x < box.left + box.width; x++)
      for (let c = 0; c < 3; c++, n++) sum += Math.abs(a.data[(y * a.width + x) * 3 + c]! - b.data[(y * b.width + x) * 3 + c]!);
  return sum / n;
}

const contains = (outer: Box, inner: Box) =>
  inner.left >= outer.left &&
  inner.top >= outer.top &&
  inner.left + inner.width <= outer.left + outer.width &&
  inner.top + inner.height <= outer.top + outer.height;

after(() => closeFaceDetector());

describe('face detection on labelled photos', () => {
  it('finds every labelled face of five photos (one of 12 MP, one EXIF-rotated CMYK) and none in two photos without faces', async () => {
    const withFaces = [
      'sample1.jpg',
      'sample5.jpg',
      'Album_en_blanco_y_negro.webp',
      'Carrie.jpg',
      'Giunchedi_Filippo_January_2015_01-cmyk-orientation-exif.jpg',
    ];
    let labelled = 0;
    let found = 0;
    for (const name of withFaces) {
      const p = photo(name);
      const boxes = await detectFacesInFile(p.file, p.format, DEFAULT_PLANS.max);
      const s = score(p.faces, boxes);
      labelled += p.faces.length;
      found += s.found;
      assert.equal(s.falsePositives.length, 0, `${name}: ${JSON.stringify(s.falsePositives)}`);
      for (const box of boxes) assert.ok(box.score > 0 && box.score <= 1 && box.width > 0 && box.height > 0);
    }
    assert.equal(found, labelled, `recall ${found}/${labelled}`);
    for (const name of ['progressive-cat.jpg', 'Landscape_1.jpg']) {
      const p = photo(name);
      assert.deepEqual(await detectFacesInFile(p.file, p.format, DEFAULT_PLANS.max), [], name);
    }
  });

  it('thorough (what redact runs) finds a small face the quick pass misses', async () => {
    const p = photo('Channel_digital_image_CMYK_color.jpg');
    const thorough = await detectFacesInFile(p.file, p.format, DEFAULT_PLANS.max, { thorough: true });
    assert.ok(score(p.faces, thorough).found >= 2, JSON.stringify(thorough));
  });

  it('an aborted signal rejects with its reason', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    await assert.rejects(detectFaces(sharp(SAMPLE.file), { width: 1, height: 1 }, { signal: controller.signal }), /stop/);
  });
});

describe('redact', () => {
  it('pixelates every face with a margin; pixels change inside each face and stay far from them; result.regions', async () => {
    const done = await runOn(redact, SAMPLE.file, { format: 'png' });
    const regions = done.result!.regions as (Box & { source: string; score: number })[];
    assert.equal(regions.length, SAMPLE.faces.length, JSON.stringify(regions));
    const before = await pixels(SAMPLE.file);
    const afterRedact = await pixels(done.outputs[0]!.data!);
    for (const face of SAMPLE.faces) {
      const region = regions.find((r) => sameFace(r, face))!;
      assert.ok(region, `no region over ${JSON.stringify(face)}`);
      assert.equal(region.source, 'face');
      // The margin: the region holds the labelled face (brows to chin) and reaches above it for the hair.
      assert.ok(contains(region, face), `${JSON.stringify(region)} does not hold ${JSON.stringify(face)}`);
      assert.ok(region.top < face.top - face.height * 0.2);
      assert.ok(meanDiff(before, afterRedact, face) > 8, `face ${JSON.stringify(face)} barely changed`);
    }
    // The bottom-left corner, far from every face.
    const far = { left: 0, top: before.height - 100, width: 200, height: 100 };
    assert.ok(meanDiff(before, afterRedact, far) < 0.5);
  });

  it('regions only (faces: false), filled: the region is black, nothing else changes; faces: false alone is refused', async () => {
    const region = { left: 10, top: 20, width: 50, height: 40 };
    const done = await runOn(redact, SAMPLE.file, { faces: false, regions: [region], method: 'fill', format: 'png' });
    assert.deepEqual(done.result!.regions, [{ ...region, source: 'region' }]);
    const before = await pixels(SAMPLE.file);
    const out = await pixels(done.outputs[0]!.data!);
    assert.equal(meanDiff(out, { ...out, data: Buffer.alloc(out.data.length) }, region), 0);
    assert.ok(meanDiff(before, out, SAMPLE.faces[0]!) < 0.5, 'a face changed though faces: false');
    assert.deepEqual(
      redact.check!({ faces: false }, [], DEFAULT_PLANS.max).map((e) => e.field),
      ['regions'],
    );
  });

  it('blur hides a region', async () => {
    const region = { left: 400, top: 340, width: 200, height: 260 };
    const done = await runOn(redact, SAMPLE.file, { faces: false, regions: [region], method: 'blur', strength: 80, format: 'png' });
    assert.ok(meanDiff(await pixels(SAMPLE.file), await pixels(done.outputs[0]!.data!), region) > 5);
  });
});

describe('face gravity', () => {
  /** The faces of an encoded output. */
  const facesOf = async (data: Buffer): Promise<FaceBox[]> => {
    const meta = await sharp(data).metadata();
    return detectFaces(sharp(data), { width: meta.width!, height: meta.height! });
  };

  it('crop aspectRatio 16:9 of a 12 MP portrait keeps the face, which a centre crop cuts', async () => {
    const face = await runOn(crop, CARRIE.file, { aspectRatio: '16:9', gravity: 'face', format: 'jpeg' });
    const centre = await runOn(crop, CARRIE.file, { aspectRatio: '16:9', gravity: 'center', format: 'jpeg' });
    assert.equal(face.outputs[0]!.width, 3000);
    assert.equal(face.outputs[0]!.height, 1688);
    const [found] = await facesOf(face.outputs[0]!.data!);
    assert.ok(found, 'no face in the face crop');
    // The whole face, as tall as labelled (brows to chin), lies inside the crop.
    assert.ok(found.height > CARRIE.faces[0]!.height * 0.7, JSON.stringify(found));
    assert.ok(found.top > 0 && found.top + found.height < 1688);
    // The centre crop starts at y 1156, below the brows.
    assert.ok((await facesOf(centre.outputs[0]!.data!)).every((f) => f.height < found.height * 0.8));
  });

  it('resize cover at position face holds a face; with no face it is attention', async () => {
    const done = await runOn(resize, SAMPLE.file, { width: 300, height: 600, fit: 'cover', position: 'face', format: 'png' });
    assert.equal(done.outputs[0]!.width, 300);
    assert.ok((await facesOf(done.outputs[0]!.data!)).length >= 1);
    const face = await runOn(resize, CAT.file, { width: 100, height: 200, fit: 'cover', position: 'face', format: 'png' });
    const attention = await runOn(resize, CAT.file, { width: 100, height: 200, fit: 'cover', position: 'attention', format: 'png' });
    assert.ok(face.outputs[0]!.data!.equals(attention.outputs[0]!.data!));
  });
});

for (const dialect of DIALECTS) {
  describe(`redact and face gravity through the API (${dialect})`, () => {
    let server: TestServer;
    let client: Client;
    let fileId: string;
    before(async () => {
      server = await startServer({ dialect, workers: 1 });
      client = new Client(server.url, await server.newKey('pro'));
      fileId = await client.uploadOk(SAMPLE.file);
    });
    after(() => server.close());

    it('redact: single (result.regions), batch, a pipeline step; a face crop; faces: false without regions is 400', async () => {
      const single = await client.post('/api/process/redact', { fileId, method: 'pixelate' });
      assert.equal(single.status, 202, JSON.stringify(single.body));
      const batch = await client.post('/api/process/batch/redact', {
        fileIds: [fileId],
        faces: false,
        regions: [{ left: 0, top: 0, width: 10, height: 10 }],
      });
      assert.equal(batch.status, 202, JSON.stringify(batch.body));
      const pipeline = await client.post('/api/process/pipeline', {
        fileId,
        steps: [
          { kind: 'resize', width: 960 },
          { kind: 'redact', method: 'blur' },
          { kind: 'crop', aspectRatio: '1:1', gravity: 'face' },
        ],
        format: 'webp',
      });
      assert.equal(pipeline.status, 202, JSON.stringify(pipeline.body));
      const faceCrop = await client.post('/api/process/crop', { fileId, aspectRatio: '1:1', gravity: 'face' });
      assert.equal(faceCrop.status, 202, JSON.stringify(faceCrop.body));

      const done = await client.waitForTask(single.body.data.taskId, 180_000);
      assert.equal(done.status, 'completed', JSON.stringify(done.error));
      assert.equal(done.result.regions.length, SAMPLE.faces.length);
      assert.equal(done.result.regions[0].source, 'face');
      const batchDone = await client.waitForTask(batch.body.data.tasks[0].taskId, 180_000);
      assert.deepEqual(batchDone.result.regions, [{ left: 0, top: 0, width: 10, height: 10, source: 'region' }]);
      const pipelineDone = await client.waitForTask(pipeline.body.data.taskId, 180_000);
      assert.equal(pipelineDone.status, 'completed', JSON.stringify(pipelineDone.error));
      assert.equal(pipelineDone.result.width, pipelineDone.result.height);
      const cropDone = await client.waitForTask(faceCrop.body.data.taskId, 180_000);
      assert.equal(cropDone.status, 'completed', JSON.stringify(cropDone.error));

      const refused = await client.post('/api/process/redact', { fileId, faces: false });
      assert.equal(refused.status, 400);
      assert.equal(refused.body.error.details.fields[0].field, 'regions');
      const badMethod = await client.post('/api/process/redact', { fileId, method: 'smudge' });
      assert.equal(badMethod.status, 400);
    });
  });
}
