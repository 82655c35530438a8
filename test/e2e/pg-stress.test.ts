// PostgreSQL under concurrent load across processes: two API-only and two worker-only processes
// share one database (and one data directory). Six clients of two accounts queue 300 tasks, in
// single jobs and batches, while the workers complete others, and meanwhile cancel tasks and
// batches, delete inputs and outputs and re-upload, with files expiring every few seconds so the
// retention sweep runs among them. Every transaction takes its locks in the one order of
// src/accounts/quota.ts: no request may answer 5xx, no process may log a deadlock or an error,
// PostgreSQL must count no deadlock (the retry would hide one from the clients), and storage
// used must equal the live files plus open reservations at the end.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import { createServices, type Services } from '../../src/services.js';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { Client, DIALECTS, corpusFile, freshDatabase, sleep, tempDir, type ApiResponse } from '../helpers.js';
import { ledgerMismatches, seededRandom } from '../limits/storage-ledger.js';
import { freePort, startProc, stopProc, waitFor, waitServing, waitWorking, type Proc } from './processes.js';

const TASKS = 300;
const CLIENTS = 6;
const SEED = Number(process.env.STRESS_SEED ?? 20_240_610);

describe(
  'PostgreSQL stress: enqueue, completion, cancel, delete and sweeps across processes',
  { skip: !DIALECTS.includes('postgres') && 'needs PostgreSQL (TEST_DIALECTS)' },
  () => {
    const root = tempDir('imgapi-pgstress-');
    let database: { url: string; drop: () => Promise<void> };
    let services: Services;
    const procs: Proc[] = [];

    before(async () => {
      database = await freshDatabase('postgres', root);
    });

    after(async () => {
      await Promise.all(procs.map((p) => stopProc(p)));
      await services?.close();
      await database?.drop();
      fs.rmSync(root, { recursive: true, force: true });
    });

    it(
      `queues ${TASKS} tasks from ${CLIENTS} clients through 2 APIs while 2 workers complete them: no 5xx, no deadlock`,
      { timeout: 90_000 },
      async () => {
        const started = Date.now();
        const plansFile = path.join(root, 'plans.json');
        // Files live 4 s: inputs and outputs expire and are swept while the load runs. The storage
        // limit binds now and then: jobs refused when full, outputs refused at completion.
        fs.writeFileSync(
          plansFile,
          JSON.stringify({
            pro: {
              requestsPerSecond: 100_000,
              monthlyTasks: 1_000_000,
              dailyBatchFiles: 1_000_000,
              maxQueuedTasks: 100_000,
              retentionSeconds: 4,
              storageBytes: 12_000,
            },
          }),
        );
        const env: Record<string, string> = {
          DATA_DIR: path.join(root, 'data'),
          DATABASE_URL: database.url,
          PLANS_FILE: plansFile,
          UPLOAD_SIGNING_SECRET: 'stress-test-signing-secret-0123456789abcdef',
          TASK_LEASE_SECONDS: '5',
          QUEUE_POLL_MS: '500',
          SWEEP_INTERVAL_SECONDS: '1',
          WORKER_CONCURRENCY: '4',
          IMAGE_THREADS: '1',
          LOG_LEVEL: 'warn',
        };
        services = await createServices(loadConfig(env), { logger: pino({ level: 'silent' }) });
        const keys: string[] = [];
        for (const n of [1, 2]) {
          const account = await createAccount(services.database, services.clock, { email: `stress${n}@example.com`, plan: 'pro' });
          keys.push((await createApiKey(services.database, services.clock, account.id, 'stress')).key);
        }

        // The processes' sessions are named, so the test can see them all gone before reading statistics.
        const procEnv = { ...env, DATABASE_URL: `${database.url}?application_name=imgapi-stress` };
        const ports = [await freePort(), await freePort()];
        const apis = ports.map((port, i) =>
          startProc(`api${i + 1}`, ['serve', '--role', 'api'], {
            ...procEnv,
            PORT: String(port),
            HOST: '127.0.0.1',
            PUBLIC_URL: `http://127.0.0.1:${port}`,
          }),
        );
        const workers = [1, 2].map((i) => startProc(`worker${i}`, ['worker'], { ...procEnv, LOG_LEVEL: 'info' }));
        procs.push(...apis, ...workers);
        await Promise.all([...apis.map((p, i) => waitServing(p, `http://127.0.0.1:${ports[i]}`)), ...workers.map((w) => waitWorking(w))]);
        const startedIn = Date.now() - started;

        const png = fs.readFileSync(corpusFile('images/sharp/2x2_fdcce6.png'));
        const serverErrors: string[] = [];
        const statuses = new Map<string, number>();
        const note = (what: string, response: ApiResponse) => {
          const label = `${what} ${response.status}${response.status >= 400 ? ` ${response.body?.error?.code}` : ''}`;
          statuses.set(label, (statuses.get(label) ?? 0) + 1);
          if (response.status >= 500) serverErrors.push(`${what}: ${response.status} ${JSON.stringify(response.body)}`);
          return response;
        };
        let queued = 0;

        // One client: jobs until the shared count reaches TASKS, mixed with cancels, deletes, uploads.
        const runClient = async (index: number) => {
          const random = seededRandom(SEED + index);
          const pick = <T>(list: T[]): T => list[Math.floor(random() * list.length)]!;
          const client = new Client(`http://127.0.0.1:${ports[Math.floor(index / 2) % 2]}`, keys[index % 2]);
          const inputs: string[] = [];
          const tasks: string[] = [];
          const batches: string[] = [];
          const upload = async () => {
            const response = note('upload', await client.upload(png, `in-${index}.png`));
            if (response.status === 201) inputs.push(response.body.data.fileId);
            else await sleep(100); // full: files expire within seconds
          };
          /** A job on a file that expired or was deleted meanwhile: forget it and upload another. */
          const forget = (response: ApiResponse, fileIds: string[]) => {
            if (response.status === 404 || response.status === 410) for (const id of fileIds) inputs.splice(inputs.indexOf(id), 1);
          };
          while (queued < TASKS) {
            if (inputs.length < 3) {
              await upload();
              continue;
            }
            const r = random();
            if (r < 0.5) {
              const fileId = pick(inputs);
              const response = note('job', await client.post('/api/process/convert', { fileId, format: pick(['webp', 'png', 'jpeg']) }));
              if (response.status === 202) {
                tasks.push(response.body.data.taskId);
                queued++;
              }
              forget(response, [fileId]);
            } else if (r < 0.65) {
              const fileIds = [pick(inputs), pick(inputs), pick(inputs)];
              const response = note('batch', await client.post('/api/process/batch/resize', { fileIds, width: 1 + Math.floor(random() * 8) }));
              if (response.status === 202) {
                batches.push(response.body.data.batchId);
                tasks.push(...response.body.data.tasks.map((t: { taskId: string }) => t.taskId));
                queued += fileIds.length;
              }
              forget(response, [...new Set(fileIds)]);
            } else if (r < 0.75 && tasks.length) {
              note('cancel', await client.request('DELETE', `/api/tasks/${pick(tasks)}`));
            } else if (r < 0.8 && batches.length) {
              note('cancel-batch', await client.request('DELETE', `/api/batches/${pick(batches)}`));
            } else if (r < 0.9 && tasks.length) {
              // Delete an output when the task has one by now.
              const task = note('read', await client.get(`/api/tasks/${pick(tasks)}`));
              const outputId = task.body?.data?.outputFileId;
              if (outputId) note('delete-output', await client.request('DELETE', `/api/files/${outputId}`));
            } else if (r < 0.95) {
              // An input: refused while a task reads it (409), else gone.
              const fileId = pick(inputs);
              const response = note('delete-input', await client.request('DELETE', `/api/files/${fileId}`));
              if (response.status === 204) inputs.splice(inputs.indexOf(fileId), 1);
              forget(response, [fileId]);
            } else {
              await upload();
            }
          }
        };
        await Promise.all(Array.from({ length: CLIENTS }, (_, i) => runClient(i)));
        const queuedIn = Date.now() - started - startedIn;

        const open = async () =>
          Number(
            (
              await services.database.db
                .selectFrom('tasks')
                .select((eb) => eb.fn.countAll().as('n'))
                .where('status', 'in', ['queued', 'processing'])
                .executeTakeFirstOrThrow()
            ).n,
          );
        await waitFor('every task to finish', 40_000, async () => {
          for (const proc of procs) if (!proc.alive()) throw new Error(`${proc.name} exited: ${proc.output().slice(-3000)}`);
          return (await open()) === 0 ? true : undefined;
        });
        // Graceful shutdown (SIGTERM, exit 0); a backend writes its statistics out as it exits, so
        // once no session of the processes is left PostgreSQL's counts below are whole.
        const sessions = async () =>
          Number(
            (
              await sql<{ n: string }>`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'imgapi-stress'`.execute(
                services.database.db,
              )
            ).rows[0]!.n,
          );
        assert.ok((await sessions()) > 0, 'the processes name their sessions (else waiting for them to close proves nothing)');
        for (const proc of procs) proc.child.kill('SIGTERM');
        const exits = await Promise.all(procs.map((p) => p.exited));
        for (const [i, exit] of exits.entries())
          assert.deepEqual(exit, { code: 0, signal: null }, `${procs[i]!.name}: ${procs[i]!.output().slice(-2000)}`);
        await waitFor("the processes' sessions to close", 30_000, async () => ((await sessions()) === 0 ? true : undefined));
        const counts = await services.database.db
          .selectFrom('tasks')
          .select(['status', (eb) => eb.fn.countAll().as('n')])
          .groupBy('status')
          .execute();
        const summary = Object.fromEntries(counts.map((c) => [c.status, Number(c.n)]));
        // PostgreSQL's own count: a deadlock the retry hid from the clients still shows here.
        const { deadlocks } = (
          await sql<{ deadlocks: string }>`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`.execute(services.database.db)
        ).rows[0]!;
        console.log(
          `pg-stress: ${queued} tasks queued by ${CLIENTS} clients in ${(queuedIn / 1000).toFixed(1)} s (processes up in ${(startedIn / 1000).toFixed(1)} s); ` +
            `tasks ${JSON.stringify(summary)}; deadlocks ${deadlocks}; responses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`,
        );

        assert.deepEqual(serverErrors, [], 'no request answers 5xx');
        assert.equal(Number(deadlocks), 0, 'PostgreSQL detected no deadlock');
        for (const proc of procs) {
          assert.doesNotMatch(proc.output(), /deadlock/i, `${proc.name} logged a deadlock`);
          const errors = proc.logs.filter((l) => Number(l.level) >= 50);
          assert.deepEqual(errors, [], `${proc.name} logged errors`);
        }
        assert.ok(queued >= TASKS);
        assert.ok((summary.completed ?? 0) > 0 && (summary.completed ?? 0) + (summary.failed ?? 0) > TASKS / 2, 'most tasks ran');
        const failures = await services.database.db.selectFrom('tasks').select('error_code').distinct().where('status', '=', 'failed').execute();
        assert.deepEqual(
          failures.filter((f) => f.error_code !== 'STORAGE_LIMIT_EXCEEDED'),
          [],
          'tasks fail only for want of storage',
        );
        assert.deepEqual(await ledgerMismatches(services.database.db), [], 'storage used = live files + open reservations');
      },
    );
  },
);
