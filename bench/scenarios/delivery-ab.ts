// Scenario: two builds of the service side by side on delivery misses, to tell a change of a
// tenth of a millisecond per miss from the host's drift (issue #24's remaining items are each
// worth 0.05–0.2 ms; one run of `delivery` is good to ±1 ms).
//
// This checkout's service (A) and another checkout's (B, BENCH_AB_OTHER: a directory with its
// own `npm run build`) run at once on the same files, and are asked for misses in small batches,
// A then B, B then A, alternately: whatever the host does, it does to both within a second. Per
// batch, each side's main thread and libuv's pool (exact, from schedstat) and whole process
// (10 ms ticks) are read; the report is the mean per miss of each, and B − A per pair of batches with its spread.
// Run it with B = this checkout to see the instrument's own noise (B − A should be 0).
//
// Environment: BENCH_AB_OTHER (required; without it the scenario says so and measures nothing),
// BENCH_AB_FORMAT=jpeg, BENCH_AB_PAIRS=24, BENCH_AB_BATCH=16, BENCH_DELIVERY_IN_FLIGHT=4,
// BENCH_DELIVERY_WARMUP=48.
import path from 'node:path';
import { envInt, median, percentile } from '../lib/pool.js';
import { cpuSecondsOf, threadCpuNsOf, threadsCpuNsNamed } from '../lib/proc.js';
import { distIsStale, startService, type Service } from '../lib/service.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';
import { requireWrk, wrkUrlList } from '../lib/wrk.js';
import { ALL_FORMATS, label, prepareInputs, signedPathsOf, type Format } from './delivery.js';

interface AbSide {
  name: 'A' | 'B';
  repoRoot: string;
  service: Service;
  /** Signed path of file `index`'s render. */
  pathOf(index: number): string;
}

interface Batch {
  mainMsPerMiss: number;
  /** libuv's pool: file operations, and sharp's calls into libvips (whose own threads are apart). */
  poolMsPerMiss: number;
  processMsPerMiss: number;
  errors: string[];
}

async function startSide(ctx: BenchContext, name: 'A' | 'B', repoRoot: string, files: string[], format: Format): Promise<AbSide> {
  const service = await startService({
    repoRoot,
    dir: path.join(ctx.tmpDir, `service-${name}`),
    plans: { max: { requestsPerSecond: 1_000_000, monthlyRenders: 1_000_000_000 } },
  });
  ctx.onCleanup(() => service.stop());
  const pathOf = await signedPathsOf(service, files);
  return { name, repoRoot, service, pathOf: (index) => pathOf(format, index) };
}

/** Misses of files first … first + count − 1 on one side, with what its main thread, libuv's pool and process spent. */
async function batch(ctx: BenchContext, side: AbSide, format: Format, first: number, count: number, inFlight: number): Promise<Batch> {
  const { pid } = side.service;
  const paths = Array.from({ length: count }, (_, i) => side.pathOf(first + i));
  let main0: number | undefined;
  let pool0 = NaN;
  let process0: number | undefined;
  let main1: number | undefined;
  let pool1 = NaN;
  let process1: number | undefined;
  const done = await wrkUrlList(side.service.url, paths, {
    inFlight,
    mime: format.mime,
    expectCache: 'miss',
    dir: ctx.tmpDir,
    started: () => {
      main0 = threadCpuNsOf(pid, pid);
      pool0 = threadsCpuNsNamed(pid, 'libuv-worker');
      process0 = cpuSecondsOf(pid);
    },
    stopped: () => {
      main1 = threadCpuNsOf(pid, pid);
      pool1 = threadsCpuNsNamed(pid, 'libuv-worker');
      process1 = cpuSecondsOf(pid);
    },
  });
  return {
    mainMsPerMiss: ((main1 ?? NaN) - (main0 ?? NaN)) / 1e6 / count,
    poolMsPerMiss: (pool1 - pool0) / 1e6 / count,
    processMsPerMiss: (((process1 ?? NaN) - (process0 ?? NaN)) * 1000) / count,
    errors: done.errors,
  };
}

const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
const fmt = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : '—');

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const other = process.env.BENCH_AB_OTHER;
  if (!other) {
    return { rows: [], report: ['skipped: set BENCH_AB_OTHER to another checkout (with its own `npm run build`) to compare against this one'] };
  }
  requireWrk();
  const format = ALL_FORMATS.find((f) => f.key === (process.env.BENCH_AB_FORMAT ?? 'jpeg'));
  if (!format) throw new Error(`BENCH_AB_FORMAT: one of ${ALL_FORMATS.map((f) => f.key).join(', ')}`);
  const pairs = envInt('BENCH_AB_PAIRS', 24);
  const size = envInt('BENCH_AB_BATCH', 16);
  const inFlight = envInt('BENCH_DELIVERY_IN_FLIGHT', 4);
  const warmup = envInt('BENCH_DELIVERY_WARMUP', 48);
  const report: string[] = [];
  for (const root of [ctx.repoRoot, path.resolve(other)]) {
    const stale = distIsStale(root);
    if (stale) report.push(`WARNING (${root}): ${stale}`);
  }

  const inputs = await prepareInputs(ctx, warmup + pairs * size);
  ctx.log(`starting both services and uploading ${inputs.files.length} files to each`);
  const a = await startSide(ctx, 'A', ctx.repoRoot, inputs.files, format);
  const b = await startSide(ctx, 'B', path.resolve(other), inputs.files, format);
  ctx.log(`warming up: ${warmup} misses each`);
  for (const side of [a, b]) {
    const warm = await batch(ctx, side, format, 0, warmup, inFlight);
    if (warm.errors.length) throw new Error(`${side.name} warm-up: ${warm.errors[0]}`);
  }

  const measured: Record<'A' | 'B', Batch[]> = { A: [], B: [] };
  for (let p = 0; p < pairs; p++) {
    const first = warmup + p * size;
    // Each side asks for its own copy of the same files: A then B, then B then A.
    for (const side of p % 2 === 0 ? [a, b] : [b, a]) measured[side.name].push(await batch(ctx, side, format, first, size, inFlight));
  }
  const errors = [...measured.A, ...measured.B].flatMap((r) => r.errors);
  const pick = (side: 'A' | 'B', metric: keyof Omit<Batch, 'errors'>) => measured[side].map((r) => r[metric]);
  const differences = (metric: keyof Omit<Batch, 'errors'>) => measured.B.map((r, i) => r[metric] - measured.A[i]![metric]);
  const summary = (metric: keyof Omit<Batch, 'errors'>) => {
    const d = differences(metric);
    const sd = Math.sqrt(d.reduce((sum, v) => sum + (v - mean(d)) ** 2, 0) / Math.max(1, d.length - 1));
    return {
      a: mean(pick('A', metric)),
      b: mean(pick('B', metric)),
      difference: mean(d),
      medianDifference: median(d),
      quartiles: [percentile(d, 25), percentile(d, 75)],
      standardError: sd / Math.sqrt(d.length),
    };
  };
  const main = summary('mainMsPerMiss');
  const pool = summary('poolMsPerMiss');
  const whole = summary('processMsPerMiss');
  report.push(
    `A: ${ctx.repoRoot}; B: ${path.resolve(other)}; ${label(format)}, ${pairs} pairs of batches of ${size} misses, ${inFlight} in flight, A and B alternately first`,
    `main thread per miss: A ${fmt(main.a, 3)} ms, B ${fmt(main.b, 3)} ms; B − A ${fmt(main.difference, 3)} ms ± ${fmt(main.standardError, 3)} (standard error), median ${fmt(main.medianDifference, 3)}, quartiles ${main.quartiles.map((q) => fmt(q, 3)).join(' … ')}`,
    `libuv's pool per miss: A ${fmt(pool.a, 3)} ms, B ${fmt(pool.b, 3)} ms; B − A ${fmt(pool.difference, 3)} ms ± ${fmt(pool.standardError, 3)}, median ${fmt(pool.medianDifference, 3)}`,
    `whole process per miss: A ${fmt(whole.a)} ms, B ${fmt(whole.b)} ms; B − A ${fmt(whole.difference)} ms ± ${fmt(whole.standardError)}, median ${fmt(whole.medianDifference)}`,
    ...(errors.length ? [`${errors.length} errors, the first: ${errors[0]}`] : []),
  );
  const scenario = `delivery A/B ${label(format)}`;
  const rows: Row[] = [
    {
      scenario,
      variant: 'main thread per miss, B − A',
      metric: 'difference',
      value: main.difference,
      unit: 'ms',
      note: `± ${fmt(main.standardError, 3)} ms (standard error); A ${fmt(main.a, 2)} ms`,
    },
    {
      scenario,
      variant: "libuv's pool per miss, B − A",
      metric: 'difference',
      value: pool.difference,
      unit: 'ms',
      note: `± ${fmt(pool.standardError, 3)} ms (standard error); A ${fmt(pool.a, 2)} ms`,
    },
    {
      scenario,
      variant: 'process CPU per miss, B − A',
      metric: 'difference',
      value: whole.difference,
      unit: 'ms',
      note: `± ${fmt(whole.standardError, 2)} ms (standard error); A ${fmt(whole.a, 1)} ms`,
    },
  ];
  return { rows, report, details: { other: path.resolve(other), format: format.key, pairs, size, inFlight, measured, main, pool, whole } };
}

export const deliveryAbScenario: Scenario = {
  name: 'delivery-ab',
  title:
    "delivery URLs: this build against another (BENCH_AB_OTHER) on misses, interleaved in small batches, main thread, libuv's pool and process CPU per miss",
  run,
};
