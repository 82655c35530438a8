// The HTTP contract (/work/shared/API.md) over real HTTP, on every dialect: authentication,
// tenant isolation, idempotency, bad input, downloads, previews, listing, tasks, batches and
// the operations endpoints. Every response is checked on the way through: never a 5xx, always
// an x-request-id, and every error in the envelope with the same request id.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { createAccount, createApiKey, revokeApiKey } from '../../src/accounts/accounts.js';
import { OPERATIONS } from '../../src/operations/registry.js';
import { simplePdf } from '../documents/pdf-fixtures.js';
import { Client, DIALECTS, apiFetch, corpusFile, sleep, startServer, type ApiResponse, type TestServer } from '../helpers.js';

const img = (name: string) => corpusFile(`images/sharp/${name}`);
const SMALL_JPEG = img('320x240.jpg'); // 81,198 bytes: under the 100 kB limit of the queued server
const TINY_PNG = img('2x2_fdcce6.png');
/** Every job kind API.md names. */
const CONTRACT_KINDS = ['compress', 'resize', 'crop', 'convert', 'rotate', 'flip', 'watermark', 'upscale', 'image-to-pdf', 'presentation-to-images'];

/** Asserts the error envelope, exactly: {success:false, error:{code, message, details?, requestId}}. */
function assertEnvelope(body: any, requestId: string | null, where: string): void {
  assert.ok(body && typeof body === 'object' && !Buffer.isBuffer(body), `${where}: error body is not JSON: ${String(body)}`);
  assert.deepEqual(Object.keys(body).sort(), ['error', 'success'], where);
  assert.equal(body.success, false, where);
  const error = body.error;
  assert.match(String(error.code), /^[A-Z][A-Z0-9_]+$/, where);
  assert.equal(typeof error.message, 'string', where);
  assert.ok(error.message.length > 0, where);
  assert.equal(error.requestId, requestId, `${where}: error.requestId equals x-request-id`);
  for (const key of Object.keys(error)) assert.ok(['code', 'message', 'details', 'requestId'].includes(key), `${where}: unexpected error.${key}`);
  if ('details' in error) assert.equal(typeof error.details, 'object', where);
}

/**
 * The harness client, checking every response: no 5xx, an x-request-id, errors in the envelope.
 * It also reads bodies of any method (HEAD included) without choking on an empty one.
 */
class CheckedClient extends Client {
  override async request<T = any>(
    method: string,
    route: string,
    init: { json?: unknown; headers?: Record<string, string>; body?: BodyInit } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...(this.key ? { 'x-api-key': this.key } : {}), ...init.headers };
    let body = init.body;
    if (init.json !== undefined) {
      if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    const { response, body: bytes } = await apiFetch(this.baseUrl + route, { method, headers, body });
    const where = `${method} ${route} → ${response.status}`;
    assert.ok(response.status < 500, `${where}: ${bytes.toString('utf8', 0, 500)}`);
    const requestId = response.headers.get('x-request-id');
    assert.ok(requestId && /^req_[A-Za-z0-9_-]+$/.test(requestId), `${where}: no x-request-id`);
    const type = response.headers.get('content-type') ?? '';
    const parsed = type.includes('application/json') && bytes.length > 0 ? JSON.parse(bytes.toString()) : bytes;
    if (response.status >= 400 && method !== 'HEAD') assertEnvelope(parsed, requestId, where);
    return { status: response.status, headers: response.headers, body: parsed as T };
  }

  delete<T = any>(route: string) {
    return this.request<T>('DELETE', route);
  }

  /** Uploads and returns the whole `data` of the 201. */
  async uploadData(file: string | Buffer, filename?: string): Promise<any> {
    const response = await this.upload(file, filename);
    assert.equal(response.status, 201, JSON.stringify(response.body));
    assert.equal(response.headers.get('location'), `/api/files/${response.body.data.fileId}`);
    return response.body.data;
  }

  async account(): Promise<any> {
    const response = await this.get('/api/account');
    assert.equal(response.status, 200);
    return response.body.data;
  }

  async queue(kind: string, body: Record<string, unknown>, headers?: Record<string, string>): Promise<string> {
    const response = await this.post(`/api/process/${kind}`, body, headers);
    assert.equal(response.status, 202, JSON.stringify(response.body));
    return response.body.data.taskId;
  }
}

function expectError(response: ApiResponse, status: number, code: string): void {
  assert.equal(response.status, status, JSON.stringify(response.body));
  assert.equal(response.body.error.code, code, JSON.stringify(response.body));
}

/** The error without its request id: what must be identical between two answers. */
const withoutRequestId = (body: any) => {
  const { requestId: _requestId, ...error } = body.error;
  return { ...body, error };
};

const fieldNames = (response: ApiResponse): string[] => (response.body.error.details?.fields ?? []).map((f: { field: string }) => f.field);

/** A multipart body written by hand, for shapes FormData cannot make. */
function multipartBody(parts: { disposition: string; data: Buffer | string; type?: string }[]): {
  body: Uint8Array<ArrayBuffer>;
  contentType: string;
} {
  const boundary = `----imgapi${Math.random().toString(16).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    chunks.push(
      Buffer.from(`--${boundary}\r\nContent-Disposition: ${part.disposition}\r\n${part.type ? `Content-Type: ${part.type}\r\n` : ''}\r\n`, 'utf8'),
    );
    chunks.push(Buffer.isBuffer(part.data) ? part.data : Buffer.from(part.data));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: new Uint8Array(Buffer.concat(chunks)), contentType: `multipart/form-data; boundary=${boundary}` };
}

function dirEntries(dir: string): string[] {
  try {
    return fs.readdirSync(dir).sort();
  } catch {
    return [];
  }
}

for (const dialect of DIALECTS) {
  describe(`API contract (${dialect})`, () => {
    /** Two workers: tasks run. */
    let server: TestServer;
    /** No workers (tasks stay queued) and a Pro plan limited to 100 kB files. */
    let queued: TestServer;
    const key = async (s: TestServer, plan: 'free' | 'pro' | 'max' = 'pro') => new CheckedClient(s.url, await s.newKey(plan));

    before(async () => {
      [server, queued] = await Promise.all([
        startServer({ dialect }),
        startServer({ dialect, workers: 0, plans: { pro: { maxFileBytes: 100_000 } } }),
      ]);
    });
    after(async () => {
      await Promise.all([server?.close(), queued?.close()]);
    });

    // ------------------------------------------------------------------------------------------
    describe('happy path', () => {
      it('answers the operations endpoints', async () => {
        const anon = new CheckedClient(server.url);
        const health = await anon.get('/healthz');
        assert.equal(health.status, 200);

        const ready = await anon.get('/readyz');
        assert.equal(ready.status, 200);
        assert.equal(ready.body.checks.database.ok, true);
        assert.equal(ready.body.checks.storage.ok, true);

        const metrics = await anon.get('/metrics');
        assert.equal(metrics.status, 200);
        const text = metrics.body.toString();
        assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain/);
        assert.match(text, /imgapi_http_requests_total/);
        assert.match(text, /imgapi_queue_depth/);

        const openapi = await anon.get('/openapi.json');
        assert.equal(openapi.status, 200);
        assert.match(openapi.body.openapi, /^3\./);
        const compress = openapi.body.paths['/api/process/compress'];
        assert.ok(compress?.post, 'the document lists POST /api/process/compress');
        assert.deepEqual(compress.post.security, [{ apiKey: [] }, { bearer: [] }]);
        assert.deepEqual(
          { ...openapi.body.components.securitySchemes.apiKey, description: undefined },
          { type: 'apiKey', in: 'header', name: 'x-api-key', description: undefined },
        );

        const docs = await anon.get('/docs');
        assert.equal(docs.status, 200);
        assert.match(docs.headers.get('content-type') ?? '', /text\/html/);
      });

      it("uploads and reads a file's metadata", async () => {
        const client = await key(server);
        const file = await client.uploadData(SMALL_JPEG);
        assert.match(file.fileId, /^file_[A-Za-z0-9_-]{22,}$/);
        assert.equal(file.format, 'jpeg');
        assert.equal(file.mimeType, 'image/jpeg');
        assert.equal(file.size, fs.statSync(SMALL_JPEG).size);
        assert.deepEqual([file.width, file.height], [320, 240]);
        assert.equal(file.filename, '320x240.jpg');
        assert.ok(!Number.isNaN(Date.parse(file.createdAt)) && file.createdAt.endsWith('Z'));
        assert.ok(Date.parse(file.expiresAt) > Date.parse(file.createdAt));

        const meta = await client.get(`/api/files/${file.fileId}`);
        assert.equal(meta.status, 200);
        assert.equal(meta.body.success, true);
        for (const field of ['fileId', 'filename', 'mimeType', 'format', 'size', 'width', 'height', 'createdAt', 'expiresAt']) {
          assert.deepEqual(meta.body.data[field], file[field], field);
        }
      });

      it('lists files newest first, paginated by limit and cursor', async () => {
        const client = await key(server);
        const ids: string[] = [];
        for (const name of ['2x2_fdcce6.png', 'd.png', 'swiss.png']) {
          ids.push((await client.uploadData(img(name))).fileId);
          await sleep(5);
        }
        const newestFirst = [...ids].reverse();

        const all = await client.get('/api/files');
        assert.equal(all.status, 200);
        assert.deepEqual(
          all.body.data.files.map((f: any) => f.fileId),
          newestFirst,
        );
        assert.equal(all.body.data.nextCursor, null);

        const first = await client.get('/api/files?limit=2');
        assert.deepEqual(
          first.body.data.files.map((f: any) => f.fileId),
          newestFirst.slice(0, 2),
        );
        assert.equal(typeof first.body.data.nextCursor, 'string');
        const second = await client.get(`/api/files?limit=2&cursor=${encodeURIComponent(first.body.data.nextCursor)}`);
        assert.equal(second.status, 200);
        assert.deepEqual(
          second.body.data.files.map((f: any) => f.fileId),
          newestFirst.slice(2),
        );
        assert.equal(second.body.data.nextCursor, null);

        const exact = await client.get('/api/files?limit=3');
        assert.equal(exact.body.data.files.length, 3);
        assert.equal(exact.body.data.nextCursor, null, 'no next page when the page is exactly full');
      });

      it('deletes a file: 204, then 404, and its storage is freed', async () => {
        const client = await key(server);
        const keep = await client.uploadData(TINY_PNG);
        const gone = await client.uploadData(SMALL_JPEG);
        assert.equal((await client.account()).usage.storageBytes.used, keep.size + gone.size);

        const deleted = await client.delete(`/api/files/${gone.fileId}`);
        assert.equal(deleted.status, 204);
        assert.equal(deleted.body.length, 0);
        assert.equal((await client.account()).usage.storageBytes.used, keep.size);

        expectError(await client.get(`/api/files/${gone.fileId}`), 404, 'NOT_FOUND');
        expectError(await client.get(`/api/download/${gone.fileId}`), 404, 'NOT_FOUND');
        expectError(await client.delete(`/api/files/${gone.fileId}`), 404, 'NOT_FOUND');
        assert.equal((await client.account()).usage.storageBytes.used, keep.size, 'a second delete frees nothing more');
        assert.deepEqual(
          (await client.get('/api/files')).body.data.files.map((f: any) => f.fileId),
          [keep.fileId],
        );
      });

      it("downloads with the contract's headers, HEAD, ranges and If-None-Match", async () => {
        const client = await key(server);
        const bytes = fs.readFileSync(SMALL_JPEG);
        const file = await client.uploadData(bytes, 'photo.jpg');
        const route = `/api/download/${file.fileId}`;

        const full = await client.get(route);
        assert.equal(full.status, 200);
        assert.ok(Buffer.isBuffer(full.body));
        assert.ok((full.body as Buffer).equals(bytes), "the bytes are the upload's");
        const h = full.headers;
        assert.equal(h.get('content-type'), 'image/jpeg');
        assert.equal(h.get('content-length'), String(bytes.length));
        assert.equal(h.get('content-disposition'), `attachment; filename="photo.jpg"; filename*=UTF-8''photo.jpg`);
        const etag = h.get('etag');
        // Strong (no W/): an upload's bytes never change and its id is never reused, so the ETag derives from the id.
        assert.match(etag ?? '', /^"[0-9a-f]{32}"$/);
        assert.equal(h.get('x-content-type-options'), 'nosniff');
        assert.match(h.get('content-security-policy') ?? '', /\bsandbox\b/);

        const head = await client.request('HEAD', route);
        assert.equal(head.status, 200);
        assert.equal((head.body as Buffer).length, 0);
        for (const name of ['content-type', 'content-length', 'content-disposition', 'etag', 'x-content-type-options', 'content-security-policy']) {
          assert.equal(head.headers.get(name), h.get(name), name);
        }

        const range = await client.get(route, { range: 'bytes=0-99' });
        assert.equal(range.status, 206);
        assert.equal(range.headers.get('content-range'), `bytes 0-99/${bytes.length}`);
        assert.equal(range.headers.get('content-length'), '100');
        assert.ok((range.body as Buffer).equals(bytes.subarray(0, 100)));

        const suffix = await client.get(route, { range: 'bytes=-10' });
        assert.equal(suffix.status, 206);
        assert.equal(suffix.headers.get('content-range'), `bytes ${bytes.length - 10}-${bytes.length - 1}/${bytes.length}`);
        assert.ok((suffix.body as Buffer).equals(bytes.subarray(bytes.length - 10)));

        const open = await client.get(route, { range: `bytes=${bytes.length - 5}-` });
        assert.equal(open.status, 206);
        assert.ok((open.body as Buffer).equals(bytes.subarray(bytes.length - 5)));

        const unsatisfiable = await client.get(route, { range: `bytes=${bytes.length}-` });
        expectError(unsatisfiable, 416, 'RANGE_NOT_SATISFIABLE');
        assert.equal(unsatisfiable.headers.get('content-range'), `bytes */${bytes.length}`);

        const notModified = await client.get(route, { 'if-none-match': etag! });
        assert.equal(notModified.status, 304);
        assert.equal((notModified.body as Buffer).length, 0);
        assert.equal(notModified.headers.get('etag'), etag);
        // If-None-Match as RFC 9110 compares it: a list, the weak form, `*`.
        for (const held of [`"other", ${etag}`, `W/${etag}`, '*'])
          assert.equal((await client.get(route, { 'if-none-match': held })).status, 304, held);
        assert.equal((await client.get(route, { 'if-none-match': '"other"' })).status, 200);

        // If-Range: the range only for the bytes the client holds (its ETag, strong); else the whole file.
        assert.equal((await client.get(route, { range: 'bytes=0-99', 'if-range': etag! })).status, 206);
        for (const held of ['"other"', `W/${etag}`, 'Tue, 01 Dec 2026 00:00:00 GMT']) {
          const whole = await client.get(route, { range: 'bytes=0-99', 'if-range': held });
          assert.equal(whole.status, 200, held);
          assert.equal(whole.headers.get('content-range'), null, held);
          assert.ok((whole.body as Buffer).equals(bytes), held);
        }
      });

      it('previews images as rasters within 1024 px, or within the asked box', async () => {
        const client = await key(server);
        const photo = await client.uploadData(img('flowers.jpeg')); // 1920×1080
        const preview = await client.get(`/api/preview/${photo.fileId}`);
        assert.equal(preview.status, 200);
        assert.match(preview.headers.get('content-type') ?? '', /^image\/(jpeg|png)$/);
        const meta = await sharp(preview.body as Buffer).metadata();
        assert.ok(meta.format === 'jpeg' || meta.format === 'png');
        assert.ok(meta.width! <= 1024 && meta.height! <= 1024, `${meta.width}×${meta.height}`);
        assert.equal(meta.width, 1024, 'fitted inside the box, not shrunk further');

        const narrow = await client.get(`/api/preview/${photo.fileId}?width=100`);
        assert.equal(narrow.status, 200);
        assert.ok((await sharp(narrow.body as Buffer).metadata()).width! <= 100);

        expectError(await client.get(`/api/preview/${photo.fileId}?width=5000`), 400, 'VALIDATION_ERROR');

        const svg = await client.uploadData(img('check.svg'));
        assert.equal(svg.format, 'svg');
        const raster = await client.get(`/api/preview/${svg.fileId}`);
        assert.equal(raster.status, 200);
        assert.match(raster.headers.get('content-type') ?? '', /^image\/(jpeg|png)$/);
        const svgMeta = await sharp(raster.body as Buffer).metadata();
        assert.ok(svgMeta.format === 'png' || svgMeta.format === 'jpeg', `rasterised, got ${svgMeta.format}`);
        assert.ok(svgMeta.width! > 0 && svgMeta.width! <= 1024);
      });

      it('lists tasks newest first, filters by status, and cancels a queued task once', async () => {
        const client = await key(queued);
        const { fileId } = await client.uploadData(TINY_PNG);
        const t1 = await client.queue('compress', { fileId });
        await sleep(5);
        const t2 = await client.queue('convert', { fileId, format: 'webp' });
        await sleep(5);
        const t3 = await client.queue('compress', { fileId, quality: 50 });

        const list = await client.get('/api/tasks');
        assert.equal(list.status, 200);
        assert.deepEqual(
          list.body.data.tasks.map((t: any) => t.taskId),
          [t3, t2, t1],
        );
        assert.equal(list.body.data.nextCursor, null);

        const page = await client.get('/api/tasks?limit=2');
        assert.deepEqual(
          page.body.data.tasks.map((t: any) => t.taskId),
          [t3, t2],
        );
        const rest = await client.get(`/api/tasks?limit=2&cursor=${encodeURIComponent(page.body.data.nextCursor)}`);
        assert.deepEqual(
          rest.body.data.tasks.map((t: any) => t.taskId),
          [t1],
        );
        assert.equal(rest.body.data.nextCursor, null);

        const task = await client.get(`/api/tasks/${t2}`);
        assert.equal(task.status, 200);
        assert.equal(task.body.data.status, 'queued');
        assert.equal(task.body.data.type, 'convert');
        assert.deepEqual(task.body.data.input, { fileId });
        assert.deepEqual(task.body.data.options, { format: 'webp' });

        const canceled = await client.delete(`/api/tasks/${t2}`);
        assert.equal(canceled.status, 200);
        assert.equal(canceled.body.data.taskId, t2);
        assert.equal(canceled.body.data.status, 'canceled');
        expectError(await client.delete(`/api/tasks/${t2}`), 409, 'TASK_NOT_CANCELABLE');

        const queuedOnly = await client.get('/api/tasks?status=queued');
        assert.deepEqual(
          queuedOnly.body.data.tasks.map((t: any) => t.taskId),
          [t3, t1],
        );
        const canceledOnly = await client.get('/api/tasks?status=canceled');
        assert.deepEqual(
          canceledOnly.body.data.tasks.map((t: any) => t.taskId),
          [t2],
        );
        expectError(await client.get('/api/tasks?status=done'), 400, 'VALIDATION_ERROR');
      });

      it('refuses to delete a file a queued task reads (409 FILE_IN_USE) until the task is canceled', async () => {
        const client = await key(queued);
        const { fileId } = await client.uploadData(TINY_PNG);
        const taskId = await client.queue('compress', { fileId });
        const refused = await client.delete(`/api/files/${fileId}`);
        expectError(refused, 409, 'FILE_IN_USE');
        assert.equal((await client.get(`/api/files/${fileId}`)).status, 200, 'the file is still there');
        assert.equal((await client.delete(`/api/tasks/${taskId}`)).status, 200);
        assert.equal((await client.delete(`/api/files/${fileId}`)).status, 204);
      });

      it('queues a batch: one task per file in order, counted per status, all or nothing', async () => {
        const client = await key(queued);
        const fileIds = [
          (await client.uploadData(TINY_PNG)).fileId,
          (await client.uploadData(img('d.png'))).fileId,
          (await client.uploadData(img('swiss.png'))).fileId,
        ];
        const batch = await client.post('/api/process/batch/convert', { fileIds, format: 'webp' });
        assert.equal(batch.status, 202, JSON.stringify(batch.body));
        const data = batch.body.data;
        assert.match(data.batchId, /^batch_/);
        assert.equal(data.type, 'convert');
        assert.equal(batch.headers.get('location'), `/api/batches/${data.batchId}`);
        assert.equal(data.tasks.length, 3);
        assert.deepEqual(
          data.tasks.map((t: any) => t.fileId),
          fileIds,
        );
        for (const t of data.tasks) {
          assert.match(t.taskId, /^task_/);
          assert.equal(t.status, 'queued');
        }

        const read = await client.get(`/api/batches/${data.batchId}`);
        assert.equal(read.status, 200);
        assert.deepEqual(read.body.data.counts, { queued: 3, processing: 0, completed: 0, failed: 0, canceled: 0 });
        assert.deepEqual(
          read.body.data.tasks.map((t: any) => t.taskId),
          data.tasks.map((t: any) => t.taskId),
        );
        assert.ok(read.body.data.tasks.every((t: any) => t.batchId === data.batchId));
        const byBatch = await client.get(`/api/tasks?batchId=${data.batchId}`);
        assert.equal(byBatch.body.data.tasks.length, 3);

        const before = await client.account();
        const tasksBefore = (await client.get('/api/tasks')).body.data.tasks.length;
        const unknown = await client.post('/api/process/batch/convert', {
          fileIds: [fileIds[0], 'file_doesnotexist0000000000', fileIds[2]],
          format: 'png',
        });
        expectError(unknown, 404, 'NOT_FOUND');
        assert.equal((await client.get('/api/tasks')).body.data.tasks.length, tasksBefore, 'nothing queued');
        const afterUnknown = await client.account();
        assert.equal(afterUnknown.usage.monthlyTasks.used, before.usage.monthlyTasks.used);
        assert.equal(afterUnknown.usage.dailyBatchFiles.used, before.usage.dailyBatchFiles.used);

        const tooMany = await client.post('/api/process/batch/convert', { fileIds: Array(51).fill(fileIds[0]), format: 'png' });
        expectError(tooMany, 400, 'BATCH_TOO_LARGE');
        assert.equal(tooMany.body.error.details.limit, 50);
        assert.equal((await client.get('/api/tasks')).body.data.tasks.length, tasksBefore);

        const canceled = await client.delete(`/api/batches/${data.batchId}`);
        assert.equal(canceled.status, 200);
        assert.deepEqual(canceled.body.data.counts, { queued: 0, processing: 0, completed: 0, failed: 0, canceled: 3 });
      });

      it('runs a batch to completion', async () => {
        const client = await key(server);
        const fileIds = [(await client.uploadData(TINY_PNG)).fileId, (await client.uploadData(img('d.png'))).fileId];
        const batch = await client.post('/api/process/batch/convert', { fileIds, format: 'jpeg' });
        assert.equal(batch.status, 202);
        for (const t of batch.body.data.tasks) assert.equal((await client.waitForTask(t.taskId)).status, 'completed');
        const read = await client.get(`/api/batches/${batch.body.data.batchId}`);
        assert.deepEqual(read.body.data.counts, { queued: 0, processing: 0, completed: 2, failed: 0, canceled: 0 });
        expectError(await client.delete(`/api/tasks/${batch.body.data.tasks[0].taskId}`), 409, 'TASK_NOT_CANCELABLE');
      });

      it('makes a repeated request with one Idempotency-Key a no-op', async () => {
        const client = await key(server);
        const { fileId } = await client.uploadData(TINY_PNG);
        const headers = { 'idempotency-key': 'compress-once' };
        const first = await client.post('/api/process/compress', { fileId, quality: 70 }, headers);
        assert.equal(first.status, 202);
        const again = await client.post('/api/process/compress', { quality: 70, fileId }, headers); // same body, other key order
        assert.equal(again.status, 202);
        assert.equal(again.body.data.taskId, first.body.data.taskId);
        assert.deepEqual(again.body, first.body);
        assert.equal(again.headers.get('location'), first.headers.get('location'));
        const tasks = (await client.get('/api/tasks')).body.data.tasks;
        assert.deepEqual(
          tasks.map((t: any) => t.taskId),
          [first.body.data.taskId],
        );
        assert.equal((await client.account()).usage.monthlyTasks.used, 1);

        const reused = await client.post('/api/process/compress', { fileId, quality: 71 }, headers);
        expectError(reused, 409, 'IDEMPOTENCY_KEY_REUSED');
        const otherKind = await client.post('/api/process/convert', { fileId, format: 'png' }, headers);
        expectError(otherKind, 409, 'IDEMPOTENCY_KEY_REUSED');
        assert.equal((await client.get('/api/tasks')).body.data.tasks.length, 1);

        // The same key from another account is that account's own.
        const other = await key(server);
        const otherFile = await other.uploadData(TINY_PNG);
        const theirs = await other.post('/api/process/compress', { fileId: otherFile.fileId, quality: 70 }, headers);
        assert.equal(theirs.status, 202);
        assert.notEqual(theirs.body.data.taskId, first.body.data.taskId);
        assert.equal((await other.account()).usage.monthlyTasks.used, 1);
        assert.equal((await client.account()).usage.monthlyTasks.used, 1);
      });

      it('makes a repeated upload with one Idempotency-Key a no-op', async () => {
        const client = await key(server);
        const headers = { 'idempotency-key': 'upload-1' };
        const first = await client.upload(SMALL_JPEG, 'a.jpg', headers);
        assert.equal(first.status, 201);
        const again = await client.upload(SMALL_JPEG, 'a.jpg', headers);
        assert.equal(again.status, 201);
        assert.equal(again.body.data.fileId, first.body.data.fileId);
        assert.equal((await client.account()).usage.storageBytes.used, first.body.data.size, 'storage counted once');
        assert.equal((await client.get('/api/files')).body.data.files.length, 1);
        const uploads = dirEntries(path.join(server.dataDir, 'objects', 'uploads'));
        assert.ok(uploads.includes(first.body.data.fileId));

        const different = await client.upload(TINY_PNG, 'a.jpg', headers);
        expectError(different, 409, 'IDEMPOTENCY_KEY_REUSED');
        assert.equal((await client.account()).usage.storageBytes.used, first.body.data.size);
        assert.equal(dirEntries(path.join(server.dataDir, 'objects', 'uploads')).length, uploads.length, 'the refused bytes are not kept');
      });

      it('creates one task from parallel duplicates with one Idempotency-Key', async () => {
        const client = await key(server);
        const { fileId } = await client.uploadData(TINY_PNG);
        const headers = { 'idempotency-key': 'parallel' };
        const responses = await Promise.all(Array.from({ length: 5 }, () => client.post('/api/process/compress', { fileId }, headers)));
        for (const r of responses) assert.equal(r.status, 202, JSON.stringify(r.body));
        assert.equal(new Set(responses.map((r) => r.body.data.taskId)).size, 1);
        assert.equal((await client.get('/api/tasks')).body.data.tasks.length, 1);
        assert.equal((await client.account()).usage.monthlyTasks.used, 1);
      });
    });

    // ------------------------------------------------------------------------------------------
    describe('errors', () => {
      let client: CheckedClient;
      let fileId: string;

      before(async () => {
        client = await key(server);
        fileId = (await client.uploadData(TINY_PNG)).fileId;
      });

      it('refuses a text file (415)', async () => {
        const text = await client.upload(Buffer.from('hello, world\nthis is not an image\n'), 'notes.jpg');
        expectError(text, 415, 'UNSUPPORTED_MEDIA_TYPE');
      });

      it('refuses an empty file and malformed multipart with 400 VALIDATION_ERROR', async () => {
        const empty = await client.upload(Buffer.alloc(0), 'empty.png');
        expectError(empty, 400, 'VALIDATION_ERROR');

        const png = new Uint8Array(fs.readFileSync(TINY_PNG));
        const two = new FormData();
        two.append('file', new Blob([png]), 'a.png');
        two.append('file', new Blob([png]), 'b.png');
        expectError(await client.request('POST', '/api/upload', { body: two }), 400, 'VALIDATION_ERROR');

        const misnamed = new FormData();
        misnamed.append('image', new Blob([png]), 'a.png');
        const wrongName = await client.request('POST', '/api/upload', { body: misnamed });
        expectError(wrongName, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(wrongName).includes('image'), JSON.stringify(wrongName.body));

        const field = new FormData();
        field.append('file', 'just text, not a file');
        expectError(await client.request('POST', '/api/upload', { body: field }), 400, 'VALIDATION_ERROR');

        const nothing = multipartBody([]);
        expectError(
          await client.request('POST', '/api/upload', { body: nothing.body, headers: { 'content-type': nothing.contentType } }),
          400,
          'VALIDATION_ERROR',
        );

        // A whole body that is not whole multipart: no boundary declared, or no closing boundary
        // (on PostgreSQL the body is in before the parser starts, which then gives the part up).
        const whole = multipartBody([{ disposition: 'form-data; name="file"; filename="a.png"', data: Buffer.from(png), type: 'image/png' }]);
        const closing = Buffer.from(whole.body).lastIndexOf(`--${whole.contentType.split('boundary=')[1]}--`);
        for (const [body, contentType] of [
          [whole.body, 'multipart/form-data'],
          [whole.body.subarray(0, closing), whole.contentType],
        ] as const) {
          const malformed = await client.request('POST', '/api/upload', { body, headers: { 'content-type': contentType } });
          expectError(malformed, 400, 'VALIDATION_ERROR');
          assert.match(malformed.body.error.message, /^Malformed multipart body/);
        }

        expectError(await client.post('/api/upload', { file: 'abc' }), 400, 'VALIDATION_ERROR');
        expectError(await client.request('POST', '/api/upload'), 400, 'VALIDATION_ERROR');
        expectError(await client.request('POST', '/api/upload', { body: png, headers: { 'content-type': 'image/png' } }), 400, 'VALIDATION_ERROR');
        assert.equal((await client.get('/api/files')).body.data.files.length, 1, 'nothing stored');
      });

      it('accepts a truncated JPEG, whose task then fails with INVALID_IMAGE', async () => {
        const upload = await client.upload(img('truncated.jpg'));
        assert.equal(upload.status, 201, JSON.stringify(upload.body));
        const task = await client.waitForTask(await client.queue('compress', { fileId: upload.body.data.fileId }));
        assert.equal(task.status, 'failed', JSON.stringify(task));
        assert.equal(task.error.code, 'INVALID_IMAGE');
        assert.equal(task.outputFileId, undefined);
      });

      it('rejects unknown fields, wrong types and missing required fields, naming each', async () => {
        const unknown = await client.post('/api/process/compress', { fileId, qualty: 80, extra: true });
        expectError(unknown, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(unknown).includes('qualty'), JSON.stringify(unknown.body));
        assert.ok(fieldNames(unknown).includes('extra'), JSON.stringify(unknown.body));

        const wrongType = await client.post('/api/process/compress', { fileId, quality: '80' });
        expectError(wrongType, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(wrongType).includes('quality'), JSON.stringify(wrongType.body));

        const outOfRange = await client.post('/api/process/compress', { fileId, quality: 101 });
        expectError(outOfRange, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(outOfRange).includes('quality'));

        const noFormat = await client.post('/api/process/convert', { fileId });
        expectError(noFormat, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(noFormat).includes('format'), JSON.stringify(noFormat.body));

        const badFormat = await client.post('/api/process/convert', { fileId, format: 'bmp' });
        expectError(badFormat, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(badFormat).includes('format'));

        const noFile = await client.post('/api/process/compress', { quality: 80 });
        expectError(noFile, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(noFile).includes('fileId'));

        const exclusive = await client.post('/api/process/compress', { fileId, targetSize: 10_000, quality: 80 });
        expectError(exclusive, 400, 'VALIDATION_ERROR');
        assert.ok(
          fieldNames(exclusive).some((f) => f === 'targetSize' || f === 'quality'),
          JSON.stringify(exclusive.body),
        );

        const notObject = await client.post('/api/process/compress', [fileId]);
        expectError(notObject, 400, 'VALIDATION_ERROR');

        const batchUnknown = await client.post('/api/process/batch/compress', { fileIds: [fileId], colour: 'red' });
        expectError(batchUnknown, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(batchUnknown).includes('colour'));
        assert.equal((await client.account()).usage.monthlyTasks.used, 1, "only the truncated JPEG's task was queued");
      });

      it('checks validation before existence', async () => {
        const both = await client.post('/api/process/compress', { fileId: 'file_doesnotexist0000000000', quality: '80' });
        expectError(both, 400, 'VALIDATION_ERROR');
        const crossField = await client.post('/api/process/compress', { fileId: 'file_doesnotexist0000000000', targetSize: 1000, quality: 80 });
        expectError(crossField, 400, 'VALIDATION_ERROR');
      });

      it('rejects bad JSON, other content types and out-of-range query parameters', async () => {
        const headers = { 'content-type': 'application/json' };
        expectError(await client.request('POST', '/api/process/compress', { body: '{"fileId": ', headers }), 400, 'VALIDATION_ERROR');
        expectError(await client.request('POST', '/api/process/compress', { body: '', headers }), 400, 'VALIDATION_ERROR');

        // A type the API does not read is 415, text/plain included (even holding JSON). Multipart
        // is read (the upload takes it), without a JSON object coming out: the schema refuses it, 400.
        const text = await client.request('POST', '/api/process/compress', {
          body: JSON.stringify({ fileId }),
          headers: { 'content-type': 'text/plain' },
        });
        expectError(text, 415, 'UNSUPPORTED_MEDIA_TYPE');
        const xml = await client.request('POST', '/api/process/compress', { body: '<fileId/>', headers: { 'content-type': 'application/xml' } });
        expectError(xml, 415, 'UNSUPPORTED_MEDIA_TYPE');
        const form = new FormData();
        form.append('fileId', fileId);
        expectError(await client.request('POST', '/api/process/compress', { body: form }), 400, 'VALIDATION_ERROR');
        expectError(await client.request('POST', '/api/process/compress', { body: 'null', headers }), 400, 'VALIDATION_ERROR');
        // An operation that takes no body refuses one that says something, naming its fields;
        // nothing, `{}` and `null` pass, and a body of another type is 415 there too.
        const named = await client.post('/api/signing-keys', { name: 'mine', rotate: true });
        expectError(named, 400, 'VALIDATION_ERROR');
        assert.deepEqual(
          named.body.error.details.fields.map((f: { field: string }) => f.field),
          ['name', 'rotate'],
        );
        expectError(await client.post('/api/signing-keys', [1]), 400, 'VALIDATION_ERROR');
        assert.equal((await client.request('POST', '/api/signing-keys')).status, 201);
        assert.equal((await client.post('/api/signing-keys', {})).status, 201);
        assert.equal((await client.request('POST', '/api/signing-keys', { body: 'null', headers })).status, 201);
        expectError(
          await client.request('POST', '/api/signing-keys', { body: '<key/>', headers: { 'content-type': 'application/xml' } }),
          415,
          'UNSUPPORTED_MEDIA_TYPE',
        );
        // Valid JSON that would poison prototypes is refused, and the message says why.
        for (const body of [`{"fileId":"${fileId}","__proto__":{"quality":1}}`, `{"fileId":"${fileId}","constructor":{"prototype":{"quality":1}}}`]) {
          const poisoned = await client.request('POST', '/api/process/compress', { body, headers });
          expectError(poisoned, 400, 'VALIDATION_ERROR');
          assert.match(poisoned.body.error.message, /__proto__ or constructor\.prototype/);
        }
        const huge = await client.request('POST', '/api/process/compress', {
          body: JSON.stringify({ fileId, pad: 'x'.repeat(2 * 1024 * 1024) }),
          headers,
        });
        expectError(huge, 413, 'PAYLOAD_TOO_LARGE');

        const taskId = (await client.get('/api/tasks')).body.data.tasks[0].taskId;
        const wait = await client.get(`/api/tasks/${taskId}?wait=31`);
        expectError(wait, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(wait).includes('wait'), JSON.stringify(wait.body));
        expectError(await client.get(`/api/tasks/${taskId}?wait=0`), 400, 'VALIDATION_ERROR');
        expectError(await client.get(`/api/tasks/${taskId}?bogus=1`), 400, 'VALIDATION_ERROR');
        expectError(await client.get(`/api/tasks/${taskId}?wait=abc`), 400, 'VALIDATION_ERROR');

        expectError(await client.get('/api/files?cursor=bm90LWEtY3Vyc29y'), 400, 'VALIDATION_ERROR');
        expectError(await client.get('/api/files?cursor=%%%garbage'), 400, 'VALIDATION_ERROR');
        expectError(await client.get('/api/tasks?cursor=garbage'), 400, 'VALIDATION_ERROR');
        expectError(await client.get('/api/files?limit=0'), 400, 'VALIDATION_ERROR');
        expectError(await client.get('/api/files?limit=101'), 400, 'VALIDATION_ERROR');
        expectError(await client.get('/api/files?limit=ten'), 400, 'VALIDATION_ERROR');

        const longKey = await client.post('/api/process/compress', { fileId }, { 'idempotency-key': 'k'.repeat(256) });
        expectError(longKey, 400, 'VALIDATION_ERROR');
      });

      it('refuses an unknown query parameter on every GET and DELETE of the API, naming it, before doing anything', async () => {
        const doc = (await apiFetch(`${server.url}/openapi.json`)).body;
        const paths = JSON.parse(doc.toString()).paths as Record<string, Record<string, { parameters?: any[] }>>;
        let checked = 0;
        for (const [route, item] of Object.entries(paths)) {
          if (!route.startsWith('/api/')) continue;
          for (const method of ['get', 'delete'] as const) {
            const op = item[method];
            if (!op) continue;
            // Each path parameter: a well-formed id (the prefix its pattern names) that does not exist.
            const url = route.replace(/\{(\w+)\}/g, (_, name: string) => {
              const pattern = String(op.parameters?.find((p) => p.name === name)?.schema?.pattern ?? '');
              return `${/^\^(\w+?)_/.exec(pattern)?.[1] ?? 'x'}_doesnotexist0000000000`;
            });
            const response = await client.request(method.toUpperCase(), `${url}?bogus=1`);
            expectError(response, 400, 'VALIDATION_ERROR');
            assert.deepEqual(fieldNames(response), ['bogus'], `${method} ${url}`);
            checked++;
          }
        }
        assert.ok(checked >= 15, `${checked} operations checked`);
      });

      it("refuses a file over the plan's maxFileBytes with 413, storing nothing", async () => {
        const limited = await key(queued); // Pro with maxFileBytes 100,000
        const uploadsDir = path.join(queued.dataDir, 'objects', 'uploads');
        const tmpDir = path.join(queued.dataDir, 'objects', '.tmp');
        const before = { uploads: dirEntries(uploadsDir), tmp: dirEntries(tmpDir) };
        const big = img('Landscape_1.jpg'); // 139,435 bytes
        assert.ok(fs.statSync(big).size > 100_000);
        const refused = await limited.upload(big);
        expectError(refused, 413, 'FILE_TOO_LARGE');
        assert.equal((await limited.account()).usage.storageBytes.used, 0);
        assert.deepEqual((await limited.get('/api/files')).body.data.files, []);
        assert.deepEqual(dirEntries(uploadsDir), before.uploads, 'no leftover upload');
        assert.deepEqual(dirEntries(tmpDir), before.tmp, 'no leftover temporary file');

        // Exactly at the limit is fine; one byte more is not.
        const limit = 100_000;
        const source = fs.readFileSync(big);
        const exact = Buffer.concat([source.subarray(0, limit - 2), Buffer.from([0xff, 0xd9])]);
        assert.equal((await limited.upload(exact, 'exact.jpg')).status, 201);
        expectError(await limited.upload(Buffer.concat([exact, Buffer.from([0])]), 'over.jpg'), 413, 'FILE_TOO_LARGE');
        assert.equal((await limited.account()).usage.storageBytes.used, limit);
      });

      it('answers 404 for job kinds that do not exist yet, and for unknown routes', async () => {
        // The contract's kinds not registered yet (resize while it is being written), and a made-up one.
        const registered = new Set(OPERATIONS.map((op) => op.kind));
        const missing = [...CONTRACT_KINDS.filter((kind) => !registered.has(kind)), 'sharpen-all-the-things'];
        for (const kind of missing) {
          expectError(await client.post(`/api/process/${kind}`, { fileId, width: 100 }), 404, 'NOT_FOUND');
          expectError(await client.post(`/api/process/batch/${kind}`, { fileIds: [fileId], width: 100 }), 404, 'NOT_FOUND');
        }
        for (const op of OPERATIONS.filter((o) => !o.batch)) {
          expectError(await client.post(`/api/process/batch/${op.kind}`, { fileIds: [fileId] }), 404, 'NOT_FOUND');
        }
        expectError(await client.get('/api/nothing-here'), 404, 'NOT_FOUND');
        expectError(await client.get('/api/tasks/task_doesnotexist0000000000'), 404, 'NOT_FOUND');
        expectError(await client.get('/api/batches/batch_doesnotexist0000000000'), 404, 'NOT_FOUND');
      });
    });

    // ------------------------------------------------------------------------------------------
    describe('security', () => {
      it('authenticates every /api request by x-api-key', async () => {
        const missing = await new CheckedClient(server.url).get('/api/account');
        expectError(missing, 401, 'API_KEY_MISSING');
        expectError(await new CheckedClient(server.url).upload(TINY_PNG), 401, 'API_KEY_MISSING');
        expectError(await new CheckedClient(server.url, '').get('/api/files'), 401, 'API_KEY_MISSING');

        expectError(await new CheckedClient(server.url, 'ik_not-a-real-key').get('/api/account'), 401, 'API_KEY_INVALID');
        expectError(await new CheckedClient(server.url, 'ik_not-a-real-key').post('/api/process/compress', { bogus: 1 }), 401, 'API_KEY_INVALID');

        // A revoked key stops working at once.
        const { database, clock } = server.services;
        const account = await createAccount(database, clock, { email: `revoked-${dialect}@example.com`, plan: 'pro' });
        const created = await createApiKey(database, clock, account.id, 'to revoke');
        const revocable = new CheckedClient(server.url, created.key);
        assert.equal((await revocable.get('/api/account')).status, 200);
        assert.equal(await revokeApiKey(database, clock, account.id, created.id), true);
        expectError(await revocable.get('/api/account'), 401, 'API_KEY_INVALID');
        expectError(await revocable.upload(TINY_PNG), 401, 'API_KEY_INVALID');

        const free = await key(server, 'free');
        const noAccess = await free.get('/api/account');
        expectError(noAccess, 403, 'PLAN_NO_API_ACCESS');
        expectError(await free.upload(TINY_PNG), 403, 'PLAN_NO_API_ACCESS');

        const pro = await key(server, 'pro');
        const account200 = await pro.get('/api/account');
        assert.equal(account200.status, 200);
        assert.equal(account200.body.data.plan, 'pro');
        assert.equal(account200.body.data.limits.apiAccess, true);
        // Authentication comes before validation.
        expectError(await new CheckedClient(server.url).post('/api/process/compress', { bogus: 1 }), 401, 'API_KEY_MISSING');
        expectError(await free.post('/api/process/compress', { bogus: 1 }), 403, 'PLAN_NO_API_ACCESS');
      });

      it('takes the key as Authorization: Bearer too; two different keys are 401', async () => {
        const pro = await key(server, 'pro');
        const bearer = (value: string, extra: Record<string, string> = {}) =>
          new CheckedClient(server.url).request('GET', '/api/account', { headers: { authorization: value, ...extra } });
        const viaBearer = await bearer(`Bearer ${pro.key}`);
        assert.equal(viaBearer.status, 200);
        assert.deepEqual(viaBearer.body.data, (await pro.get('/api/account')).body.data);
        assert.equal((await bearer(`bearer  ${pro.key}`)).status, 200, 'the scheme is case-insensitive');
        assert.equal((await bearer(`Bearer ${pro.key}`, { 'x-api-key': pro.key! })).status, 200, 'the same key twice');
        expectError(await bearer(`Bearer ${pro.key}`, { 'x-api-key': (await key(server, 'pro')).key! }), 401, 'API_KEY_INVALID');
        expectError(await bearer('Bearer ik_not-a-real-key'), 401, 'API_KEY_INVALID');
        expectError(await bearer(`Basic ${Buffer.from(`user:${pro.key}`).toString('base64')}`), 401, 'API_KEY_MISSING');
        expectError(await bearer('Bearer'), 401, 'API_KEY_MISSING');
      });

      it("answers another account's resources exactly as nonexistent ones (404)", async () => {
        const alice = await key(server);
        const bob = await key(server);
        const file = await alice.uploadData(SMALL_JPEG);
        const taskId = await alice.queue('compress', { fileId: file.fileId });
        const batch = await alice.post('/api/process/batch/compress', { fileIds: [file.fileId] });
        assert.equal(batch.status, 202);
        const batchId = batch.body.data.batchId;
        const bobsFile = await bob.uploadData(TINY_PNG);

        const fake = { file: 'file_AAAAAAAAAAAAAAAAAAAAAA', task: 'task_AAAAAAAAAAAAAAAAAAAAAA', batch: 'batch_AAAAAAAAAAAAAAAAAAAAAA' };
        const pairs: [string, string, (id: string) => Promise<ApiResponse>][] = [
          ['GET file', 'file', (id) => bob.get(`/api/files/${id}`)],
          ['download', 'file', (id) => bob.get(`/api/download/${id}`)],
          ['preview', 'file', (id) => bob.get(`/api/preview/${id}`)],
          ['DELETE file', 'file', (id) => bob.delete(`/api/files/${id}`)],
          ['job input', 'file', (id) => bob.post('/api/process/compress', { fileId: id })],
          ['batch input', 'file', (id) => bob.post('/api/process/batch/convert', { fileIds: [bobsFile.fileId, id], format: 'png' })],
          ['GET task', 'task', (id) => bob.get(`/api/tasks/${id}`)],
          ['GET task ?wait', 'task', (id) => bob.get(`/api/tasks/${id}?wait=1`)],
          ['DELETE task', 'task', (id) => bob.delete(`/api/tasks/${id}`)],
          ['GET batch', 'batch', (id) => bob.get(`/api/batches/${id}`)],
          ['DELETE batch', 'batch', (id) => bob.delete(`/api/batches/${id}`)],
        ];
        const real: Record<string, string> = { file: file.fileId, task: taskId, batch: batchId };
        for (const [what, type, call] of pairs) {
          const foreign = await call(real[type]!);
          const missing = await call(fake[type as keyof typeof fake]);
          expectError(foreign, 404, 'NOT_FOUND');
          expectError(missing, 404, 'NOT_FOUND');
          assert.deepEqual(withoutRequestId(foreign.body), withoutRequestId(missing.body), what);
        }
        const head = await bob.request('HEAD', `/api/download/${file.fileId}`);
        assert.equal(head.status, 404);

        // Bob's lists do not show Alice's things, and nothing of Alice's was touched.
        assert.deepEqual(
          (await bob.get('/api/files')).body.data.files.map((f: any) => f.fileId),
          [bobsFile.fileId],
        );
        assert.deepEqual((await bob.get('/api/tasks')).body.data.tasks, []);
        assert.deepEqual((await bob.get(`/api/tasks?batchId=${batchId}`)).body.data.tasks, []);
        assert.equal((await bob.account()).usage.monthlyTasks.used, 0);
        assert.equal((await alice.get(`/api/files/${file.fileId}`)).status, 200);
        const aliceTask = await alice.waitForTask(taskId);
        assert.notEqual(aliceTask.status, 'canceled');
        assert.equal((await alice.get(`/api/batches/${batchId}`)).body.data.counts.canceled, 0);
      });

      it('serves downloads safely, with a safe filename for any name', async () => {
        const client = await key(server);
        const png = fs.readFileSync(TINY_PNG);
        // A name with non-ASCII letters, quotes and a path, sent raw in UTF-8.
        const raw = '../../naïve "quoted" 写真.png';
        const form = multipartBody([
          { disposition: `form-data; name="file"; filename="${raw.replace(/["\\]/g, (c) => `\\${c}`)}"`, data: png, type: 'image/png' },
        ]);
        const upload = await client.request('POST', '/api/upload', { body: form.body, headers: { 'content-type': form.contentType } });
        assert.equal(upload.status, 201, JSON.stringify(upload.body));
        const stored: string = upload.body.data.filename;
        assert.ok(!/[\\/"\u0000-\u001f]/.test(stored), `stored name ${JSON.stringify(stored)}`);
        assert.ok(stored.includes('naïve') && stored.includes('写真'), `non-ASCII kept: ${JSON.stringify(stored)}`);

        const download = await client.get(`/api/download/${upload.body.data.fileId}`);
        assert.equal(download.status, 200);
        const disposition = download.headers.get('content-disposition') ?? '';
        const match = /^attachment; filename="([^"]*)"; filename\*=UTF-8''(\S+)$/.exec(disposition);
        assert.ok(match, disposition);
        assert.match(match[1]!, /^[\x20-\x7e]+$/, 'the fallback is printable ASCII');
        assert.ok(!/[\\"]/.test(match[1]!));
        assert.equal(decodeURIComponent(match[2]!), stored, 'filename* carries the exact name');
        assert.match(match[2]!, /^[A-Za-z0-9!#$&+.^_`|~%'()*-]+$/, 'filename* is percent-encoded');
        // The type comes from the bytes, not the name or the part's header.
        assert.equal(download.headers.get('content-type'), 'image/png');
        assert.equal(download.headers.get('x-content-type-options'), 'nosniff');
        assert.match(download.headers.get('content-security-policy') ?? '', /\bsandbox\b/);

        // An SVG is served as SVG, but sandboxed and as an attachment: never run as a page.
        const svg = await client.uploadData(img('check.svg'), 'x.html');
        const svgDownload = await client.get(`/api/download/${svg.fileId}`);
        assert.equal(svgDownload.headers.get('content-type'), 'image/svg+xml');
        assert.match(svgDownload.headers.get('content-disposition') ?? '', /^attachment;/);
        assert.match(svgDownload.headers.get('content-security-policy') ?? '', /\bsandbox\b/);
      });

      it('gives unguessable ids and never reveals internals in errors', async () => {
        const client = await key(server);
        const a = await client.uploadData(TINY_PNG);
        const b = await client.uploadData(TINY_PNG);
        for (const id of [a.fileId, b.fileId]) assert.match(id, /^file_[A-Za-z0-9_-]{22,}$/);
        assert.notEqual(a.fileId, b.fileId);
        const traversal = await client.get('/api/files/..%2F..%2Fetc%2Fpasswd');
        expectError(traversal, 404, 'NOT_FOUND');
        // Errors Fastify raises before routing still carry the envelope and the request id.
        expectError(await client.get(`/api/files/file_${'a'.repeat(200)}`), 400, 'VALIDATION_ERROR');
        expectError(await client.get('/api/files/file_%E0%A4%A'), 400, 'VALIDATION_ERROR');
        const download = await client.get('/api/download/..%2Fobjects%2Fuploads');
        expectError(download, 404, 'NOT_FOUND');
      });
    });

    // ------------------------------------------------------------------------------------------
    // Where the service and the OpenAPI document once disagreed with API.md (issue 13). Every
    // response here is also held to the document by the client.
    describe('contract details', () => {
      it("answers a reused Idempotency-Key with the new request's own 400 or 404 first, then 409", async () => {
        const client = await key(server);
        const { fileId } = await client.uploadData(TINY_PNG);
        const headers = { 'idempotency-key': 'reused-key' };
        assert.equal((await client.post('/api/process/compress', { fileId }, headers)).status, 202);
        // API.md's order: validation → not found / expired → conflict.
        expectError(await client.post('/api/process/compress', { fileId: 'file_AAAAAAAAAAAAAAAAAAAAAA' }, headers), 404, 'NOT_FOUND');
        expectError(await client.post('/api/process/compress', { fileId, quality: 500 }, headers), 400, 'VALIDATION_ERROR');
        expectError(
          await client.post('/api/process/batch/compress', { fileIds: [fileId, 'file_AAAAAAAAAAAAAAAAAAAAAA'] }, headers),
          404,
          'NOT_FOUND',
        );
        expectError(await client.post('/api/process/compress', { fileId, quality: 50 }, headers), 409, 'IDEMPOTENCY_KEY_REUSED');
        // Whatever the refused requests would have done is undone: one task, charged once.
        assert.equal((await client.get('/api/tasks')).body.data.tasks.length, 1);
        assert.equal((await client.account()).usage.monthlyTasks.used, 1);
      });

      it('authenticates unknown /api paths first (401), then answers 404, and 405 with Allow for a method a path does not take', async () => {
        const anonymous = new CheckedClient(server.url);
        expectError(await anonymous.get('/api/nothing-here'), 401, 'API_KEY_MISSING');
        expectError(await anonymous.post('/api/nothing/here', {}), 401, 'API_KEY_MISSING');
        expectError(await new CheckedClient(server.url, 'ik_not-a-real-key').get('/api/nothing-here'), 401, 'API_KEY_INVALID');
        expectError(await anonymous.request('PUT', '/api/files'), 401, 'API_KEY_MISSING');
        expectError(await (await key(server, 'free')).get('/api/nothing-here'), 403, 'PLAN_NO_API_ACCESS');

        const client = await key(server);
        expectError(await client.get('/api/nothing-here'), 404, 'NOT_FOUND');
        expectError(await client.get('/api/files/file_x/extra'), 404, 'NOT_FOUND');
        const put = await client.request('PUT', '/api/files');
        expectError(put, 405, 'METHOD_NOT_ALLOWED');
        assert.deepEqual(put.headers.get('allow')?.split(', ').sort(), ['GET', 'HEAD']);
        const post = await client.post('/api/files/file_AAAAAAAAAAAAAAAAAAAAAA', {});
        expectError(post, 405, 'METHOD_NOT_ALLOWED');
        assert.deepEqual(post.headers.get('allow')?.split(', ').sort(), ['DELETE', 'GET', 'HEAD']);
        assert.deepEqual(post.body.error.details.allowed.sort(), ['DELETE', 'GET', 'HEAD']);
        const getJob = await client.get('/api/process/compress');
        expectError(getJob, 405, 'METHOD_NOT_ALLOWED');
        assert.equal(getJob.headers.get('allow'), 'POST');
        // A wrong method on a known path is still authenticated first.
        expectError(await anonymous.get('/api/process/compress'), 401, 'API_KEY_MISSING');
      });

      it('answers 405 with Allow outside /api too: a delivery URL, health and metrics take GET and HEAD; an unknown path is 404', async () => {
        const anonymous = new CheckedClient(server.url);
        for (const [method, path] of [
          ['POST', '/r/sk_x/sig/w:100/file_x'],
          ['DELETE', '/r/sk_x/sig/w:100/o/shop/a/b.jpg'],
          ['OPTIONS', '/r/sk_x/sig/w:100/file_x'],
          ['PUT', '/healthz'],
          ['POST', '/metrics'],
        ] as const) {
          const refused = await anonymous.request(method, path);
          expectError(refused, 405, 'METHOD_NOT_ALLOWED');
          assert.deepEqual(refused.headers.get('allow')?.split(', ').sort(), ['GET', 'HEAD'], `${method} ${path}`);
          assert.deepEqual(refused.body.error.details.allowed.sort(), ['GET', 'HEAD'], `${method} ${path}`);
        }
        expectError(await anonymous.request('POST', '/nothing-here'), 404, 'NOT_FOUND');
        // Short of a key id, a signature and the rest, no delivery URL: 404.
        expectError(await anonymous.request('POST', '/r/sk_x'), 404, 'NOT_FOUND');
      });

      it('serves no resource headers on an error: a 416 says the size in Content-Range, and nothing else of the file', async () => {
        const client = await key(server);
        const bytes = fs.readFileSync(TINY_PNG);
        const { fileId } = await client.uploadData(bytes);
        const refused = await client.get(`/api/download/${fileId}`, { range: `bytes=${bytes.length + 10}-` });
        expectError(refused, 416, 'RANGE_NOT_SATISFIABLE');
        assert.equal(refused.headers.get('content-range'), `bytes */${bytes.length}`);
        for (const name of ['content-disposition', 'etag', 'accept-ranges']) assert.equal(refused.headers.get(name), null, name);
        assert.equal(refused.headers.get('content-type'), 'application/json; charset=utf-8');
        assert.equal(Number(refused.headers.get('content-length')), Buffer.byteLength(JSON.stringify(refused.body)), "the length is the error's own");
        const missing = await client.get('/api/download/file_AAAAAAAAAAAAAAAAAAAAAA');
        expectError(missing, 404, 'NOT_FOUND');
        for (const name of ['content-disposition', 'etag']) assert.equal(missing.headers.get(name), null, name);
      });

      it('answers 202 with a task already failed when the stored header shows a limit passed, charged nothing', async () => {
        const client = await key(queued);
        const { fileId } = await client.uploadData(SMALL_JPEG); // 320×240
        const response = await client.post('/api/process/resize', { fileId, width: 16_384, withoutEnlargement: false }); // 16384×12288 > Pro's 100 MP
        assert.equal(response.status, 202, JSON.stringify(response.body));
        assert.equal(response.body.data.status, 'failed');
        assert.equal(response.body.data.error.code, 'IMAGE_TOO_LARGE');
        assert.equal(response.headers.get('location'), `/api/tasks/${response.body.data.taskId}`);
        const task = (await client.get(`/api/tasks/${response.body.data.taskId}`)).body.data;
        assert.equal(task.status, 'failed');
      });

      it('takes any quality from 1 to 100, rounding a fraction', async () => {
        const client = await key(server);
        const { fileId } = await client.uploadData(SMALL_JPEG);
        const fraction = await client.waitForTask(await client.queue('convert', { fileId, format: 'webp', quality: 79.6 }));
        const whole = await client.waitForTask(await client.queue('convert', { fileId, format: 'webp', quality: 80 }));
        assert.equal(fraction.status, 'completed', JSON.stringify(fraction.error));
        assert.ok((await client.download(fraction.outputFileId)).equals(await client.download(whole.outputFileId)), '79.6 encodes as 80');
        assert.equal((await client.post('/api/process/compress', { fileId, quality: 1.4 })).status, 202);
        for (const quality of [0.5, 100.2, -1]) expectError(await client.post('/api/process/compress', { fileId, quality }), 400, 'VALIDATION_ERROR');
      });

      it('rotates by any finite angle, and refuses one that is not a number', async () => {
        const client = await key(server);
        const { fileId } = await client.uploadData(SMALL_JPEG); // 320×240
        const turned = await client.waitForTask(await client.queue('rotate', { fileId, angle: 3690 })); // 10 turns and 90°
        assert.equal(turned.status, 'completed', JSON.stringify(turned.error));
        assert.deepEqual([turned.result.width, turned.result.height], [240, 320]);
        const back = await client.waitForTask(await client.queue('rotate', { fileId, angle: -7200.5 }));
        assert.equal(back.status, 'completed', JSON.stringify(back.error));
        const huge = await client.request('POST', '/api/process/rotate', {
          body: `{"fileId":"${fileId}","angle":1e400}`,
          headers: { 'content-type': 'application/json' },
        });
        expectError(huge, 400, 'VALIDATION_ERROR'); // 1e400 is Infinity to JSON.parse
        assert.ok(fieldNames(huge).includes('angle'), JSON.stringify(huge.body));
        expectError(await client.post('/api/process/rotate', { fileId, angle: '90' }), 400, 'VALIDATION_ERROR');
      });

      it("takes image-to-pdf's one input as fileId too, and refuses both or neither", async () => {
        const client = await key(server);
        const { fileId } = await client.uploadData(SMALL_JPEG);
        const task = await client.waitForTask(await client.queue('image-to-pdf', { fileId }));
        assert.equal(task.status, 'completed', JSON.stringify(task.error));
        assert.deepEqual(task.input, { fileIds: [fileId] });
        assert.equal(task.result.pages, 1);
        const both = await client.post('/api/process/image-to-pdf', { fileId, fileIds: [fileId] });
        expectError(both, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(both).includes('fileId'), JSON.stringify(both.body));
        const neither = await client.post('/api/process/image-to-pdf', { pageSize: 'A4' });
        expectError(neither, 400, 'VALIDATION_ERROR');
        assert.ok(fieldNames(neither).includes('fileIds'), JSON.stringify(neither.body));
      });

      it("reports a BMP upload's width and height", async () => {
        const client = await key(server);
        const bmp = await client.uploadData(corpusFile('images/image-rs/rgb24.bmp'));
        assert.equal(bmp.format, 'bmp');
        assert.deepEqual([bmp.width, bmp.height], [127, 64]);
        const rle = await client.uploadData(corpusFile('images/image-rs/pal8rle.bmp'));
        assert.deepEqual([rle.width, rle.height], [127, 64]);
      });

      it('accepts the request example the document shows for every job kind', async () => {
        const client = await key(queued); // no workers: the tasks stay queued
        const openapi = (await client.get('/openapi.json')).body;
        const image = (await client.uploadData(SMALL_JPEG)).fileId;
        const deck = (await client.uploadData(corpusFile('presentations/python-pptx/tbl-cell.pptx'))).fileId;
        const pdf = (await client.uploadData(simplePdf({ pages: 5 }), 'five.pdf')).fileId;
        const inputs = { image, presentation: deck, pdf } as const;
        for (const op of OPERATIONS) {
          const name = op.kind.replace(/(^|-)([a-z])/g, (_m: string, _d: string, c: string) => c.toUpperCase());
          const example = { ...openapi.components.schemas[`${name}Request`].examples[0] };
          const input = inputs[op.accepts];
          if ('fileIds' in example) example.fileIds = example.fileIds.map(() => input);
          else example.fileId = input;
          const queuedTask = await client.post(`/api/process/${op.kind}`, example);
          assert.equal(queuedTask.status, 202, `${op.kind} ${JSON.stringify(example)}: ${JSON.stringify(queuedTask.body)}`);
          if (!op.batch) continue;
          const batchExample = { ...openapi.components.schemas[`${name}BatchRequest`].examples[0], fileIds: [image, image] };
          const queuedBatch = await client.post(`/api/process/batch/${op.kind}`, batchExample);
          assert.equal(queuedBatch.status, 202, `${op.kind} batch: ${JSON.stringify(queuedBatch.body)}`);
        }
        const presign = await client.post('/api/upload/presign', { ...openapi.components.schemas.PresignRequest.examples[0], size: 1000 });
        assert.equal(presign.status, 201, JSON.stringify(presign.body));
      });
    });
  });
}
