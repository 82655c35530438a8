// The project's benchmark: `npm run bench` (setup, then this file), or after `npm run build`:
//   node --import tsx bench/run.ts [scenario-name …]
//
// Every speed target is a ratio against a baseline measured in the same run, so a slow or busy
// machine moves both sides alike. The bench reports; it never fails (exit code 0 unless it
// could not start at all). Results: a table on stdout and bench/out/results.json.
//
// Environment (all optional):
//   BENCH_JOBS=24              jobs per round (resize: the 1600 px WebP workload)
//   BENCH_THUMB_JOBS=48        resize: jobs per round of the 720 px JPEG thumbnail workload
//   BENCH_ROUNDS=3             rounds per scenario (fewer when the time budget runs out)
//   BENCH_BUDGET_SECONDS=270   the whole run's budget
//   BENCH_IMAGE=synthetic      resize: the upscaled 4000×3000 fixture instead of the corpus photo
//   BENCH_SERVICE_ENV='{"QUEUE_POLL_MS":"200"}'   extra environment for the service under test
//   BENCH_SKIP_IMAGEMAGICK=1, BENCH_IMAGEMAGICK_ROUNDS=1
//   BENCH_SERVICE_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof'   Node options for the service
//   BENCH_TMPDIR=/dev/shm      where the run keeps its files (default: tmpfs when it has room: benchRoot)
//   BENCH_WORKLOADS=jpeg720, BENCH_IN_FLIGHT=12   resize: one workload / in-flight level (profiling)
//   BENCH_DELIVERY_JOBS=24, BENCH_DELIVERY_IN_FLIGHT=4, BENCH_DELIVERY_FORMATS=jpeg,webp,avif,png,
//   BENCH_DELIVERY_PARTS=misses,hits, BENCH_HIT_SECONDS=10, BENCH_HIT_CONNECTIONS=50,
//   BENCH_DELIVERY_RUNNABLE=1   delivery
//
// Add a scenario: write a module under bench/scenarios/ exporting a `Scenario` and list it below.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { loadAverage, MiB } from './lib/proc.js';
import { meetsTarget, type BenchContext, type Row, type Scenario, type ScenarioResult } from './lib/types.js';
import { resizeThroughput } from './scenarios/resize-throughput.js';
import { compressionScenario } from './scenarios/compression.js';
import { compressSearchScenario } from './scenarios/compress-search.js';
import { statusPolls } from './scenarios/status-polls.js';
import { queuePickup } from './scenarios/queue-pickup.js';
import { soakScenario } from './scenarios/soak.js';
import { aiUpscale } from './scenarios/ai-upscale.js';
import { aiQuality } from './scenarios/ai-quality.js';
import { pipelineScenario } from './scenarios/pipeline.js';
import { conformanceScenario } from './scenarios/conformance.js';
import { deliveryScenario } from './scenarios/delivery.js';
import { deliveryAbScenario } from './scenarios/delivery-ab.js';
import { facesScenario } from './scenarios/faces.js';
import { jobStatements } from './scenarios/job-statements.js';
import { jxlScenario } from './scenarios/jxl.js';
import { pdfScenario } from './scenarios/pdf.js';
import { presentationBench } from './presentation.js';
import { presignScenario } from './presign.js';
import { previewScenario } from './preview.js';
import { infoScenario } from './info.js';

/** Wraps a scenario that reports named text values (no baseline of its own). */
function textScenario(name: string, title: string, run: () => Promise<{ name: string; value: string }[]>): Scenario {
  return {
    name,
    title,
    async run() {
      const rows = await run();
      return {
        rows: rows.map((r) => ({ scenario: name, variant: r.name, metric: 'measured', value: null, unit: '', note: r.value })),
        report: rows.map((r) => `${r.name}: ${r.value}`),
      };
    },
  };
}

const scenarios: Scenario[] = [
  resizeThroughput,
  statusPolls,
  jobStatements,
  deliveryScenario,
  deliveryAbScenario,
  queuePickup,
  presentationBench,
  pdfScenario,
  compressionScenario,
  compressSearchScenario,
  jxlScenario,
  textScenario('presign', "Presigned PUT of the Max plan's largest file: API RSS growth (target < 64 MiB) and throughput", presignScenario),
  textScenario('preview', '16 parallel previews of a 256 MP PNG: API RSS growth, time, answers (503 past the preview queue)', () =>
    previewScenario(),
  ),
  textScenario('info', 'GET /api/files/{id}/info on a 12 MP JPEG, first ask (target ≤ 150 ms)', infoScenario),
  soakScenario,
  aiUpscale,
  aiQuality,
  facesScenario,
  pipelineScenario,
  conformanceScenario,
];

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT_DIR = path.join(REPO_ROOT, 'bench', 'out');
const budgetSeconds = Number(process.env.BENCH_BUDGET_SECONDS) > 0 ? Number(process.env.BENCH_BUDGET_SECONDS) : 270;

const log = (message: string) => process.stderr.write(`bench: ${message}\n`);

/** The free space a tmpfs needs for the run's files (a delivery-ab run keeps about 2.5 GiB). */
const TMPFS_MIN_FREE = 8 * 1024 * MiB;

/**
 * Where the run keeps its files (every side's inputs, the services' data): BENCH_TMPDIR; else
 * tmpfs (/dev/shm) when it has room; else the system's temporary directory. On a disk, what
 * creating a file costs depends on what was deleted near it lately: ext4 without a journal passes
 * over every inode freed in the last minutes, 0.4–0.9 ms of CPU a file just after a bench run's
 * own cleanup against 0.02–0.03 ms in a quiet directory (docs/benchmarks.md). Only the service
 * creates files per request (its stores), so that cost would be its alone, and different for
 * each of its two copies in delivery-ab. In memory every side's files cost the same, run after run.
 */
function benchRoot(): string {
  if (process.env.BENCH_TMPDIR) return process.env.BENCH_TMPDIR;
  try {
    const shm = fs.statfsSync('/dev/shm');
    if (shm.bavail * shm.bsize >= TMPFS_MIN_FREE) return '/dev/shm';
  } catch {
    // no /dev/shm here
  }
  return os.tmpdir();
}

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const unknown = wanted.filter((name) => !scenarios.some((s) => s.name === name));
  if (unknown.length) {
    console.error(`unknown scenario(s) ${unknown.join(', ')}; known: ${scenarios.map((s) => s.name).join(', ')}`);
    process.exit(64);
  }
  const selected = wanted.length ? scenarios.filter((s) => wanted.includes(s.name)) : scenarios;

  const started = Date.now();
  const root = benchRoot();
  const tmpDir = fs.mkdtempSync(path.join(root, 'imgapi-bench-'));
  const cleanups: (() => void | Promise<void>)[] = [];
  /** Stops what the current scenario started (services, child processes). */
  const runCleanups = async () => {
    for (const fn of cleanups.splice(0).reverse()) {
      try {
        await fn();
      } catch (err) {
        log(`cleanup failed: ${(err as Error).message}`);
      }
    }
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping`);
      void runCleanups().finally(() => {
        fs.rmSync(tmpDir, { recursive: true, force: true });
        process.exit(130);
      });
    });
  }

  const contextFor = (scenario: Scenario): BenchContext => {
    const dir = path.join(tmpDir, scenario.name);
    fs.mkdirSync(dir, { recursive: true });
    return {
      repoRoot: REPO_ROOT,
      tmpDir: dir,
      secondsLeft: () => budgetSeconds - (Date.now() - started) / 1000,
      log: (message) => log(`${scenario.name}: ${message}`),
      onCleanup: (fn) => cleanups.push(fn),
    };
  };

  const meta = {
    startedAt: new Date(started).toISOString(),
    host: os.hostname(),
    cpus: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model,
    memoryMiB: Math.round(os.totalmem() / MiB),
    node: process.version,
    sharp: sharp.versions.sharp,
    libvips: sharp.versions.vips,
    sharpConcurrency: sharp.concurrency(),
    loadAverageAtStart: loadAverage(),
    filesIn: root,
  };
  console.log(
    `imgapi bench — ${meta.cpus} CPUs (${meta.cpuModel}), ${meta.memoryMiB} MiB, Node ${meta.node}, sharp ${meta.sharp} / libvips ${meta.libvips}`,
  );
  console.log(
    `load average at start: ${meta.loadAverageAtStart.join(' ')} (other work on this machine shifts absolute numbers; ratios are measured round by round)`,
  );
  console.log(`files (inputs, the services' data) in ${root}${root === '/dev/shm' ? ' (tmpfs; BENCH_TMPDIR to choose)' : ''}`);

  const results: { name: string; title: string; seconds: number; error?: string; result?: ScenarioResult }[] = [];
  for (const scenario of selected) {
    const t0 = Date.now();
    console.log(`\n== ${scenario.name}: ${scenario.title}`);
    try {
      const result = await scenario.run(contextFor(scenario));
      const seconds = (Date.now() - t0) / 1000;
      for (const line of result.report) console.log(line ? `  ${line}` : '');
      console.log(`  (${seconds.toFixed(0)} s)`);
      results.push({ name: scenario.name, title: scenario.title, seconds, result });
    } catch (err) {
      const seconds = (Date.now() - t0) / 1000;
      const message = (err as Error).stack ?? String(err);
      console.log(`  FAILED: ${message}`);
      results.push({ name: scenario.name, title: scenario.title, seconds, error: message });
    }
    await runCleanups(); // each scenario's services and children stop before the next starts
  }
  fs.rmSync(tmpDir, { recursive: true, force: true });

  const rows = results.flatMap(
    (r) =>
      r.result?.rows ?? [
        { scenario: r.name, variant: '—', metric: 'error', value: null, unit: '', note: `scenario failed: ${r.error?.split('\n')[0]}` } satisfies Row,
      ],
  );
  const totalSeconds = (Date.now() - started) / 1000;
  console.log(`\n${table(rows)}`);
  console.log(`\nbench finished in ${totalSeconds.toFixed(0)} s; load average now ${loadAverage().join(' ')}`);

  fs.mkdirSync(OUT_DIR, { recursive: true });
  const file = path.join(OUT_DIR, 'results.json');
  fs.writeFileSync(
    file,
    `${JSON.stringify(
      {
        meta: { ...meta, finishedAt: new Date().toISOString(), totalSeconds, loadAverageAtEnd: loadAverage() },
        rows: rows.map((row) => ({ ...row, meetsTarget: meetsTarget(row) ?? null })),
        scenarios: results.map((r) => ({
          name: r.name,
          title: r.title,
          seconds: r.seconds,
          error: r.error,
          report: r.result?.report,
          details: r.result?.details,
        })),
      },
      null,
      2,
    )}\n`,
  );
  console.log(`results written to ${path.relative(process.cwd(), file) || file}`);
}

function table(rows: Row[]): string {
  const num = (n: number | null | undefined, digits = 2) => (n === null || n === undefined || Number.isNaN(n) ? '—' : n.toFixed(digits));
  const header = ['scenario', 'variant', 'result', 'vs baseline', 'target', 'ok', 'peak RSS', 'notes'];
  const body = rows.map((row) => {
    const ok = meetsTarget(row);
    return [
      row.scenario,
      row.variant,
      row.value === null ? '—' : `${num(row.value)} ${row.unit}`,
      row.ratio === undefined || row.ratio === null ? '—' : `${num(row.ratio)}×`,
      row.target
        ? `${row.target.on === 'ratio' ? '' : `${row.metric} `}${row.target.op} ${row.target.threshold}${row.target.on === 'ratio' ? '×' : ` ${row.unit}`}`
        : '',
      ok === undefined ? (row.target ? '?' : '') : ok ? 'yes' : 'NO',
      row.peakRssBytes ? `${(row.peakRssBytes / MiB).toFixed(0)} MiB` : '—',
      row.note ?? '',
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join(' │ ')
      .trimEnd();
  return [line(header), widths.map((w) => '─'.repeat(w)).join('─┼─'), ...body.map(line)].join('\n');
}

main().then(
  () => process.exit(0),
  (err) => {
    // Reports, never fails CI: even an unexpected error ends with 0 after saying so.
    console.error(`bench: unexpected error: ${(err as Error).stack ?? err}`);
    process.exit(0);
  },
);
