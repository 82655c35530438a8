// The real server as a child process, killed with SIGKILL in the middle of a run and started
// again on the same data directory and database: every task completes exactly once.
// Needs the compiled build (dist/), which `npm test` makes first; run `npm run build` before
// running this file alone.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import sharp from 'sharp';
import { loadConfig } from '../../src/config.js';
import { createServices } from '../../src/services.js';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { Client, DIALECTS, REPO_ROOT, corpusFile, freshDatabase, nodeOptions, sleep, tempDir } from '../helpers.js';
import { freePort } from './processes.js';

const MAIN = path.join(REPO_ROOT, 'dist/src/main.js');
// Enough that some complete before the kill, some run across it and some start only after the restart.
const TASKS = 10;

interface Child {
  process: ChildProcess;
  output: string[];
  exited: Promise<void>;
}

function startChild(env: Record<string, string>): Child {
  const child = spawn(process.execPath, [MAIN, 'serve'], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...nodeOptions(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  child.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  // Should this test process die without running after(), take the server down with it.
  const orphan = () => child.kill('SIGKILL');
  process.once('exit', orphan);
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else
      child.once('exit', () => {
        process.off('exit', orphan);
        resolve();
      });
  });
  return { process: child, output, exited };
}

const alive = (child: Child): boolean => child.process.exitCode === null && child.process.signalCode === null;

async function kill(child: Child): Promise<void> {
  if (!alive(child)) return;
  child.process.kill('SIGKILL');
  await child.exited;
}

async function waitReady(child: Child, url: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (!alive(child)) throw new Error(`the server exited (${child.process.exitCode ?? child.process.signalCode}):\n${child.output.join('')}`);
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`the server did not answer within 20 s:\n${child.output.join('')}`);
}

type Counts = { queued: number; processing: number; completed: number; failed: number; canceled: number };

async function readBatch(client: Client, batchId: string): Promise<{ counts: Counts; tasks: { status: string; startedAt?: string }[] }> {
  const response = await client.get(`/api/batches/${batchId}`);
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body.data;
}

const batchCounts = async (client: Client, batchId: string): Promise<Counts> => (await readBatch(client, batchId)).counts;

for (const dialect of DIALECTS) {
  describe(`restart (${dialect})`, () => {
    const dataDir = tempDir('imgapi-restart-');
    let drop: (() => Promise<void>) | undefined;
    let env: Record<string, string>;
    const children: Child[] = [];

    before(async () => {
      assert.ok(fs.existsSync(MAIN), `${MAIN} is missing: run "npm run build" first`);
      // The server runs the build while this process runs the sources; say so when they differ.
      const built = fs.statSync(MAIN).mtimeMs;
      const newer = fs
        .readdirSync(path.join(REPO_ROOT, 'src'), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.ts') && fs.statSync(path.join(REPO_ROOT, 'src', f)).mtimeMs > built);
      if (newer.length)
        console.warn(`restart test: dist/ is older than src/ (${newer.slice(0, 3).join(', ')}…): run "npm run build" if the server fails`);
      const database = await freshDatabase(dialect, dataDir);
      drop = database.drop;
      const plansFile = path.join(dataDir, 'plans.json');
      fs.writeFileSync(
        plansFile,
        JSON.stringify({
          max: { requestsPerSecond: 100_000, monthlyTasks: 1_000_000, maxQueuedTasks: 100_000, dailyBatchFiles: 100_000, batchSize: 200 },
        }),
      );
      env = {
        DATA_DIR: dataDir,
        DATABASE_URL: database.url,
        PORT: String(await freePort()),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        TASK_LEASE_SECONDS: '2',
        WORKER_CONCURRENCY: '2',
        QUEUE_POLL_MS: '200',
        PLANS_FILE: plansFile,
      };
    });

    after(async () => {
      for (const child of children) await kill(child);
      await drop?.();
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    it('Restarting the server (SIGKILL) in the middle of a run loses no task', async () => {
      const url = `http://127.0.0.1:${env.PORT}`;
      const setup = await createServices(loadConfig(env), { logger: pino({ level: 'silent' }) });
      let key: string;
      try {
        const account = await createAccount(setup.database, setup.clock, { email: `restart-${dialect}@example.com`, plan: 'max' });
        key = (await createApiKey(setup.database, setup.clock, account.id, 'restart')).key;
      } finally {
        await setup.close();
      }

      const first = startChild(env);
      children.push(first);
      await waitReady(first, url);
      const client = new Client(url, key);
      const fileId = await client.uploadOk(corpusFile('images/sharp/2569067123_aca715a2ee_o.jpg'));
      const batch = await client.post('/api/process/batch/convert', { fileIds: Array.from({ length: TASKS }, () => fileId), format: 'webp' });
      assert.equal(batch.status, 202, JSON.stringify(batch.body));
      const batchId: string = batch.body.data.batchId;
      const taskIds: string[] = batch.body.data.tasks.map((t: { taskId: string }) => t.taskId);

      // Kill it once some tasks are done and another has just started (a task takes about half
      // a second or more, so it is still running when the signal lands).
      let atKill: Counts | undefined;
      const killBy = Date.now() + 60_000;
      while (!atKill) {
        assert.ok(Date.now() < killBy, 'no task completed within 60 s');
        assert.ok(alive(first), `the first server exited:\n${first.output.join('')}`);
        const { counts, tasks } = await readBatch(client, batchId);
        assert.ok(counts.completed < TASKS, 'every task finished before the kill: make the tasks slower');
        const justStarted = tasks.some((t) => t.status === 'processing' && t.startedAt && Date.now() - Date.parse(t.startedAt) < 250);
        if (counts.completed >= 3 && justStarted) atKill = counts;
        else await sleep(25);
      }
      first.process.kill('SIGKILL');
      await first.exited;
      assert.equal(first.process.signalCode, 'SIGKILL');

      const second = startChild(env);
      children.push(second);
      await waitReady(second, url);
      const doneBy = Date.now() + 90_000;
      let counts = await batchCounts(client, batchId);
      while (counts.completed + counts.failed + counts.canceled < TASKS) {
        assert.ok(Date.now() < doneBy, `tasks still open 90 s after the restart: ${JSON.stringify(counts)}`);
        assert.ok(alive(second), `the second server exited:\n${second.output.join('')}`);
        await sleep(200);
        counts = await batchCounts(client, batchId);
      }
      assert.deepEqual(counts, { queued: 0, processing: 0, completed: TASKS, failed: 0, canceled: 0 });

      // Read what was recorded through a fresh set of services on the same database.
      const check = await createServices(loadConfig(env), { logger: pino({ level: 'silent' }) });
      try {
        const db = check.database.db;
        const tasks = await db.selectFrom('tasks').selectAll().where('batch_id', '=', batchId).execute();
        assert.equal(tasks.length, TASKS);
        const outputs = await db.selectFrom('files').select(['id', 'task_id', 'storage_key', 'size']).where('origin', '=', 'output').execute();
        assert.equal(outputs.length, TASKS, 'exactly one output row per task');
        for (const output of outputs) {
          assert.equal((await check.storage.head(output.storage_key))?.size, output.size, `the object of ${output.id} is whole`);
        }
        for (const task of tasks) {
          assert.ok(taskIds.includes(task.id));
          assert.equal(task.status, 'completed', `${task.id}: ${task.status} ${task.error_code ?? ''}`);
          assert.ok(task.attempts >= 1 && task.attempts <= task.max_attempts, `${task.id} attempts ${task.attempts}`);
          assert.equal(task.lease_owner, null);
          const own = outputs.filter((o) => o.task_id === task.id);
          assert.equal(own.length, 1, `${task.id} has ${own.length} output rows`);
          assert.equal(task.output_file_id, own[0]!.id);
        }
        const reclaimed = tasks.filter((t) => t.attempts >= 2);
        console.log(
          `restart (${dialect}): at the kill ${atKill.completed} completed, ${atKill.processing} processing; ` +
            `${reclaimed.length} task(s) re-claimed after the restart`,
        );
        assert.ok(reclaimed.length >= 1, 'the tasks running at the kill should have been re-claimed');

        // A re-claimed task's output is whole and decodes.
        const again = reclaimed[0]!;
        const bytes = await client.download(again.output_file_id!);
        const meta = await sharp(bytes).metadata();
        assert.equal(meta.format, 'webp');
        const result = JSON.parse(again.result!) as { width: number; height: number; size: number };
        assert.deepEqual([meta.width, meta.height], [result.width, result.height]);
        assert.equal(bytes.length, result.size);
      } finally {
        await check.close();
      }
    });
  });
}
