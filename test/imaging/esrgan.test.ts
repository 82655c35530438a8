// AI upscaling (`upscale` with `model: "esrgan"`): the network against Lanczos on real photos, no
// seams between tiles, alpha and colour, cancel between tiles; then through the API: the plan's
// maxAiUpscalePixels and Free refused when the task is queued, animations refused, the AI time
// limit, a canceled task. The model is loaded once for the whole file (one worker thread per
// process, kept), and the images are small crops so that the network's work stays short.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { kindsOf } from '../../src/cli/job-options.js';
import { superResolutionEngine, superResolve } from '../../src/imaging/super-resolution/engine.js';
import { upscale } from '../../src/operations/upscale.js';
import type { StepEnv } from '../../src/operations/types.js';
import { CAMERA_PHOTOS } from './camera-photos.js';
import { Client, corpusFile, DIALECTS, sleep, startServer, tempDir, type TestServer } from '../helpers.js';

/** Ten camera photos of the corpus (MANIFEST.json), each cropped to CROP × CROP around its centre. */
const PHOTOS = CAMERA_PHOTOS;
const CROP = 160;

type Raw = { data: Buffer; width: number; height: number; channels: number };

async function raw(image: sharp.Sharp): Promise<Raw> {
  const { data, info } = await image.raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

/** A photo upright, in sRGB, reduced to fit 640 px (a crop then shows objects, not texture), cropped at its centre. */
async function photoCrop(file: string, size = CROP): Promise<Raw> {
  const fitted = await sharp(corpusFile(file))
    .rotate()
    .resize({ width: 640, height: 640, fit: 'inside' })
    .toColourspace('srgb')
    .removeAlpha()
    .png()
    .toBuffer();
  const meta = await sharp(fitted).metadata();
  const left = Math.floor((meta.width! - size) / 2);
  const top = Math.floor((meta.height! - size) / 2);
  return raw(sharp(fitted).extract({ left, top, width: size, height: size }));
}

const rawInput = (image: Raw) => ({ raw: { width: image.width, height: image.height, channels: image.channels as 1 | 2 | 3 | 4 } });

/** PSNR in dB over every channel of two same-size images. */
function psnr(a: Buffer, b: Buffer): number {
  assert.equal(a.length, b.length);
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += (a[i]! - b[i]!) ** 2;
  return sum === 0 ? Infinity : 10 * Math.log10((255 * 255) / (sum / a.length));
}

/** The upscale kind's own Lanczos step (the `lanczos` model), as a single job runs it. */
function lanczosStep(image: Raw, factor: 2 | 3 | 4) {
  const transform = upscale.step!.transform({ factor }, {} as StepEnv);
  return transform(sharp(image.data, rawInput(image)), { format: 'raw', width: image.width, height: image.height, frames: 1, hasAlpha: false });
}

describe('esrgan super-resolution (engine)', () => {
  const scratch = tempDir('imgapi-esrgan-');
  after(async () => {
    await superResolutionEngine().close();
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('restores photos closer to the original than Lanczos (PSNR) on at least 8 of 10 corpus photos', async (t) => {
    const rows: string[] = [];
    let wins = 0;
    for (const file of PHOTOS) {
      const original = await photoCrop(file);
      const small = await raw(sharp(original.data, rawInput(original)).resize(CROP / 2, CROP / 2, { kernel: 'lanczos3' }));
      const target = { width: CROP, height: CROP };
      const ai = await superResolve(sharp(small.data, rawInput(small)), target, { tmpDir: scratch });
      assert.equal(ai.scale, 2);
      const esrgan = await raw(ai.open());
      const lanczos = await raw(await lanczosStep(small, 2));
      assert.deepEqual([esrgan.width, esrgan.height, esrgan.channels], [CROP, CROP, 3]);
      const [e, l] = [psnr(original.data, esrgan.data), psnr(original.data, lanczos.data)];
      if (e > l) wins++;
      rows.push(`${file}: esrgan ${e.toFixed(2)} dB, lanczos ${l.toFixed(2)} dB`);
    }
    for (const row of rows) t.diagnostic(row);
    assert.ok(wins >= 8, `esrgan closer on ${wins} of 10:\n${rows.join('\n')}`);
  });

  it('leaves no seams: a run in 24-px tiles equals one over the whole image', async (t) => {
    const photo = await photoCrop('images/sharp/Landscape_1.jpg', 120);
    const input = () => sharp(photo.data, rawInput(photo));
    const target = { width: 240, height: 240 };
    const whole = await raw((await superResolve(input(), target, { tmpDir: scratch, tileSize: 256 })).open());
    const tiledRun = await superResolve(input(), target, { tmpDir: scratch, tileSize: 24 });
    assert.equal(tiledRun.tiles, 25);
    const tiled = await raw(tiledRun.open());
    // Every output pixel, and those along the tile borders (output rows and columns 48, 96, …) on their own.
    let worst = 0;
    let borderWorst = 0;
    for (let y = 0; y < 240; y++) {
      for (let x = 0; x < 240; x++) {
        for (let c = 0; c < 3; c++) {
          const i = (y * 240 + x) * 3 + c;
          const diff = Math.abs(whole.data[i]! - tiled.data[i]!);
          worst = Math.max(worst, diff);
          if (x % 48 <= 1 || x % 48 >= 46 || y % 48 <= 1 || y % 48 >= 46) borderWorst = Math.max(borderWorst, diff);
        }
      }
    }
    t.diagnostic(`largest difference ${worst}, at tile borders ${borderWorst}`);
    assert.ok(worst <= 1 && borderWorst <= 1, `largest difference ${worst} (at tile borders ${borderWorst})`);
  });

  it('answers exactly the asked size, whatever the tiles: sides not multiples of the tile, one tile, both axes, no black edges', async (t) => {
    // 129 × 129 at ×4: a one-pixel second row and column of tiles; 192 × 144: two rows of tiles,
    // the second shorter; 130 × 67: one row, two tiles; and an exact resize after the ×3 model.
    const photo = await photoCrop('images/sharp/Landscape_1.jpg', 200);
    const cases = [
      { width: 192, height: 144, target: { width: 384, height: 288 } },
      { width: 129, height: 129, target: { width: 516, height: 516 } },
      { width: 130, height: 67, target: { width: 390, height: 201 } },
      { width: 130, height: 67, target: { width: 250, height: 129 } },
    ];
    for (const { width, height, target } of cases) {
      const small = await raw(sharp(photo.data, rawInput(photo)).resize(width, height, { fit: 'fill' }));
      const out = await raw((await superResolve(sharp(small.data, rawInput(small)), target, { tmpDir: scratch })).open());
      assert.deepEqual([out.width, out.height], [target.width, target.height], `${width} × ${height} to ${target.width} × ${target.height}`);
      // The last row and column, against the input's own: as bright (not padding), give or take detail.
      const mean = (image: Raw, pick: (image: Raw) => number[]) => {
        const values = pick(image);
        return values.reduce((a, b) => a + b, 0) / values.length;
      };
      const lastRow = (image: Raw) => [...image.data.subarray((image.height - 1) * image.width * image.channels)];
      const lastColumn = (image: Raw) =>
        Array.from({ length: image.height }, (_, y) => [...image.data.subarray(((y + 1) * image.width - 1) * image.channels).subarray(0, 3)]).flat();
      for (const [name, pick] of [
        ['last row', lastRow],
        ['last column', lastColumn],
      ] as const) {
        const [got, want] = [mean(out, pick), mean(small, pick)];
        t.diagnostic(`${width} × ${height} → ${target.width} × ${target.height}: ${name} mean ${got.toFixed(1)} (input ${want.toFixed(1)})`);
        assert.ok(Math.abs(got - want) < 25, `${name}: mean ${got} against the input's ${want}`);
      }
    }
  });

  it('upscales alpha with Lanczos and keeps colour (an ICC-tagged P3 photo comes out as sRGB)', async () => {
    const bird = await sharp(corpusFile('images/sharp/embedgravitybird.png'))
      .extract({ left: 200, top: 100, width: 64, height: 48 })
      .png()
      .toBuffer();
    const withAlpha = await superResolve(sharp(bird), { width: 128, height: 96 }, { tmpDir: scratch });
    const out = await raw(withAlpha.open());
    assert.deepEqual([out.width, out.height, out.channels], [128, 96, 4]);
    const expectedAlpha = await raw(sharp(bird).extractChannel(3).resize(128, 96, { fit: 'fill', kernel: 'lanczos3' }));
    for (let p = 0; p < 128 * 96; p++) assert.ok(Math.abs(out.data[p * 4 + 3]! - expectedAlpha.data[p]!) <= 1, `alpha at pixel ${p}`);

    // Mean colour of the network's output against the input converted to sRGB by libvips.
    const p3 = corpusFile('images/wide-gamut/P3-sRGB-color-ring.jpg');
    const crop = () => sharp(p3).resize({ width: 96, height: 96, fit: 'cover' });
    const ai = await superResolve(crop(), { width: 192, height: 192 }, { tmpDir: scratch });
    const [aiStats, srgbStats] = await Promise.all([ai.open().stats(), sharp(await crop().toColourspace('srgb').png().toBuffer()).stats()]);
    for (let c = 0; c < 3; c++) {
      assert.ok(
        Math.abs(aiStats.channels[c]!.mean - srgbStats.channels[c]!.mean) < 3,
        `channel ${c}: ${aiStats.channels[c]!.mean} vs ${srgbStats.channels[c]!.mean}`,
      );
    }
  });

  it('a canceled job stops within one tile', async () => {
    const photo = await photoCrop('images/sharp/Portrait_1.jpg', 192);
    const controller = new AbortController();
    let canceled: { atCancel: number; run: number } | undefined;
    const reason = new Error('stop here');
    // 576 tiles of 8 px: the run is far from its end when the cancel comes, however busy the machine.
    const job = superResolve(
      sharp(photo.data, rawInput(photo)),
      { width: 384, height: 384 },
      {
        tmpDir: scratch,
        tileSize: 8,
        signal: controller.signal,
        progress: (done) => {
          if (done === 2) controller.abort(reason);
        },
        onCanceled: (tiles) => (canceled = tiles),
      },
    );
    await assert.rejects(job, (err) => err === reason);
    assert.ok(canceled, 'the worker reported the cancel');
    assert.ok(canceled.atCancel >= 2 && canceled.run - canceled.atCancel <= 1, JSON.stringify(canceled));
    assert.ok(canceled.run < 576, 'stopped before the last of 576 tiles');
    // The engine is free again.
    const next = await superResolve(sharp(photo.data, rawInput(photo)), { width: 384, height: 384 }, { tmpDir: scratch });
    assert.equal(next.tiles, 4);
  });
});

for (const dialect of DIALECTS) {
  describe(`upscale model esrgan through the API (${dialect})`, () => {
    let server: TestServer;
    /** The same, with AI_TASK_TIMEOUT_SECONDS=1. */
    let hurried: TestServer;
    let png: Buffer;
    before(async () => {
      server = await startServer({
        dialect,
        workers: 1,
        plans: { free: { apiAccess: true }, max: { maxAiUpscalePixels: 70 * 50 } },
      });
      hurried = await startServer({ dialect, workers: 1, env: { AI_TASK_TIMEOUT_SECONDS: '1' } });
      const photo = await photoCrop('images/sharp/Landscape_1.jpg', 96);
      png = await sharp(photo.data, rawInput(photo)).resize(72, 48).png().toBuffer();
    });
    after(async () => {
      await Promise.all([server.close(), hurried.close()]);
    });

    it('upscales a photo by factor and to a width (the ×3 model, then an exact resize), single and batch', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(png, 'photo.png');
      const single = await client.post('/api/process/upscale', { fileId, factor: 2, model: 'esrgan' });
      assert.equal(single.status, 202, JSON.stringify(single.body));
      const widthTask = await client.post('/api/process/upscale', { fileId, width: 170, model: 'esrgan', format: 'webp' });
      assert.equal(widthTask.status, 202, JSON.stringify(widthTask.body));
      const batch = await client.post('/api/process/batch/upscale', { fileIds: [fileId, fileId], factor: 4, model: 'esrgan' });
      assert.equal(batch.status, 202, JSON.stringify(batch.body));
      const done = await client.waitForTask(single.body.data.taskId, 300_000);
      assert.equal(done.status, 'completed', JSON.stringify(done));
      assert.deepEqual([done.result.width, done.result.height, done.result.format], [144, 96, 'png']);
      const out = await sharp(await client.download(done.outputFileId)).metadata();
      assert.deepEqual([out.width, out.height], [144, 96]);
      const resized = await client.waitForTask(widthTask.body.data.taskId, 300_000);
      assert.equal(resized.status, 'completed', JSON.stringify(resized));
      assert.deepEqual([resized.result.width, resized.result.height, resized.result.format], [170, 113, 'webp']);
      for (const task of batch.body.data.tasks) {
        const finished = await client.waitForTask(task.taskId, 300_000);
        assert.equal(finished.status, 'completed', JSON.stringify(finished));
        assert.deepEqual([finished.result.width, finished.result.height], [288, 192]);
      }
      // EXIF orientation is applied first, as for every job: stored 72 × 48, shown (and upscaled) 48 × 72.
      const turned = await client.uploadOk(await sharp(png).withMetadata({ orientation: 6 }).jpeg().toBuffer(), 'turned.jpg');
      const upright = await client.post('/api/process/upscale', { fileId: turned, factor: 2, model: 'esrgan' });
      const uprightDone = await client.waitForTask(upright.body.data.taskId, 300_000);
      assert.equal(uprightDone.status, 'completed', JSON.stringify(uprightDone));
      assert.deepEqual([uprightDone.result.width, uprightDone.result.height], [96, 144]);
      // The account shows the plan's limit.
      assert.equal((await client.get('/api/account')).body.data.limits.maxAiUpscalePixels, 2_000_000);
      // The command line takes its options from the service's document: `--model esrgan` is among them.
      const { body: document } = await client.get('/openapi.json');
      assert.deepEqual(kindsOf(document).get('upscale')?.options.get('model')?.enum, ['lanczos', 'esrgan']);
    });

    it('a pipeline of two esrgan steps ends at exactly the size asked (70 × 70 → 140 × 140, two rows of tiles → 280 × 280)', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(await sharp(png).resize(70, 70, { fit: 'fill' }).png().toBuffer(), 'square.png');
      const twice = { kind: 'upscale', factor: 2, model: 'esrgan' };
      const queued = await client.post('/api/process/pipeline', { fileId, steps: [twice, twice] });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      const done = await client.waitForTask(queued.body.data.taskId, 300_000);
      assert.equal(done.status, 'completed', JSON.stringify(done));
      assert.deepEqual([done.result.width, done.result.height], [280, 280]);
      const out = await sharp(await client.download(done.outputFileId)).metadata();
      assert.deepEqual([out.width, out.height], [280, 280]);
    });

    it('refuses at queue time: Free, an input above maxAiUpscalePixels (single and batch), an animation', async () => {
      const free = new Client(server.url, await server.newKey('free'));
      const freeFile = await free.uploadOk(png, 'photo.png');
      const refusedFree = await free.post('/api/process/upscale', { fileId: freeFile, factor: 2, model: 'esrgan' });
      assert.equal(refusedFree.status, 400);
      assert.equal(refusedFree.body.error.code, 'VALIDATION_ERROR');
      assert.deepEqual(
        refusedFree.body.error.details.fields.map((f: { field: string }) => f.field),
        ['model'],
      );
      assert.match(refusedFree.body.error.message, /not available on this plan/);
      const inPipeline = await free.post('/api/process/pipeline', {
        fileId: freeFile,
        steps: [
          { kind: 'crop', left: 0, top: 0, width: 40, height: 40 },
          { kind: 'upscale', factor: 2, model: 'esrgan' },
        ],
      });
      assert.equal(inPipeline.status, 400);
      assert.deepEqual(
        inPipeline.body.error.details.fields.map((f: { field: string }) => f.field),
        ['steps[1].model'],
      );
      // Lanczos stays open to Free.
      assert.equal((await free.post('/api/process/upscale', { fileId: freeFile, factor: 2 })).status, 202);

      const max = new Client(server.url, await server.newKey('max'));
      const large = await max.uploadOk(png, 'photo.png'); // 72 × 48 = 3456 pixels, the limit 3500
      const larger = await max.uploadOk(await sharp(png).resize(80, 50).png().toBuffer(), 'larger.png'); // 4000
      const over = await max.post('/api/process/upscale', { fileId: larger, factor: 2, model: 'esrgan' });
      assert.equal(over.status, 400);
      assert.equal(over.body.error.details.fields[0].field, 'model');
      assert.match(over.body.error.message, /at most 3500 pixels on this plan; this one has 4000/);
      const batch = await max.post('/api/process/batch/upscale', { fileIds: [large, larger], factor: 2, model: 'esrgan' });
      assert.equal(batch.status, 400);
      assert.equal((await max.get('/api/tasks?limit=10')).body.data.tasks.length, 0, 'nothing queued');

      const gif = await max.uploadOk(corpusFile('images/sharp/rotating-squares.gif'));
      const animated = await max.post('/api/process/upscale', { fileId: gif, factor: 2, model: 'esrgan' });
      assert.equal(animated.status, 400);
      assert.match(animated.body.error.message, /model: esrgan does not upscale animations/);
    });

    it('applies AI_TASK_TIMEOUT_SECONDS to esrgan tasks', async () => {
      const client = new Client(hurried.url, await hurried.newKey('pro'));
      const photo = await photoCrop('images/sharp/2569067123_aca715a2ee_o.jpg', 400);
      const fileId = await client.uploadOk(await sharp(photo.data, rawInput(photo)).png().toBuffer(), 'photo.png');
      const queued = await client.post('/api/process/upscale', { fileId, factor: 4, model: 'esrgan' });
      assert.equal(queued.status, 202);
      const failed = await client.waitForTask(queued.body.data.taskId, 120_000);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error.code, 'PROCESSING_TIMEOUT');
      // The same as a pipeline step: the task takes the step's limit.
      const pipeline = await client.post('/api/process/pipeline', { fileId, steps: [{ kind: 'upscale', factor: 4, model: 'esrgan' }] });
      assert.equal(pipeline.status, 202, JSON.stringify(pipeline.body));
      const pipelineFailed = await client.waitForTask(pipeline.body.data.taskId, 120_000);
      assert.equal(pipelineFailed.error?.code, 'PROCESSING_TIMEOUT');
      // Lanczos keeps TASK_TIMEOUT_SECONDS.
      const lanczos = await client.post('/api/process/upscale', { fileId, factor: 2 });
      assert.equal((await client.waitForTask(lanczos.body.data.taskId)).status, 'completed');
    });

    it('a canceled esrgan task stops, and the next one runs', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const photo = await photoCrop('images/sharp/Portrait_1.jpg', 384);
      const fileId = await client.uploadOk(await sharp(photo.data, rawInput(photo)).png().toBuffer(), 'photo.png');
      const queued = await client.post('/api/process/upscale', { fileId, factor: 2, model: 'esrgan' });
      const taskId = queued.body.data.taskId;
      for (let i = 0; i < 600; i++) {
        if ((await client.get(`/api/tasks/${taskId}`)).body.data.status === 'processing') break;
        await sleep(100);
      }
      const canceled = await client.request('DELETE', `/api/tasks/${taskId}`);
      assert.equal(canceled.status, 200, JSON.stringify(canceled.body));
      assert.equal((await client.waitForTask(taskId)).status, 'canceled');
      const small = await client.uploadOk(png, 'photo.png');
      const next = await client.post('/api/process/upscale', { fileId: small, factor: 2, model: 'esrgan' });
      assert.equal((await client.waitForTask(next.body.data.taskId, 300_000)).status, 'completed');
    });
  });
}
