// Previews are bounded (issue 10, defect 7): a render slot per PREVIEW_CONCURRENCY with
// PREVIEW_QUEUE more waiting and a quick 503 + Retry-After past that; the plan's pixel limits
// from the header before decoding; the box's missing side capped; each rendition made once,
// kept in storage and deleted with its file.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { ManualClock } from '../../src/clock.js';
import { previewKey } from '../../src/storage/storage.js';
import { Client, DIALECTS, corpusFile, startServer, type TestServer } from '../helpers.js';

/** An SVG whose 1024 px rendition takes about half a second (turbulence at every pixel). */
const SLOW_SVG = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" width="1024" height="1024"><filter id="t"><feTurbulence baseFrequency="0.01" numOctaves="4"/></filter>' +
    '<rect width="1024" height="1024" filter="url(#t)"/></svg>',
);

/** The value of imgapi_previews_total{event} on /metrics. */
async function previewEvents(server: TestServer, event: string): Promise<number> {
  const text = (await (await fetch(`${server.url}/metrics`)).text()) as string;
  const match = new RegExp(`^imgapi_previews_total\\{event="${event}"\\} (\\d+)`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}

for (const dialect of DIALECTS) {
  describe(`previews are bounded (${dialect})`, () => {
    let server: TestServer;
    const clock = new ManualClock();

    before(async () => {
      server = await startServer({
        dialect,
        clock,
        workers: 0,
        env: { PREVIEW_CONCURRENCY: '1', PREVIEW_QUEUE: '1' },
        plans: { pro: { maxPixels: 1_000_000, maxTotalPixels: 2_000_000 } },
      });
    });
    after(() => server.close());

    it('past one render and one waiting, parallel previews are refused at once with 503 and Retry-After', async () => {
      const client = new Client(server.url, await server.newKey('max'));
      const fileIds = [];
      for (let i = 0; i < 5; i++) fileIds.push(await client.uploadOk(SLOW_SVG, `slow-${i}.svg`));
      const started = Date.now();
      const answers = await Promise.all(
        fileIds.map(async (id) => {
          const response = await client.get(`/api/preview/${id}`);
          return { id, response, ms: Date.now() - started };
        }),
      );
      const served = answers.filter((a) => a.response.status === 200);
      const refused = answers.filter((a) => a.response.status === 503);
      assert.deepEqual([served.length, refused.length], [2, 3], JSON.stringify(answers.map((a) => [a.response.status, a.ms])));
      for (const { response, ms } of refused) {
        assert.equal(response.body.error.code, 'SERVICE_UNAVAILABLE');
        assert.ok(Number(response.headers.get('retry-after')) >= 1, 'Retry-After says when to come back');
        assert.ok(ms < Math.min(...served.map((a) => a.ms)), 'refused before the first render finished, not after waiting');
      }
      assert.equal(await previewEvents(server, 'busy'), 3);
      // Retried once the line is free, it is served.
      assert.equal((await client.get(`/api/preview/${refused[0]!.id}`)).status, 200);
    });

    it("an image over the plan's pixel limits has no preview: 415 naming the limit, decided from the header", async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const large = await client.uploadOk(
        await sharp({ create: { width: 1200, height: 1000, channels: 3, background: '#336699' } })
          .png()
          .toBuffer(),
      );
      const response = await client.get(`/api/preview/${large}`);
      assert.equal(response.status, 415);
      assert.equal(response.body.error.code, 'PREVIEW_UNAVAILABLE');
      assert.equal(response.body.error.details.reason, 'IMAGE_TOO_LARGE');
      assert.match(response.body.error.message, /1200×1000.*1000000/);
      // Frames × canvas past maxTotalPixels: 3 frames of 800×1000 (each under maxPixels).
      const frames = await Promise.all(
        [0, 1, 2].map((i) =>
          sharp({ create: { width: 800, height: 1000, channels: 3, background: ['#000000', '#808080', '#ffffff'][i]! } })
            .png()
            .toBuffer(),
        ),
      );
      const animation = await sharp(frames, { join: { animated: true } })
        .gif()
        .toBuffer();
      const animated = await client.uploadOk(animation, 'frames.gif');
      const total = await client.get(`/api/preview/${animated}`);
      assert.equal(total.status, 415);
      assert.equal(total.body.error.details.reason, 'IMAGE_TOO_LARGE');
      assert.match(total.body.error.message, /2000000/);
      // Within the limits the same account gets its preview.
      const small = await client.uploadOk(
        await sharp({ create: { width: 1000, height: 1000, channels: 3, background: '#336699' } })
          .png()
          .toBuffer(),
      );
      assert.equal((await client.get(`/api/preview/${small}`)).status, 200);
    });

    it('the formats this service decodes itself have previews too: HEIC, JPEG 2000, BMP and lossless JPEG', async () => {
      const client = new Client(server.url, await server.newKey('max'));
      const files: [string, number, number][] = [
        ['images/libheif/example.heic', 1280, 854],
        ['images/sharp/relax.jp2', 320, 240],
        ['images/image-rs/rgb24.bmp', 127, 64],
        ['images/sharp/testimgl.jpg', 227, 149],
      ];
      for (const [file, width, height] of files) {
        const id = await client.uploadOk(corpusFile(file));
        const response = await client.get(`/api/preview/${id}?width=256`);
        assert.equal(response.status, 200, `${file}: ${JSON.stringify(response.body)}`);
        const meta = await sharp(response.body as Buffer).metadata();
        const scale = Math.min(1, 256 / width);
        assert.deepEqual([meta.width, meta.height], [Math.round(width * scale), Math.round(height * scale)], file);
      }
    });

    it('a box with one side keeps the other within 2048 px', async () => {
      const client = new Client(server.url, await server.newKey('max'));
      const wide = await client.uploadOk(
        await sharp({ create: { width: 6000, height: 500, channels: 3, background: '#336699' } })
          .png()
          .toBuffer(),
      );
      const response = await client.get(`/api/preview/${wide}?height=400`);
      assert.equal(response.status, 200);
      const meta = await sharp(response.body as Buffer).metadata();
      assert.deepEqual([meta.width, meta.height], [2048, 171]);
    });

    it('a rendition is made once, served from storage after, and deleted with its file or when it expires', async () => {
      const client = new Client(server.url, await server.newKey('max'));
      const photo = await client.uploadOk(corpusFile('images/sharp/flowers.jpeg')); // 1920×1080
      const rendition = (side: number) => server.services.storage.localPath!(previewKey(photo, side));
      const rendered = await previewEvents(server, 'rendered');
      const cached = await previewEvents(server, 'cached');

      const first = await client.get(`/api/preview/${photo}`);
      assert.equal(first.status, 200);
      assert.ok(fs.existsSync(rendition(1024)), 'the 1024 px rendition is stored');
      assert.equal(await previewEvents(server, 'rendered'), rendered + 1);

      const second = await client.get(`/api/preview/${photo}`);
      assert.equal(second.status, 200);
      assert.deepEqual(second.body, first.body, 'the same bytes');
      assert.equal(await previewEvents(server, 'rendered'), rendered + 1, 'not decoded again');
      assert.equal(await previewEvents(server, 'cached'), cached + 1);

      // The dashboard's 320 px box has a rendition of its own; a 100 px box is cut from the 128 px one.
      const thumbnail = await client.get(`/api/preview/${photo}?width=320&height=320`);
      assert.deepEqual([(await sharp(thumbnail.body as Buffer).metadata()).width, fs.existsSync(rendition(320))], [320, true]);
      const small = await client.get(`/api/preview/${photo}?width=100`);
      assert.equal((await sharp(small.body as Buffer).metadata()).width, 100);
      assert.ok(fs.existsSync(rendition(128)));
      assert.equal(await previewEvents(server, 'rendered'), rendered + 3);

      assert.equal((await client.request('DELETE', `/api/files/${photo}`)).status, 204);
      assert.ok(
        !fs.existsSync(path.dirname(rendition(1024))) || fs.readdirSync(path.dirname(rendition(1024))).length === 0,
        'renditions deleted with the file',
      );

      const expiring = await client.uploadOk(corpusFile('images/sharp/flowers.jpeg'));
      assert.equal((await client.get(`/api/preview/${expiring}`)).status, 200);
      assert.ok(fs.existsSync(server.services.storage.localPath!(previewKey(expiring, 1024))));
      clock.advance(8 * 86_400_000);
      assert.equal(await server.services.maintenance.tick(), true);
      assert.ok(!fs.existsSync(server.services.storage.localPath!(previewKey(expiring, 1024))), 'renditions deleted when the file expires');
    });
  });
}
