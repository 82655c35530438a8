// Scenario: queue pickup latency — from a task's enqueue to a worker's claim, while the workers sit
// idle waiting for work. The service runs as a child process (`node dist/src/main.js serve`, API
// and workers in one process, default WORKER_CONCURRENCY and QUEUE_POLL_MS), once on SQLite and
// once on PostgreSQL (a fresh database on BENCH_POSTGRES_URL, default the local `test` server's,
// dropped after). One small job at a time (`rotate` of a 64×64 PNG): submit, long-poll until it
// completed, pause a few milliseconds so every worker is waiting again, repeat. The latency is the
// task's own `startedAt − createdAt`, both stamped by the service's clock (ms), so the client's
// HTTP time is not in it. `createdAt` is stamped as the enqueue transaction starts (lock the
// account, check the input, storage and quota, insert, commit), so the figure holds that
// transaction's round trips (several on PostgreSQL) as well as the wake-up and the claim; the
// submit's HTTP round trip, measured by the client, is reported beside it for scale.
//
// Environment: BENCH_PICKUP_JOBS=200 (per database), BENCH_POSTGRES_URL.
import sharp from 'sharp';
import { ApiClient } from '../lib/client.js';
import { percentile, sleep } from '../lib/pool.js';
import { distIsStale, startService } from '../lib/service.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';
import { freshPostgres } from '../../test/fresh-postgres.js';

const SCENARIO = 'queue pickup';
const POSTGRES_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
};

const PLANS = { max: { requestsPerSecond: 1_000_000, monthlyTasks: 1_000_000_000, maxQueuedTasks: 1_000_000 } };

interface Measured {
  dialect: 'sqlite' | 'postgres';
  samples: number[];
  /** POST /api/process/rotate → 202, as the client saw it, ms. */
  submits: number[];
}

async function measure(ctx: BenchContext, dialect: 'sqlite' | 'postgres', jobs: number, image: Blob): Promise<Measured> {
  const env: Record<string, string> = {};
  if (dialect === 'postgres') {
    const database = await freshPostgres(POSTGRES_URL, 'imgapi_bench_');
    ctx.onCleanup(database.drop);
    env.DATABASE_URL = database.url;
  }
  const service = await startService({ repoRoot: ctx.repoRoot, dir: `${ctx.tmpDir}/${dialect}`, plans: PLANS, env });
  ctx.onCleanup(() => service.stop());
  const client = new ApiClient(service.url, service.key);
  const fileId = await client.upload(image, 'dot.png');
  const samples: number[] = [];
  const submits: number[] = [];
  // A few unmeasured jobs first: connections, prepared statements and sharp are warm.
  for (let i = 0; i < jobs + 5; i++) {
    const sent = performance.now();
    const taskId = await client.submit('rotate', { fileId, angle: 90 });
    if (i >= 5) submits.push(performance.now() - sent);
    const task = await client.waitForTask(taskId);
    if (task.status !== 'completed') throw new Error(`rotate ${task.status}: ${JSON.stringify(task.error)}`);
    if (i >= 5) samples.push(Date.parse(task.startedAt) - Date.parse(task.createdAt));
    await sleep(5 + Math.random() * 10); // every worker back to waiting
  }
  await service.stop();
  return { dialect, samples, submits };
}

export const queuePickup: Scenario = {
  name: 'queue-pickup',
  title: 'Queue pickup latency: enqueue → claim with idle workers waiting, SQLite and PostgreSQL (service clock)',
  async run(ctx): Promise<ScenarioResult> {
    const stale = distIsStale(ctx.repoRoot);
    if (stale) ctx.log(`warning: ${stale}`);
    const jobs = envInt('BENCH_PICKUP_JOBS', 200);
    const png = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#3a7' } })
      .png()
      .toBuffer();
    const image = new Blob([new Uint8Array(png)]);
    const rows: Row[] = [];
    const report: string[] = [];
    const details: Record<string, unknown> = {};
    for (const dialect of ['sqlite', 'postgres'] as const) {
      let result: Measured;
      try {
        result = await measure(ctx, dialect, jobs, image);
      } catch (err) {
        report.push(`${dialect}: failed: ${(err as Error).message}`);
        rows.push({ scenario: SCENARIO, variant: dialect, metric: 'error', value: null, unit: '', note: (err as Error).message.slice(0, 120) });
        continue;
      }
      const p50 = percentile(result.samples, 50);
      const p99 = percentile(result.samples, 99);
      const max = Math.max(...result.samples);
      const submit50 = percentile(result.submits, 50);
      details[dialect] = { samples: result.samples, submits: result.submits };
      report.push(
        `${dialect}: ${result.samples.length} jobs, enqueue → claim p50 ${p50} ms, p99 ${p99} ms, max ${max} ms; the submit's HTTP round trip p50 ${submit50.toFixed(1)} ms`,
      );
      rows.push(
        {
          scenario: SCENARIO,
          variant: `${dialect} p50`,
          metric: 'latency',
          value: p50,
          unit: 'ms',
          note: `${result.samples.length} jobs, one at a time`,
        },
        { scenario: SCENARIO, variant: `${dialect} p99`, metric: 'latency', value: p99, unit: 'ms', note: `max ${max} ms` },
      );
    }
    return { rows, report, details };
  },
};
