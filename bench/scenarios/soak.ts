// Scenario: soak — does the server's memory stay flat over thousands of jobs? BENCH_SOAK_JOBS
// (default 5,000) small mixed jobs over HTTP, 4 in flight, each a whole client round: upload a
// small image (three sizes and formats in turn), queue resize / convert / compress / rotate,
// long-poll to completion, download the output. The service is `node dist/src/main.js serve` on
// SQLite as a child process; its resident memory (VmRSS from /proc, read from outside) is taken
// after 500 jobs — warmed up: code compiled, caches and pools filled — and after the last job.
// Target: RSS after 5,000 ≤ 1.2 × RSS after 500.
//
// Run twice when the bench budget allows: with jemalloc preloaded (LD_PRELOAD, as `npm start`
// does through scripts/start.mjs when libjemalloc2 is installed) and with glibc's malloc (plain
// `node`), to show what the allocator does; the jemalloc run comes first as it is how the service
// is started. A run of 5,000 takes minutes (the server spends 50–140 ms of CPU per job on this
// 2-core machine), so the glibc run only happens when BENCH_BUDGET_SECONDS has room for it.
// Environment: BENCH_SOAK_JOBS=5000, BENCH_SOAK_CHECKPOINT=500, BENCH_SOAK_ALLOCATORS=jemalloc,glibc.
import crypto from 'node:crypto';
import sharp from 'sharp';
import { findJemalloc } from '../../scripts/start.mjs';
import { ApiClient } from '../lib/client.js';
import { runPool } from '../lib/pool.js';
import { cpuSecondsOf, MiB, peakRssOf, rssOf } from '../lib/proc.js';
import { distIsStale, startService } from '../lib/service.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';

const SCENARIO = 'soak';
const IN_FLIGHT = 4;
const TARGET_RATIO = 1.2;

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
};

const PLANS = { max: { requestsPerSecond: 1_000_000, monthlyTasks: 1_000_000_000, maxQueuedTasks: 1_000_000 } };

interface Input {
  name: string;
  blob: Blob;
}

/** Three small photo-like images (a gradient over faint noise, so encoders have some work): JPEG, PNG, WebP. */
async function inputs(): Promise<Input[]> {
  const make = (width: number, height: number) =>
    sharp(crypto.randomBytes(width * height * 3), { raw: { width, height, channels: 3 } }).composite([
      {
        input: Buffer.from(
          `<svg width="${width}" height="${height}"><defs><linearGradient id="g"><stop offset="0" stop-color="#c33"/><stop offset="1" stop-color="#33c"/></linearGradient></defs><rect width="100%" height="100%" fill="url(#g)" opacity="0.85"/></svg>`,
        ),
      },
    ]);
  return [
    { name: 'photo.jpg', blob: new Blob([new Uint8Array(await make(480, 360).jpeg({ quality: 85 }).toBuffer())]) },
    { name: 'shot.png', blob: new Blob([new Uint8Array(await make(400, 300).png().toBuffer())]) },
    { name: 'pic.webp', blob: new Blob([new Uint8Array(await make(320, 320).webp({ quality: 80 }).toBuffer())]) },
  ];
}

const JOBS: [string, Record<string, unknown>][] = [
  ['resize', { width: 320, format: 'webp' }],
  ['convert', { format: 'png' }],
  ['compress', { quality: 70 }],
  ['rotate', { angle: 90 }],
];

interface SoakRun {
  allocator: 'jemalloc' | 'glibc';
  jobs: number;
  checkpoint: number;
  rssAtCheckpoint: number;
  rssAtEnd: number;
  peakRss: number;
  seconds: number;
  cpuMsPerJob: number;
  failed: number;
}

async function soak(
  ctx: BenchContext,
  allocator: 'jemalloc' | 'glibc',
  library: string | undefined,
  jobs: number,
  checkpoint: number,
  files: Input[],
) {
  // startService preloads jemalloc unless told not to.
  const env: Record<string, string> = library ? { LD_PRELOAD: library } : { IMGAPI_JEMALLOC: '0' };
  const service = await startService({ repoRoot: ctx.repoRoot, dir: `${ctx.tmpDir}/${allocator}`, plans: PLANS, env });
  ctx.onCleanup(() => service.stop());
  const client = new ApiClient(service.url, service.key);
  let done = 0;
  let failed = 0;
  let rssAtCheckpoint = NaN;
  let cpuAtCheckpoint = NaN;
  const started = performance.now();
  await runPool(jobs, IN_FLIGHT, async (index) => {
    const file = files[index % files.length]!;
    const [kind, options] = JOBS[Math.floor(index / files.length) % JOBS.length]!;
    const fileId = await client.upload(file.blob, file.name);
    const task = await client.waitForTask(await client.submit(kind, { fileId, ...options }));
    if (task.status === 'completed') await client.download(task.outputFileId);
    else failed++;
    done++;
    if (done === checkpoint) {
      rssAtCheckpoint = rssOf(service.pid) ?? NaN;
      cpuAtCheckpoint = cpuSecondsOf(service.pid) ?? NaN;
    }
    if (done % 1000 === 0) ctx.log(`${allocator}: ${done}/${jobs} jobs, RSS ${((rssOf(service.pid) ?? 0) / MiB).toFixed(0)} MiB`);
  });
  const run: SoakRun = {
    allocator,
    jobs,
    checkpoint,
    rssAtCheckpoint,
    rssAtEnd: rssOf(service.pid) ?? NaN,
    peakRss: peakRssOf(service.pid) ?? NaN,
    seconds: (performance.now() - started) / 1000,
    cpuMsPerJob: (((cpuSecondsOf(service.pid) ?? NaN) - cpuAtCheckpoint) * 1000) / (jobs - checkpoint),
    failed,
  };
  await service.stop();
  return run;
}

export const soakScenario: Scenario = {
  name: 'soak',
  title: 'Soak: server RSS after 500 and after 5,000 small mixed jobs over HTTP (target ≤ 1.2×), with jemalloc and with glibc malloc',
  async run(ctx): Promise<ScenarioResult> {
    const stale = distIsStale(ctx.repoRoot);
    if (stale) ctx.log(`warning: ${stale}`);
    const jobs = envInt('BENCH_SOAK_JOBS', 5000);
    const checkpoint = Math.min(envInt('BENCH_SOAK_CHECKPOINT', 500), Math.max(1, Math.floor(jobs / 10)));
    const files = await inputs();
    const library = findJemalloc();
    const wanted = (process.env.BENCH_SOAK_ALLOCATORS ?? 'jemalloc,glibc').split(',');
    const all: ['jemalloc' | 'glibc', string | undefined][] = library
      ? [
          ['jemalloc', library],
          ['glibc', undefined],
        ]
      : [['glibc', undefined]];
    const plan = all.filter(([name]) => wanted.includes(name));
    const runs: SoakRun[] = [];
    const report: string[] = [];
    if (!library) report.push('libjemalloc2 is not installed (node scripts/setup.mjs installs it as root): glibc malloc only');
    for (const [allocator, lib] of plan) {
      // The second run only when the first's duration fits in what is left of the budget.
      if (runs.length && ctx.secondsLeft() < runs[0]!.seconds * 1.2 + 10) {
        report.push(`${allocator}: skipped, the bench budget has ${Math.max(0, ctx.secondsLeft()).toFixed(0)} s left (BENCH_BUDGET_SECONDS)`);
        continue;
      }
      ctx.log(`${allocator}: ${jobs} jobs, ${IN_FLIGHT} in flight`);
      runs.push(await soak(ctx, allocator, lib, jobs, checkpoint, files));
    }
    const rows: Row[] = [];
    for (const run of runs) {
      const ratio = run.rssAtEnd / run.rssAtCheckpoint;
      const line = `${run.allocator}: RSS ${(run.rssAtCheckpoint / MiB).toFixed(0)} MiB after ${run.checkpoint} jobs, ${(run.rssAtEnd / MiB).toFixed(0)} MiB after ${run.jobs} (${ratio.toFixed(2)}×), peak ${(run.peakRss / MiB).toFixed(0)} MiB; ${(run.jobs / run.seconds).toFixed(0)} jobs/s, ${run.cpuMsPerJob.toFixed(1)} ms server CPU per job${run.failed ? `, ${run.failed} jobs failed` : ''}`;
      report.push(line);
      rows.push(
        {
          scenario: SCENARIO,
          variant: `${run.allocator}: RSS after ${run.jobs} / after ${run.checkpoint}`,
          metric: 'rss ratio',
          value: ratio,
          unit: '×',
          target: { on: 'value', op: '<=', threshold: TARGET_RATIO },
          peakRssBytes: run.peakRss,
          note: `${(run.rssAtCheckpoint / MiB).toFixed(0)} → ${(run.rssAtEnd / MiB).toFixed(0)} MiB`,
          extra: { ...run },
        },
        {
          scenario: SCENARIO,
          variant: `${run.allocator}: RSS after ${run.jobs} jobs`,
          metric: 'rss',
          value: run.rssAtEnd / MiB,
          unit: 'MiB',
          note: `${(run.jobs / run.seconds).toFixed(0)} jobs/s, ${IN_FLIGHT} in flight${run.failed ? `, ${run.failed} failed` : ''}`,
        },
      );
    }
    return { rows, report, details: { runs } };
  },
};
