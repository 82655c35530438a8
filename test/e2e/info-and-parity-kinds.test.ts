// GET /api/files/{fileId}/info (API.md "Info") and the kinds adjust, trim and extend through
// the API (single, batch, pipeline step), on both databases. What each option does is tested
// on the operations themselves (test/operations/adjust-trim-extend.test.ts); this is the contract.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import path from 'node:path';
import sharp from 'sharp';
import { Client, DIALECTS, REPO_ROOT, corpusFile, startServer, type TestServer } from '../helpers.js';

for (const dialect of DIALECTS) {
  describe(`info and the parity kinds (${dialect})`, () => {
    let server: TestServer;
    let client: Client;
    let photo: string;

    before(async () => {
      server = await startServer({ dialect, workers: 2, plans: { pro: { maxPixels: 20_000_000 } } });
      client = new Client(server.url, await server.newKey('pro'));
      photo = await client.uploadOk(corpusFile('images/wikimedia/Cerkiew.jpg'));
    });
    after(() => server.close());

    it('answers every field of a photo with EXIF and GPS, computed once and kept', async () => {
      const first = await client.get(`/api/files/${photo}/info`);
      assert.equal(first.status, 200, JSON.stringify(first.body));
      const info = first.body.data;
      assert.equal(info.format, 'jpeg');
      assert.deepEqual([info.width, info.height, info.pages, info.hasAlpha], [1914, 2565, 1, false]);
      assert.equal(info.colorSpace, 'srgb');
      assert.equal(typeof info.orientation, 'number');
      assert.equal(typeof info.exif.Make, 'string');
      assert.ok(Math.abs(info.gps.latitude) <= 90 && Math.abs(info.gps.longitude) <= 180 && info.gps.latitude !== 0, JSON.stringify(info.gps));
      assert.ok(info.palette.length >= 2 && info.palette.length <= 8, JSON.stringify(info.palette));
      assert.equal(info.dominant, info.palette[0]);
      assert.match(info.phash, /^[0-9a-f]{16}$/);
      assert.ok(info.blurhash.length >= 6 && Buffer.from(info.thumbhash, 'base64').length > 5, `${info.blurhash} ${info.thumbhash}`);
      const kept = await server.services.database.db.selectFrom('file_info').select('file_id').where('file_id', '=', photo).execute();
      assert.equal(kept.length, 1, 'kept in file_info');
      // Asked again: the kept answer, byte for byte.
      assert.deepEqual((await client.get(`/api/files/${photo}/info`)).body.data, info);
    });

    it('?faces=1 adds the faces the detector finds, found once and kept; without it no faces field', async () => {
      // The face-api package's own sample photo, three faces labelled in test/fixtures/faces.json.
      const group = await client.uploadOk(path.join(REPO_ROOT, 'node_modules/@vladmandic/face-api/demo/sample1.jpg'));
      const plain = (await client.get(`/api/files/${group}/info`)).body.data;
      assert.equal('faces' in plain, false);
      const asked = await client.get(`/api/files/${group}/info?faces=1`);
      assert.equal(asked.status, 200, JSON.stringify(asked.body));
      const faces = asked.body.data.faces as { left: number; top: number; width: number; height: number; score: number }[];
      assert.ok(faces.length >= 3, JSON.stringify(faces));
      // The labelled face at (414, 353) 177 × 240 holds a detection's centre.
      assert.ok(
        faces.some((f) => Math.abs(f.left + f.width / 2 - 502) < 90 && Math.abs(f.top + f.height / 2 - 473) < 120),
        JSON.stringify(faces),
      );
      assert.deepEqual({ ...asked.body.data, faces: undefined }, { ...plain, faces: undefined });
      // Kept: the next ask is the same answer, and a plain ask still leaves faces out.
      assert.deepEqual((await client.get(`/api/files/${group}/info?faces=true`)).body.data.faces, faces);
      assert.equal('faces' in (await client.get(`/api/files/${group}/info`)).body.data, false);
    });

    it('an image without EXIF answers null for exif and gps; alpha and frames are told', async () => {
      const gif = await client.uploadOk(corpusFile('images/sharp/rotating-squares.gif'));
      const info = (await client.get(`/api/files/${gif}/info`)).body.data;
      assert.deepEqual([info.format, info.pages, info.exif, info.gps], ['gif', 30, null, null]);
      const png = await client.uploadOk(corpusFile('images/sharp/embedgravitybird.png'));
      assert.equal((await client.get(`/api/files/${png}/info`)).body.data.hasAlpha, true);
    });

    it('documents answer 415 INFO_UNAVAILABLE; another account’s file 404; an unknown query 400; a deleted file 404 and its info goes', async () => {
      // A presentation (PDFs too, where they are accepted): a document, no info.
      const deck = await client.uploadOk(corpusFile('presentations/python-pptx/tbl-cell.pptx'));
      const refused = await client.get(`/api/files/${deck}/info`);
      assert.equal(refused.status, 415);
      assert.equal(refused.body.error.code, 'INFO_UNAVAILABLE');

      const stranger = new Client(server.url, await server.newKey('pro'));
      const hidden = await stranger.get(`/api/files/${photo}/info`);
      assert.equal(hidden.status, 404);
      assert.equal(hidden.body.error.code, 'NOT_FOUND');
      assert.equal((await client.get(`/api/files/${photo}/info?faces=maybe`)).status, 400);

      const gone = await client.uploadOk(corpusFile('images/sharp/320x240.jpg'));
      assert.equal((await client.get(`/api/files/${gone}/info`)).status, 200);
      assert.equal((await client.request('DELETE', `/api/files/${gone}`)).status, 204);
      assert.equal((await client.get(`/api/files/${gone}/info`)).status, 404);
      const rows = await server.services.database.db.selectFrom('file_info').select('file_id').where('file_id', '=', gone).execute();
      assert.equal(rows.length, 0, 'its info is freed with it');
    });

    it('an image past the plan’s pixel limit answers 415 with reason IMAGE_TOO_LARGE, without decoding it', async () => {
      const giant = await client.uploadOk(corpusFile('images/sharp/giant-image.jpg'));
      const refused = await client.get(`/api/files/${giant}/info`);
      assert.equal(refused.status, 415);
      assert.equal(refused.body.error.details.reason, 'IMAGE_TOO_LARGE');
    });

    const run = async (route: string, body: Record<string, unknown>) => {
      const queued = await client.post(route, body);
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      const task = await client.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      return task;
    };

    it('adjust, trim and extend run as single jobs, batch kinds and pipeline steps', async () => {
      const small = await client.uploadOk(corpusFile('images/sharp/320x240.jpg'));
      const adjusted = await run('/api/process/adjust', { fileId: small, brightness: 1.2, grayscale: true, format: 'png' });
      const out = await sharp(await client.download(adjusted.outputFileId)).stats();
      assert.ok(Math.abs(out.channels[0]!.mean - out.channels[1]!.mean) < 1, 'grey');

      const framed = await client.uploadOk(
        await sharp(corpusFile('images/sharp/320x240.jpg')).extend({ top: 9, left: 4, bottom: 3, right: 6, background: '#ffffff' }).png().toBuffer(),
        'framed.png',
      );
      const trimmed = await run('/api/process/trim', { fileId: framed });
      assert.deepEqual([trimmed.result.width, trimmed.result.height], [320, 240]);
      assert.deepEqual([trimmed.result.trimmed, trimmed.result.offsetLeft, trimmed.result.offsetTop], [true, 4, 9]);

      const extended = await run('/api/process/extend', { fileId: small, all: 10, top: 0, background: 'red' });
      assert.deepEqual([extended.result.width, extended.result.height], [340, 250]);

      const batch = await client.post('/api/process/batch/extend', { fileIds: [small, framed], left: 5 });
      assert.equal(batch.status, 202, JSON.stringify(batch.body));
      for (const task of batch.body.data.tasks) assert.equal((await client.waitForTask(task.taskId)).status, 'completed');

      const piped = await run('/api/process/pipeline', {
        fileId: framed,
        steps: [{ kind: 'trim' }, { kind: 'adjust', negate: true }, { kind: 'extend', all: 2 }],
        format: 'webp',
      });
      assert.deepEqual([piped.result.width, piped.result.height], [324, 244]);
    });

    it('bad options are a 400 naming the field; an extend past the pixel limit fails IMAGE_TOO_LARGE when queued', async () => {
      for (const [kind, body, field] of [
        ['adjust', {}, 'brightness'],
        ['adjust', { blur: 1000 }, 'blur'],
        ['adjust', { tint: 'no-such-colour' }, 'tint'],
        ['trim', { threshold: -1 }, 'threshold'],
        ['extend', { top: -5 }, 'top'],
        ['extend', {}, 'all'],
      ] as const) {
        const refused = await client.post(`/api/process/${kind}`, { fileId: photo, ...body });
        assert.equal(refused.status, 400, `${kind} ${JSON.stringify(body)}`);
        assert.ok(
          refused.body.error.details.fields.some((f: { field: string }) => f.field === field),
          JSON.stringify(refused.body.error.details),
        );
      }
      const huge = await client.post('/api/process/extend', { fileId: photo, all: 50_000 });
      assert.equal(huge.status, 202);
      assert.equal(huge.body.data.status, 'failed');
      assert.equal(huge.body.data.error.code, 'IMAGE_TOO_LARGE');
    });
  });
}
