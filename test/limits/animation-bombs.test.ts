// Animation bombs: frames that each pass the per-frame pixel limit on a canvas so large that
// all of them together would hold a worker for minutes at gigabytes of memory. `maxTotalPixels`
// (frames × canvas) refuses them from the header: when the task is queued where the stored
// header tells, else in the worker before any frame is decoded — for inputs and for the
// output the options compute.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import { Client, DIALECTS, startServer, type TestServer } from '../helpers.js';
import { gifFrameBomb, webpFrameBomb } from './bombs.js';

const PRO = DEFAULT_PLANS.pro;

/** Runs `work` while sampling this process's RSS (the server runs in it); returns the peak growth. */
async function peakRssGrowth(work: () => Promise<void>): Promise<number> {
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
  try {
    await work();
  } finally {
    clearInterval(sampler);
  }
  return Math.max(peak, process.memoryUsage().rss) - baseline;
}

/** An animation of `frames` flat frames of `size`×`size`, each a different grey: a small file. */
async function smallAnimation(frames: number, size: number, format: 'gif' | 'webp'): Promise<Buffer> {
  const strip = Buffer.alloc(size * size * frames);
  for (let i = 0; i < frames; i++) strip.fill((i * 37) % 256, i * size * size, (i + 1) * size * size);
  return sharp(strip, { raw: { width: size, height: size * frames, channels: 1, pageHeight: size } })
    .toFormat(format)
    .toBuffer();
}

for (const dialect of DIALECTS) {
  describe(`animation bombs (${dialect})`, () => {
    let server: TestServer;
    let client: Client;

    before(async () => {
      // Pro's defaults: 100,000,000 pixels a frame, 500 frames, 400,000,000 pixels in all.
      server = await startServer({ dialect, workers: 1 });
      client = new Client(server.url, await server.newKey('pro'));
    });
    after(() => server.close());

    it('maxTotalPixels is in GET /api/account and in its OpenAPI schema', async () => {
      const account = (await client.get('/api/account')).body.data;
      assert.equal(account.limits.maxTotalPixels, PRO.maxTotalPixels);
      assert.equal(PRO.maxTotalPixels, 400_000_000);
      const openapi = (await new Client(server.url).get('/openapi.json')).body;
      const account200 = openapi.paths['/api/account'].get.responses['200'].content['application/json'].schema;
      assert.equal(account200.properties.data.$ref, '#/components/schemas/Account');
      assert.equal(openapi.components.schemas.Account.properties.limits.$ref, '#/components/schemas/PlanLimits');
      const limits = openapi.components.schemas.PlanLimits;
      assert.equal(limits.properties.maxTotalPixels.type, 'integer');
      assert.match(limits.properties.maxTotalPixels.description, /frames × canvas/);
      // Every limit the account shows is described.
      assert.deepEqual(Object.keys(account.limits).sort(), Object.keys(limits.properties).sort());
    });

    const queuedBombs: { name: string; build: () => Promise<Buffer> | Buffer; width: number; frames: number }[] = [
      // The report's file: 24 KB, 500 frames of 1×1 on 10000×10000 (each frame at Pro's per-frame limit).
      { name: 'a 24 KB WebP of 500 1×1 frames on a 10000×10000 canvas', build: () => webpFrameBomb(500, 10_000), width: 10_000, frames: 500 },
      { name: 'an 11 KB GIF of 500 1×1 frames spread over a 2000×2000 canvas', build: () => gifFrameBomb(500, 2000), width: 2000, frames: 500 },
    ];
    for (const bomb of queuedBombs) {
      it(`${bomb.name} fails IMAGE_TOO_LARGE when queued, single and batch`, async () => {
        const bytes = await bomb.build();
        assert.ok(bytes.length < 30_000, `${bytes.length} bytes`);
        const upload = await client.upload(bytes, 'bomb');
        assert.equal(upload.status, 201, JSON.stringify(upload.body));
        assert.equal(upload.body.data.width, bomb.width);
        assert.equal(upload.body.data.pages, bomb.frames);
        const fileId = upload.body.data.fileId;
        for (const [kind, options] of [
          ['resize', { width: 100 }],
          ['compress', {}],
          ['flip', { direction: 'vertical' }],
        ] as const) {
          const queued = await client.post(`/api/process/${kind}`, { fileId, ...options });
          assert.equal(queued.status, 202);
          assert.equal(queued.body.data.status, 'failed', kind);
          assert.equal(queued.body.data.error.code, 'IMAGE_TOO_LARGE');
          assert.match(queued.body.data.error.message, /in all.*400000000/);
        }
        const batch = await client.post('/api/process/batch/convert', { fileIds: [fileId], format: 'png' });
        assert.equal(batch.status, 202);
        assert.equal(batch.body.data.tasks[0].status, 'failed');
        // Tasks failed when queued are charged nothing: no monthly task, no batch file.
        const usage = (await client.get('/api/account')).body.data.usage;
        assert.equal(usage.monthlyTasks.used, 0);
        assert.equal(usage.dailyBatchFiles.used, 0);
      });
    }

    // Frames past the first MiB, which the header probe does not read, are still counted while
    // the upload streams: the bomb fails when queued.
    const paddedBombs = [
      { name: 'the WebP bomb padded to 1.1 MB', build: () => webpFrameBomb(500, 10_000, 1_100_000), width: 10_000 },
      { name: 'the GIF bomb with 450 of its frames past the first MiB', build: () => gifFrameBomb(500, 2000, 1_100_000, 50), width: 2000 },
    ];
    for (const bomb of paddedBombs) {
      it(`${bomb.name}: every frame counted at upload, failed when queued`, async () => {
        const upload = await client.upload(await bomb.build(), 'bomb');
        assert.equal(upload.status, 201);
        assert.equal(upload.body.data.pages, 500);
        assert.equal(upload.body.data.width, bomb.width);
        const queued = await client.post('/api/process/resize', { fileId: upload.body.data.fileId, width: 100 });
        assert.equal(queued.body.data.status, 'failed');
        assert.equal(queued.body.data.error.code, 'IMAGE_TOO_LARGE');
      });
    }

    it('a direct upload counts every frame too', async () => {
      const bytes = gifFrameBomb(500, 2000, 1_100_000, 50);
      const presigned = await client.post('/api/upload/presign', { filename: 'bomb.gif', size: bytes.length });
      assert.equal(presigned.status, 201);
      const { url, headers, uploadId } = presigned.body.data;
      // The URL names PUBLIC_URL; the test server listens elsewhere.
      const signed = new URL(url, server.url);
      const put = await fetch(new URL(signed.pathname + signed.search, server.url), { method: 'PUT', headers, body: new Uint8Array(bytes) });
      assert.equal(put.status, 200);
      const confirmed = await client.post('/api/upload/confirm', { uploadId });
      assert.equal(confirmed.status, 201);
      assert.equal(confirmed.body.data.pages, 500);
    });

    // Bytes the frame count cannot follow (a trailing fragment after the RIFF, a GIF without its
    // trailer) leave the stored header short; the worker's own header check still holds.
    const lateBombs: { name: string; build: () => Promise<Buffer> | Buffer; storedPages: number | undefined }[] = [
      {
        name: 'the padded WebP bomb with a fragment after its RIFF',
        build: async () => Buffer.concat([await webpFrameBomb(500, 10_000, 1_100_000), Buffer.from('JUN')]),
        storedPages: undefined,
      },
      {
        name: 'the padded GIF bomb without its trailer',
        build: () => {
          const gif = gifFrameBomb(500, 2000, 1_100_000, 50);
          return gif.subarray(0, gif.length - 1);
        },
        storedPages: 50,
      },
    ];
    for (const bomb of lateBombs) {
      it(`${bomb.name}: queued, then failed by the worker within seconds, with bounded memory`, async () => {
        const bytes = await bomb.build();
        const upload = await client.upload(bytes, 'bomb');
        assert.equal(upload.status, 201);
        assert.equal(upload.body.data.pages, bomb.storedPages, 'what the upload could tell');
        let task: any;
        let elapsed = 0;
        const growth = await peakRssGrowth(async () => {
          const started = Date.now();
          const queued = await client.post('/api/process/resize', { fileId: upload.body.data.fileId, width: 100 });
          assert.equal(queued.body.data.status, 'queued');
          task = await client.waitForTask(queued.body.data.taskId, 30_000);
          elapsed = Date.now() - started;
        });
        assert.equal(task.status, 'failed');
        assert.equal(task.error.code, 'IMAGE_TOO_LARGE');
        assert.match(task.error.message, /500 frame\(s\).*in all/);
        assert.ok(elapsed < 5000, `failed after ${elapsed} ms`);
        // Decoding it took ~1 GB for 120 s; the header check decodes nothing.
        assert.ok(growth < 150 * 1024 * 1024, `RSS grew ${Math.round(growth / 1024 / 1024)} MB`);
      });
    }

    it('an output counts every frame it keeps: enlarging an animation past the total fails when queued; to PNG (one frame) it completes', async () => {
      // 100 frames of 200×200 (4,000,000 pixels in all); at 2100 px wide the animation would
      // be 441,000,000 pixels, a single PNG frame 4,410,000.
      const bytes = await smallAnimation(100, 200, 'gif');
      assert.ok(bytes.length < 1024 * 1024, 'the upload reads the whole header');
      const fileId = await client.uploadOk(bytes, 'small.gif');
      const animated = await client.post('/api/process/resize', { fileId, width: 2100, withoutEnlargement: false });
      assert.equal(animated.body.data.status, 'failed');
      assert.equal(animated.body.data.error.code, 'IMAGE_TOO_LARGE');
      assert.match(animated.body.data.error.message, /^The output is 100 frame\(s\) of 2100×2100/);
      const still = await client.post('/api/process/resize', { fileId, width: 2100, withoutEnlargement: false, format: 'png' });
      assert.equal(still.body.data.status, 'queued');
      const done = await client.waitForTask(still.body.data.taskId);
      assert.equal(done.status, 'completed', JSON.stringify(done.error));
      assert.deepEqual([done.result.width, done.result.height], [2100, 2100]);
    });

    it('the worker checks the computed output too, when the upload could not read the header', async () => {
      // 100 frames of 200×200, padded past the first MiB and followed by a fragment the frame
      // count cannot follow: nothing is known when queueing.
      const bytes = Buffer.concat([await webpFrameBomb(100, 200, 1_100_000, 200), Buffer.from('JUN')]);
      const fileId = await client.uploadOk(bytes, 'padded.webp');
      const queued = await client.post('/api/process/resize', { fileId, width: 100 }); // 100×100 × 100 frames: fits
      assert.equal(queued.body.data.status, 'queued');
      const fits = await client.waitForTask(queued.body.data.taskId);
      assert.equal(fits.status, 'completed', JSON.stringify(fits.error));
      assert.equal(fits.result.width, 100);
      const tooMany = await client.post('/api/process/resize', { fileId, width: 2100, withoutEnlargement: false });
      assert.equal(tooMany.body.data.status, 'queued');
      const task = await client.waitForTask(tooMany.body.data.taskId);
      assert.equal(task.status, 'failed');
      assert.equal(task.error.code, 'IMAGE_TOO_LARGE');
      assert.match(task.error.message, /^The output is 100 frame\(s\) of 2100×2100/);
    });
  });
}
