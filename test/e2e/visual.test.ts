// Visual checks that can fail, on lossless inputs, over the real API: what the stored files and
// the pipeline between upload and download keep. References are made from the pixels themselves
// (or from the orientation-1 file of a set), never from our own output. Each kind's own pixel
// logic (flip, resize's fits, watermark positions, all eight EXIF orientations) is tested on its
// Operation in test/operations/.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, corpusFile, runJob, startServer, type TestServer } from '../helpers.js';
import { meanDifference, rgba } from '../operations/images.js';

let server: TestServer;
let client: Client;

describe('visual checks', () => {
  before(async () => {
    server = await startServer({ dialect: 'sqlite' });
    client = new Client(server.url, await server.newKey('pro'));
  });
  after(() => server.close());

  it('rotate 90 then -90, the output uploaded again, returns the same pixels', async () => {
    const source = corpusFile('images/sharp/with-alpha.png');
    const turned = await runJob(client, 'rotate', { fileId: await client.uploadOk(source), angle: 90 });
    const original = await rgba(source);
    const once = await rgba(turned.output);
    assert.deepEqual([once.width, once.height], [original.height, original.width]);
    const back = await runJob(client, 'rotate', { fileId: await client.uploadOk(turned.output, 'turned.png'), angle: -90 });
    assert.ok((await rgba(back.output)).data.equals(original.data), 'pixels differ after a round trip');
  });

  it('an EXIF-rotated upload (orientation 6) comes out upright', async () => {
    const reference = corpusFile('images/sharp/Landscape_1.jpg');
    const upright = await sharp(reference).metadata();
    const { output } = await runJob(client, 'convert', { fileId: await client.uploadOk(corpusFile('images/sharp/Landscape_6.jpg')), format: 'png' });
    const meta = await sharp(output).metadata();
    assert.deepEqual([meta.width, meta.height, meta.orientation ?? 1], [upright.width, upright.height, 1]);
    assert.ok((await meanDifference(output, reference)) < 8);
  });
});
