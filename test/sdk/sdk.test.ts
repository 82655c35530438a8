// The TypeScript SDK (sdk/) against a real server: the typical flow, a batch, a large file by
// direct upload, retries (429 with Retry-After, a dropped connection) with one Idempotency-Key,
// and errors as ImgapiError with code, status, requestId and details.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Imgapi as BrowserImgapi } from '../../sdk/index.js';
import { Imgapi, ImgapiError, type PipelineStep, type Progress, type RetryEvent } from '../../sdk/node.js';
import { freePort } from '../e2e/processes.js';
import { DIALECTS, corpusFile, tempDir, type TestServer } from '../helpers.js';
import { checkedFetch, recordingFetch, startPublicServer } from './support.js';

const JPEG = corpusFile('images/sharp/concert.jpg');
const PNG = corpusFile('images/sharp/swiss.png');
const GIF = corpusFile('images/sharp/rotating-squares.gif');
const TRUNCATED = corpusFile('images/sharp/truncated.jpg');
/** 829 kB: read in several chunks, so progress is seen while it is sent. */
const PHOTO = corpusFile('images/sharp/2569067123_aca715a2ee_o.jpg');

for (const dialect of DIALECTS) {
  describe(`SDK (${dialect})`, () => {
    let server: TestServer;
    let out: string;

    before(async () => {
      server = await startPublicServer(dialect);
      out = tempDir('imgapi-sdk-out-');
    });
    after(async () => {
      await server.close();
      fs.rmSync(out, { recursive: true, force: true });
    });

    it('uploads a path with progress, converts, waits by long-poll and downloads to a directory', async () => {
      const { fetch, requests } = recordingFetch();
      const imgapi = new Imgapi({ baseUrl: server.url, apiKey: await server.newKey(), fetch });
      const progress: Progress[] = [];
      const file = await imgapi.upload(JPEG, { onProgress: (p) => progress.push(p) });
      assert.equal(file.format, 'jpeg');
      assert.equal(file.filename, 'concert.jpg');
      assert.equal(file.size, fs.statSync(JPEG).size);
      assert.deepEqual(progress[0], { loaded: 0, total: file.size });
      assert.deepEqual(progress.at(-1), { loaded: file.size, total: file.size });
      const loaded = progress.map((p) => p.loaded);
      assert.deepEqual(
        loaded,
        [...new Set(loaded)].sort((a, b) => a - b),
        'progress only grows',
      );

      const queued = await imgapi.process('convert', { fileId: file.fileId, format: 'webp', quality: 70 });
      assert.equal(queued.status, 'queued');
      const task = await imgapi.wait(queued.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      assert.ok(
        requests.some((r) => r.path === `/api/tasks/${queued.taskId}`),
        'read the task',
      );

      const saved = await imgapi.download(task.outputFileId!, `${out}/`);
      assert.equal(saved.path, path.join(out, saved.filename));
      assert.equal(saved.contentType, 'image/webp');
      assert.equal(saved.size, task.result!.size);
      const meta = await sharp(saved.path).metadata();
      assert.equal(meta.format, 'webp');
      assert.deepEqual([meta.width, meta.height], [file.width, file.height]);
      assert.deepEqual(
        fs.readdirSync(out).filter((name) => name.endsWith('.part')),
        [],
        'no partial file left',
      );

      // Every POST carried its own Idempotency-Key.
      const posts = requests.filter((r) => r.method === 'POST');
      assert.equal(posts.length, 2);
      assert.ok(posts.every((r) => r.key && r.key.length >= 32));
      assert.equal(new Set(posts.map((r) => r.key)).size, posts.length, 'a key each');
    });

    it('run() does the whole flow in one call, from a Buffer (Node) and from a Blob (browser entry)', async () => {
      const apiKey = await server.newKey();
      const node = new Imgapi({ baseUrl: server.url, apiKey, fetch: checkedFetch });
      const target = path.join(out, 'small.png');
      const fromBuffer = await node.run('resize', fs.readFileSync(JPEG), { width: 40, format: 'png' }, { destination: target });
      assert.equal(fromBuffer.task.status, 'completed');
      assert.equal(fromBuffer.output.path, target);
      assert.deepEqual(
        await sharp(target)
          .metadata()
          .then((m) => [m.format, m.width]),
        ['png', 40],
      );

      const browser = new BrowserImgapi({ baseUrl: server.url, apiKey, fetch: checkedFetch });
      const blob = new Blob([fs.readFileSync(PNG)], { type: 'image/png' });
      const fromBlob = await browser.run('rotate', blob, { angle: 90 });
      assert.ok(fromBlob.output.blob instanceof Blob);
      // The service names the output by the one rule: <input stem>.<tag>.<ext> (a nameless blob is `upload`).
      assert.equal(fromBlob.output.filename, 'upload.rotate-90.png');
      assert.equal(fromBlob.output.blob.type, 'image/png');
      const original = await sharp(PNG).metadata();
      const rotated = await sharp(Buffer.from(await fromBlob.output.blob.arrayBuffer())).metadata();
      assert.deepEqual([rotated.width, rotated.height], [original.height, original.width]);

      // A directory keeps the service's name; a function chooses the path knowing it.
      const intoFolder = await node.run('resize', JPEG, { width: 40, format: 'png' }, { destination: `${out}/` });
      assert.equal(intoFolder.output.path, path.join(out, 'concert.resize-40.png'));
      const chosen = await node.run('resize', JPEG, { width: 40, format: 'png' }, { destination: (file) => path.join(out, `mine-${file.filename}`) });
      assert.equal(chosen.output.path, path.join(out, 'mine-concert.resize-40.png'));
      assert.ok(fs.existsSync(chosen.output.path!));

      // An input already stored is used as it is.
      const [storedId] = fromBuffer.inputs;
      assert.ok(storedId);
      const again = await node.run('flip', { fileId: storedId }, { direction: 'horizontal' });
      assert.deepEqual(again.inputs, fromBuffer.inputs);
      assert.ok(again.output.blob && again.output.blob.size > 0);
    });

    it('pipeline() runs typed steps as one task, with one encode at the end', async () => {
      const imgapi = new Imgapi({ baseUrl: server.url, apiKey: await server.newKey(), fetch: checkedFetch });
      const steps: PipelineStep[] = [
        { kind: 'resize', width: 120 },
        { kind: 'rotate', angle: 90 },
        { kind: 'watermark', text: '© SDK', opacity: 0.8 },
      ];
      const { task, output, inputs } = await imgapi.pipeline(fs.readFileSync(JPEG), steps, { format: 'webp', quality: 70 });
      assert.equal(task.type, 'pipeline');
      assert.deepEqual(task.options, { steps, format: 'webp', quality: 70 });
      const original = await sharp(JPEG).metadata();
      const result = await sharp(Buffer.from(await output.blob!.arrayBuffer())).metadata();
      assert.deepEqual([result.format, result.width, result.height], ['webp', Math.round((original.height! * 120) / original.width!), 120]);
      // A step the server refuses is an ImgapiError naming the step's field.
      const refused = await imgapi
        .pipeline({ fileId: inputs[0]! }, [{ kind: 'flip', direction: 'both' }, { kind: 'rotate' } as never])
        .catch((err: unknown) => err);
      assert.ok(refused instanceof ImgapiError);
      assert.equal(refused.code, 'VALIDATION_ERROR');
      assert.match(refused.message, /steps\[1\]\.angle/);
    });

    it('batch() queues one task per file; waitBatch() waits for them all with one long-poll at a time; each is downloaded', async () => {
      const { fetch, requests } = recordingFetch();
      const imgapi = new Imgapi({ baseUrl: server.url, apiKey: await server.newKey(), fetch });
      const files = await Promise.all([JPEG, PNG, GIF].map((source) => imgapi.upload(source)));
      const batch = await imgapi.batch(
        'resize',
        files.map((f) => f.fileId),
        { width: 32, format: 'png' },
      );
      assert.match(batch.batchId, /^batch_/);
      assert.deepEqual(
        batch.tasks.map((t) => t.fileId),
        files.map((f) => f.fileId),
      );
      const updates: string[] = [];
      const finished = await imgapi.waitBatch(batch.batchId, { onUpdate: (update) => updates.push(update.status) });
      assert.equal(finished.status, 'completed');
      assert.ok(finished.completedAt);
      assert.equal(updates.at(-1), 'completed');
      assert.ok(!requests.some((r) => r.path.startsWith('/api/tasks/')), 'no task was polled');
      for (const task of finished.tasks) {
        assert.equal(task.status, 'completed', JSON.stringify(task.error));
        assert.equal(task.batchId, batch.batchId);
        const { blob } = await imgapi.download(task.outputFileId!);
        assert.equal((await sharp(Buffer.from(await blob!.arrayBuffer())).metadata()).width, 32);
      }
    });

    it('a large file goes by presign → PUT → confirm, from a path and from a stream of unknown length', async () => {
      const { fetch, requests } = recordingFetch();
      const imgapi = new Imgapi({ baseUrl: server.url, apiKey: await server.newKey(), fetch, directUploadThreshold: 10_000 });
      const size = fs.statSync(PHOTO).size;
      const progress: Progress[] = [];
      const file = await imgapi.upload(PHOTO, { onProgress: (p) => progress.push(p) });
      assert.equal(file.size, size);
      assert.equal(file.filename, path.basename(PHOTO));
      assert.deepEqual(
        requests.map((r) => `${r.method} ${r.path.replace(/upl_[\w-]+/, 'upl_…')}`),
        ['POST /api/upload/presign', 'PUT /uploads/upl_…', 'POST /api/upload/confirm'],
      );
      assert.equal(requests[1]?.key, null, 'the PUT carries no Idempotency-Key (nor the API key)');
      assert.ok(progress.length > 2, 'progress while the PUT streams');
      assert.deepEqual(progress.at(-1), { loaded: size, total: size });

      // A stream's length is not known: it is spooled, then sent the same way.
      requests.length = 0;
      const streamed = await imgapi.upload(fs.createReadStream(PHOTO));
      assert.equal(streamed.size, size);
      assert.equal(streamed.filename, path.basename(PHOTO));
      assert.equal(requests[0]?.path, '/api/upload/presign');
      // …and a small stream goes as one multipart upload.
      requests.length = 0;
      const small = await imgapi.upload(Readable.from([fs.readFileSync(PNG)]), { filename: 'swiss.png' });
      assert.equal(small.format, 'png');
      assert.deepEqual(
        requests.map((r) => r.path),
        ['/api/upload'],
      );

      const { task } = await imgapi.run('resize', { fileId: file.fileId }, { width: 200 });
      assert.equal(task.status, 'completed');
    });

    it('errors are ImgapiError with the code, status, requestId and details', async () => {
      const imgapi = new Imgapi({ baseUrl: server.url, apiKey: await server.newKey(), fetch: checkedFetch });
      const missing = await imgapi.process('convert', { fileId: 'file_doesnotexist0000000000', format: 'webp' }).catch((err: unknown) => err);
      assert.ok(missing instanceof ImgapiError);
      assert.equal(missing.code, 'NOT_FOUND');
      assert.equal(missing.status, 404);
      assert.match(missing.requestId ?? '', /^req_/);

      const file = await imgapi.upload(PNG);
      const invalid = await imgapi.process('resize', { fileId: file.fileId, width: -5 }).catch((err: unknown) => err);
      assert.ok(invalid instanceof ImgapiError);
      assert.equal(invalid.code, 'VALIDATION_ERROR');
      assert.equal(invalid.status, 400);
      assert.match(JSON.stringify(invalid.details), /width/);

      // A task that fails: run() throws its error code, with the task.
      const failed = await imgapi.run('compress', TRUNCATED, {}).catch((err: unknown) => err);
      assert.ok(failed instanceof ImgapiError);
      assert.equal(failed.code, 'INVALID_IMAGE');
      assert.equal(failed.status, 0);
      assert.equal((failed.task as { status: string }).status, 'failed');

      const anonymous = await new Imgapi({ baseUrl: server.url, fetch: checkedFetch }).account().catch((err: unknown) => err);
      assert.ok(anonymous instanceof ImgapiError);
      assert.deepEqual([anonymous.code, anonymous.status], ['API_KEY_MISSING', 401]);

      // Nothing listens: NETWORK_ERROR after the retries.
      const port = await freePort();
      const retries: RetryEvent[] = [];
      const offline = new Imgapi({
        baseUrl: `http://127.0.0.1:${port}`,
        apiKey: 'ik_x',
        retry: { retries: 2, baseDelayMs: 10 },
        onRetry: (e) => retries.push(e),
      });
      const unreachable = await offline.account().catch((err: unknown) => err);
      assert.ok(unreachable instanceof ImgapiError);
      assert.deepEqual([unreachable.code, unreachable.status], ['NETWORK_ERROR', 0]);
      assert.match(unreachable.message, /ECONNREFUSED/);
      assert.equal(retries.length, 2);
    });

    it('a dropped connection is retried with the same Idempotency-Key: one task', async () => {
      const apiKey = await server.newKey();
      const keys: Array<string | null> = [];
      let drop = true;
      const imgapi = new Imgapi({
        baseUrl: server.url,
        apiKey,
        retry: { baseDelayMs: 10 },
        // The first POST to /api/process is lost on the way back, after the server took it.
        fetch: async (request) => {
          const isJob = request.method === 'POST' && new URL(request.url).pathname.startsWith('/api/process/');
          if (isJob) keys.push(request.headers.get('idempotency-key'));
          const response = await checkedFetch(request);
          if (isJob && drop) {
            drop = false;
            throw new TypeError('fetch failed', { cause: new Error('ECONNRESET') });
          }
          return response;
        },
      });
      const file = await imgapi.upload(PNG);
      const queued = await imgapi.process('convert', { fileId: file.fileId, format: 'avif' });
      assert.equal(keys.length, 2);
      assert.equal(keys[0], keys[1], 'the retry replays the same key');
      const tasks = await imgapi.api.GET('/api/tasks', {});
      assert.deepEqual(
        tasks.data?.data.tasks.map((t) => t.taskId),
        [queued.taskId],
        'one task, not two',
      );
    });
  });
}

// No workers: tasks stay queued. Pro: two requests a second, so a burst is refused 429; Max: one task a month.
describe('SDK on a rate-limited server without workers', () => {
  let server: TestServer;
  before(async () => {
    server = await startPublicServer('sqlite', { workers: 0, plans: { pro: { requestsPerSecond: 2 }, max: { monthlyTasks: 1 } } });
  });
  after(() => server.close());

  it('waits what Retry-After says and succeeds, every request answered', async () => {
    const retries: RetryEvent[] = [];
    const { fetch, requests } = recordingFetch();
    const imgapi = new Imgapi({ baseUrl: server.url, apiKey: await server.newKey('pro'), fetch, onRetry: (event) => retries.push(event) });
    const file = await imgapi.upload(PNG);
    // Six jobs at once against two requests a second: some are refused 429 and retried.
    const queued = await Promise.all(Array.from({ length: 6 }, () => imgapi.process('flip', { fileId: file.fileId, direction: 'vertical' })));
    assert.equal(new Set(queued.map((q) => q.taskId)).size, 6, 'six tasks');
    const limited = retries.filter((r) => r.status === 429);
    assert.ok(limited.length > 0, 'some requests were rate limited');
    assert.ok(
      // Retry-After: 1 (the next one-second window), and at most a tenth more.
      limited.every((r) => r.code === 'RATE_LIMITED' && r.delayMs >= 1000 && r.delayMs <= 1100),
      JSON.stringify(limited),
    );
    // A retried POST kept its key: one key per job, each sent until it was taken.
    const jobKeys = new Set(requests.filter((r) => r.path === '/api/process/flip').map((r) => r.key));
    assert.equal(jobKeys.size, 6);
    assert.ok(requests.filter((r) => r.path === '/api/process/flip').length > 6);
  });

  it('wait() gives up after timeoutMs with TIMEOUT', async () => {
    const imgapi = new Imgapi({ baseUrl: server.url, apiKey: await server.newKey('pro'), fetch: checkedFetch });
    const file = await imgapi.upload(PNG);
    const queued = await imgapi.process('flip', { fileId: file.fileId, direction: 'both' });
    const started = Date.now();
    const timedOut = await imgapi.wait(queued.taskId, { timeoutMs: 1500, pollSeconds: 1 }).catch((err: unknown) => err);
    assert.ok(timedOut instanceof ImgapiError, String(timedOut));
    assert.deepEqual([timedOut.code, timedOut.status], ['TIMEOUT', 0]);
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 1500 && elapsed < 6000, `gave up after ${elapsed} ms`);
  });

  it('a 429 that asks for a longer wait than maxDelayMs (a monthly quota) is thrown at once', async () => {
    const retries: RetryEvent[] = [];
    const imgapi = new Imgapi({
      baseUrl: server.url,
      apiKey: await server.newKey('max'),
      fetch: checkedFetch,
      onRetry: (event) => retries.push(event),
    });
    const file = await imgapi.upload(PNG);
    await imgapi.process('flip', { fileId: file.fileId, direction: 'both' });
    const started = Date.now();
    const refused = await imgapi.process('flip', { fileId: file.fileId, direction: 'both' }).catch((err: unknown) => err);
    assert.ok(refused instanceof ImgapiError, String(refused));
    assert.deepEqual([refused.code, refused.status], ['MONTHLY_QUOTA_EXCEEDED', 429]);
    assert.ok(typeof refused.details?.resetsAt === 'string');
    assert.deepEqual(retries, []);
    // Answered at once, without a backoff sleep; the bound is loose for a loaded machine.
    assert.ok(Date.now() - started < 3000, `${Date.now() - started} ms`);
  });
});
