// The task table as a queue, on every dialect: competing workers complete each task exactly once,
// lapsed leases move to another worker and the stale one's completion is refused, transient
// faults retry with backoff while input faults fail at once, and canceled tasks never run.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import pino from 'pino';
import { ManualClock } from '../../src/clock.js';
import { createServices, type Services } from '../../src/services.js';
import { backoffMs, MAX_LOST_LEASES, type TaskQueue, type TaskRow } from '../../src/queue/queue.js';
import type { StoredOutput } from '../../src/files/files.js';
import { MAX_ATTEMPTS } from '../../src/tasks/tasks.js';
import { WorkerPool } from '../../src/worker/worker.js';
import { simplePdf } from '../documents/pdf-fixtures.js';
import { Client, DIALECTS, completeTask, corpusFile, sleep, startServer, type TestServer } from '../helpers.js';

const LEASE_MS = 30_000;

const MAX_PLAN = {
  max: { requestsPerSecond: 100_000, monthlyTasks: 1_000_000, maxQueuedTasks: 100_000, dailyBatchFiles: 100_000, batchSize: 200 },
};

/** A made-up stored output for completeTask: the files module records it; no bytes need to exist. */
function fakeOutput(label: string): StoredOutput {
  return {
    fileId: `file_fake_${label}_${Math.random().toString(36).slice(2)}`,
    storageKey: `outputs/fake/${label}`,
    filename: `${label}.jpg`,
    mimeType: 'image/jpeg',
    format: 'jpeg',
    size: 10,
    etag: 'fake',
    width: 1,
    height: 1,
  };
}

async function taskRow(services: Services, id: string): Promise<TaskRow> {
  return services.database.db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

async function outputRows(services: Services, taskId: string) {
  return services.database.db.selectFrom('files').select(['id', 'task_id']).where('task_id', '=', taskId).execute();
}

async function monthlyUsed(client: Client): Promise<number> {
  const response = await client.get('/api/account');
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body.data.usage.monthlyTasks.used;
}

async function queueCompress(client: Client, fileId: string): Promise<string> {
  const response = await client.post('/api/process/compress', { fileId });
  assert.equal(response.status, 202, JSON.stringify(response.body));
  return response.body.data.taskId;
}

for (const dialect of DIALECTS) {
  describe(`queue (${dialect})`, () => {
    it('200 tasks across 4 concurrent workers complete exactly once', async () => {
      const server = await startServer({ dialect, workers: 0, plans: MAX_PLAN });
      const extra: Services[] = [];
      const pools: WorkerPool[] = [];
      try {
        const client = new Client(server.url, await server.newKey('max'));
        const fileId = await client.uploadOk(corpusFile('images/sharp/320x240.jpg'));
        const batch = await client.post('/api/process/batch/compress', { fileIds: Array.from({ length: 200 }, () => fileId) });
        assert.equal(batch.status, 202, JSON.stringify(batch.body));
        const taskIds: string[] = batch.body.data.tasks.map((t: { taskId: string }) => t.taskId);
        assert.equal(new Set(taskIds).size, 200);

        // Warnings and errors of the workers: there should be none.
        const logs: string[] = [];
        const logger = pino({ level: 'warn' }, { write: (line: string) => void logs.push(line) });
        // Four workers, each with its own services and so its own connection(s) and TaskQueue.
        for (let i = 0; i < 3; i++) extra.push(await createServices(server.config, { logger }));
        const claimedBy: string[][] = [];
        const overClaims: string[] = [];
        for (const services of [server.services, ...extra]) {
          const claimed: string[] = [];
          claimedBy.push(claimed);
          const queue: TaskQueue = services.queue;
          // The worker pools claim through claimSome (claim and whether more are left).
          const claimSome = queue.claimSome.bind(queue);
          queue.claimSome = async (...args) => {
            const result = await claimSome(...args);
            const rows = result.tasks;
            if (rows.length > args[1]) overClaims.push(`claimed ${rows.length} tasks with ${args[1]} free slot(s)`);
            for (const row of rows) claimed.push(row.id);
            return result;
          };
          pools.push(new WorkerPool({ ...services, logger }, 1));
        }
        for (const pool of pools) pool.start();

        const db = server.services.database.db;
        const deadline = Date.now() + 120_000;
        for (;;) {
          const open = await db
            .selectFrom('tasks')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('status', 'in', ['queued', 'processing'])
            .executeTakeFirstOrThrow();
          if (Number(open.n) === 0) break;
          if (Date.now() >= deadline) {
            const stuck = await db
              .selectFrom('tasks')
              .select(['id', 'status', 'attempts', 'lease_owner', 'lease_expires_at', 'run_at'])
              .where('status', 'in', ['queued', 'processing'])
              .execute();
            const state = { now: Date.now(), busy: pools.map((p) => p.busy), claims: claimedBy.map((c) => c.length), stuck, logs: logs.slice(-20) };
            assert.fail(`${open.n} tasks still open after 120 s: ${JSON.stringify(state, null, 1)}`);
          }
          await sleep(100);
        }
        await Promise.all(pools.map((pool) => pool.stop(5000)));
        assert.deepEqual(overClaims, [], 'a claim takes at most as many tasks as there are free slots');
        assert.deepEqual(logs, [], 'the workers logged no warning or error');

        const tasks = await db.selectFrom('tasks').selectAll().where('id', 'in', taskIds).execute();
        assert.equal(tasks.length, 200);
        for (const task of tasks) {
          assert.equal(task.status, 'completed', `${task.id}: ${task.status} ${task.error_code ?? ''} ${task.error_message ?? ''}`);
          assert.equal(task.attempts, 1, `${task.id} ran ${task.attempts} times`);
        }
        const outputs = await db.selectFrom('files').select(['id', 'task_id']).where('origin', '=', 'output').execute();
        assert.equal(outputs.length, 200, 'one output per task, no more');
        const perTask = new Map<string, number>();
        for (const output of outputs) perTask.set(output.task_id!, (perTask.get(output.task_id!) ?? 0) + 1);
        for (const task of tasks) assert.equal(perTask.get(task.id), 1, `outputs of ${task.id}`);
        for (const task of tasks) assert.equal(task.output_file_id, outputs.find((o) => o.task_id === task.id)!.id);

        const allClaims = claimedBy.flat();
        assert.equal(allClaims.length, 200, 'each task claimed once in all');
        assert.equal(new Set(allClaims).size, 200);
        const counts = claimedBy.map((ids) => ids.length);
        console.log(`queue (${dialect}): claims per worker ${counts.join(', ')}`);
        for (const [i, n] of counts.entries()) assert.ok(n > 0, `worker ${i} did no work (claims per worker: ${counts.join(', ')})`);
      } finally {
        await Promise.all(pools.map((pool) => pool.stop(2000)));
        for (const services of extra) await services.close();
        await server.close();
      }
    });

    describe('leases, retries and cancel', () => {
      let server: TestServer;
      let client: Client;
      let queue: TaskQueue;
      let services: Services;
      const clock = new ManualClock();

      before(async () => {
        // The lease in config (2 s) is what a WorkerPool uses; the tests below that call the queue
        // directly pass their own (LEASE_MS).
        server = await startServer({ dialect, clock, workers: 0, env: { TASK_LEASE_SECONDS: '2' } });
        services = server.services;
        queue = services.queue;
        client = new Client(server.url, await server.newKey('pro'));
      });
      after(() => server.close());

      /** Queues one task and returns its id; nothing else is runnable when each test starts. */
      async function queueOne(): Promise<string> {
        const fileId = await client.uploadOk(corpusFile('images/sharp/320x240.jpg'));
        return queueCompress(client, fileId);
      }

      it("a worker that stops heart-beating loses its task to another, and the stale worker's late completion is refused", async () => {
        const id = await queueOne();
        const [fromA, ...moreA] = await queue.claim('worker-A', 1, LEASE_MS);
        assert.equal(moreA.length, 0);
        assert.ok(fromA, 'claimed');
        assert.equal(fromA.id, id);
        assert.equal(fromA.attempts, 1);
        assert.equal(fromA.status, 'processing');
        assert.equal(fromA.lease_owner, 'worker-A');
        assert.ok(await queue.heartbeat(id, 'worker-A', LEASE_MS), 'A holds the lease while it is fresh');

        // Before the lease lapses, nothing is reaped and nobody else can claim it.
        assert.deepEqual(await queue.reapExpiredLeases(), { requeued: 0, failed: 0 });
        assert.deepEqual(await queue.claim('worker-B', 1, LEASE_MS), []);

        clock.advance(LEASE_MS + 1_000);
        assert.deepEqual(await queue.reapExpiredLeases(), { requeued: 1, failed: 0 });
        const requeued = await taskRow(services, id);
        assert.equal(requeued.status, 'queued');
        assert.equal(requeued.lease_owner, null);

        const [fromB, ...moreB] = await queue.claim('worker-B', 1, LEASE_MS);
        assert.equal(moreB.length, 0);
        assert.ok(fromB, 'claimed');
        assert.equal(fromB.id, id);
        assert.equal(fromB.attempts, 2);
        assert.equal(fromB.lease_owner, 'worker-B');

        // A wakes up: its heartbeat and its completion are refused and leave nothing behind.
        assert.equal(await queue.heartbeat(id, 'worker-A', LEASE_MS), false);
        const stale = await completeTask(queue, fromA, 'worker-A', [fakeOutput('a')], { result: { quality: 11 } });
        assert.equal(stale, false);
        assert.equal(await queue.fail(fromA, 'worker-A', { code: 'INTERNAL_ERROR', message: 'late', transient: true }), 'lost');
        assert.equal((await outputRows(services, id)).length, 0);
        const stillB = await taskRow(services, id);
        assert.equal(stillB.status, 'processing');
        assert.equal(stillB.lease_owner, 'worker-B');

        assert.ok(await queue.heartbeat(id, 'worker-B', LEASE_MS));
        const output = fakeOutput('b');
        // A result as the worker writes it: the output's format and size, and the kind's own fields.
        const resultB = { format: output.format, size: output.size, quality: 22 };
        assert.equal(await completeTask(queue, fromB, 'worker-B', [output], { result: resultB }), true);
        // Completing twice is refused too: the task is no longer processing.
        assert.equal(await completeTask(queue, fromB, 'worker-B', [fakeOutput('b2')], { result: resultB }), false);

        const done = await taskRow(services, id);
        assert.equal(done.status, 'completed');
        assert.equal(done.attempts, 2);
        assert.equal(done.output_file_id, output.fileId);
        assert.deepEqual(JSON.parse(done.result!), resultB);
        assert.deepEqual(
          (await outputRows(services, id)).map((f) => f.id),
          [output.fileId],
        );
        const api = await client.get(`/api/tasks/${id}`);
        assert.equal(api.body.data.status, 'completed');
        assert.equal(api.body.data.attempts, 2);
      });

      it('a task whose worker dies twice (its lease lapses twice) fails INTERNAL_ERROR, is refunded and is never claimed a third time', async () => {
        const id = await queueOne();
        const before = await monthlyUsed(client);
        assert.ok(MAX_LOST_LEASES < MAX_ATTEMPTS, 'the poison-task rule is stricter than the attempts limit');
        for (let death = 1; death <= MAX_LOST_LEASES; death++) {
          const [claimed] = await queue.claim(`worker-${death}`, 1, LEASE_MS);
          assert.ok(claimed, 'claimed');
          assert.equal(claimed.id, id);
          assert.equal(claimed.attempts, death, 'the claim counts the attempt');
          // The worker dies: nothing heart-beats, the lease lapses and the reaper finds it.
          clock.advance(LEASE_MS + 1_000);
          const reaped = await queue.reapExpiredLeases();
          assert.deepEqual(reaped, death < MAX_LOST_LEASES ? { requeued: 1, failed: 0 } : { requeued: 0, failed: 1 });
        }
        const failed = await taskRow(services, id);
        assert.equal(failed.status, 'failed');
        assert.equal(failed.error_code, 'INTERNAL_ERROR');
        assert.match(failed.error_message!, /stopped responding 2 times/);
        assert.equal(failed.lease_owner, null);
        assert.equal(failed.lost_leases, MAX_LOST_LEASES);
        assert.equal(await monthlyUsed(client), before - 1);
        assert.deepEqual(await queue.claim('worker-late', 1, LEASE_MS), [], 'not claimed a third time');
        const api = await client.get(`/api/tasks/${id}`);
        assert.equal(api.body.data.status, 'failed');
        assert.equal(api.body.data.error.code, 'INTERNAL_ERROR');
        assert.equal(api.body.data.attempts, MAX_LOST_LEASES);
      });

      it('lost leases are counted apart from transient faults: a fault and one lapse still leave the task its last attempt', async () => {
        await queueOne();
        const [first] = await queue.claim('worker-fault', 1, LEASE_MS);
        assert.ok(first, 'claimed');
        assert.equal(await queue.fail(first, 'worker-fault', { code: 'INTERNAL_ERROR', message: 'disk hiccup', transient: true }), 'retrying');
        clock.advance(backoffMs(1) + 1);
        const [second] = await queue.claim('worker-dies', 1, LEASE_MS);
        assert.ok(second, 'claimed after the backoff');
        assert.equal(second.attempts, 2);
        clock.advance(LEASE_MS + 1_000);
        assert.deepEqual(await queue.reapExpiredLeases(), { requeued: 1, failed: 0 });
        const [third] = await queue.claim('worker-last', 1, LEASE_MS);
        assert.ok(third, 'the last attempt runs');
        assert.equal(third.attempts, MAX_ATTEMPTS);
        assert.equal(third.lost_leases, 1);
        assert.equal(await completeTask(queue, third, 'worker-last'), true);
      });

      it('a transient failure retries with backoff; after the last attempt the task fails and is refunded', async () => {
        const usedBefore = await monthlyUsed(client);
        const id = await queueOne();
        assert.equal(await monthlyUsed(client), usedBefore + 1, 'queueing charges one task');

        for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
          const [claimed] = await queue.claim('worker-R', 1, LEASE_MS);
          assert.ok(claimed, 'claimed');
          assert.equal(claimed.id, id, `attempt ${attempt} claims the task`);
          assert.equal(claimed.attempts, attempt);
          const outcome = await queue.fail(claimed, 'worker-R', { code: 'INTERNAL_ERROR', message: 'x', transient: true });
          if (attempt === MAX_ATTEMPTS) {
            assert.equal(outcome, 'failed');
            break;
          }
          assert.equal(outcome, 'retrying');
          const row = await taskRow(services, id);
          assert.equal(row.status, 'queued');
          assert.equal(row.lease_owner, null);
          assert.equal(row.error_code, 'INTERNAL_ERROR');
          const wait = row.run_at - clock.now();
          assert.ok(wait > 0 && wait <= backoffMs(attempt), `run_at is ${wait} ms ahead`);
          assert.equal((await client.get(`/api/tasks/${id}`)).body.data.status, 'queued');
          // Not claimable until the clock passes run_at.
          assert.deepEqual(await queue.claim('worker-R', 1, LEASE_MS), []);
          clock.advance(Math.floor(wait / 2));
          assert.deepEqual(await queue.claim('worker-R', 1, LEASE_MS), [], 'still backing off');
          clock.advance(backoffMs(attempt));
        }
        // The backoff grows between attempts.
        assert.ok(backoffMs(2) > backoffMs(1));

        const failed = await taskRow(services, id);
        assert.equal(failed.status, 'failed');
        assert.equal(failed.attempts, MAX_ATTEMPTS);
        assert.equal(failed.error_code, 'INTERNAL_ERROR');
        assert.equal(failed.charged, 0);
        assert.equal(await monthlyUsed(client), usedBefore, 'an internal failure is refunded');
        const api = await client.get(`/api/tasks/${id}`);
        assert.equal(api.body.data.status, 'failed');
        assert.equal(api.body.data.error.code, 'INTERNAL_ERROR');
        assert.deepEqual(await queue.claim('worker-R', 1, LEASE_MS), []);
      });

      it('an input fault fails at once, without retry or refund', async () => {
        const usedBefore = await monthlyUsed(client);
        const id = await queueOne();
        const [claimed] = await queue.claim('worker-I', 1, LEASE_MS);
        assert.ok(claimed, 'claimed');
        assert.equal(claimed.id, id);
        assert.equal(await queue.fail(claimed, 'worker-I', { code: 'INVALID_IMAGE', message: 'not an image', transient: false }), 'failed');
        const failed = await taskRow(services, id);
        assert.equal(failed.status, 'failed');
        assert.equal(failed.attempts, 1);
        assert.equal(failed.error_code, 'INVALID_IMAGE');
        assert.equal(failed.lease_owner, null);
        assert.equal(await monthlyUsed(client), usedBefore + 1, 'an input fault is not refunded');
        clock.advance(10 * 60_000);
        assert.deepEqual(await queue.claim('worker-I', 1, LEASE_MS), []);
        const api = await client.get(`/api/tasks/${id}`);
        assert.equal(api.body.data.status, 'failed');
        assert.deepEqual(api.body.data.error, { code: 'INVALID_IMAGE', message: 'not an image' });
      });

      it('cancels a queued task once; a canceled task is never claimed', async () => {
        const id = await queueOne();
        const canceled = await client.request('DELETE', `/api/tasks/${id}`);
        assert.equal(canceled.status, 200, JSON.stringify(canceled.body));
        assert.equal(canceled.body.data.taskId, id);
        assert.equal(canceled.body.data.status, 'canceled');

        const again = await client.request('DELETE', `/api/tasks/${id}`);
        assert.equal(again.status, 409, JSON.stringify(again.body));
        assert.equal(again.body.success, false);
        assert.equal(again.body.error.code, 'TASK_NOT_CANCELABLE');

        clock.advance(60_000);
        assert.deepEqual(await queue.claim('worker-C', 10, LEASE_MS), []);
        assert.deepEqual(await queue.reapExpiredLeases(), { requeued: 0, failed: 0 });
        assert.equal((await taskRow(services, id)).status, 'canceled');
      });

      it('canceling a running task takes its lease: heartbeat and completion are refused', async () => {
        const id = await queueOne();
        const [claimed] = await queue.claim('worker-D', 1, LEASE_MS);
        assert.ok(claimed, 'claimed');
        assert.equal(claimed.id, id);
        const canceled = await client.request('DELETE', `/api/tasks/${id}`);
        assert.equal(canceled.status, 200, JSON.stringify(canceled.body));
        assert.equal(canceled.body.data.status, 'canceled');
        assert.equal(await queue.heartbeat(id, 'worker-D', LEASE_MS), false);
        assert.equal(await completeTask(queue, claimed, 'worker-D', [fakeOutput('d')]), false);
        assert.equal((await outputRows(services, id)).length, 0);
        assert.equal((await taskRow(services, id)).status, 'canceled');
        clock.advance(LEASE_MS * 2);
        assert.deepEqual(await queue.reapExpiredLeases(), { requeued: 0, failed: 0 });
        assert.deepEqual(await queue.claim('worker-D', 10, LEASE_MS), []);
      });

      it('a task whose scratch directory cannot be made goes back to the queue, and nothing renews its lease after', async () => {
        // pdf-to-images rasterises into a scratch directory first thing.
        const pdf = await client.uploadOk(simplePdf(), 'one-page.pdf');
        const queued = await client.post('/api/process/pdf-to-images', { fileId: pdf });
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        const id: string = queued.body.data.taskId;
        const pool = new WorkerPool(services, 1);
        const tmpdir = process.env.TMPDIR;
        process.env.TMPDIR = '/nonexistent/imgapi-queue-test'; // the scratch directory cannot be made
        try {
          pool.start();
          const deadline = Date.now() + 10_000;
          while ((await taskRow(services, id)).attempts === 0 || (await taskRow(services, id)).status === 'processing' || pool.busy > 0) {
            assert.ok(Date.now() < deadline, 'the pool did not run the task');
            await sleep(20);
          }
          await pool.stop(0);
        } finally {
          if (tmpdir === undefined) delete process.env.TMPDIR;
          else process.env.TMPDIR = tmpdir;
          await pool.stop(0);
        }
        // A fault of this machine, not of the input: retried later, its lease given up.
        const failed = await taskRow(services, id);
        assert.equal(failed.status, 'queued');
        assert.equal(failed.attempts, 1);
        assert.equal(failed.lease_owner, null);
        // Nothing renews the lease any more: the run ended (pool.stop waited for it), and its
        // heartbeat with it; a heartbeat renews only a processing task its worker still holds.
        clock.advance(10 * 60_000); // past the retry's backoff
        const [again] = await queue.claim('worker-F', 1, LEASE_MS);
        assert.ok(again, 'claimed');
        assert.equal(again.id, id);
        assert.equal(again.attempts, 2);
        assert.equal(await completeTask(queue, again, 'worker-F'), true);
      });

      it('a cancel that commits while a worker fails or completes the task wins: the task stays canceled', async () => {
        for (const finish of ['fail-transient', 'fail-input', 'complete'] as const) {
          const id = await queueOne();
          const [claimed] = await queue.claim('worker-E', 1, LEASE_MS);
          assert.ok(claimed, 'claimed');
          assert.equal(claimed.id, id);
          const run = () =>
            finish === 'complete'
              ? completeTask(queue, claimed, 'worker-E', [fakeOutput('e')])
              : queue.fail(claimed, 'worker-E', {
                  code: finish === 'fail-input' ? 'INVALID_IMAGE' : 'INTERNAL_ERROR',
                  message: 'x',
                  transient: finish === 'fail-transient',
                });
          let outcome: unknown;
          if (dialect === 'postgres') {
            // The cancel holds the row, uncommitted, while the worker reports: the worker's
            // transaction must wait for it and then see the task canceled.
            const other = new pg.Client({ connectionString: server.databaseUrl });
            await other.connect();
            try {
              await other.query('BEGIN');
              await other.query(`UPDATE tasks SET status = 'canceled', lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`, [id]);
              const blocker: number = (await other.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
              const pending = run();
              // Commit only once the worker's transaction waits on the cancel's row lock.
              const watcher = new pg.Client({ connectionString: server.databaseUrl });
              await watcher.connect();
              try {
                const deadline = Date.now() + 10_000;
                while (
                  (await watcher.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [blocker])).rows[0]
                    .n === 0
                ) {
                  assert.ok(Date.now() < deadline, "the worker's transaction never waited for the cancel");
                  await sleep(10);
                }
              } finally {
                await watcher.end();
              }
              await other.query('COMMIT');
              outcome = await pending;
            } finally {
              await other.end();
            }
          } else {
            // SQLite has one writer: the cancel simply lands first.
            assert.equal((await client.request('DELETE', `/api/tasks/${id}`)).status, 200);
            outcome = await run();
          }
          assert.equal(outcome, finish === 'complete' ? false : 'lost', finish);
          const row = await taskRow(services, id);
          assert.equal(row.status, 'canceled', `${finish}: a canceled task became ${row.status}`);
          assert.equal((await outputRows(services, id)).length, 0);
          clock.advance(10 * 60_000);
          assert.deepEqual(await queue.claim('worker-E', 10, LEASE_MS), [], finish);
        }
      });
    });
  });
}
