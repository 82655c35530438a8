// The storage invariant under a random (seeded) mix of everything that changes storage, on
// every dialect: at any moment an account's storage used equals its live files plus its open
// reservations (API.md "Plans and limits").
//
// Three accounts on a small plan run uploads, direct uploads (confirmed, left pending, left to
// expire), jobs and batches (some outputs too large for a file or for the account), cancels of
// tasks and batches, deletes of inputs and outputs, and expiries (the application's clock moved
// on, the sweep run). A worker process (a child, sharing the database and the data directory)
// runs the tasks first and is killed with SIGKILL in the middle of one; the in-process workers
// take over its tasks once their leases lapse. The ledger is checked after every step (and no
// account may pass its limit), and at the end: every live file's object is whole, and no object
// is left that nothing records, not even what the killed worker wrote.
// Replay a failing run with STORAGE_SEED=<seed from the log>.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { CONFIRM_GRACE_MS } from '../../src/files/direct-upload.js';
import { outputKey } from '../../src/storage/storage.js';
import { WorkerPool } from '../../src/worker/worker.js';
import { Client, DIALECTS, apiFetch, corpusFile, sleep, startServer, type ApiResponse, type TestServer } from '../helpers.js';
import { startProc, stopProc, waitFor, waitWorking, type Proc } from '../e2e/processes.js';
import { ledgerMismatches, seededRandom, storageLedger } from './storage-ledger.js';

const SEED = Number(process.env.STORAGE_SEED ?? Date.now() % 1_000_000);
const STEPS_WITH_CHILD = 50;
const STEPS_AFTER = 110;
const LEASE_SECONDS = 2;
const STORAGE_LIMIT = 300_000;

const IMAGES = ['images/sharp/concert.jpg', 'images/sharp/320x240.jpg', 'images/sharp/swiss.png', 'images/sharp/2x2_fdcce6.png'].map((f) => ({
  name: path.basename(f),
  bytes: fs.readFileSync(corpusFile(f)),
}));

/** Keys of every object under the local storage's root. */
function objectKeys(server: TestServer): string[] {
  const root = path.resolve(server.services.storage.localPath!('uploads/x'), '..', '..');
  const keys: string[] = [];
  for (const dir of ['uploads', 'outputs', 'incoming']) {
    const base = path.join(root, dir);
    if (!fs.existsSync(base)) continue;
    for (const entry of fs.readdirSync(base, { recursive: true, withFileTypes: true })) {
      if (entry.isFile() && !entry.name.startsWith('.')) keys.push(path.relative(root, path.join(entry.parentPath, entry.name)));
    }
  }
  return keys;
}

for (const dialect of DIALECTS) {
  describe(`storage invariant (${dialect})`, () => {
    let server: TestServer;
    const clock = new ManualClock();
    let child: Proc | undefined;
    let pool: WorkerPool | undefined;

    before(async () => {
      server = await startServer({
        dialect,
        clock,
        workers: 0,
        env: { TASK_LEASE_SECONDS: String(LEASE_SECONDS) },
        plans: {
          pro: {
            storageBytes: STORAGE_LIMIT,
            maxFileBytes: 100_000,
            retentionSeconds: 86_400,
            monthlyTasks: 1_000_000,
            dailyBatchFiles: 1_000_000,
            maxQueuedTasks: 100_000,
          },
        },
      });
    });
    after(async () => {
      if (child) await stopProc(child);
      await pool?.stop(2000);
      await server.close();
    });

    it('storage used = live files + open reservations, after a random mix with a SIGKILLed worker', { timeout: 240_000 }, async () => {
      const random = seededRandom(SEED);
      const pick = <T>(list: T[]): T | undefined => list[Math.floor(random() * list.length)];
      const db = server.services.database.db;
      const counts = new Map<string, number>();
      const note = (what: string, response: ApiResponse): ApiResponse => {
        assert.ok(response.status < 500, `${what}: ${response.status} ${JSON.stringify(response.body)} (seed ${SEED})`);
        const label = `${what} ${response.status}${response.status >= 400 ? ` ${response.body?.error?.code}` : ''}`;
        counts.set(label, (counts.get(label) ?? 0) + 1);
        return response;
      };
      const accounts = await Promise.all(
        [1, 2, 3].map(async () => ({
          client: new Client(server.url, await server.newKey('pro')),
          files: [] as string[],
          tasks: [] as string[],
          batches: [] as string[],
          uploads: [] as { uploadId: string; put: boolean }[],
        })),
      );

      const jobBody = (fileId: string) => {
        const r = random();
        if (r < 0.35) return { kind: 'convert', body: { fileId, format: pick(['png', 'webp', 'jpeg'])! } };
        if (r < 0.6) return { kind: 'resize', body: { fileId, width: 16 + Math.floor(random() * 600), format: pick(['png', 'webp'])! } };
        if (r < 0.8) return { kind: 'upscale', body: { fileId, factor: 2, format: pick(['png', 'jpeg'])! } };
        return { kind: 'compress', body: { fileId, quality: 30 + Math.floor(random() * 60) } };
      };

      const step = async (allowExpiry: boolean) => {
        const account = pick(accounts)!;
        const { client } = account;
        const r = random();
        if (r < 0.15 || account.files.length === 0) {
          const image = pick(IMAGES)!;
          const response = note('upload', await client.upload(image.bytes, image.name));
          if (response.status === 201) account.files.push(response.body.data.fileId);
        } else if (r < 0.23) {
          const image = pick(IMAGES)!;
          const presigned = note('presign', await client.post('/api/upload/presign', { filename: image.name, size: image.bytes.length }));
          if (presigned.status !== 201) return;
          const upload = { uploadId: presigned.body.data.uploadId as string, put: false };
          account.uploads.push(upload);
          if (random() < 0.75) {
            const url = (presigned.body.data.url as string).replace(server.config.publicUrl, server.url);
            const { response: put, body } = await apiFetch(url, {
              method: 'PUT',
              headers: presigned.body.data.headers,
              body: new Uint8Array(image.bytes),
            });
            assert.equal(put.status, 200, body.toString());
            upload.put = true;
          }
        } else if (r < 0.28) {
          const upload = pick(account.uploads.filter((u) => u.put));
          if (!upload) return;
          const confirmed = note('confirm', await client.post('/api/upload/confirm', { uploadId: upload.uploadId }));
          if (confirmed.status === 201 && !account.files.includes(confirmed.body.data.fileId)) account.files.push(confirmed.body.data.fileId);
        } else if (r < 0.5) {
          const { kind, body } = jobBody(pick(account.files)!);
          const response = note(`job`, await client.post(`/api/process/${kind}`, body));
          if (response.status === 202) account.tasks.push(response.body.data.taskId);
        } else if (r < 0.6) {
          const fileIds = Array.from({ length: 2 + Math.floor(random() * 3) }, () => pick(account.files)!);
          const response = note('batch', await client.post('/api/process/batch/convert', { fileIds, format: pick(['png', 'webp', 'jpeg']) }));
          if (response.status === 202) {
            account.batches.push(response.body.data.batchId);
            account.tasks.push(...response.body.data.tasks.map((t: { taskId: string }) => t.taskId));
          }
        } else if (r < 0.68) {
          const taskId = pick(account.tasks);
          if (taskId) note('cancel', await client.request('DELETE', `/api/tasks/${taskId}`));
        } else if (r < 0.71) {
          const batchId = pick(account.batches);
          if (batchId) note('cancel-batch', await client.request('DELETE', `/api/batches/${batchId}`));
        } else if (r < 0.8) {
          // An input, or the output of a task that has one by now.
          let fileId = pick(account.files);
          if (random() < 0.5 && account.tasks.length) {
            const task = note('read', await client.get(`/api/tasks/${pick(account.tasks)}`)).body.data;
            if (task.outputFileId) fileId = task.outputFileId;
          }
          if (!fileId) return;
          const response = note('delete', await client.request('DELETE', `/api/files/${fileId}`));
          if (response.status === 204 || response.status === 404 || response.status === 410)
            account.files = account.files.filter((f) => f !== fileId);
        } else if (r < 0.88 && allowExpiry) {
          // Time passes: some files expire (a day), some direct uploads are abandoned.
          clock.advance(Math.floor(random() * 2 * 3600_000) + (random() < 0.3 ? 86_400_000 : 0) + (random() < 0.3 ? CONFIRM_GRACE_MS + 900_000 : 0));
          await server.services.maintenance.tick(true);
          counts.set('expiry', (counts.get('expiry') ?? 0) + 1);
        } else {
          await sleep(Math.floor(random() * 150));
        }
      };

      const checkLedger = async (when: string) => {
        assert.deepEqual(await ledgerMismatches(db), [], `storage used = live files + open reservations ${when} (seed ${SEED})`);
        const over = (await storageLedger(db)).filter((a) => a.used > STORAGE_LIMIT);
        assert.deepEqual(over, [], `no account is past its storage limit ${when} (seed ${SEED})`);
      };

      // Phase 1: a worker process runs the tasks; the clock stands still (it is the child's).
      const startWorkerProcess = async () => {
        child = startProc('worker', ['worker'], {
          DATA_DIR: server.dataDir,
          DATABASE_URL: server.databaseUrl,
          PLANS_FILE: path.join(server.dataDir, 'plans.json'),
          WORKER_CONCURRENCY: '2',
          IMAGE_THREADS: '1',
          TASK_LEASE_SECONDS: String(LEASE_SECONDS),
          QUEUE_POLL_MS: '200',
          LOG_LEVEL: 'info',
        });
        return { proc: child, id: await waitWorking(child) };
      };
      let worker = await startWorkerProcess();
      for (let i = 0; i < STEPS_WITH_CHILD; i++) {
        await step(false);
        await checkLedger(`after step ${i}`);
      }
      // Kill it in the middle of a task, at best between writing an output and recording it:
      // slow tasks (a 320×240 JPEG upscaled ×4 to WebP) from an account of their own (the others
      // may be full by now), and the kill sent as soon as one of their output objects appears.
      const slow = new Client(server.url, await server.newKey('pro'));
      const slowFile = await slow.uploadOk(IMAGES[1]!.bytes, IMAGES[1]!.name);
      const slowBatch = note(
        'batch',
        await slow.post('/api/process/batch/upscale', { fileIds: Array(12).fill(slowFile), factor: 4, format: 'webp', quality: 20 }),
      );
      assert.equal(slowBatch.status, 202, JSON.stringify(slowBatch.body));
      const heldBy = async (owner: string) =>
        (await db.selectFrom('tasks').select('id').where('status', '=', 'processing').where('lease_owner', '=', owner).execute()).map((t) => t.id);
      const outputPath = (taskId: string) => server.services.storage.localPath!(outputKey(taskId, 0));
      // A task can finish between the last look and the signal; then the kill caught nothing, and
      // another worker process tries again on the batch's remaining tasks.
      let heldAtKill: string[] = [];
      for (let attempt = 0; !heldAtKill.length; attempt++) {
        assert.ok(attempt < 5, 'the worker process was killed mid-task');
        if (attempt > 0) worker = await startWorkerProcess();
        await waitFor('the worker process to run a task', 30_000, async () => ((await heldBy(worker.id)).length ? true : undefined));
        // Watch for up to 5 s, then settle for any moment the worker holds a task.
        const watchUntil = Date.now() + 5_000;
        for (;;) {
          const held = await heldBy(worker.id);
          if (held.some((id) => fs.existsSync(outputPath(id))) || (held.length && Date.now() > watchUntil)) break;
          assert.ok(Date.now() < watchUntil + 30_000, 'the worker process stopped running tasks');
        }
        worker.proc.child.kill('SIGKILL');
        await worker.proc.exited;
        heldAtKill = await heldBy(worker.id);
      }
      // Its outputs are written under task-derived keys and recorded nowhere. Should the kill have
      // missed that moment, leave what it would have left a moment later.
      let writtenUnrecorded = heldAtKill.filter((id) => fs.existsSync(outputPath(id)));
      const killedAfterWrite = writtenUnrecorded.length > 0;
      if (!killedAfterWrite) {
        await server.services.storage.put(outputKey(heldAtKill[0]!, 0), Readable.from([Buffer.alloc(20_000, 7)]));
        writtenUnrecorded = [heldAtKill[0]!];
      }
      await checkLedger('after the SIGKILL');

      // Phase 2: the in-process workers take over once the dead worker's leases lapse; time moves.
      pool = new WorkerPool(server.services, 2);
      pool.start();
      clock.advance((LEASE_SECONDS + 1) * 1000);
      for (let i = 0; i < STEPS_AFTER; i++) {
        await step(true);
        await checkLedger(`after step ${STEPS_WITH_CHILD + i}`);
      }
      // Whatever the seed made of the mix, one output is refused for certain, so "some outputs were
      // refused" below never rests on the seed (seed 139314 refused none): a fresh account (the
      // others may be full, their files expired) upscales the 320×240 JPEG ×4 to PNG — megabytes,
      // past the plan's maxFileBytes.
      const oversized = new Client(server.url, await server.newKey('pro'));
      const oversizedFile = await oversized.uploadOk(IMAGES[1]!.bytes, IMAGES[1]!.name);
      const refusedJob = note('job', await oversized.post('/api/process/upscale', { fileId: oversizedFile, factor: 4, format: 'png' }));
      assert.equal(refusedJob.status, 202, JSON.stringify(refusedJob.body));

      // Settle: every task ends (retries' backoff skipped by moving the clock), a last sweep.
      await waitFor('every task to finish', 60_000, async () => {
        clock.advance(60_000);
        const open = await db.selectFrom('tasks').select('id').where('status', 'in', ['queued', 'processing']).executeTakeFirst();
        return open ? undefined : true;
      });
      await server.services.maintenance.tick(true);
      await checkLedger('at the end');

      // Every live file's bytes are there, whole; nothing is stored that no record explains.
      const live = await db.selectFrom('files').select(['id', 'storage_key', 'size']).where('deleted_at', 'is', null).execute();
      for (const file of live) assert.equal((await server.services.storage.head(file.storage_key))?.size, Number(file.size), `${file.id}'s object`);
      const pending = await db.selectFrom('uploads').select('id').where('status', '=', 'pending').execute();
      const explained = new Set([...live.map((f) => f.storage_key), ...pending.map((u) => `incoming/${u.id}`)]);
      const strays = objectKeys(server).filter((key) => !explained.has(key));

      const tasks = await db.selectFrom('tasks').select(['status', 'error_code']).execute();
      const outcomes = new Map<string, number>();
      for (const t of tasks)
        outcomes.set(
          `${t.status}${t.error_code ? `:${t.error_code}` : ''}`,
          (outcomes.get(`${t.status}${t.error_code ? `:${t.error_code}` : ''}`) ?? 0) + 1,
        );
      console.log(
        `storage invariant (${dialect}, seed ${SEED}): tasks ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}; ` +
          `SIGKILL held ${heldAtKill.length} task(s), ${writtenUnrecorded.length} with an output written, unrecorded ` +
          `(${killedAfterWrite ? 'the kill landed after the write' : 'left by the test: the kill landed before any write'}); ` +
          `${strays.length} object(s) left unrecorded at the end; requests ${JSON.stringify(Object.fromEntries([...counts].sort()))}`,
      );
      assert.deepEqual(strays, [], `no object is left that nothing records (seed ${SEED})`);
      // The mix did exercise what it is about.
      assert.ok((outcomes.get('completed') ?? 0) > 0);
      assert.ok(
        (outcomes.get('failed:STORAGE_LIMIT_EXCEEDED') ?? 0) + (outcomes.get('failed:OUTPUT_TOO_LARGE') ?? 0) > 0,
        'some outputs were refused',
      );
    });
  });
}
