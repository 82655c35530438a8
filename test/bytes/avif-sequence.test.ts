// Animated AVIF (AV1 image sequences, brand `avis`) over the real server: uploaded with its size
// and frames, decoded by ffmpeg with every frame and its timing, kept animated where the output
// holds animation (WebP, GIF, and AVIF itself, checked by decoding the output back), smart crops
// chosen on one frame, the alpha track written and read, and a damaged sequence refused at
// upload or failed as INVALID_IMAGE. Without ffmpeg a sequence fails with a message naming it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Sandbox } from '../../src/programs/sandbox.js';
import { bufferReader, readSequenceHeader } from '../../src/bytes/avif-sequence.js';
import { Ffmpeg } from '../../src/programs/ffmpeg.js';
import { runImageJob } from '../../src/imaging/pipeline.js';
import { inspect } from '../../src/imaging/source.js';
import { Client, DIALECTS, corpusFile, runJob, startServer, tempDir, type TestServer } from '../helpers.js';

const ANIM = corpusFile('images/crabbyavif/anim.avif'); // 150 frames of 120×120 at 30 fps, no alpha
const SQUARES = corpusFile('images/sharp/rotating-squares.gif'); // 30 frames of 80×80, transparent corners

/** The stored file's record, as GET /api/files/{id} answers it. */
async function fileRecord(client: Client, fileId: string): Promise<any> {
  const response = await client.get(`/api/files/${fileId}`);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body.data;
}

/** Converts the 150-frame sequence to an animated `format` and checks its frames, timing and loop. */
async function convertsAnimated(client: Client, fileId: string, format: 'webp' | 'gif', delay: number): Promise<void> {
  const { task, output } = await runJob(client, 'convert', { fileId, format });
  const meta = await sharp(output, { animated: true }).metadata();
  assert.equal(meta.format, format);
  assert.deepEqual([meta.pages, meta.width, meta.pageHeight, meta.loop], [150, 120, 120, 0]);
  assert.deepEqual(new Set(meta.delay), new Set([delay]));
  assert.equal(task.result.pages, 150);
  assert.equal((await fileRecord(client, task.outputFileId)).pages, 150);
}

// What the database holds (the upload's size and frames, each output's true frame count) on
// every dialect; the decoding and encoding themselves, which no database touches, on the first.
for (const dialect of DIALECTS) {
  describe(`animated AVIF: uploads and outputs as stored (${dialect})`, () => {
    let server: TestServer;
    let client: Client;
    let anim: string;

    before(async () => {
      server = await startServer({ dialect });
      client = new Client(server.url, await server.newKey('pro'));
      anim = await client.uploadOk(ANIM);
    });
    after(() => server.close());

    it('uploads with its size and its 150 frames', async () => {
      const file = await fileRecord(client, anim);
      assert.deepEqual([file.format, file.width, file.height, file.pages], ['avif', 120, 120, 150]);
    });

    it('its preview is its still image', async () => {
      const response = await client.get(`/api/preview/${anim}?width=64`);
      assert.equal(response.status, 200, JSON.stringify(response.body));
      const meta = await sharp(response.body as Buffer).metadata();
      assert.deepEqual([meta.width, meta.height], [64, 64]);
    });

    it('to WebP: 150 frames of 33 ms, looping for ever; the task and the stored file say 150', async () => {
      await convertsAnimated(client, anim, 'webp', 33);
    });
  });
}

describe(`animated AVIF: frames through every output (${DIALECTS[0]})`, () => {
  const dialect = DIALECTS[0]!;
  let server: TestServer;
  let client: Client;
  let anim: string;

  before(async () => {
    server = await startServer({ dialect });
    client = new Client(server.url, await server.newKey('pro'));
    anim = await client.uploadOk(ANIM);
  });
  after(() => server.close());

  it('to GIF: 150 frames of 30 ms (GIF counts time in hundredths of a second)', async () => {
    await convertsAnimated(client, anim, 'gif', 30);
  });

  it('to AVIF: an image sequence again, whose frames, timing and pixels decode back', async () => {
    const { task, output } = await runJob(client, 'convert', { fileId: anim, format: 'avif' });
    assert.equal(output.toString('latin1', 4, 12), 'ftypavis');
    const header = await readSequenceHeader(bufferReader(output));
    assert.deepEqual([header.width, header.height, header.frames, header.loop], [120, 120, 150, 0]);
    assert.deepEqual(new Set(header.delay), new Set([33]));
    assert.equal(task.result.pages, 150);
    assert.equal((await fileRecord(client, task.outputFileId)).pages, 150);
    // Read back through this service's own decoder: its first frame next to the source's.
    const [back, source] = await Promise.all(
      [task.outputFileId, anim].map(async (fileId) => {
        const { output: pngOutput } = await runJob(client, 'convert', { fileId, format: 'png' });
        return sharp(pngOutput).raw().toBuffer();
      }),
    );
    let sum = 0;
    for (let i = 0; i < back!.length; i++) sum += Math.abs(back![i]! - source![i]!);
    assert.ok(sum / back!.length < 6, `mean difference ${sum / back!.length}`);
  });

  it('a smart crop chooses one rectangle for all 150 frames, written as an AVIF sequence', async () => {
    const { task, output } = await runJob(client, 'crop', { fileId: anim, aspectRatio: '2:1', gravity: 'attention' });
    assert.equal(task.result.format, 'avif');
    const header = await readSequenceHeader(bufferReader(output));
    assert.deepEqual([header.width, header.height, header.frames], [120, 60, 150]);
    assert.equal(task.result.pages, 150);
  });

  it('alpha: an animation with transparency to AVIF gets an alpha track, read back as alpha', async () => {
    const { task, output } = await runJob(client, 'convert', { fileId: await client.uploadOk(SQUARES), format: 'avif' });
    const header = await readSequenceHeader(bufferReader(output));
    assert.deepEqual([header.frames, header.alphaStream !== undefined], [30, true]);
    assert.equal(task.result.pages, 30);
    const { task: back, output: backOutput } = await runJob(client, 'compress', {
      fileId: await client.uploadOk(output, 'squares.avif'),
      format: 'webp',
      lossless: true,
    });
    const meta = await sharp(backOutput, { animated: true }).metadata();
    // WebP merges frames that came out identical: the task says how many it holds.
    assert.deepEqual([meta.pages, meta.hasAlpha], [back.result.pages, true]);
    assert.ok(back.result.pages > 20, `${back.result.pages} frames`);
    const { channels } = await sharp(backOutput, { page: 5 }).stats();
    assert.ok(channels[3]!.min < 20 && channels[3]!.max > 235, `alpha from ${channels[3]!.min} to ${channels[3]!.max}`);
  });

  it('a sequence without a still image (no meta box) uploads and converts with all its frames', async () => {
    const bytes = Buffer.from(fs.readFileSync(ANIM));
    assert.equal(bytes.toString('latin1', 44 + 4, 44 + 8), 'meta');
    bytes.write('free', 44 + 4, 'latin1');
    const fileId = await client.uploadOk(bytes, 'no-still.avif');
    const file = await fileRecord(client, fileId);
    assert.deepEqual([file.width, file.height, file.pages], [120, 120, 150]);
    const { task, output } = await runJob(client, 'flip', { fileId, direction: 'vertical', format: 'webp' });
    assert.equal(task.result.pages, 150);
    // No still image to show: the preview is its first frame, decoded as the jobs decode it.
    const preview = await client.get(`/api/preview/${fileId}?width=64`);
    assert.equal(preview.status, 200, JSON.stringify(preview.body));
    const shown = await sharp(preview.body as Buffer)
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    assert.deepEqual([shown.info.width, shown.info.height], [64, 64]);
    const frame = await sharp(output, { page: 0 }).flip().resize(64, 64).removeAlpha().raw().toBuffer();
    assert.equal(frame.length, shown.data.length);
    let difference = 0;
    for (let i = 0; i < frame.length; i++) difference += Math.abs(frame[i]! - shown.data[i]!);
    assert.ok(difference / frame.length < 20, `the preview differs from the first frame by ${difference / frame.length} per channel`);
  });

  it('a sequence cut short or with a damaged header is refused at upload; damaged frames fail INVALID_IMAGE', async () => {
    const bytes = fs.readFileSync(ANIM);
    const cut = await client.upload(bytes.subarray(0, 40_000), 'cut.avif');
    assert.equal(cut.status, 415, JSON.stringify(cut.body));
    assert.match(cut.body.error.message, /cut short/);
    // The stsz box's sample count (offset 921 + 16) no longer matches the timing.
    const damaged = Buffer.from(bytes);
    damaged.writeUInt32BE(7, 921 + 16);
    const refused = await client.upload(damaged, 'damaged.avif');
    assert.equal(refused.status, 415, JSON.stringify(refused.body));
    // The headers intact, the frames' data overwritten (mdat starts at 1597).
    const garbage = Buffer.from(bytes);
    garbage.fill(0x5a, 1597 + 8);
    const task = (await runJob(client, 'convert', { fileId: await client.uploadOk(garbage, 'garbage.avif'), format: 'webp' }, { expect: 'any' }))
      .task;
    assert.equal(task.status, 'failed');
    assert.equal(task.error.code, 'INVALID_IMAGE', JSON.stringify(task.error));
    // The first frame damaged a little: ffmpeg's last words name its decoder by heap address
    // ("[libdav1d @ 0x55…] Error parsing OBU data"). They reach the task reduced to safe text.
    const hurt = Buffer.from(bytes);
    hurt.fill(0x5a, 1605, 1700);
    const failed = (await runJob(client, 'convert', { fileId: await client.uploadOk(hurt, 'hurt.avif'), format: 'webp' }, { expect: 'any' })).task;
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error.code, 'INVALID_IMAGE', JSON.stringify(failed.error));
    assert.match(failed.error.message, /\[libdav1d\] Error parsing OBU data/);
    for (const message of [task.error.message, failed.error.message]) {
      assert.doesNotMatch(message, /0x[0-9a-f]{4,}|\/tmp\/|imgapi-|[\u0000-\u001f]/i, message);
    }
  });
});

describe('animated AVIF: the header against the limits', () => {
  const limits = { maxPixels: 50_000_000, maxFrames: 1000, maxTotalPixels: 500_000_000 };

  it('a header declaring more frames than any plan reads is refused before its timing is expanded', async () => {
    // One stts run and a constant one-byte sample size: 105 000 frames in a 105 KB file.
    const bytes = Buffer.from(fs.readFileSync(ANIM));
    const stts = bytes.indexOf('stts');
    bytes.writeUInt32BE(1, stts + 8);
    bytes.writeUInt32BE(105_000, stts + 12);
    bytes.writeUInt32BE(1, stts + 16);
    const stsz = bytes.indexOf('stsz');
    bytes.writeUInt32BE(1, stsz + 8);
    bytes.writeUInt32BE(105_000, stsz + 12);
    await assert.rejects(readSequenceHeader(bufferReader(bytes)), /declares 105000 frames; at most 100000/);
  });

  it('frames, size and timing come from the header; all frames together are held to the plan before decoding', async () => {
    const info = await inspect(ANIM, 'avif', limits);
    assert.deepEqual([info.width, info.height, info.frames, info.hasAlpha, info.loop], [120, 120, 150, false, 0]);
    assert.deepEqual(new Set(info.delay), new Set([33]));
    await assert.rejects(inspect(ANIM, 'avif', { ...limits, maxTotalPixels: 120 * 120 * 150 - 1 }), { code: 'IMAGE_TOO_LARGE' });
    await assert.rejects(inspect(ANIM, 'avif', { ...limits, maxFrames: 149 }), { code: 'IMAGE_TOO_LARGE' });
  });
});

describe('animated AVIF: lossless', () => {
  it('an animation written lossless decodes back to its very pixels, alpha included', async () => {
    const limits = { maxPixels: 50_000_000, maxFrames: 1000, maxTotalPixels: 500_000_000 };
    const ffmpeg = new Ffmpeg({ command: 'ffmpeg', timeoutMs: 60_000, sandbox: new Sandbox({ mode: 'auto', command: 'bwrap', hidden: [] }) });
    const job = { inputPath: SQUARES, inputFormat: 'gif', limits, deadline: Date.now() + 60_000, ffmpeg, format: 'avif' as const, lossless: true };
    const out = await runImageJob(job);
    const dir = tempDir('imgapi-avif-lossless-');
    try {
      const file = path.join(dir, 'squares.avif');
      fs.writeFileSync(file, out.data);
      const header = await readSequenceHeader(bufferReader(out.data));
      const back = await ffmpeg.decode(file, header, header.frames, {});
      const source = await sharp(SQUARES, { animated: true }).ensureAlpha().raw().toBuffer();
      assert.equal(back.data.length, source.length);
      let differing = 0;
      // Where a pixel is fully transparent its colour is not seen (nor kept): alpha alone counts there.
      for (let i = 0; i < source.length; i += 4) {
        const visible = source[i + 3]! > 0;
        for (let c = visible ? 0 : 3; c < 4; c++) if (source[i + c] !== back.data[i + c]) differing++;
      }
      assert.equal(differing, 0);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('animated AVIF without ffmpeg', () => {
  let server: TestServer;
  let client: Client;

  before(async () => {
    const missing = path.join(tempDir('imgapi-no-ffmpeg-'), 'no-such-ffmpeg');
    server = await startServer({ env: { FFMPEG_COMMAND: missing } });
    client = new Client(server.url, await server.newKey('pro'));
  });
  after(() => server.close());

  it('a sequence fails CONVERSION_FAILED naming ffmpeg; an animation to AVIF is its first frame; /readyz says so', async () => {
    const anim = await client.uploadOk(ANIM);
    const task = (await runJob(client, 'convert', { fileId: anim, format: 'webp' }, { expect: 'any' })).task;
    assert.equal(task.status, 'failed');
    assert.equal(task.error.code, 'CONVERSION_FAILED');
    assert.match(task.error.message, /ffmpeg/);
    const { task: still, output: stillOutput } = await runJob(client, 'convert', { fileId: await client.uploadOk(SQUARES), format: 'avif' });
    assert.equal(still.result.pages, undefined);
    assert.equal(stillOutput.toString('latin1', 8, 12), 'avif');
    const ready = await client.get('/readyz');
    assert.equal(ready.body.checks.ffmpeg.ok, false);
    assert.match(ready.body.checks.ffmpeg.detail, /no-such-ffmpeg not found/);
  });
});
