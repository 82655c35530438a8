// The brief's typical flow over real HTTP, on every dialect: upload, start a job, poll, download.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, DIALECTS, corpusFile, startServer, type TestServer } from '../helpers.js';

for (const dialect of DIALECTS) {
  describe(`typical flow (${dialect})`, () => {
    let server: TestServer;
    let client: Client;

    before(async () => {
      server = await startServer({ dialect });
      client = new Client(server.url, await server.newKey('pro'));
    });
    after(() => server.close());

    it('uploads, converts to WebP, polls and downloads a decodable WebP', async () => {
      const upload = await client.upload(corpusFile('images/sharp/Landscape_6.jpg'));
      assert.equal(upload.status, 201);
      assert.equal(upload.body.success, true);
      const file = upload.body.data;
      assert.match(file.fileId, /^file_[A-Za-z0-9_-]{22,}$/);
      assert.equal(file.format, 'jpeg');
      assert.equal(file.mimeType, 'image/jpeg');
      // EXIF orientation 6: 450×600 stored pixels display as 600×450, and the API reports what displays.
      assert.deepEqual([file.width, file.height], [600, 450]);
      assert.ok(upload.headers.get('x-request-id')?.startsWith('req_'));

      const job = await client.post('/api/process/convert', { fileId: file.fileId, format: 'webp' });
      assert.equal(job.status, 202);
      assert.equal(job.body.data.status, 'queued');
      assert.equal(job.body.data.type, 'convert');
      assert.equal(job.headers.get('location'), `/api/tasks/${job.body.data.taskId}`);

      const task = await client.waitForTask(job.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      assert.equal(task.progress, 100);
      assert.equal(task.result.format, 'webp');

      const bytes = await client.download(task.outputFileId);
      const meta = await sharp(bytes).metadata();
      assert.equal(meta.format, 'webp');
      assert.equal(meta.width, task.result.width);
      assert.equal(bytes.length, task.result.size);
    });

    it('compresses a PNG into a smaller PNG that decodes', async () => {
      const fileId = await client.uploadOk(corpusFile('images/sharp/test-pattern.png'));
      const job = await client.post('/api/process/compress', { fileId });
      assert.equal(job.status, 202);
      const task = await client.waitForTask(job.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      const bytes = await client.download(task.outputFileId);
      const meta = await sharp(bytes).metadata();
      assert.equal(meta.format, 'png');
      const original = await sharp(corpusFile('images/sharp/test-pattern.png')).metadata();
      assert.equal(meta.width, original.width);
      assert.equal(meta.height, original.height);
    });

    it('compresses a JPEG to a target size, or says it cannot', async () => {
      const fileId = await client.uploadOk(corpusFile('images/sharp/2569067123_aca715a2ee_o.jpg'));
      const fits = await client.waitForTask((await client.post('/api/process/compress', { fileId, targetSize: 150_000 })).body.data.taskId);
      assert.equal(fits.status, 'completed', JSON.stringify(fits.error));
      assert.ok(fits.result.size <= 150_000, `output ${fits.result.size} bytes`);
      assert.ok(fits.result.size > 50_000, 'the search should keep as much quality as fits');
      assert.equal((await sharp(await client.download(fits.outputFileId)).metadata()).format, 'jpeg');

      const impossible = await client.waitForTask((await client.post('/api/process/compress', { fileId, targetSize: 500 })).body.data.taskId);
      assert.equal(impossible.status, 'failed');
      assert.equal(impossible.error.code, 'TARGET_SIZE_UNREACHABLE');
    });
  });
}
