// JPEG XL over HTTP, once per database: the contract's path for a JPEG XL upload and output, and
// the `jpg`/`tif` aliases of `format`. The formats' own behaviour is tested on the pipeline
// directly (test/imaging/jxl.test.ts).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, DIALECTS, corpusFile, startServer, type TestServer } from '../helpers.js';
import { cjxl, djxl } from '../imaging/jxl-files.js';

const PHOTO = 'images/sharp/Portrait_1.jpg';

for (const dialect of DIALECTS) {
  describe(`JPEG XL over HTTP (${dialect})`, () => {
    let server: TestServer;
    let client: Client;
    before(async () => {
      server = await startServer({ dialect });
      client = new Client(server.url, await server.newKey());
    });
    after(async () => {
      await server?.close();
    });

    it('an upload of either form is jxl with its size; a resize to JPEG XL decodes with djxl', async () => {
      const { width, height } = await sharp(corpusFile(PHOTO)).metadata();
      for (const bytes of [cjxl(await sharp(corpusFile(PHOTO)).png().toBuffer()), cjxl(PHOTO, ['--container=1'])]) {
        const uploaded = await client.upload(bytes, 'photo.jxl');
        assert.equal(uploaded.status, 201, JSON.stringify(uploaded.body));
        assert.deepEqual(
          [uploaded.body.data.format, uploaded.body.data.mimeType, uploaded.body.data.width, uploaded.body.data.height],
          ['jxl', 'image/jxl', width, height],
        );
      }
      const fileId = await client.uploadOk(corpusFile(PHOTO));
      const queued = await client.post('/api/process/resize', { fileId, width: 200, format: 'jxl', quality: 60 });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      assert.equal(task.result.format, 'jxl');
      const output = await client.get(`/api/download/${task.outputFileId}`);
      assert.equal(output.headers.get('content-type'), 'image/jxl');
      const decoded = await sharp(djxl(output.body)).metadata();
      assert.deepEqual([decoded.width, decoded.height], [task.result.width, task.result.height]);
      assert.equal(decoded.width, 200);
    });

    it('format jpg and tif are jpeg and tiff in the task, its result and its output', async () => {
      const fileId = await client.uploadOk(corpusFile('images/sharp/test-pattern.png'));
      for (const [alias, format] of [
        ['jpg', 'jpeg'],
        ['tif', 'tiff'],
      ]) {
        const queued = await client.post('/api/process/convert', { fileId, format: alias });
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        const task = await client.waitForTask(queued.body.data.taskId);
        assert.equal(task.options.format, format);
        assert.equal(task.result.format, format);
        assert.equal((await sharp(await client.download(task.outputFileId)).metadata()).format, format);
      }
      const pipeline = await client.post('/api/process/pipeline', { fileId, steps: [{ kind: 'resize', width: 20 }], format: 'jpg' });
      assert.equal((await client.waitForTask(pipeline.body.data.taskId)).result.format, 'jpeg');
      const wrong = await client.post('/api/process/convert', { fileId, format: 'jpe' });
      assert.equal(wrong.status, 400);
    });
  });
}
