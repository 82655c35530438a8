// Text watermarks that cannot be drawn as asked: the error names the option — 400
// VALIDATION_ERROR when the request alone decides it, else the task fails INVALID_OPTIONS with
// `details.field` — never INVALID_IMAGE about an image that is fine. The text is drawn as
// text, never read as Pango markup, and no size asked for makes an unbounded raster (those
// three on the operation, in test/operations/watermark.test.ts).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, DIALECTS, startServer, type TestServer } from '../helpers.js';

const black = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: '#000000' } })
    .png()
    .toBuffer();

for (const dialect of DIALECTS) {
  describe(`watermark text (${dialect})`, () => {
    let server: TestServer;
    let client: Client;
    let image: string;

    before(async () => {
      server = await startServer({ dialect, workers: 1 });
      client = new Client(server.url, await server.newKey('pro'));
      image = await client.uploadOk(await black(400, 200), 'black.png');
    });
    after(() => server.close());

    const refused: { name: string; options: Record<string, unknown>; field: string }[] = [
      { name: 'only spaces and line breaks', options: { text: '  \n\t ' }, field: 'text' },
      { name: 'only invisible characters (zero-width, joiners, tags)', options: { text: '\u200b\u2060\u{e0041}\u{e0042}' }, field: 'text' },
      { name: 'a NUL, which is not even valid markup', options: { text: 'a\u0000b' }, field: 'text' },
      { name: 'a control character', options: { text: 'bell\u0007' }, field: 'text' },
      { name: 'an unknown font', options: { text: 'hello', font: 'Comic Sans MS' }, field: 'font' },
      { name: 'a fontSize of 0', options: { text: 'hello', fontSize: 0 }, field: 'fontSize' },
    ];
    for (const row of refused) {
      it(`text with ${row.name}: 400 VALIDATION_ERROR naming ${row.field}, single and batch`, async () => {
        for (const [route, body] of [
          ['/api/process/watermark', { fileId: image, ...row.options }],
          ['/api/process/batch/watermark', { fileIds: [image], ...row.options }],
        ] as const) {
          const response = await client.post(route, body);
          assert.equal(response.status, 400, JSON.stringify(response.body));
          assert.equal(response.body.error.code, 'VALIDATION_ERROR');
          const fields = response.body.error.details.fields.map((f: { field: string }) => f.field);
          assert.ok(fields.includes(row.field), JSON.stringify(response.body.error));
        }
      });
    }

    it('text no font can draw (U+2800, a blank glyph) fails INVALID_OPTIONS with details.field "text"', async () => {
      const queued = await client.post('/api/process/watermark', { fileId: image, text: '\u2800\u2800\u2800' });
      assert.equal(queued.status, 202);
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'failed');
      assert.equal(task.error.code, 'INVALID_OPTIONS');
      assert.deepEqual(task.error.details, { field: 'text' });
      assert.match(task.error.message, /^text: draws nothing in DejaVu Sans/);
      // The listing shows the same error.
      const listed = (await client.get('/api/tasks?limit=10')).body.data.tasks.find((t: any) => t.taskId === task.taskId);
      assert.deepEqual(listed.error, task.error);
    });

    it('a logo that cannot be decoded fails naming logoFileId', async () => {
      const png = await black(100, 100);
      const broken = await client.uploadOk(Buffer.concat([png.subarray(0, 60), Buffer.alloc(200, 0x55)]), 'broken.png');
      const queued = await client.post('/api/process/watermark', { fileId: image, logoFileId: broken });
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'failed');
      assert.equal(task.error.details?.field, 'logoFileId', JSON.stringify(task.error));
      assert.match(task.error.message, /^The logo \(logoFileId\)/);
    });
  });
}
