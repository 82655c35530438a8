// GET /api/batches/{batchId}?wait=N: the long-poll, the overall status and completedAt; and
// GET /api/batches/{batchId}/download: 409 while a task is unfinished; then a ZIP of the
// completed outputs in batch order with a manifest naming every task, its input and outcome,
// its length and ETag known before it is sent.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import yauzl from 'yauzl';
import { WorkerPool } from '../../src/worker/worker.js';
import { Client, DIALECTS, startServer, type TestServer } from '../helpers.js';

function unzip(bytes: Buffer): Promise<Map<string, Buffer>> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(bytes, { lazyEntries: true }, (err, zip) => {
      if (err) return reject(err);
      const entries = new Map<string, Buffer>();
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (openErr, stream) => {
          if (openErr) return reject(openErr);
          const chunks: Buffer[] = [];
          stream.on('data', (chunk: Buffer) => chunks.push(chunk));
          stream.on('end', () => {
            entries.set(entry.fileName, Buffer.concat(chunks));
            zip.readEntry();
          });
        });
      });
      zip.on('end', () => resolve(entries));
      zip.on('error', reject);
      zip.readEntry();
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`batch download (${dialect})`, () => {
    let server: TestServer;
    let client: Client;
    let workers: WorkerPool | undefined;
    before(async () => {
      // No workers at first: the batch stays queued until the test starts some.
      server = await startServer({ dialect, workers: 0 });
      client = new Client(server.url, await server.newKey('pro'));
    });
    after(async () => {
      await workers?.stop(2000);
      await server?.close();
    });

    it('refuses unknown and bad query parameters, naming them', async () => {
      const fileId = await client.uploadOk(
        await sharp({ create: { width: 8, height: 8, channels: 3, background: '#000' } })
          .png()
          .toBuffer(),
        'q.png',
      );
      const { batchId } = (await client.post('/api/process/batch/flip', { fileIds: [fileId], direction: 'horizontal' })).body.data;
      for (const [query, field] of [
        ['foo=1', 'foo'],
        ['wait=abc', 'wait'],
        ['wait=0', 'wait'],
        ['wait=31', 'wait'],
      ]) {
        const response = await client.get(`/api/batches/${batchId}?${query}`);
        assert.equal(response.status, 400, query);
        assert.equal(response.body.error.code, 'VALIDATION_ERROR');
        assert.deepEqual(
          response.body.error.details.fields.map((f: { field: string }) => f.field),
          [field],
          query,
        );
      }
      await client.request('DELETE', `/api/batches/${batchId}`);
    });

    it('is queued, then canceled with completedAt once every task is canceled', async () => {
      const fileIds = [];
      for (const background of ['#000', '#fff']) {
        fileIds.push(
          await client.uploadOk(
            await sharp({ create: { width: 8, height: 8, channels: 3, background } })
              .png()
              .toBuffer(),
            'c.png',
          ),
        );
      }
      const { batchId } = (await client.post('/api/process/batch/flip', { fileIds, direction: 'horizontal' })).body.data;
      // No worker: still queued when a one-second wait runs out.
      const waited = await client.get(`/api/batches/${batchId}?wait=1`);
      assert.equal(waited.status, 200);
      assert.equal(waited.body.data.status, 'queued');
      assert.equal(waited.body.data.completedAt, null);
      const canceled = await client.request('DELETE', `/api/batches/${batchId}`);
      assert.equal(canceled.body.data.status, 'canceled');
      const times = canceled.body.data.tasks.map((t: { completedAt: string }) => t.completedAt).sort();
      assert.equal(canceled.body.data.completedAt, times.at(-1));
      // Finished already: the wait answers at once with the same batch.
      assert.deepEqual((await client.get(`/api/batches/${batchId}?wait=30`)).body.data, canceled.body.data);
    });

    it('answers 409 while unfinished, then a ZIP of the outputs in order with a manifest', async () => {
      const red = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#c00' } })
        .png()
        .toBuffer();
      const blue = await sharp({ create: { width: 32, height: 32, channels: 3, background: '#00c' } })
        .jpeg()
        .toBuffer();
      const ids = [await client.uploadOk(red, 'red.png'), await client.uploadOk(blue, 'blue photo.jpg')];
      // A PNG cut short: its task fails, and the manifest says why.
      ids.push(await client.uploadOk(red.subarray(0, 60), 'cut.png'));
      const batch = await client.post('/api/process/batch/rotate', { fileIds: ids, angle: 180, format: 'webp' });
      assert.equal(batch.status, 202);
      const { batchId } = batch.body.data;

      const early = await client.get(`/api/batches/${batchId}/download`);
      assert.equal(early.status, 409);
      assert.equal(early.body.error.code, 'BATCH_NOT_FINISHED');
      assert.equal(early.headers.get('content-disposition'), null);

      // The long-poll is asked while every task is queued; it answers once the last has finished.
      const waiting = client.get(`/api/batches/${batchId}?wait=30`);
      workers = new WorkerPool(server.services, 1);
      workers.start();
      const finished = (await waiting).body.data;
      const tasks = finished.tasks;
      assert.deepEqual(
        tasks.map((t: { status: string }) => t.status),
        ['completed', 'completed', 'failed'],
      );
      assert.equal(finished.status, 'partial');
      assert.deepEqual(finished.counts, { queued: 0, processing: 0, completed: 2, failed: 1, canceled: 0 });
      assert.equal(
        finished.completedAt,
        tasks
          .map((t: { completedAt: string }) => t.completedAt)
          .sort()
          .at(-1),
      );

      const zip = await client.get(`/api/batches/${batchId}/download`);
      assert.equal(zip.status, 200);
      assert.equal(zip.headers.get('content-type'), 'application/zip');
      assert.match(zip.headers.get('content-disposition') ?? '', /attachment; filename="batch_/);
      assert.equal(zip.headers.get('content-length'), String((zip.body as Buffer).length));
      const etag = zip.headers.get('etag');
      assert.match(etag ?? '', /^"[0-9a-f]{32}"$/);
      // The same outputs: the same bytes under the same ETag.
      const again = await client.get(`/api/batches/${batchId}/download`);
      assert.equal(again.headers.get('etag'), etag);
      assert.deepEqual(again.body, zip.body);
      const entries = await unzip(zip.body as Buffer);
      // Each output under the service's own name (the one naming rule), after its place in the batch.
      assert.deepEqual([...entries.keys()], ['001-red.rotate-180.webp', '002-blue photo.rotate-180.webp', 'manifest.json']);
      for (const [index, task] of tasks.slice(0, 2).entries()) {
        const output = (await client.get(`/api/files/${task.outputFileId}`)).body.data;
        assert.equal([...entries.keys()][index], `00${index + 1}-${output.filename}`);
      }
      assert.deepEqual(entries.get('001-red.rotate-180.webp'), await client.download(tasks[0].outputFileId));
      assert.deepEqual(entries.get('002-blue photo.rotate-180.webp'), await client.download(tasks[1].outputFileId));
      assert.equal((await sharp(entries.get('002-blue photo.rotate-180.webp')!).metadata()).width, 32);

      const manifest = JSON.parse(entries.get('manifest.json')!.toString('utf8'));
      assert.equal(manifest.batchId, batchId);
      assert.equal(manifest.type, 'rotate');
      assert.deepEqual(
        manifest.tasks.map((t: any) => [t.taskId, t.input.fileId, t.input.filename, t.status, t.file ?? null, t.error?.code ?? null]),
        [
          [tasks[0].taskId, ids[0], 'red.png', 'completed', '001-red.rotate-180.webp', null],
          [tasks[1].taskId, ids[1], 'blue photo.jpg', 'completed', '002-blue photo.rotate-180.webp', null],
          [tasks[2].taskId, ids[2], 'cut.png', 'failed', null, tasks[2].error.code],
        ],
      );
    });

    it("is another account's batch: 404", async () => {
      const fileId = await client.uploadOk(
        await sharp({ create: { width: 8, height: 8, channels: 3, background: '#000' } })
          .png()
          .toBuffer(),
        'x.png',
      );
      const batch = await client.post('/api/process/batch/flip', { fileIds: [fileId], direction: 'horizontal' });
      const other = new Client(server.url, await server.newKey('pro'));
      const response = await other.get(`/api/batches/${batch.body.data.batchId}/download`);
      assert.equal(response.status, 404);
      assert.equal(response.body.error.code, 'NOT_FOUND');
    });
  });
}
