// Direct upload (API.md "Direct upload") over real HTTP, on every dialect: presign → PUT →
// confirm on local storage, where this service signs and receives the PUT (so tampering, expiry
// and wrong sizes are refused here, storing nothing), and the same flow on S3 storage against
// s3rver (the URL is a real presigned S3 PUT; round trips checked byte for byte). The declared
// size is reserved from presign on, becomes the file's storage at confirm, and an abandoned
// upload's reservation is released by the sweep.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { ManualClock } from '../../src/clock.js';
import { CONFIRM_GRACE_MS } from '../../src/files/direct-upload.js';
import { Client, DIALECTS, apiFetch, corpusFile, sleep, startServer, type ApiResponse, type TestServer } from '../helpers.js';
import { startS3rver, type S3Server } from '../s3rver.js';

const JPEG = fs.readFileSync(corpusFile('images/sharp/320x240.jpg'));
const PNG = fs.readFileSync(corpusFile('images/sharp/2x2_fdcce6.png'));
const TTL_MS = 900_000;

function expectError(response: ApiResponse, status: number, code: string): void {
  assert.equal(response.status, status, JSON.stringify(response.body));
  assert.equal(response.body?.success, false, JSON.stringify(response.body));
  assert.equal(response.body.error.code, code, JSON.stringify(response.body));
  assert.equal(response.body.error.requestId, response.headers.get('x-request-id'));
}

interface Presigned {
  uploadId: string;
  url: string;
  method: 'PUT';
  headers: Record<string, string>;
  expiresAt: string;
}

async function presign(client: Client, body: Record<string, unknown>, headers?: Record<string, string>): Promise<Presigned> {
  const response = await client.post('/api/upload/presign', body, headers);
  assert.equal(response.status, 201, JSON.stringify(response.body));
  assert.deepEqual(Object.keys(response.body.data).sort(), ['expiresAt', 'headers', 'method', 'uploadId', 'url']);
  return response.body.data;
}

/** The PUT a client makes: the URL as given, its headers, no API key. */
async function put(url: string, body: Buffer | ReadableStream<Uint8Array>, headers: Record<string, string> = {}): Promise<ApiResponse> {
  const streamed = body instanceof ReadableStream;
  const init: RequestInit & { duplex?: 'half' } = { method: 'PUT', headers, body: streamed ? body : new Uint8Array(body) };
  if (streamed) init.duplex = 'half';
  const { response, body: bytes } = await apiFetch(url, init);
  const text = bytes.toString('utf8');
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // S3's XML
  }
  return { status: response.status, headers: response.headers, body: parsed };
}

/** A body without Content-Length (chunked), as a streaming client sends it. */
function chunkedBody(data: Buffer): ReadableStream<Uint8Array> {
  let sent = false;
  return new ReadableStream({
    pull(controller) {
      if (sent) return controller.close();
      sent = true;
      controller.enqueue(new Uint8Array(data.subarray(0, 100)));
      controller.enqueue(new Uint8Array(data.subarray(100)));
    },
  });
}

const storageUsed = async (client: Client): Promise<number> => {
  const response = await client.get('/api/account');
  assert.equal(response.status, 200);
  return response.body.data.usage.storageBytes.used;
};

/** Every file under the local object store, other than finished files (uploads/, outputs/). */
function strayObjects(server: TestServer): string[] {
  const root = path.join(server.dataDir, 'objects');
  return ['incoming', '.tmp'].flatMap((dir) => {
    try {
      return fs.readdirSync(path.join(root, dir)).map((name) => `${dir}/${name}`);
    } catch {
      return [];
    }
  });
}

for (const dialect of DIALECTS) {
  describe(`direct upload, local storage (${dialect})`, () => {
    let server: TestServer;
    let clock: ManualClock;
    before(async () => {
      clock = new ManualClock();
      server = await startServer({ dialect, clock, workers: 1, plans: { pro: { maxFileBytes: 1_000_000, storageBytes: 2_000_000 } } });
    });
    after(async () => server?.close());
    const client = async (plan: 'pro' | 'max' = 'max') => new Client(server.url, await server.newKey(plan));

    it('presign → PUT → confirm makes a file as an upload does; the reservation becomes its storage', async () => {
      const api = await client();
      const asked = clock.now();
      const upload = await presign(api, { filename: 'holiday/photo.jpg', size: JPEG.length, contentType: 'image/jpeg' });
      assert.match(upload.uploadId, /^upl_[A-Za-z0-9_-]{22,}$/);
      assert.equal(upload.method, 'PUT');
      const url = new URL(upload.url);
      assert.equal(`${url.origin}${url.pathname}`, `${server.config.publicUrl}/uploads/${upload.uploadId}`);
      assert.deepEqual([...url.searchParams.keys()].sort(), ['expires', 'signature', 'size']);
      assert.deepEqual(upload.headers, { 'content-length': String(JPEG.length), 'content-type': 'image/jpeg' });
      // TTL after the request, in whole seconds (so, up to a second before the exact instant).
      const expiresAt = Date.parse(upload.expiresAt);
      assert.ok(expiresAt > asked + TTL_MS - 1000 && expiresAt <= clock.now() + TTL_MS, upload.expiresAt);
      // Reserved at presign.
      assert.equal(await storageUsed(api), JPEG.length);

      expectError(await api.post('/api/upload/confirm', { uploadId: upload.uploadId }), 409, 'UPLOAD_NOT_RECEIVED');

      // The fixed server URL works with the PUT the client's headers name; no API key.
      const received = await put(upload.url.replace(server.config.publicUrl, server.url), JPEG, upload.headers);
      assert.equal(received.status, 200, JSON.stringify(received.body));
      assert.deepEqual(received.body.data, { uploadId: upload.uploadId, size: JPEG.length });

      const confirmed = await api.post('/api/upload/confirm', { uploadId: upload.uploadId });
      assert.equal(confirmed.status, 201, JSON.stringify(confirmed.body));
      const file = confirmed.body.data;
      assert.match(file.fileId, /^file_/);
      assert.equal(confirmed.headers.get('location'), `/api/files/${file.fileId}`);
      assert.equal(file.filename, 'photo.jpg');
      assert.equal(file.format, 'jpeg');
      assert.equal(file.mimeType, 'image/jpeg');
      assert.equal(file.size, JPEG.length);
      assert.deepEqual([file.width, file.height], [320, 240]);
      assert.ok(Date.parse(file.expiresAt) > Date.parse(file.createdAt));
      assert.ok((await api.download(file.fileId)).equals(JPEG));
      assert.equal(await storageUsed(api), JPEG.length, 'confirm does not charge again');

      // Twice: the same file, nothing charged.
      const again = await api.post('/api/upload/confirm', { uploadId: upload.uploadId });
      assert.equal(again.status, 201);
      assert.deepEqual(again.body.data, file);
      assert.equal(await storageUsed(api), JPEG.length);

      // The URL can no longer change the confirmed file, nor leave bytes behind.
      expectError(await put(upload.url.replace(server.config.publicUrl, server.url), Buffer.alloc(JPEG.length)), 409, 'UPLOAD_ALREADY_CONFIRMED');
      assert.ok((await api.download(file.fileId)).equals(JPEG));
      assert.deepEqual(strayObjects(server), []);

      // A job reads it like any upload.
      const job = await api.post('/api/process/convert', { fileId: file.fileId, format: 'webp' });
      assert.equal(job.status, 202, JSON.stringify(job.body));
      const task = await api.waitForTask(job.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task));
      assert.equal((await sharp(await api.download(task.outputFileId)).metadata()).format, 'webp');

      assert.equal((await api.request('DELETE', `/api/files/${file.fileId}`)).status, 204);
      assert.equal(await storageUsed(api), task.result.size);
      assert.deepEqual(strayObjects(server), []);
    });

    it('a PUT still arriving when its upload is confirmed is refused 409 and leaves nothing', async () => {
      const api = await client();
      const upload = await presign(api, { filename: 'a.jpg', size: JPEG.length });
      const url = upload.url.replace(server.config.publicUrl, server.url);
      assert.equal((await put(url, JPEG, upload.headers)).status, 200);
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(new Uint8Array(JPEG.subarray(0, 100)));
          await released;
          controller.enqueue(new Uint8Array(JPEG.subarray(100)));
          controller.close();
        },
      });
      const late = put(url, body);
      for (const deadline = Date.now() + 10_000; !strayObjects(server).some((name) => name.startsWith('.tmp/')); await sleep(20)) {
        assert.ok(Date.now() < deadline, 'the second PUT never reached storage');
      }
      const confirmed = await api.post('/api/upload/confirm', { uploadId: upload.uploadId });
      assert.equal(confirmed.status, 201, JSON.stringify(confirmed.body));
      release();
      expectError(await late, 409, 'UPLOAD_ALREADY_CONFIRMED');
      assert.deepEqual(strayObjects(server), []);
      assert.ok((await api.download(confirmed.body.data.fileId)).equals(JPEG));
    });

    it('refuses a changed URL or signature, storing nothing', async () => {
      const api = await client();
      const upload = await presign(api, { filename: 'a.png', size: PNG.length });
      const other = await presign(api, { filename: 'b.png', size: PNG.length + 1 });
      const url = new URL(upload.url.replace(server.config.publicUrl, server.url));
      const variants: [string, (u: URL) => void][] = [
        [
          'another signature',
          (u) =>
            u.searchParams.set(
              'signature',
              `${u.searchParams.get('signature')!.startsWith('A') ? 'B' : 'A'}${u.searchParams.get('signature')!.slice(1)}`,
            ),
        ],
        ['a larger size', (u) => u.searchParams.set('size', String(PNG.length + 1))],
        ['a later expiry', (u) => u.searchParams.set('expires', String(Number(u.searchParams.get('expires')) + 3600))],
        ['another upload id', (u) => (u.pathname = `/uploads/${other.uploadId}`)],
        ['no signature', (u) => u.searchParams.delete('signature')],
        ['a garbage signature', (u) => u.searchParams.set('signature', 'x')],
        ['an unknown upload id', (u) => (u.pathname = '/uploads/upl_nothing')],
      ];
      for (const [what, change] of variants) {
        const tampered = new URL(url);
        change(tampered);
        const response = await put(tampered.toString(), PNG);
        assert.equal(response.status, 403, `${what}: ${JSON.stringify(response.body)}`);
        expectError(response, 403, 'UPLOAD_SIGNATURE_INVALID');
      }
      assert.deepEqual(strayObjects(server), []);
      expectError(await api.post('/api/upload/confirm', { uploadId: upload.uploadId }), 409, 'UPLOAD_NOT_RECEIVED');
      expectError(await api.post('/api/upload/confirm', { uploadId: other.uploadId }), 409, 'UPLOAD_NOT_RECEIVED');
    });

    it('refuses a body of another length, declared or streamed, storing nothing', async () => {
      const api = await client();
      const upload = await presign(api, { filename: 'a.png', size: PNG.length });
      const url = upload.url.replace(server.config.publicUrl, server.url);
      const longer = Buffer.concat([PNG, Buffer.from([0])]);
      const shorter = PNG.subarray(0, PNG.length - 1);
      for (const [what, body] of [
        ['one byte more (Content-Length)', longer],
        ['one byte less (Content-Length)', shorter],
        ['nothing', Buffer.alloc(0)],
        ['one byte more (chunked)', chunkedBody(longer)],
        ['one byte less (chunked)', chunkedBody(shorter)],
      ] as const) {
        const response = await put(url, body);
        assert.equal(response.status, 400, `${what}: ${JSON.stringify(response.body)}`);
        expectError(response, 400, 'UPLOAD_SIZE_MISMATCH');
        assert.deepEqual(strayObjects(server), [], what);
      }
      expectError(await api.post('/api/upload/confirm', { uploadId: upload.uploadId }), 409, 'UPLOAD_NOT_RECEIVED');
      // The exact length, streamed without Content-Length, is taken.
      assert.equal((await put(url, chunkedBody(PNG))).status, 200);
      assert.equal((await api.post('/api/upload/confirm', { uploadId: upload.uploadId })).status, 201);
    });

    it('refuses an expired URL, storing nothing; confirm then answers 410', async () => {
      const api = await client();
      const upload = await presign(api, { filename: 'a.png', size: PNG.length });
      clock.advance(TTL_MS + 1000);
      expectError(await put(upload.url.replace(server.config.publicUrl, server.url), PNG), 403, 'UPLOAD_URL_EXPIRED');
      assert.deepEqual(strayObjects(server), []);
      expectError(await api.post('/api/upload/confirm', { uploadId: upload.uploadId }), 410, 'UPLOAD_EXPIRED');
    });

    it('accepts a confirm after the URL expired when the bytes arrived in time', async () => {
      const api = await client();
      const upload = await presign(api, { filename: 'late.png', size: PNG.length });
      assert.equal((await put(upload.url.replace(server.config.publicUrl, server.url), PNG)).status, 200);
      clock.advance(TTL_MS + 60_000);
      const confirmed = await api.post('/api/upload/confirm', { uploadId: upload.uploadId });
      assert.equal(confirmed.status, 201, JSON.stringify(confirmed.body));
      assert.equal(confirmed.body.data.format, 'png');
    });

    it('inspects at confirm exactly as an upload: type sniffed, unknown bytes refused and dropped', async () => {
      const api = await client();
      const text = Buffer.from('this is not an image, whatever its name says\n'.repeat(20));
      const upload = await presign(api, { filename: 'fake.jpg', size: text.length, contentType: 'image/jpeg' });
      const url = upload.url.replace(server.config.publicUrl, server.url);
      assert.equal((await put(url, text)).status, 200);
      expectError(await api.post('/api/upload/confirm', { uploadId: upload.uploadId }), 415, 'UNSUPPORTED_MEDIA_TYPE');
      // The bytes are gone; the reservation stays until the upload is confirmed or expires.
      expectError(await api.post('/api/upload/confirm', { uploadId: upload.uploadId }), 409, 'UPLOAD_NOT_RECEIVED');
      assert.equal(await storageUsed(api), text.length);

      // A PNG named .jpg is a PNG.
      const png = await presign(api, { filename: 'really.jpg', size: PNG.length });
      assert.equal((await put(png.url.replace(server.config.publicUrl, server.url), PNG)).status, 200);
      const confirmed = await api.post('/api/upload/confirm', { uploadId: png.uploadId });
      assert.equal(confirmed.status, 201);
      assert.equal(confirmed.body.data.format, 'png');
      assert.equal(confirmed.body.data.mimeType, 'image/png');
    });

    it('applies the plan at presign: file size, then storage with reservations counted', async () => {
      const api = await client('pro'); // 1,000,000-byte files, 2,000,000 bytes of storage
      expectError(await api.post('/api/upload/presign', { filename: 'big.jpg', size: 1_000_001 }), 413, 'FILE_TOO_LARGE');
      await presign(api, { filename: 'a.jpg', size: 900_000 });
      await presign(api, { filename: 'b.jpg', size: 900_000 });
      const refused = await api.post('/api/upload/presign', { filename: 'c.jpg', size: 900_000 });
      expectError(refused, 403, 'STORAGE_LIMIT_EXCEEDED');
      assert.equal(refused.body.error.details.used, 1_800_000);
      assert.equal(await storageUsed(api), 1_800_000);
    });

    it('validates presign and confirm bodies, naming every bad field', async () => {
      const api = await client();
      const bad = await api.post('/api/upload/presign', { size: 0, contentType: 'not a type', extra: 1 });
      expectError(bad, 400, 'VALIDATION_ERROR');
      const fields = bad.body.error.details.fields.map((f: { field: string }) => f.field).sort();
      assert.deepEqual(fields, ['contentType', 'extra', 'filename', 'size']);
      expectError(await api.post('/api/upload/presign', { filename: 'a', size: 1.5 }), 400, 'VALIDATION_ERROR');
      expectError(await api.post('/api/upload/confirm', {}), 400, 'VALIDATION_ERROR');
      expectError(await api.post('/api/upload/confirm', { uploadId: 'upl_x', more: true }), 400, 'VALIDATION_ERROR');
      expectError(await new Client(server.url).post('/api/upload/presign', { filename: 'a', size: 1 }), 401, 'API_KEY_MISSING');
    });

    it("answers 404 for an unknown upload and for another account's", async () => {
      const [mine, theirs] = [await client(), await client()];
      const upload = await presign(theirs, { filename: 'a.png', size: PNG.length });
      assert.equal((await put(upload.url.replace(server.config.publicUrl, server.url), PNG)).status, 200);
      expectError(await mine.post('/api/upload/confirm', { uploadId: upload.uploadId }), 404, 'NOT_FOUND');
      expectError(await mine.post('/api/upload/confirm', { uploadId: 'upl_doesnotexist' }), 404, 'NOT_FOUND');
    });

    it('replays presign for a repeated Idempotency-Key, reserving once', async () => {
      const api = await client();
      const first = await presign(api, { filename: 'a.png', size: 1234 }, { 'idempotency-key': 'presign-1' });
      const second = await presign(api, { filename: 'a.png', size: 1234 }, { 'idempotency-key': 'presign-1' });
      assert.deepEqual(second, first);
      assert.equal(await storageUsed(api), 1234);
      expectError(
        await api.post('/api/upload/presign', { filename: 'b.png', size: 1234 }, { 'idempotency-key': 'presign-1' }),
        409,
        'IDEMPOTENCY_KEY_REUSED',
      );
    });

    it('sweeps abandoned uploads after they expire: bytes deleted, reservation released', async () => {
      const api = await client();
      const arrived = await presign(api, { filename: 'a.png', size: PNG.length });
      const never = await presign(api, { filename: 'b.png', size: 5000 });
      assert.equal((await put(arrived.url.replace(server.config.publicUrl, server.url), PNG)).status, 200);
      assert.equal(await storageUsed(api), PNG.length + 5000);
      assert.ok(fs.existsSync(path.join(server.dataDir, 'objects', 'incoming', arrived.uploadId)));

      clock.advance(TTL_MS + CONFIRM_GRACE_MS - 5000);
      await server.services.maintenance.tick(true);
      assert.equal(await storageUsed(api), PNG.length + 5000, 'kept while a confirm may still come');

      clock.advance(10_000);
      await server.services.maintenance.tick(true);
      assert.equal(await storageUsed(api), 0);
      assert.ok(!fs.existsSync(path.join(server.dataDir, 'objects', 'incoming', arrived.uploadId)));
      expectError(await api.post('/api/upload/confirm', { uploadId: arrived.uploadId }), 410, 'UPLOAD_EXPIRED');
      expectError(await api.post('/api/upload/confirm', { uploadId: never.uploadId }), 410, 'UPLOAD_EXPIRED');
      // Sweeping again changes nothing.
      await server.services.maintenance.tick(true);
      assert.equal(await storageUsed(api), 0);
    });

    it('describes the three routes in the OpenAPI document', async () => {
      const openapi = (await new Client(server.url).get('/openapi.json')).body;
      assert.deepEqual(openapi.paths['/api/upload/presign'].post.security, [{ apiKey: [] }, { bearer: [] }]);
      assert.deepEqual(openapi.paths['/api/upload/confirm'].post.security, [{ apiKey: [] }, { bearer: [] }]);
      assert.ok(openapi.paths['/uploads/{uploadId}']?.put, 'PUT /uploads/{uploadId}');
      assert.deepEqual(openapi.paths['/uploads/{uploadId}'].put.security, [], "no API key: the URL's signature authorises it");
    });
  });

  describe(`direct upload, S3 storage (${dialect})`, () => {
    let s3: S3Server;
    let server: TestServer;
    let clock: ManualClock;
    before(async () => {
      s3 = await startS3rver();
      clock = new ManualClock();
      // Pro: 10 MB files, so a refused upload has sent a first 8 MiB part of a multipart upload.
      server = await startServer({ dialect, clock, workers: 1, env: s3.env, plans: { pro: { maxFileBytes: 10_000_000 } } });
    });
    after(async () => {
      await server?.close();
      await s3?.stop();
    });
    const client = async (plan: 'pro' | 'max' = 'max') => new Client(server.url, await server.newKey(plan));

    it("presign gives a real presigned S3 PUT; the bytes round-trip exactly; confirm moves them out of the URL's reach", async () => {
      const api = await client();
      const data = fs.readFileSync(corpusFile('images/sharp/Landscape_5.jpg'));
      const upload = await presign(api, { filename: 'landscape.jpg', size: data.length });
      const url = new URL(upload.url);
      assert.equal(url.origin, s3.endpoint);
      assert.equal(url.pathname, `/${s3.bucket}/incoming/${upload.uploadId}`);
      assert.equal(url.searchParams.get('X-Amz-SignedHeaders'), 'content-length;host');
      assert.ok(Number(url.searchParams.get('X-Amz-Expires')) <= TTL_MS / 1000);
      assert.deepEqual(upload.headers, { 'content-length': String(data.length) });
      assert.equal(await storageUsed(api), data.length);
      assert.equal((await server.app.inject({ method: 'PUT', url: `/uploads/${upload.uploadId}` })).statusCode, 404, 'no local PUT route with S3');

      expectError(await api.post('/api/upload/confirm', { uploadId: upload.uploadId }), 409, 'UPLOAD_NOT_RECEIVED');
      const stored = await put(upload.url, data, upload.headers);
      assert.equal(stored.status, 200, String(stored.body));

      const confirmed = await api.post('/api/upload/confirm', { uploadId: upload.uploadId });
      assert.equal(confirmed.status, 201, JSON.stringify(confirmed.body));
      const file = confirmed.body.data;
      assert.equal(file.format, 'jpeg');
      assert.equal(file.size, data.length);
      assert.equal(file.filename, 'landscape.jpg');
      assert.ok((await api.download(file.fileId)).equals(data), 'byte for byte');
      const ranged = await api.get(`/api/download/${file.fileId}`, { range: 'bytes=0-0' });
      assert.equal(ranged.status, 206);
      assert.ok((ranged.body as Buffer).equals(data.subarray(0, 1)));
      assert.deepEqual(await s3.listKeys('incoming/'), []);
      assert.deepEqual(await s3.listKeys('uploads/'), [`uploads/${file.fileId}`]);
      assert.equal(await storageUsed(api), data.length);
      assert.deepEqual((await api.post('/api/upload/confirm', { uploadId: upload.uploadId })).body.data, file);

      // Workers read the object from S3 (no local path) and write the output there.
      const job = await api.post('/api/process/convert', { fileId: file.fileId, format: 'png' });
      const task = await api.waitForTask(job.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task));
      const output = await api.download(task.outputFileId);
      assert.deepEqual([(await sharp(output).metadata()).format, output.length], ['png', task.result.size]);
      assert.deepEqual(await s3.listKeys('outputs/'), [`outputs/${task.taskId}/0`]);
    });

    it("streams multipart uploads into the bucket; one past the plan's limit leaves nothing there", async () => {
      const api = await client('pro');
      const before = await s3.listKeys('uploads/');
      const fileId = await api.uploadOk(JPEG, 'small.jpg');
      assert.ok((await api.download(fileId)).equals(JPEG));
      assert.deepEqual(await s3.listKeys(`uploads/${fileId}`), [`uploads/${fileId}`]);

      const large = Buffer.concat([JPEG, Buffer.alloc(12_000_000 - JPEG.length, 1)]);
      expectError(await api.upload(large, 'large.jpg'), 413, 'FILE_TOO_LARGE');
      assert.deepEqual((await s3.listKeys('uploads/')).sort(), [...before, `uploads/${fileId}`].sort());
      assert.equal(await storageUsed(api), JPEG.length);
    });

    it('catches at confirm a body of another length that the store took', async () => {
      // Real S3 refuses it (the signature covers Content-Length); s3rver does not check.
      const api = await client();
      const upload = await presign(api, { filename: 'a.png', size: PNG.length + 10 });
      assert.equal((await put(upload.url, PNG)).status, 200);
      expectError(await api.post('/api/upload/confirm', { uploadId: upload.uploadId }), 400, 'UPLOAD_SIZE_MISMATCH');
      assert.deepEqual(await s3.listKeys(`incoming/${upload.uploadId}`), []);
    });

    it('a PUT after the confirm is not kept: confirm deletes what arrived, the next sweep what arrives later', async () => {
      const api = await client();
      const upload = await presign(api, { filename: 'a.png', size: PNG.length });
      assert.equal((await put(upload.url, PNG, upload.headers)).status, 200);
      const confirmed = await api.post('/api/upload/confirm', { uploadId: upload.uploadId });
      assert.equal(confirmed.status, 201, JSON.stringify(confirmed.body));
      assert.deepEqual(await s3.listKeys('incoming/'), []);
      // The URL still works at S3 itself: the late bytes land, are never the file, and are swept.
      const late = Buffer.alloc(PNG.length, 7);
      assert.equal((await put(upload.url, late, upload.headers)).status, 200);
      assert.deepEqual(await s3.listKeys('incoming/'), [`incoming/${upload.uploadId}`]);
      assert.equal((await api.post('/api/upload/confirm', { uploadId: upload.uploadId })).status, 201, 'confirming again answers the file');
      assert.deepEqual(await s3.listKeys('incoming/'), [], 'and deletes what arrived after the first confirm');
      assert.equal((await put(upload.url, late, upload.headers)).status, 200);
      await server.services.maintenance.tick(true);
      assert.deepEqual(await s3.listKeys('incoming/'), []);
      assert.ok((await api.download(confirmed.body.data.fileId)).equals(PNG));
    });

    it('sweeps an abandoned upload from the bucket and releases its reservation', async () => {
      const api = await client();
      const upload = await presign(api, { filename: 'a.png', size: PNG.length });
      assert.equal((await put(upload.url, PNG)).status, 200);
      assert.equal(await storageUsed(api), PNG.length);
      clock.advance(TTL_MS + CONFIRM_GRACE_MS + 1000);
      await server.services.maintenance.tick(true);
      assert.equal(await storageUsed(api), 0);
      assert.deepEqual(await s3.listKeys(`incoming/${upload.uploadId}`), []);
      expectError(await api.post('/api/upload/confirm', { uploadId: upload.uploadId }), 410, 'UPLOAD_EXPIRED');
    });
  });
}
