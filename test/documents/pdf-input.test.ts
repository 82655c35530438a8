// PDF input over HTTP, once per database: a PDF is accepted at upload with its page count,
// previewed by its first page, and turned into page images by pdf-to-images; image-to-pdf's
// output goes back in as input; a password-protected PDF is stored and its task fails
// DOCUMENT_ENCRYPTED. The options themselves are tested on the operation
// (test/operations/pdf-to-images.test.ts), the broken PDFs in the hostile-input table.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, corpusFile, DIALECTS, startServer, type TestServer } from '../helpers.js';
import { encryptedPdf, photoPdf } from './pdf-fixtures.js';

for (const dialect of DIALECTS) {
  describe(`PDF input over HTTP (${dialect})`, () => {
    let server: TestServer;
    let client: Client;
    before(async () => {
      server = await startServer({ dialect });
      client = new Client(server.url, await server.newKey('pro'));
    });
    after(() => server.close());

    it('upload: a PDF with its page count; preview: its first page; pdf-to-images: the pages and their ZIP', async () => {
      const upload = await client.upload(await photoPdf(), 'photos.pdf');
      assert.equal(upload.status, 201, JSON.stringify(upload.body));
      const file = upload.body.data;
      assert.equal(file.format, 'pdf');
      assert.equal(file.mimeType, 'application/pdf');
      assert.equal(file.pages, 3);

      const preview = await client.get(`/api/preview/${file.fileId}?width=200`);
      assert.equal(preview.status, 200);
      const shown = await sharp(preview.body as Buffer).metadata();
      assert.deepEqual([shown.width, shown.height], [200, 150], 'page 1 is 600×450 pt');

      const queued = await client.post('/api/process/pdf-to-images', { fileId: file.fileId, format: 'jpeg', width: 300, pages: '2-3' });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      assert.equal(task.outputFileIds.length, 2);
      assert.deepEqual(
        { format: task.result.format, pages: task.result.pages, imageFormat: task.result.imageFormat, pageNumbers: task.result.pageNumbers },
        { format: 'zip', pages: 2, imageFormat: 'jpeg', pageNumbers: [2, 3] },
      );
      const page2 = await sharp(await client.download(task.outputFileIds[0])).metadata();
      assert.deepEqual([page2.format, page2.width, page2.height], ['jpeg', 300, 400]);
      assert.equal((await client.download(task.outputFileId)).subarray(0, 2).toString('latin1'), 'PK');
    });

    it("image-to-pdf's output is accepted back as input", async () => {
      const image = await client.uploadOk(corpusFile('images/sharp/Portrait_1.jpg'));
      const made = await client.waitForTask((await client.post('/api/process/image-to-pdf', { fileId: image })).body.data.taskId);
      assert.equal(made.status, 'completed', JSON.stringify(made.error));
      const queued = await client.post('/api/process/pdf-to-images', { fileId: made.outputFileId, dpi: 72 });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      assert.deepEqual([task.result.width, task.result.height], [450, 600]);
    });

    it('a password-protected PDF is stored without a page count, and its task fails DOCUMENT_ENCRYPTED; an image is not a PDF', async () => {
      const upload = await client.upload(encryptedPdf(), 'locked.pdf');
      assert.equal(upload.status, 201, JSON.stringify(upload.body));
      assert.equal(upload.body.data.pages, undefined);
      const task = await client.waitForTask((await client.post('/api/process/pdf-to-images', { fileId: upload.body.data.fileId })).body.data.taskId);
      assert.equal(task.status, 'failed');
      assert.equal(task.error.code, 'DOCUMENT_ENCRYPTED');

      const image = await client.uploadOk(corpusFile('images/sharp/Portrait_1.jpg'));
      const wrong = await client.post('/api/process/pdf-to-images', { fileId: image });
      assert.equal(wrong.status, 409);
      assert.equal(wrong.body.error.code, 'INPUT_NOT_SUPPORTED');
      const both = await client.post('/api/process/pdf-to-images', { fileId: upload.body.data.fileId, width: 800, dpi: 100 });
      assert.equal(both.status, 400);
      assert.equal(both.body.error.code, 'VALIDATION_ERROR');
    });
  });
}
