// Text watermarks that cannot be drawn as asked: the error names the option — 400
// VALIDATION_ERROR when the request alone decides it, else the task fails INVALID_OPTIONS with
// `details.field` — never INVALID_IMAGE about an image that is fine. The text is drawn as
// text, never read as Pango markup, and no size asked for makes an unbounded raster.
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

    it('markup in the text is drawn as text: tags and entities neither apply nor break it', async () => {
      // Were the span applied, the mark would be red and huge; drawn as text, it is white.
      const text = '<span foreground="#ff0000" size="400000">X</span> &amp; &#0; <b>';
      const queued = await client.post('/api/process/watermark', { fileId: image, text, color: '#ffffff', opacity: 1, fontSize: 12 });
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      const { data, info } = await sharp(await client.download(task.outputFileId))
        .raw()
        .toBuffer({ resolveWithObject: true });
      let red = 0;
      let white = 0;
      for (let i = 0; i < data.length; i += info.channels) {
        if (data[i]! > 150 && data[i + 1]! < 80) red++;
        if (data[i]! > 200 && data[i + 1]! > 200 && data[i + 2]! > 200) white++;
      }
      assert.equal(red, 0, 'no red pixel: the markup was not applied');
      assert.ok(white > 50, `the text was drawn (${white} white pixels)`);
    });

    it('the largest fontSize with the longest text on a small image completes quickly: the text is fitted, not drawn huge', async () => {
      const small = await client.uploadOk(await black(64, 48), 'small.png');
      const started = Date.now();
      const longest = await client.post('/api/process/watermark', { fileId: small, text: 'W'.repeat(500), fontSize: 2000, opacity: 1 });
      const word = await client.post('/api/process/watermark', { fileId: small, text: 'MARK', fontSize: 2000, opacity: 1, position: 'center' });
      for (const queued of [longest, word]) {
        const task = await client.waitForTask(queued.body.data.taskId);
        assert.equal(task.status, 'completed', JSON.stringify(task.error));
        assert.deepEqual([task.result.width, task.result.height], [64, 48]);
      }
      assert.ok(Date.now() - started < 10_000, `${Date.now() - started} ms`);
      // The word, shrunk to the image's width, is legible ink in the middle.
      const task = await client.waitForTask(word.body.data.taskId);
      const stats = await sharp(await client.download(task.outputFileId)).stats();
      assert.ok(stats.channels[0]!.max > 200, 'the text is on the image');
    });

    it('a large fontSize on a large image is drawn at that size when it fits', async () => {
      const wide = await client.uploadOk(await black(1600, 400), 'wide.png');
      const queued = await client.post('/api/process/watermark', {
        fileId: wide,
        text: 'HI',
        fontSize: 300,
        opacity: 1,
        margin: 0,
        position: 'top-left',
        color: '#ffffff',
      });
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      // The ink of "HI" at 300 px: about 200 px tall (cap height), well over what a shrunk mark would be.
      const { data, info } = await sharp(await client.download(task.outputFileId))
        .raw()
        .toBuffer({ resolveWithObject: true });
      let top = info.height;
      let bottom = -1;
      for (let y = 0; y < info.height; y++) {
        for (let x = 0; x < info.width; x++) {
          if (data[(y * info.width + x) * info.channels]! > 128) {
            top = Math.min(top, y);
            bottom = Math.max(bottom, y);
            break;
          }
        }
      }
      assert.ok(bottom - top > 180 && bottom - top < 300, `ink ${top}–${bottom}`);
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
