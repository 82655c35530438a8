// Scenario 1: upload → resize a 12-megapixel JPEG to 1600 px WebP → download, 4 in flight.
//
// Three variants on the same image, interleaved round by round so that load from elsewhere on
// the machine hits them alike:
//   bare sharp   — sharp(buffer).autoOrient().resize({width:1600}).webp({quality:80,effort:4}),
//                  in a child process of its own (the baseline; ratio 1.00)
//   service      — the real server as a child process (`node dist/src/main.js serve`, SQLite,
//                  default WORKER_CONCURRENCY), driven over HTTP from this process
//   ImageMagick  — `convert in.jpg -auto-orient -resize 1600x -quality 80 out.webp` per job
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import sharp from 'sharp';
import { ApiClient, ApiError } from '../lib/client.js';
import { median, percentile, runPool } from '../lib/pool.js';
import { cpuSecondsOf, ForeignLoad, loadAverage, MiB, peakRssOf, reapedChildrenCpuSeconds, resetPeakRss, RssSampler } from '../lib/proc.js';
import { distIsStale, startService, type Service } from '../lib/service.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';

const SCENARIO = 'resize 12MP→1600 WebP';
const WIDTH = 1600;
const IN_FLIGHT = 4;
const WARMUP = 2;
const TARGET_RATIO = 0.85;

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
};

// ---------------------------------------------------------------------------------------------
// The input

interface InputImage {
  path: string;
  bytes: Buffer;
  /** The same bytes, made once for every upload. */
  blob: Blob;
  width: number;
  height: number;
  description: string;
}

/**
 * A real ≥12 MP camera photo from the corpus when there is one (MANIFEST.json), else the
 * 2725×2225 sharp fixture upscaled to 4000×3000 at quality 90. BENCH_IMAGE=synthetic forces the
 * latter.
 */
async function prepareInput(ctx: BenchContext): Promise<InputImage> {
  const corpus = path.resolve(ctx.repoRoot, '../shared/corpus');
  if (process.env.BENCH_IMAGE !== 'synthetic') {
    try {
      const manifest = JSON.parse(fs.readFileSync(path.join(corpus, 'MANIFEST.json'), 'utf8')) as { path: string; format?: string; exercises?: string }[];
      const photos = manifest.filter((e) => e.format === 'jpeg' && /camera photo/i.test(e.exercises ?? ''));
      for (const entry of photos) {
        const file = path.join(corpus, entry.path);
        if (!fs.existsSync(file)) continue;
        const meta = await sharp(file).metadata();
        const pixels = (meta.width ?? 0) * (meta.height ?? 0);
        if (pixels >= 12_000_000 && pixels <= 16_000_000) {
          return {
            path: file,
            ...read(file),
            width: meta.width!,
            height: meta.height!,
            description: `${entry.path} (corpus camera photo${(meta.orientation ?? 1) > 1 ? `, EXIF orientation ${meta.orientation}` : ''})`,
          };
        }
      }
    } catch (err) {
      ctx.log(`corpus manifest unreadable (${(err as Error).message}); using the synthetic image`);
    }
  }
  const source = path.join(corpus, 'images/sharp/2569067123_aca715a2ee_o.jpg');
  const file = path.join(ctx.tmpDir, 'photo-4000x3000.jpg');
  await sharp(source).resize(4000, 3000, { fit: 'fill' }).jpeg({ quality: 90 }).toFile(file);
  return { path: file, ...read(file), width: 4000, height: 3000, description: 'images/sharp/2569067123_aca715a2ee_o.jpg upscaled to 4000×3000, q90' };
}

function read(file: string): { bytes: Buffer; blob: Blob } {
  const bytes = fs.readFileSync(file);
  return { bytes, blob: new Blob([new Uint8Array(bytes)], { type: 'image/jpeg' }) };
}

const isWebp = (b: Buffer) => b.length > 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP';

// ---------------------------------------------------------------------------------------------
// Measurements common to the variants

interface RoundResult {
  wallMs: number;
  jobs: number;
  throughput: number;
  cpuSeconds: number | null;
  /** Peak RSS of the measured process(es) during the round. */
  peakRss: number | null;
  errors: string[];
  /** CPUs kept busy by other processes on the machine meanwhile (a noise indicator). */
  foreignCpus: number;
  /** Service only: the bench's own CPU (HTTP client), to show what it takes from the 2 cores. */
  clientCpuSeconds?: number;
}

// ---------------------------------------------------------------------------------------------
// Bare sharp, in its own process

interface BareWorker {
  pid: number;
  info: Record<string, unknown>;
  run(jobs: number): Promise<RoundResult & { latencies?: number[] }>;
  stop(): Promise<void>;
}

async function startBare(ctx: BenchContext, input: InputImage): Promise<BareWorker> {
  const script = path.join(ctx.repoRoot, 'bench', 'workers', 'bare-sharp.mjs');
  const child: ChildProcess = spawn(process.execPath, [script, input.path, String(WIDTH), String(IN_FLIGHT), String(WARMUP)], {
    cwd: ctx.repoRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<any> => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`bare-sharp worker ended: ${stderr.trim() || `exit ${child.exitCode}`}`);
    return JSON.parse(value);
  };
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = await next();
  return {
    pid: child.pid!,
    info: ready,
    async run(jobs) {
      const pid = child.pid!;
      resetPeakRss(pid);
      const sampler = new RssSampler(() => [pid]).start();
      const foreign = new ForeignLoad();
      const cpu0 = cpuSecondsOf(pid);
      child.stdin!.write(`run ${jobs}\n`);
      const done = await next();
      const cpu1 = cpuSecondsOf(pid);
      sampler.stop();
      const cpuSeconds = cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : null;
      const errors = (done.widths as number[]).some((w) => w !== WIDTH) ? [`output width ${done.widths.join(',')} ≠ ${WIDTH}`] : [];
      return {
        wallMs: done.wallMs,
        jobs,
        throughput: jobs / (done.wallMs / 1000),
        cpuSeconds,
        peakRss: Math.max(peakRssOf(pid) ?? 0, sampler.peakTotal) || null,
        errors,
        foreignCpus: foreign.stop(cpuSeconds ?? 0),
      };
    },
    async stop() {
      if (child.exitCode === null) child.stdin!.write('exit\n');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(killer);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The service over HTTP

interface JobTiming {
  uploadMs: number;
  submitMs: number;
  /** Server side: claimed − created. */
  queueWaitMs: number;
  /** Server side: completed − claimed (inputs, sharp, store, complete). */
  processingMs: number;
  /** Client saw the task finished − server completed it (long-poll wake-up). */
  notifyMs: number;
  downloadMs: number;
  totalMs: number;
  createdAt: number;
  startedAt: number;
  completedAt: number;
}

interface ServiceRun {
  route: 'resize' | 'convert';
  routeMissing: boolean;
}

async function serviceJob(client: ApiClient, input: InputImage, route: ServiceRun['route']): Promise<JobTiming> {
  const t0 = Date.now();
  const fileId = await client.upload(input.blob, path.basename(input.path));
  const t1 = Date.now();
  const body = route === 'resize' ? { fileId, width: WIDTH, format: 'webp' } : { fileId, format: 'webp' };
  const taskId = await client.submit(route, body);
  const t2 = Date.now();
  const task = await client.waitForTask(taskId, 30);
  const t3 = Date.now();
  if (task.status !== 'completed') throw new Error(`task ${taskId} ${task.status}: ${JSON.stringify(task.error)}`);
  const output = await client.download(task.outputFileId);
  const t4 = Date.now();
  if (!isWebp(output)) throw new Error(`task ${taskId}: the download is not WebP`);
  if (route === 'resize' && task.result?.width !== WIDTH) throw new Error(`task ${taskId}: output width ${task.result?.width} ≠ ${WIDTH}`);
  const created = Date.parse(task.createdAt);
  const started = Date.parse(task.startedAt);
  const completed = Date.parse(task.completedAt);
  return {
    uploadMs: t1 - t0,
    submitMs: t2 - t1,
    queueWaitMs: started - created,
    processingMs: completed - started,
    notifyMs: t3 - completed,
    downloadMs: t4 - t3,
    totalMs: t4 - t0,
    createdAt: created,
    startedAt: started,
    completedAt: completed,
  };
}

/** Warm-up, and finds out whether the resize route exists on this build. */
async function warmService(client: ApiClient, input: InputImage): Promise<ServiceRun> {
  try {
    for (let i = 0; i < WARMUP; i++) await serviceJob(client, input, 'resize');
    return { route: 'resize', routeMissing: false };
  } catch (err) {
    if (!(err instanceof ApiError && err.routeMissing)) throw err;
    if (process.env.BENCH_RESIZE_FALLBACK === 'convert') {
      for (let i = 0; i < WARMUP; i++) await serviceJob(client, input, 'convert');
      return { route: 'convert', routeMissing: true };
    }
    return { route: 'resize', routeMissing: true };
  }
}

async function measureService(service: Service, client: ApiClient, input: InputImage, run: ServiceRun, jobs: number): Promise<RoundResult & { timings: JobTiming[] }> {
  resetPeakRss(service.pid);
  const sampler = new RssSampler(() => [service.pid]).start();
  const foreign = new ForeignLoad();
  const cpu0 = cpuSecondsOf(service.pid);
  const client0 = process.cpuUsage();
  const errors: string[] = [];
  const { wallMs, results } = await runPool(jobs, IN_FLIGHT, async () => {
    try {
      return await serviceJob(client, input, run.route);
    } catch (err) {
      errors.push((err as Error).message);
      return undefined;
    }
  });
  const cpu1 = cpuSecondsOf(service.pid);
  const client1 = process.cpuUsage(client0);
  sampler.stop();
  const timings = results.filter((t): t is JobTiming => t !== undefined);
  const cpuSeconds = cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : null;
  return {
    wallMs,
    jobs,
    throughput: timings.length / (wallMs / 1000),
    cpuSeconds,
    foreignCpus: foreign.stop(cpuSeconds ?? 0),
    peakRss: Math.max(peakRssOf(service.pid) ?? 0, sampler.peakTotal) || null,
    errors,
    clientCpuSeconds: (client1.user + client1.system) / 1e6,
    timings,
  };
}

// ---------------------------------------------------------------------------------------------
// ImageMagick

interface ImageMagick {
  command: string;
  version: string;
  note?: string;
}

const isElf = (file: string): boolean => {
  try {
    const fd = fs.openSync(fs.realpathSync(file), 'r');
    const head = Buffer.alloc(4);
    fs.readSync(fd, head, 0, 4, 0);
    fs.closeSync(fd);
    return head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } catch {
    return false;
  }
};

/**
 * `magick` when present; else a `convert` whose `-version` starts "Version: ImageMagick" — the
 * real binary preferred over a wrapper script (a stand-in that forwards to it would add its
 * interpreter's start-up to every job).
 */
export function findImageMagick(): ImageMagick | undefined {
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  const onPath = (name: string) => dirs.map((d) => path.join(d, name)).filter((f) => {
    try {
      fs.accessSync(f, fs.constants.X_OK);
      return fs.statSync(f).isFile();
    } catch {
      return false;
    }
  });
  const version = (file: string) => {
    const r = spawnSync(file, ['-version'], { encoding: 'utf8', timeout: 30_000 });
    return r.status === 0 ? /^Version: ImageMagick.*$/m.exec(r.stdout)?.[0] : undefined;
  };
  for (const file of onPath('magick')) {
    const v = version(file);
    if (v) return { command: file, version: v };
  }
  const candidates = [...new Set(onPath('convert'))]
    .map((file) => ({ file, v: version(file) }))
    .filter((c): c is { file: string; v: string } => c.v !== undefined);
  const binary = candidates.find((c) => isElf(c.file));
  const chosen = binary ?? candidates[0];
  if (!chosen) return undefined;
  const skipped = candidates.filter((c) => c !== chosen && !isElf(c.file)).map((c) => c.file);
  return { command: chosen.file, version: chosen.v, note: skipped.length ? `wrapper ${skipped.join(', ')} bypassed` : undefined };
}

function convertOnce(im: ImageMagick, input: string, output: string, live: Set<number>): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(im.command, [input, '-auto-orient', '-resize', `${WIDTH}x`, '-quality', '80', output], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    if (child.pid) live.add(child.pid);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (child.pid) live.delete(child.pid);
      if (code === 0 && fs.existsSync(output)) resolve();
      else reject(new Error(`${path.basename(im.command)} ${code ?? signal}: ${stderr.trim().split('\n')[0] || 'no output'}`));
    });
  });
}

async function measureImageMagick(im: ImageMagick, input: InputImage, outDir: string, jobs: number): Promise<RoundResult> {
  const live = new Set<number>();
  const sampler = new RssSampler(() => live).start();
  const foreign = new ForeignLoad();
  const cpu0 = reapedChildrenCpuSeconds();
  const errors: string[] = [];
  const { wallMs } = await runPool(jobs, IN_FLIGHT, async (i) => {
    const output = path.join(outDir, `out-${i}.webp`);
    try {
      await convertOnce(im, input.path, output, live);
      const meta = await sharp(output).metadata();
      if (meta.width !== WIDTH) errors.push(`output width ${meta.width} ≠ ${WIDTH}`);
    } catch (err) {
      errors.push((err as Error).message);
    } finally {
      fs.rmSync(output, { force: true });
    }
  });
  sampler.stop();
  const ok = jobs - errors.length;
  // Exited children's CPU, summed by the kernel into ours (cutime/cstime): exact, no sampling.
  const cpuSeconds = reapedChildrenCpuSeconds() - cpu0;
  return {
    wallMs,
    jobs,
    throughput: ok / (wallMs / 1000),
    cpuSeconds,
    foreignCpus: foreign.stop(cpuSeconds),
    peakRss: sampler.peakTotal || null,
    errors,
  };
}

// ---------------------------------------------------------------------------------------------
// The scenario

const fmt = (n: number | null | undefined, digits = 2) => (n === null || n === undefined || Number.isNaN(n) ? '—' : n.toFixed(digits));
const mib = (bytes: number | null | undefined) => (bytes ? `${(bytes / MiB).toFixed(0)} MiB` : '—');

type Variant = 'bare' | 'service' | 'imagemagick';

export const resizeThroughput: Scenario = {
  name: 'resize-throughput',
  title: `upload → resize a 12-megapixel JPEG to ${WIDTH} px WebP → download, ${IN_FLIGHT} in flight`,
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const jobs = envInt('BENCH_JOBS', 24);
    const maxRounds = envInt('BENCH_ROUNDS', 3);
    // ImageMagick is a reference, not a target, and 3–4× slower: one round unless asked.
    const imRounds = envInt('BENCH_IMAGEMAGICK_ROUNDS', 1);
    const report: string[] = [];
    const cleanups: (() => Promise<void>)[] = [];
    const stopAll = async () => {
      for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => {});
    };
    ctx.onCleanup(stopAll);

    const input = await prepareInput(ctx);
    report.push(`input: ${input.description}: ${input.width}×${input.height} (${(input.width * input.height / 1e6).toFixed(1)} MP), ${(input.bytes.length / MiB).toFixed(2)} MiB`);
    report.push(
      `${jobs} jobs per round after ${WARMUP} warm-up jobs, ${IN_FLIGHT} in flight; up to ${maxRounds} rounds (ImageMagick ${imRounds}), variants interleaved; ` +
        'throughput = jobs / wall time, median over rounds; ratio = median of per-round ratios',
    );

    // Baseline
    ctx.log('starting the bare-sharp worker');
    const bare = await startBare(ctx, input);
    cleanups.push(() => bare.stop());
    report.push(`bare sharp: child process pid ${bare.pid}, sharp ${bare.info.sharp} / libvips ${bare.info.vips}, sharp.concurrency() = ${bare.info.concurrency}, libuv threadpool ${process.env.UV_THREADPOOL_SIZE || 4}`);

    // Service
    const stale = distIsStale(ctx.repoRoot);
    if (stale) report.push(`WARNING: ${stale}`);
    const serviceEnv: Record<string, string> = process.env.BENCH_SERVICE_ENV ? JSON.parse(process.env.BENCH_SERVICE_ENV) : {};
    ctx.log('starting the service (node dist/src/main.js serve)');
    const serviceDir = path.join(ctx.tmpDir, 'service');
    const service = await startService({
      repoRoot: ctx.repoRoot,
      dir: serviceDir,
      plans: { max: { requestsPerSecond: 1_000_000, monthlyTasks: 1_000_000_000, maxQueuedTasks: 1_000_000 } },
      env: serviceEnv,
    });
    cleanups.push(() => service.stop());
    const client = new ApiClient(service.url, service.key);
    const workerConcurrency = Number(service.env.WORKER_CONCURRENCY ?? os.availableParallelism());
    const pollMs = service.env.QUEUE_POLL_MS ?? '2000 (default)';
    report.push(
      `service: child process pid ${service.pid}, SQLite, WORKER_CONCURRENCY ${service.env.WORKER_CONCURRENCY ?? `default = ${workerConcurrency} CPUs`}, QUEUE_POLL_MS ${pollMs}` +
        `${Object.keys(serviceEnv).length ? `, BENCH_SERVICE_ENV ${JSON.stringify(serviceEnv)}` : ''}; the HTTP client runs in the bench process`,
    );
    ctx.log('warming up the service');
    const run = await warmService(client, input);
    if (run.routeMissing) {
      const message =
        run.route === 'convert'
          ? `POST /api/process/resize is MISSING on this build (404 "No route"); BENCH_RESIZE_FALLBACK=convert: measuring full-size convert to WebP instead — NOT comparable with the baseline`
          : `POST /api/process/resize is MISSING on this build (404 "No route"): the service variant is not measured`;
      report.push(`*** ${message}`);
      ctx.log(message);
    }
    const measureServiceVariant = !run.routeMissing || run.route === 'convert';

    // ImageMagick
    const skipIm = process.env.BENCH_SKIP_IMAGEMAGICK === '1';
    const im = skipIm ? undefined : findImageMagick();
    let imProblem: string | undefined = skipIm ? 'ImageMagick: skipped (BENCH_SKIP_IMAGEMAGICK=1)' : im ? undefined : 'ImageMagick: not installed';
    const imDir = path.join(ctx.tmpDir, 'imagemagick');
    fs.mkdirSync(imDir, { recursive: true });
    if (im) {
      report.push(`ImageMagick: ${im.command} — ${im.version}${im.note ? ` (${im.note})` : ''}; one process per job, OMP threads default`);
      ctx.log('warming up ImageMagick');
      const warm = await measureImageMagick(im, input, imDir, 1);
      if (warm.errors.length) {
        imProblem = `ImageMagick refused the ${input.width}×${input.height} image (policy.xml limits?): ${warm.errors[0]}`;
      }
    }
    if (imProblem) report.push(imProblem);

    // Rounds, interleaved, rotating the order
    const variants: Variant[] = ['bare', ...(measureServiceVariant ? (['service'] as const) : []), ...(im && !imProblem ? (['imagemagick'] as const) : [])];
    const rounds: Record<Variant, RoundResult[]> = { bare: [], service: [], imagemagick: [] };
    const timings: JobTiming[] = [];
    /** Seconds the last run of each variant took, to tell whether another round fits the budget. */
    const lastSeconds: Partial<Record<Variant, number>> = {};
    let roundsRun = 0;
    for (let r = 0; r < maxRounds; r++) {
      const order = variants.filter((v) => v !== 'imagemagick' || r < imRounds);
      if (r > 0) {
        const estimate = order.reduce((sum, v) => sum + (lastSeconds[v] ?? 0), 0);
        if (ctx.secondsLeft() < estimate * 1.2) {
          report.push(`stopped after ${r} round(s): another (~${estimate.toFixed(0)} s) would overrun the time budget`);
          break;
        }
      }
      for (let k = 0; k < order.length; k++) {
        const variant = order[(k + r) % order.length]!;
        ctx.log(`round ${r + 1}/${maxRounds}: ${variant}`);
        const t0 = Date.now();
        if (variant === 'bare') rounds.bare.push(await bare.run(jobs));
        else if (variant === 'service') {
          const result = await measureService(service, client, input, run, jobs);
          timings.push(...result.timings);
          rounds.service.push(result);
        } else rounds.imagemagick.push(await measureImageMagick(im!, input, imDir, jobs));
        lastSeconds[variant] = (Date.now() - t0) / 1000;
        const last = rounds[variant].at(-1)!;
        ctx.log(`  ${fmt(last.throughput)} jobs/s in ${fmt(last.wallMs / 1000, 1)} s${last.errors.length ? `, ${last.errors.length} errors: ${last.errors[0]}` : ''}`);
      }
      roundsRun++;
    }
    const serviceStderr = service.stderr().trim();
    await stopAll();

    // Summaries
    const summary = (variant: Variant) => {
      const rs = rounds[variant];
      const throughputs = rs.map((r) => r.throughput);
      const cpuPerJob = rs.map((r) => (r.cpuSeconds ?? NaN) / r.jobs);
      return {
        rounds: rs.length,
        throughput: rs.length ? median(throughputs) : null,
        min: rs.length ? Math.min(...throughputs) : null,
        max: rs.length ? Math.max(...throughputs) : null,
        cpuPerJob: rs.length ? median(cpuPerJob) : null,
        peakRss: rs.length ? Math.max(...rs.map((r) => r.peakRss ?? 0)) || null : null,
        errors: rs.flatMap((r) => r.errors),
        wallMs: rs.map((r) => r.wallMs),
      };
    };
    /** Median of the per-round ratios: each round's variants ran back to back, under the same load. */
    const ratioToBare = (variant: Variant) => {
      const n = Math.min(rounds[variant].length, rounds.bare.length);
      if (n === 0) return null;
      return median(Array.from({ length: n }, (_, i) => rounds[variant][i]!.throughput / rounds.bare[i]!.throughput));
    };

    const rows: Row[] = [];
    const b = summary('bare');
    rows.push({
      scenario: SCENARIO,
      variant: 'bare sharp (baseline)',
      metric: 'throughput',
      value: b.throughput,
      unit: 'jobs/s',
      ratio: 1,
      baseline: 'bare sharp',
      peakRssBytes: b.peakRss,
      extra: { ...b, process: 'child (node bench/workers/bare-sharp.mjs)' },
      note: `CPU ${fmt(b.cpuPerJob)} s/job`,
    });

    const s = summary('service');
    const serviceRatio = ratioToBare('service');
    const clientCpuPerJob = median(rounds.service.map((r) => (r.clientCpuSeconds ?? NaN) / r.jobs));
    rows.push({
      scenario: SCENARIO,
      variant: run.route === 'convert' ? 'service (CONVERT fallback: resize route missing)' : 'service (HTTP, child process)',
      metric: 'throughput',
      value: measureServiceVariant ? s.throughput : null,
      unit: 'jobs/s',
      ratio: measureServiceVariant ? serviceRatio : null,
      baseline: 'bare sharp',
      target: { on: 'ratio', op: '>=', threshold: TARGET_RATIO },
      peakRssBytes: s.peakRss,
      extra: { ...s, route: run.route, routeMissing: run.routeMissing, clientCpuPerJob, process: 'child (node dist/src/main.js serve)' },
      note: run.routeMissing && run.route === 'resize'
        ? 'POST /api/process/resize missing (404)'
        : `CPU ${fmt(s.cpuPerJob)} s/job (+ client ${fmt(clientCpuPerJob, 3)})${s.errors.length ? `; ${s.errors.length} errors` : ''}`,
    });

    if (measureServiceVariant && b.cpuPerJob && s.cpuPerJob) {
      rows.push({
        scenario: SCENARIO,
        variant: 'service CPU per job (service + client)',
        metric: 'CPU per job',
        value: s.cpuPerJob + clientCpuPerJob,
        unit: 's',
        // Inverted so that, like the throughput ratio, higher is better: bare CPU / service CPU.
        ratio: b.cpuPerJob / (s.cpuPerJob + clientCpuPerJob),
        baseline: 'bare sharp',
        extra: { service: s.cpuPerJob, client: clientCpuPerJob, bare: b.cpuPerJob },
        note: 'ratio = bare CPU ÷ service CPU: load-independent ceiling of the throughput ratio',
      });
    }

    const m = summary('imagemagick');
    rows.push({
      scenario: SCENARIO,
      variant: im ? `ImageMagick ${/ImageMagick (\S+)/.exec(im.version)?.[1] ?? ''}`.trim() : 'ImageMagick',
      metric: 'throughput',
      value: imProblem ? null : m.throughput,
      unit: 'jobs/s',
      ratio: imProblem ? null : ratioToBare('imagemagick'),
      baseline: 'bare sharp',
      peakRssBytes: imProblem ? null : m.peakRss,
      extra: { ...m, command: im?.command, version: im?.version, problem: imProblem },
      note:
        imProblem ??
        `CPU ${fmt(m.cpuPerJob)} s/job (${fmt(m.cpuPerJob && b.cpuPerJob ? m.cpuPerJob / b.cpuPerJob : null, 1)}× bare); RSS = sum of ${IN_FLIGHT} processes` +
          `${m.errors.length ? `; ${m.errors.length} errors` : ''}`,
    });

    // Per-round figures
    report.push('');
    report.push('per round: jobs/s [CPUs used by the variant (service: + client) / CPUs used by other work on the machine]');
    const cpusUsed = (r: RoundResult) => ((r.cpuSeconds ?? NaN) + (r.clientCpuSeconds ?? 0)) / (r.wallMs / 1000);
    for (const variant of variants) {
      report.push(`  ${variant.padEnd(12)} ${rounds[variant].map((r) => `${fmt(r.throughput).padStart(5)} [${fmt(cpusUsed(r), 1)}/${fmt(r.foreignCpus, 1)}]`).join('  ')}`);
    }
    // The round in which the machine was quietest (bare and service both measured) is the most
    // trustworthy single comparison on a shared machine.
    const paired = Array.from({ length: Math.min(rounds.bare.length, rounds.service.length) }, (_, i) => ({
      round: i + 1,
      ratio: rounds.service[i]!.throughput / rounds.bare[i]!.throughput,
      foreign: Math.max(rounds.service[i]!.foreignCpus, rounds.bare[i]!.foreignCpus),
    }));
    const quietest = paired.sort((x, y) => x.foreign - y.foreign)[0];
    if (quietest && measureServiceVariant) {
      report.push(`  quietest round: #${quietest.round}, other work ≤ ${fmt(quietest.foreign, 1)} CPUs: service/bare = ${fmt(quietest.ratio)}`);
    }
    const foreignCpus = median(variants.flatMap((v) => rounds[v].map((r) => r.foreignCpus)));
    const cpus = os.availableParallelism();
    if (foreignCpus > 0.25 * cpus) {
      report.push(
        `WARNING: other processes kept ~${fmt(foreignCpus, 1)} of ${cpus} CPUs busy during the measurements (load average ${loadAverage().join(' ')}). ` +
          'Throughputs are low and the throughput ratio is unreliable: how the scheduler shares contended CPUs between ' +
          `the baseline's ${IN_FLIGHT} image threads and the service's WORKER_CONCURRENCY (sharp.concurrency() = ${bare.info.concurrency}) decides it more than the code does. ` +
          'The CPU-per-job ratio below does not depend on load; rerun on a quiet machine for the target.',
      );
    }

    // Where the service's time goes
    const diagnostics: Record<string, unknown> = {};
    if (timings.length) {
      const phases: (keyof JobTiming)[] = ['uploadMs', 'submitMs', 'queueWaitMs', 'processingMs', 'notifyMs', 'downloadMs', 'totalMs'];
      report.push('');
      report.push(`service, per job (ms; ${timings.length} jobs)      median    p90    max`);
      for (const phase of phases) {
        const values = timings.map((t) => t[phase] as number);
        diagnostics[phase] = { median: median(values), p90: percentile(values, 90), max: Math.max(...values) };
        const label = {
          uploadMs: 'upload (POST /api/upload)',
          submitMs: 'submit (POST /api/process)',
          queueWaitMs: 'queued → claimed (server)',
          processingMs: 'claimed → completed (server)',
          notifyMs: 'completed → long-poll answer',
          downloadMs: 'download',
          totalMs: 'whole job',
        }[phase as string]!;
        report.push(`  ${label.padEnd(34)} ${fmt(median(values), 0).padStart(6)} ${fmt(percentile(values, 90), 0).padStart(6)} ${fmt(Math.max(...values), 0).padStart(6)}`);
      }
      // Slot hand-off: a task that was already waiting when another finished should be claimed
      // at once (in-process 'finished' → worker wake-up), not at the next QUEUE_POLL_MS tick.
      const completions = timings.map((t) => t.completedAt).sort((x, y) => x - y);
      const handoffs: number[] = [];
      for (const t of timings) {
        const freed = completions.filter((c) => c <= t.startedAt).at(-1);
        if (freed !== undefined && t.createdAt <= freed && t.queueWaitMs > 0) handoffs.push(t.startedAt - freed);
      }
      if (handoffs.length) {
        diagnostics.slotHandoffMs = { median: median(handoffs), p90: percentile(handoffs, 90), max: Math.max(...handoffs), count: handoffs.length };
        report.push(
          `  slot hand-off (a task finishes → a waiting one is claimed): median ${fmt(median(handoffs), 0)} ms, p90 ${fmt(percentile(handoffs, 90), 0)} ms, max ${fmt(Math.max(...handoffs), 0)} ms over ${handoffs.length} hand-offs`,
        );
      }
      // Worker utilisation: the share of (wall × WORKER_CONCURRENCY) spent inside tasks.
      const busyMs = timings.reduce((sum, t) => sum + t.processingMs, 0);
      const wallMs = rounds.service.reduce((sum, r) => sum + r.wallMs, 0);
      const utilisation = busyMs / (wallMs * workerConcurrency);
      const bareLatencyPerJob = b.throughput ? 1000 / b.throughput : NaN;
      diagnostics.workerUtilisation = utilisation;
      diagnostics.workerConcurrency = workerConcurrency;
      report.push(
        `  worker slots busy ${fmt(utilisation * 100, 0)}% of the wall time (${workerConcurrency} slots); ` +
          `a task holds a slot ${fmt(median(timings.map((t) => t.processingMs)), 0)} ms → at most ${fmt((workerConcurrency * 1000) / median(timings.map((t) => t.processingMs)))} jobs/s; bare sharp does one per ${fmt(bareLatencyPerJob, 0)} ms of wall time`,
      );
      if (b.cpuPerJob && s.cpuPerJob) {
        const efficiency = b.cpuPerJob / (s.cpuPerJob + clientCpuPerJob);
        diagnostics.cpuEfficiencyRatio = efficiency;
        report.push(
          `  CPU per job: service ${fmt(s.cpuPerJob)} s + client ${fmt(clientCpuPerJob, 3)} s vs bare ${fmt(b.cpuPerJob)} s: ` +
            `bare/service = ${fmt(efficiency)}: the most the throughput ratio can reach, on an idle machine with every core kept busy`,
        );
      }
    }
    if (serviceStderr) report.push(`service stderr: ${serviceStderr.slice(0, 500)}`);

    return {
      rows,
      report,
      details: {
        input: { file: input.path, description: input.description, width: input.width, height: input.height, bytes: input.bytes.length },
        jobsPerRound: jobs,
        roundsRun,
        quietestRound: quietest ?? null,
        inFlight: IN_FLIGHT,
        warmup: WARMUP,
        rounds: Object.fromEntries(variants.map((v) => [v, rounds[v].map(({ ...r }) => ({ ...r, timings: undefined }))])),
        service: { route: run.route, routeMissing: run.routeMissing, env: { ...service.env, PATH: undefined, HOME: undefined }, diagnostics },
        bare: bare.info,
        imagemagick: im ?? null,
      },
    };
  },
};
