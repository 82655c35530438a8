// Scenario: authenticated status polls. One finished task, then `GET /api/tasks/{id}` with an API
// key from 50 connections for ~10 s: requests per second, p50/p99 latency and the service's CPU
// per request.
//
// The load comes from wrk (Debian package `wrk`, installed by `node scripts/setup.mjs --bench`
// as root), not from Node: a Node client on this 2-core machine spends more CPU per request than
// the service does and would measure itself. wrk runs one thread (the service has one main
// thread; the other core is left to wrk and the kernel) and adds the key with a Lua script.
// The Max plan's rate limit is lifted by the PLANS_FILE, as the other scenarios do, so the
// limiter is exercised (counted, reserved in the database) without refusing anything.
//
// Environment: BENCH_STATUS_SECONDS=10, BENCH_STATUS_CONNECTIONS=50; a CPU profile of the service
// under this load: BENCH_SERVICE_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' (bench/lib/service.ts).
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { ApiClient } from '../lib/client.js';
import { envInt, sleep } from '../lib/pool.js';
import { cpuSecondsOf, loadAverage } from '../lib/proc.js';
import { distIsStale, startService } from '../lib/service.js';
import { parseWrk, requireWrk, runWrk } from '../lib/wrk.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';

const SCENARIO = 'status polls';
const TARGET_RPS = 8000;
const TARGET_P99_MS = 20;
const WARMUP_SECONDS = 2;

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  requireWrk();
  const seconds = envInt('BENCH_STATUS_SECONDS', 10);
  const connections = envInt('BENCH_STATUS_CONNECTIONS', 50);
  const report: string[] = [];
  const stale = distIsStale(ctx.repoRoot);
  if (stale) report.push(`WARNING: ${stale}`);

  const env: Record<string, string> = process.env.BENCH_SERVICE_ENV ? JSON.parse(process.env.BENCH_SERVICE_ENV) : {};
  const service = await startService({
    repoRoot: ctx.repoRoot,
    dir: path.join(ctx.tmpDir, 'service'),
    plans: { max: { requestsPerSecond: 1_000_000 } },
    env,
  });
  ctx.onCleanup(() => service.stop());

  // One finished task: a small PNG converted to WebP.
  const client = new ApiClient(service.url, service.key);
  const png = new Uint8Array(
    await sharp({ create: { width: 64, height: 64, channels: 3, background: '#3a7' } })
      .png()
      .toBuffer(),
  );
  const fileId = await client.upload(new Blob([png], { type: 'image/png' }), 'poll.png');
  const taskId = await client.submit('convert', { fileId, format: 'webp' });
  const task = await client.waitForTask(taskId, 10, 60_000);
  if (task.status !== 'completed') throw new Error(`the task to poll ended ${task.status}`);

  const url = `${service.url}/api/tasks/${taskId}`;
  const script = path.join(ctx.tmpDir, 'status-polls.lua');
  fs.writeFileSync(script, `wrk.method = "GET"\nwrk.headers["x-api-key"] = ${JSON.stringify(service.key)}\n`);
  const wrkArgs = (duration: number) => ['-t1', `-c${connections}`, `-d${duration}s`, '--latency', '-s', script, url];

  ctx.log(`warming up (${WARMUP_SECONDS} s)`);
  await runWrk(wrkArgs(WARMUP_SECONDS));
  await sleep(500);
  ctx.log(`${connections} connections for ${seconds} s`);
  const cpuBefore = cpuSecondsOf(service.pid);
  const result = parseWrk(await runWrk(wrkArgs(seconds)));
  const cpuAfter = cpuSecondsOf(service.pid);
  const cpuUsPerRequest = cpuBefore !== undefined && cpuAfter !== undefined ? ((cpuAfter - cpuBefore) * 1e6) / result.requests : NaN;

  await service.stop();
  report.push(
    `wrk -t1 -c${connections} -d${seconds}s, x-api-key by Lua script, GET /api/tasks/{id} of a completed task; Max plan, requestsPerSecond lifted to 1,000,000`,
  );
  report.push(
    `${result.requests} requests in ${result.seconds.toFixed(1)} s: ${result.rps.toFixed(0)} req/s; latency p50 ${result.p50Ms.toFixed(2)} ms, ` +
      `p90 ${result.p90Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, max ${result.maxMs.toFixed(1)} ms`,
  );
  report.push(
    `service CPU (user + system, all threads) per request: ${cpuUsPerRequest.toFixed(0)} µs; load average after ${loadAverage().join(' ')}`,
  );
  if (result.non2xx) report.push(`WARNING: ${result.non2xx} answers were not 2xx`);
  if (result.socketErrors) report.push(`WARNING: ${result.socketErrors}`);

  const row = (metric: string, value: number, unit: string, target?: Row['target']): Row => ({
    scenario: SCENARIO,
    variant: `service, ${connections} connections`,
    metric,
    value,
    unit,
    target,
  });
  return {
    rows: [
      {
        ...row('throughput', result.rps, 'req/s', { on: 'value', op: '>=', threshold: TARGET_RPS }),
        note: result.non2xx ? `${result.non2xx} non-2xx` : undefined,
      },
      row('p99', result.p99Ms, 'ms', { on: 'value', op: '<=', threshold: TARGET_P99_MS }),
      row('p50', result.p50Ms, 'ms'),
      row('CPU per request', cpuUsPerRequest, 'µs'),
    ],
    report,
    details: { connections, durationSeconds: seconds, ...result, cpuUsPerRequest },
  };
}

export const statusPolls: Scenario = {
  name: 'status-polls',
  title: 'Authenticated GET /api/tasks/{id} of a finished task, 50 connections (wrk): req/s, p50/p99, CPU per request',
  run,
};
