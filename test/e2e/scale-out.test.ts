// Scale-out on one machine: PostgreSQL and an S3 server (s3rver) shared by two API-only
// processes (`serve --role api`) and two worker processes (`worker`), each with a DATA_DIR of
// its own. 400 small tasks are queued through both APIs; one worker is killed with SIGKILL in
// the middle. Every task must complete exactly once: one output row and one output object each,
// none lost, none duplicated. Prints the throughput and how many tasks were claimed again.
//
// The processes run the build (dist/); it is rebuilt first when src/ is newer.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { Client, DIALECTS, REPO_ROOT, corpusFile, freshDatabase, tempDir } from '../helpers.js';
import { startS3rver, type S3Server } from '../s3rver.js';
import { BUILT_MAIN, freePort, startProc, waitFor, type Proc } from './processes.js';

const TASKS = 400;
const FILES = 10;
const BATCH = 100;
const KILL_AFTER_COMPLETED = 120;
const LEASE_SECONDS = 3;
/** Slow on purpose: idle workers must be woken by NOTIFY from the API processes, not by polling. */
const POLL_MS = 20_000;
const MAIN_JS = BUILT_MAIN;

/** Rebuilds dist/ when a source file is newer than it (CI's setup has built it already). */
function ensureBuilt(): void {
  let newest = 0;
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts')) newest = Math.max(newest, fs.statSync(full).mtimeMs);
    }
  };
  walk(path.join(REPO_ROOT, 'src'));
  if (fs.existsSync(MAIN_JS) && fs.statSync(MAIN_JS).mtimeMs >= newest) return;
  const tsc = spawnSync(process.execPath, [path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  });
  assert.equal(tsc.status, 0, `the build failed:\n${tsc.stdout}${tsc.stderr}`);
}

describe(
  'scale-out: two API processes, two workers, PostgreSQL and S3',
  { skip: !DIALECTS.includes('postgres') && 'needs PostgreSQL (TEST_DIALECTS)' },
  () => {
    let s3: S3Server;
    let database: { url: string; drop: () => Promise<void> };
    let db: pg.Client;
    const dirs: string[] = [];
    const procs: Proc[] = [];

    before(async () => {
      ensureBuilt();
      const root = tempDir('imgapi-scale-');
      dirs.push(root);
      [s3, database] = await Promise.all([startS3rver(), freshDatabase('postgres', root)]);
      db = new pg.Client({ connectionString: database.url });
      await db.connect();
    });

    after(async () => {
      for (const proc of procs) if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
      await Promise.all(procs.map((p) => p.exited));
      await db?.end();
      await database?.drop();
      await s3?.stop();
      for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
    });

    it(`completes ${TASKS} tasks exactly once while a worker is killed`, async () => {
      const plansFile = path.join(dirs[0]!, 'plans.json');
      fs.writeFileSync(
        plansFile,
        JSON.stringify({ max: { requestsPerSecond: 100_000, monthlyTasks: 1_000_000, dailyBatchFiles: 1_000_000, maxQueuedTasks: 100_000 } }),
      );
      /** Each process gets a DATA_DIR of its own: nothing is shared but PostgreSQL and the bucket. */
      const envFor = (name: string, extra: Record<string, string> = {}): Record<string, string> => {
        const dataDir = path.join(dirs[0]!, name);
        fs.mkdirSync(dataDir, { recursive: true });
        return {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? dataDir,
          DATA_DIR: dataDir,
          DATABASE_URL: database.url,
          PLANS_FILE: plansFile,
          TASK_LEASE_SECONDS: String(LEASE_SECONDS),
          QUEUE_POLL_MS: String(POLL_MS),
          WORKER_CONCURRENCY: '4',
          IMAGE_THREADS: '1',
          LOG_LEVEL: 'warn',
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
          ...s3.env,
          ...extra,
        };
      };

      // Schema and an account, as an operator would: the CLI against the shared database.
      const cli = (args: string[]) => {
        const run = spawnSync(process.execPath, [MAIN_JS, ...args], { cwd: REPO_ROOT, env: envFor('cli'), encoding: 'utf8' });
        assert.equal(run.status, 0, `imgapi ${args.join(' ')}: ${run.stderr}`);
        return run.stdout.trim();
      };
      cli(['migrate']);
      cli(['users', 'create', '--email', 'scale@example.com', '--plan', 'max']);
      const key = cli(['keys', 'create', '--email', 'scale@example.com', '--name', 'scale-out']);

      const ports = [await freePort(), await freePort()];
      const apis = ports.map((port, i) =>
        startProc(
          `api${i + 1}`,
          ['serve', '--role', 'api'],
          envFor(`api${i + 1}`, { PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: `http://127.0.0.1:${port}` }),
          'build',
        ),
      );
      // The victim's connections carry a name of their own, so the test can see them gone after the kill.
      const workers = [1, 2].map((i) =>
        startProc(
          `worker${i}`,
          ['worker'],
          envFor(`worker${i}`, { LOG_LEVEL: 'info', DATABASE_URL: `${database.url}?application_name=imgapi-worker${i}` }),
          'build',
        ),
      );
      procs.push(...apis, ...workers);
      const clients = ports.map((port) => new Client(`http://127.0.0.1:${port}`, key));
      for (const [i, client] of clients.entries()) {
        await waitFor(`api${i + 1} to answer /readyz`, 60_000, async () => {
          if (apis[i]!.child.exitCode !== null) throw new Error(`api${i + 1} exited: ${apis[i]!.output()}`);
          return (await client.get('/readyz').catch(() => undefined))?.status === 200 ? true : undefined;
        });
      }
      const workerIds = await Promise.all(
        workers.map((w) =>
          waitFor(`${w.name} to start`, 60_000, () => {
            if (w.child.exitCode !== null) throw new Error(`${w.name} exited: ${w.output()}`);
            return w.logs.find((l) => l.msg === 'imgapi worker started')?.workerId as string | undefined;
          }),
        ),
      );

      // Inputs through both APIs; then the tasks, in batches alternating between them.
      const png = fs.readFileSync(corpusFile('images/sharp/2x2_fdcce6.png'));
      const fileIds: string[] = [];
      for (let i = 0; i < FILES; i++) fileIds.push(await clients[i % 2]!.uploadOk(png, `in-${i}.png`));
      const started = Date.now();
      const taskIds: string[] = [];
      for (let b = 0; b < TASKS / BATCH; b++) {
        const batch = Array.from({ length: BATCH }, (_, i) => fileIds[(b * BATCH + i) % FILES]!);
        const response = await clients[b % 2]!.post('/api/process/batch/convert', { fileIds: batch, format: 'webp', quality: 60 });
        assert.equal(response.status, 202, JSON.stringify(response.body));
        taskIds.push(...response.body.data.tasks.map((t: { taskId: string }) => t.taskId));
      }
      const queuedIn = Date.now() - started;

      const count = async (where: string, params: unknown[] = []) =>
        Number((await db.query(`SELECT count(*) AS n FROM tasks WHERE ${where}`, params)).rows[0].n);
      // Idle workers poll every 20 s: a task starting well before that means the NOTIFY of an API
      // process woke a worker process.
      await waitFor('the first task to start', 15_000, async () => ((await count('started_at IS NOT NULL')) > 0 ? true : undefined));
      const firstStart = Number((await db.query('SELECT min(started_at) - min(created_at) AS ms FROM tasks')).rows[0].ms);
      assert.ok(firstStart < POLL_MS / 2, `the first task started ${firstStart} ms after it was queued`);

      // Kill one worker in the middle of the run, while it holds leases.
      await waitFor(`${KILL_AFTER_COMPLETED} completed tasks`, 120_000, async () =>
        (await count("status = 'completed'")) >= KILL_AFTER_COMPLETED ? true : undefined,
      );
      const victim = workers[0]!;
      const sessions = async () =>
        Number((await db.query('SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1', ['imgapi-worker1'])).rows[0].n);
      assert.ok((await sessions()) > 0, 'worker1 has sessions named after it (else waiting for them to close proves nothing)');
      victim.child.kill('SIGKILL');
      await victim.exited;
      // A COMMIT already on the wire lands or not: once PostgreSQL has closed every session of the
      // victim, nothing more comes from it.
      await waitFor("the killed worker's sessions to close", 30_000, async () => ((await sessions()) === 0 ? true : undefined));
      const orphaned = (await db.query("SELECT id FROM tasks WHERE status = 'processing' AND lease_owner = $1", [workerIds[0]])).rows.map(
        (r) => r.id as string,
      );
      const completedAtKill = await count("status = 'completed'");

      await waitFor(`all ${TASKS} tasks to finish`, 150_000, async () => {
        if (workers[1]!.child.exitCode !== null) throw new Error(`worker2 exited: ${workers[1]!.output()}`);
        return (await count("status IN ('queued', 'processing')")) === 0 ? true : undefined;
      });
      const seconds = (Date.now() - started) / 1000;

      // Exactly once: every task completed, one output row and one output object each.
      const tasks = (await db.query('SELECT id, status, attempts, output_file_id, error_code FROM tasks')).rows;
      assert.equal(tasks.length, TASKS);
      assert.deepEqual(new Set(tasks.map((t) => t.id)), new Set(taskIds));
      const notCompleted = tasks.filter((t) => t.status !== 'completed');
      assert.deepEqual(notCompleted, [], 'every task completed');
      const outputs = (await db.query("SELECT id, task_id, output_index, storage_key FROM files WHERE origin = 'output'")).rows;
      assert.equal(outputs.length, TASKS, 'one output row per task');
      assert.equal(new Set(outputs.map((o) => o.task_id)).size, TASKS, 'no task has two output rows');
      const outputOf = new Map(outputs.map((o) => [o.task_id as string, o]));
      for (const task of tasks) assert.equal(outputOf.get(task.id)?.id, task.output_file_id, `${task.id}: its output row`);
      const objects = await s3.listKeys('outputs/');
      assert.equal(objects.length, TASKS, 'one output object per task, no strays');
      assert.deepEqual(new Set(objects), new Set(taskIds.map((id) => `outputs/${id}/0`)));
      // Spot-check outputs through the other API than the one that queued them.
      for (const id of [taskIds[0]!, taskIds[TASKS - 1]!, ...orphaned.slice(0, 2)]) {
        const task = await clients[1]!.waitForTask(id);
        const bytes = await clients[0]!.download(task.outputFileId);
        assert.equal(bytes.subarray(8, 12).toString('latin1'), 'WEBP');
        assert.equal(bytes.length, task.result.size);
      }

      // The killed worker's tasks ran again elsewhere.
      const attemptsOf = new Map(tasks.map((t) => [t.id as string, Number(t.attempts)]));
      for (const id of orphaned) assert.ok(attemptsOf.get(id)! >= 2, `${id} was claimed again`);
      const reclaimed = tasks.filter((t) => Number(t.attempts) > 1).length;
      assert.ok(reclaimed >= orphaned.length);

      console.log(
        `scale-out: ${TASKS} tasks (queued in ${(queuedIn / 1000).toFixed(1)} s through 2 APIs) completed by 2 workers in ${seconds.toFixed(1)} s ` +
          `→ ${(TASKS / seconds).toFixed(1)} tasks/s; first task started ${firstStart} ms after it was queued; ` +
          `worker1 SIGKILLed at ${completedAtKill} completed holding ${orphaned.length} task(s); re-claimed tasks: ${reclaimed}`,
      );

      // Graceful shutdown of what is left: SIGTERM, exit 0.
      const survivors = [...apis, workers[1]!];
      for (const proc of survivors) proc.child.kill('SIGTERM');
      const exits = await Promise.all(survivors.map((p) => p.exited));
      for (const [i, exit] of exits.entries())
        assert.deepEqual(exit, { code: 0, signal: null }, `${survivors[i]!.name}: ${survivors[i]!.output().slice(-2000)}`);
    });
  },
);
