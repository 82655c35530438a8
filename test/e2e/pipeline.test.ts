// Pipelines (API.md "Pipelines"): several transforms over one decode with one encode, one task
// against the quota. Each step is its kind's own options, validated by its kind's schema, with
// errors naming the step's path; limits apply to every intermediate size, at queue time where the
// options decide it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, DIALECTS, corpusFile, startServer, type TestServer } from '../helpers.js';

/** A corpus file by its path in MANIFEST.json (the manifest says what it exercises). */
function corpus(path: string): string {
  const manifest = JSON.parse(fs.readFileSync(corpusFile('MANIFEST.json'), 'utf8')) as { path: string }[];
  assert.ok(
    manifest.some((entry) => entry.path === path),
    `${path} is in the corpus manifest`,
  );
  return corpusFile(path);
}

/** Mean absolute difference per sample of two images of the same size (0–255). */
async function meanDifference(a: Buffer, b: Buffer): Promise<number> {
  const [x, y] = await Promise.all([a, b].map((image) => sharp(image).removeAlpha().raw().toBuffer()));
  assert.equal(x!.length, y!.length, 'same size');
  let sum = 0;
  for (let i = 0; i < x!.length; i++) sum += Math.abs(x![i]! - y![i]!);
  return sum / x!.length;
}

const STEPS = [
  { kind: 'resize', width: 800 },
  { kind: 'rotate', angle: 90 },
  { kind: 'watermark', text: '© imgapi', opacity: 0.6 },
];

for (const dialect of DIALECTS) {
  describe(`pipelines (${dialect})`, () => {
    let server: TestServer;
    let client: Client;
    let photo: string;

    before(async () => {
      // The max plan's pixel limit is lowered so that an intermediate can pass it while input and output do not.
      server = await startServer({ dialect, workers: 2, plans: { max: { maxPixels: 1_000_000 } } });
      client = new Client(server.url, await server.newKey('pro'));
      photo = await client.uploadOk(corpus('images/sharp/2569067123_aca715a2ee_o.jpg'));
    });
    after(() => server.close());

    const run = async (route: string, body: Record<string, unknown>) => {
      const queued = await client.post(route, body);
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      return task;
    };

    it("resize → rotate → watermark to WebP: the three single jobs' geometry, one encode, fewer bytes and closer pixels", async () => {
      const usage = async () => (await client.get('/api/account')).body.data.usage.monthlyTasks.used as number;
      const usedBefore = await usage();
      const queued = await client.post('/api/process/pipeline', { fileId: photo, steps: STEPS, format: 'webp', quality: 80 });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      assert.equal(queued.body.data.type, 'pipeline');
      assert.equal(queued.headers.get('location'), `/api/tasks/${queued.body.data.taskId}`);
      const piped = await client.waitForTask(queued.body.data.taskId);
      assert.equal(piped.status, 'completed', JSON.stringify(piped.error));
      assert.deepEqual(piped.options, { steps: STEPS, format: 'webp', quality: 80 });
      assert.equal(piped.result.inputSize, fs.statSync(corpus('images/sharp/2569067123_aca715a2ee_o.jpg')).size);
      assert.equal(piped.result.savedBytes, piped.result.inputSize - piped.result.size);
      assert.equal(await usage(), usedBefore + 1, 'three steps, one task against the quota');

      // The same three as single jobs, each encoding WebP at the same quality.
      let input = photo;
      let single: any;
      for (const { kind, ...options } of STEPS) {
        single = await run(`/api/process/${kind}`, { fileId: input, ...options, format: 'webp', quality: 80 });
        input = single.outputFileId;
      }
      assert.equal(piped.result.format, 'webp');
      assert.deepEqual([piped.result.width, piped.result.height], [single.result.width, single.result.height]);
      // 2725×2225 resized to 800 wide, then turned a quarter: 653×800.
      assert.deepEqual([piped.result.width, piped.result.height], [653, 800]);

      // The same pipeline encoded losslessly is the reference both are measured against.
      const reference = await client.download(
        (await run('/api/process/pipeline', { fileId: photo, steps: STEPS, format: 'webp', lossless: true })).outputFileId,
      );
      const chainedBytes = await client.download(single.outputFileId);
      const chainedError = await meanDifference(chainedBytes, reference);
      const pipedError = await meanDifference(await client.download(piped.outputFileId), reference);
      assert.ok(pipedError < chainedError, `at the same quality setting one encode loses less: ${pipedError} < ${chainedError}`);
      // Equal quality as measured: the pipeline at the highest setting whose error is no larger than the three jobs' is smaller.
      const measured: string[] = [`three jobs at quality 80: ${chainedBytes.length} B, mean error ${chainedError.toFixed(2)}`];
      let matched: { quality: number; bytes: number } | undefined;
      for (const quality of [80, 75, 70, 65, 60, 55, 50]) {
        const task = await run('/api/process/pipeline', { fileId: photo, steps: STEPS, format: 'webp', quality });
        const bytes = await client.download(task.outputFileId);
        const error = await meanDifference(bytes, reference);
        measured.push(`pipeline at quality ${quality}: ${bytes.length} B, mean error ${error.toFixed(2)}`);
        if (error > chainedError) break;
        matched = { quality, bytes: bytes.length };
      }
      console.log(measured.join('\n'));
      assert.ok(matched, measured.join('; '));
      assert.ok(matched.bytes < chainedBytes.length, `at equal error the pipeline is smaller: ${measured.join('; ')}`);
    });

    it('keeps an animation (every frame) and applies EXIF orientation once', async () => {
      // 10 frames of 370×285, looping 3 times.
      const path = corpus('images/sharp/animated-loop-3.webp');
      const source = await sharp(path, { animated: true }).metadata();
      const animated = await run('/api/process/pipeline', {
        fileId: await client.uploadOk(path),
        steps: [
          { kind: 'crop', aspectRatio: '1:1' },
          { kind: 'flip', direction: 'vertical' },
          { kind: 'resize', width: 60 },
        ],
        format: 'webp',
      });
      assert.equal(animated.result.pages, source.pages);
      const output = await sharp(await client.download(animated.outputFileId), { animated: true }).metadata();
      assert.deepEqual([output.format, output.pages, output.width, output.pageHeight, output.loop], ['webp', source.pages, 60, 60, source.loop]);
      assert.equal(source.pages, 10);

      // Orientation 6 (stored 450×600, shown 600×450) and orientation 1 of the same picture give the same result.
      const steps = [
        { kind: 'resize', width: 300 },
        { kind: 'flip', direction: 'horizontal' },
        { kind: 'crop', left: 0, top: 0, width: 200, height: 200 },
      ];
      const outputs: Buffer[] = [];
      for (const name of ['Landscape_6.jpg', 'Landscape_1.jpg']) {
        const fileId = await client.uploadOk(corpus(`images/sharp/${name}`));
        const task = await run('/api/process/pipeline', { fileId, steps, format: 'png' });
        assert.deepEqual([task.result.width, task.result.height], [200, 200]);
        outputs.push(await client.download(task.outputFileId));
      }
      const difference = await meanDifference(outputs[0]!, outputs[1]!);
      assert.ok(difference < 8, `the oriented and the upright source agree (mean difference ${difference})`);
    });

    it('a bad step refuses the whole request, naming the step by its path; nothing is queued', async () => {
      const before = (await client.get('/api/tasks?limit=100')).body.data.tasks.length;
      const refused: { body: Record<string, unknown>; field: string }[] = [
        { body: { steps: [{ kind: 'resize', width: 100 }, { kind: 'flip', direction: 'horizontal' }, { kind: 'rotate' }] }, field: 'steps[2].angle' },
        {
          body: {
            steps: [
              { kind: 'resize', width: 100 },
              { kind: 'rotate', angle: 'left' },
            ],
          },
          field: 'steps[1].angle',
        },
        { body: { steps: [{ kind: 'resize', width: 100, format: 'png' }] }, field: 'steps[0].format' },
        { body: { steps: [{ kind: 'compress', quality: 50 }] }, field: 'steps[0].kind' },
        { body: { steps: [{ width: 100 }] }, field: 'steps[0].kind' },
        { body: { steps: [{ kind: 'flip', direction: 'sideways' }] }, field: 'steps[0].direction' },
        // The kind's own cross-field rules: a watermark needs text or a logo.
        {
          body: {
            steps: [
              { kind: 'resize', width: 100 },
              { kind: 'watermark', opacity: 0.5 },
            ],
          },
          field: 'steps[1].text',
        },
        // A rectangle inside the 2725×2225 input, outside the 400×327 image the resize before it makes.
        {
          body: {
            steps: [
              { kind: 'resize', width: 400 },
              { kind: 'crop', left: 0, top: 0, width: 800, height: 200 },
            ],
          },
          field: 'steps[1].width',
        },
        { body: { steps: [] }, field: 'steps' },
        { body: { steps: Array.from({ length: 11 }, () => ({ kind: 'flip', direction: 'both' })) }, field: 'steps' },
        { body: { steps: [{ kind: 'resize', width: 100 }], quality: 80, targetSize: 10_000 }, field: 'targetSize' },
      ];
      for (const { body, field } of refused) {
        for (const [route, input] of [
          ['/api/process/pipeline', { fileId: photo }],
          ['/api/process/batch/pipeline', { fileIds: [photo] }],
        ] as const) {
          const response = await client.post(route, { ...input, ...body });
          assert.equal(response.status, 400, `${route} ${JSON.stringify(body)}: ${JSON.stringify(response.body)}`);
          assert.equal(response.body.error.code, 'VALIDATION_ERROR');
          const fields = response.body.error.details.fields.map((f: { field: string }) => f.field);
          assert.ok(fields.includes(field), `${field} in ${JSON.stringify(response.body.error)}`);
        }
      }
      assert.equal((await client.get('/api/tasks?limit=100')).body.data.tasks.length, before);

      // What only drawing can tell (text no font can draw) fails the task, naming the step's field too.
      const queued = await client.post('/api/process/pipeline', {
        fileId: photo,
        steps: [
          { kind: 'resize', width: 100 },
          { kind: 'watermark', text: '\u2800\u2800' },
        ],
      });
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'failed');
      assert.equal(task.error.code, 'INVALID_OPTIONS');
      assert.deepEqual(task.error.details, { field: 'steps[1].text' });
      assert.match(task.error.message, /^steps\[1\]\.text: draws nothing/);
    });

    it('an intermediate result past the pixel limit fails the task at queue time, charged nothing', async () => {
      const free = new Client(server.url, await server.newKey('max'));
      // 800×600 (0.48 MP) upscaled ×2 is 1600×1200 (1.92 MP) before it is resized to 400 wide.
      const image = await free.uploadOk(
        await sharp({ create: { width: 800, height: 600, channels: 3, background: '#808080' } })
          .png()
          .toBuffer(),
        'grey.png',
      );
      const body = {
        fileId: image,
        steps: [
          { kind: 'upscale', factor: 2 },
          { kind: 'resize', width: 400 },
        ],
      };
      const queued = await free.post('/api/process/pipeline', body);
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      assert.equal(queued.body.data.status, 'failed');
      assert.equal(queued.body.data.error.code, 'IMAGE_TOO_LARGE');
      assert.match(queued.body.data.error.message, /1600×1200/);
      assert.equal((await free.get('/api/account')).body.data.usage.monthlyTasks.used, 0);
      // The same steps the other way round stay small at every step.
      const fine = await free.post('/api/process/pipeline', { ...body, steps: [...body.steps].reverse() });
      const task = await free.waitForTask(fine.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      assert.deepEqual([task.result.width, task.result.height], [800, 600]);
    });

    it('an esrgan upscale is a step like any other; its limit sees the size the steps before leave', async () => {
      // The 6-megapixel photo is past Pro's maxAiUpscalePixels for a single esrgan job, not once resized to 64 px wide.
      const direct = await client.post('/api/process/pipeline', { fileId: photo, steps: [{ kind: 'upscale', factor: 2, model: 'esrgan' }] });
      assert.equal(direct.status, 400, JSON.stringify(direct.body));
      assert.ok(
        direct.body.error.details.fields.some((f: { field: string }) => f.field === 'steps[0].model'),
        JSON.stringify(direct.body.error),
      );
      const task = await run('/api/process/pipeline', {
        fileId: photo,
        steps: [
          { kind: 'resize', width: 64 },
          { kind: 'upscale', factor: 2, model: 'esrgan' },
        ],
        format: 'png',
      });
      assert.deepEqual([task.result.width, task.result.height], [128, 104]);
    });

    it("a logo watermark step's file is the task's input too; an unknown one is 404 before anything is queued", async () => {
      const logo = await client.uploadOk(
        await sharp({ create: { width: 64, height: 64, channels: 4, background: '#ff0000ff' } })
          .png()
          .toBuffer(),
        'logo.png',
      );
      const steps = [
        { kind: 'crop', left: 0, top: 0, width: 400, height: 300 },
        { kind: 'watermark', logoFileId: logo, position: 'top-left', margin: 0, opacity: 1, scale: 0.25 },
      ];
      const task = await run('/api/process/pipeline', { fileId: photo, steps, format: 'png' });
      assert.deepEqual([task.result.width, task.result.height], [400, 300]);
      // The logo, a quarter of the width (100 px), red and opaque at the top-left corner.
      const { data, info } = await sharp(await client.download(task.outputFileId))
        .extract({ left: 40, top: 40, width: 1, height: 1 })
        .raw()
        .toBuffer({ resolveWithObject: true });
      assert.deepEqual([...data.subarray(0, 3)], [255, 0, 0], `pixel ${[...data]} (${info.channels} channels)`);

      // A logo that is not a file of the account, the empty id included, is 404 when queued
      // (a single watermark, its batch and a pipeline's step), never a task that fails later.
      for (const logoFileId of ['file_doesNotExist0000000000', '']) {
        const requests: [string, object][] = [
          ['/api/process/pipeline', { fileId: photo, steps: [{ kind: 'watermark', logoFileId }] }],
          ['/api/process/watermark', { fileId: photo, logoFileId }],
          ['/api/process/batch/watermark', { fileIds: [photo], logoFileId }],
        ];
        for (const [route, body] of requests) {
          const missing = await client.post(route, body);
          assert.equal(missing.status, 404, `${route} ${JSON.stringify(logoFileId)}: ${JSON.stringify(missing.body)}`);
          assert.equal(missing.body.error.code, 'NOT_FOUND');
        }
      }
    });

    it('batch form: one task per file, each a pipeline, charged one each', async () => {
      const other = await client.uploadOk(corpus('images/sharp/Landscape_1.jpg'));
      const usedBefore = (await client.get('/api/account')).body.data.usage.monthlyTasks.used as number;
      const queued = await client.post('/api/process/batch/pipeline', {
        fileIds: [photo, other],
        steps: [
          { kind: 'resize', width: 200, height: 200, fit: 'cover' },
          { kind: 'flip', direction: 'horizontal' },
        ],
        format: 'jpeg',
        quality: 70,
      });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      assert.equal(queued.body.data.type, 'pipeline');
      assert.equal(queued.headers.get('location'), `/api/batches/${queued.body.data.batchId}`);
      for (const { taskId } of queued.body.data.tasks) {
        const task = await client.waitForTask(taskId);
        assert.equal(task.status, 'completed', JSON.stringify(task.error));
        assert.deepEqual([task.result.format, task.result.width, task.result.height], ['jpeg', 200, 200]);
      }
      const batch = (await client.get(`/api/batches/${queued.body.data.batchId}`)).body.data;
      assert.equal(batch.type, 'pipeline');
      assert.equal(batch.counts.completed, 2);
      assert.equal((await client.get('/api/account')).body.data.usage.monthlyTasks.used, usedBefore + 2);
    });
  });
}
