// Visual checks that can fail, on lossless inputs, over the real API. References are made from
// the pixels themselves (or from the orientation-1 file of a set), never from our own output.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Client, corpusFile, startServer, type TestServer } from '../helpers.js';

let server: TestServer;
let client: Client;

async function run(kind: string, body: Record<string, unknown>): Promise<Buffer> {
  const queued = await client.post(`/api/process/${kind}`, body);
  assert.equal(queued.status, 202, JSON.stringify(queued.body));
  const task = await client.waitForTask(queued.body.data.taskId);
  assert.equal(task.status, 'completed', JSON.stringify(task.error));
  return client.download(task.outputFileId);
}

async function rgba(image: Buffer | string) {
  const { data, info } = await sharp(image).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

/** Mean absolute difference per channel, 0–255. */
async function meanDifference(a: Buffer | string, b: Buffer | string, size?: { width: number; height: number }): Promise<number> {
  const resize = (img: Buffer | string) =>
    sharp(img)
      .autoOrient()
      .resize(size ? { ...size, fit: 'fill' } : undefined)
      .removeAlpha()
      .raw()
      .toBuffer();
  const [x, y] = await Promise.all([resize(a), resize(b)]);
  assert.equal(x.length, y.length);
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += Math.abs(x[i]! - y[i]!);
  return sum / x.length;
}

describe('visual checks', () => {
  before(async () => {
    server = await startServer({ dialect: 'sqlite' });
    client = new Client(server.url, await server.newKey('pro'));
  });
  after(() => server.close());

  it('rotate 90 then -90 returns the same pixels', async () => {
    const source = corpusFile('images/sharp/with-alpha.png');
    const turned = await run('rotate', { fileId: await client.uploadOk(source), angle: 90 });
    const original = await rgba(source);
    const once = await rgba(turned);
    assert.deepEqual([once.width, once.height], [original.height, original.width]);
    const back = await run('rotate', { fileId: await client.uploadOk(turned, 'turned.png'), angle: -90 });
    assert.ok((await rgba(back)).data.equals(original.data), 'pixels differ after a round trip');
  });

  it('flip both, twice, is the identity; once, it is a 180° turn', async () => {
    const source = corpusFile('images/sharp/test-pattern.png');
    const once = await run('flip', { fileId: await client.uploadOk(source), direction: 'both' });
    const twice = await run('flip', { fileId: await client.uploadOk(once, 'once.png'), direction: 'both' });
    assert.ok((await rgba(twice)).data.equals((await rgba(source)).data));
    const turned = await sharp(source).rotate(180).png().toBuffer();
    assert.ok((await rgba(once)).data.equals((await rgba(turned)).data));
  });

  it('resize with fit cover fills the box, with no letterbox', async () => {
    const source = corpusFile('images/sharp/test-pattern.png');
    const out = await run('resize', { fileId: await client.uploadOk(source), width: 300, height: 100, fit: 'cover', background: '#123456' });
    const { data, width, height } = await rgba(out);
    assert.deepEqual([width, height], [300, 100]);
    let letterbox = 0;
    for (let i = 0; i < data.length; i += 4) if (data[i] === 0x12 && data[i + 1] === 0x34 && data[i + 2] === 0x56) letterbox++;
    assert.equal(letterbox, 0, 'cover must not letterbox');
    // contain, by contrast, letterboxes on the background colour.
    const contained = await rgba(
      await run('resize', { fileId: await client.uploadOk(source), width: 300, height: 100, fit: 'contain', background: '#123456' }),
    );
    let bars = 0;
    for (let i = 0; i < contained.data.length; i += 4)
      if (contained.data[i] === 0x12 && contained.data[i + 1] === 0x34 && contained.data[i + 2] === 0x56) bars++;
    assert.ok(bars > 100 * 100, 'contain should show the background');
  });

  for (const position of ['bottom-right', 'top-left', 'center'] as const) {
    it(`a watermark at ${position} changes pixels only near that position`, async () => {
      const source = corpusFile('images/sharp/test-pattern.png');
      const out = await run('watermark', {
        fileId: await client.uploadOk(source),
        text: 'imgapi',
        position,
        fontSize: 24,
        margin: 10,
        opacity: 1,
        color: '#ff0000',
      });
      const before = await rgba(source);
      const after = await rgba(out);
      assert.deepEqual([after.width, after.height], [before.width, before.height]);
      let minX = Infinity,
        minY = Infinity,
        maxX = -1,
        maxY = -1;
      for (let y = 0; y < before.height; y++) {
        for (let x = 0; x < before.width; x++) {
          const i = (y * before.width + x) * 4;
          if (
            Math.abs(before.data[i]! - after.data[i]!) +
              Math.abs(before.data[i + 1]! - after.data[i + 1]!) +
              Math.abs(before.data[i + 2]! - after.data[i + 2]!) >
            6
          ) {
            minX = Math.min(minX, x);
            maxX = Math.max(maxX, x);
            minY = Math.min(minY, y);
            maxY = Math.max(maxY, y);
          }
        }
      }
      assert.ok(maxX >= 0, 'the watermark changed nothing');
      const w = before.width,
        h = before.height;
      // The changed area is about one line of 24 px text, within the margin of its corner.
      assert.ok(maxY - minY < 60, `changed rows ${minY}–${maxY}`);
      if (position === 'bottom-right')
        assert.ok(minX > w / 3 && maxX <= w - 10 && minY > h / 2 && maxY <= h - 10, `changed box ${minX},${minY}–${maxX},${maxY}`);
      if (position === 'top-left')
        assert.ok(minX >= 10 && maxX < (2 * w) / 3 && minY >= 10 && maxY < h / 2, `changed box ${minX},${minY}–${maxX},${maxY}`);
      if (position === 'center')
        assert.ok(minX > w / 6 && maxX < (5 * w) / 6 && minY > h / 3 && maxY < (2 * h) / 3, `changed box ${minX},${minY}–${maxX},${maxY}`);
    });
  }

  for (const set of ['Landscape', 'Portrait'] as const) {
    it(`EXIF-rotated inputs come out upright (${set} 1–8)`, async () => {
      // Orientation 1 stores the picture upright: it is the reference for the other seven.
      const reference = corpusFile(`images/sharp/${set}_1.jpg`);
      const upright = await sharp(reference).metadata();
      for (let orientation = 2; orientation <= 8; orientation++) {
        const source = corpusFile(`images/sharp/${set}_${orientation}.jpg`);
        const out = await run('convert', { fileId: await client.uploadOk(source), format: 'png' });
        const meta = await sharp(out).metadata();
        assert.deepEqual([meta.width, meta.height], [upright.width, upright.height], `${set}_${orientation} dimensions`);
        assert.equal(meta.orientation ?? 1, 1);
        const difference = await meanDifference(out, reference);
        // JPEG noise is a few levels; a wrong orientation differs by tens.
        assert.ok(difference < 8, `${set}_${orientation} differs from upright by ${difference.toFixed(1)}`);
      }
    });
  }
});
