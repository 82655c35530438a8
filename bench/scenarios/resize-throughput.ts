// Scenario 1: upload → resize a 12-megapixel JPEG → download, over HTTP, against bare sharp doing
// the same work in the same run. Two workloads, each at 4 and 12 jobs in flight:
//   → 1600 px WebP quality 80 (effort 4)           target ≥ 0.92× bare sharp
//   → 720 px JPEG thumbnail quality 80             target ≥ 0.70× bare sharp
// and the service's main-thread CPU per job (target ≤ 10 ms).
//
// Variants, interleaved round by round (every workload and in-flight level in every round) so
// that load from elsewhere on the machine hits them alike:
//   bare sharp   — sharp(buffer).autoOrient().resize({width}).webp|jpeg(the service's encoder
//                  defaults), in a child process of its own (the baseline; ratio 1.00)
//   service      — the real server as a child process (`node dist/src/main.js serve`, SQLite,
//                  default WORKER_CONCURRENCY), driven over HTTP from this process
//   ImageMagick  — `convert in.jpg -auto-orient -resize 1600x -quality 80 out.webp` per job
//                  (the WebP workload at 4 in flight only: a reference, not a target)
//
// Main-thread CPU: utime + stime of /proc/<pid>/task/<pid>/stat (the thread whose tid is the
// pid: the one running JavaScript, GC on it included) over a round, divided by its jobs. The
// rest of the process's CPU (libvips and libuv threads, V8's helper threads) is reported apart.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { ApiClient, prepareMultipart, type PreparedUpload } from '../lib/client.js';
import { median, percentile, runPool } from '../lib/pool.js';
import {
  cpuSecondsOf,
  ForeignLoad,
  loadAverage,
  MiB,
  peakRssOf,
  reapedChildrenCpuSeconds,
  resetPeakRss,
  RssSampler,
  threadCpuSecondsOf,
} from '../lib/proc.js';
import { distIsStale, startService, type Service } from '../lib/service.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';
import { startWorkerProcess } from '../lib/worker-process.js';

const WARMUP = 2;
const IN_FLIGHT_LEVELS = [4, 12] as const;
const MAIN_THREAD_TARGET_MS = 10;
const IM_WIDTH = 1600;
const IM_IN_FLIGHT = 4;

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
};

interface Workload {
  key: 'webp1600' | 'jpeg720';
  /** The table's scenario column. */
  name: string;
  width: number;
  format: 'webp' | 'jpeg';
  /** Throughput ratio against bare sharp. */
  target: number;
  jobs: number;
}

const allWorkloads = (): Workload[] => [
  { key: 'webp1600', name: 'resize 12MP→1600 px WebP q80', width: 1600, format: 'webp', target: 0.92, jobs: envInt('BENCH_JOBS', 24) },
  // A thumbnail costs libvips a few ms: more jobs per round for a round long enough to time.
  { key: 'jpeg720', name: 'thumbnail 12MP→720 px JPEG q80', width: 720, format: 'jpeg', target: 0.7, jobs: envInt('BENCH_THUMB_JOBS', 48) },
];

/** BENCH_WORKLOADS=jpeg720 (or webp1600) measures one workload only: for profiling. */
const workloads = (): Workload[] => {
  const wanted = process.env.BENCH_WORKLOADS?.split(',').filter(Boolean);
  return allWorkloads().filter((w) => !wanted?.length || wanted.includes(w.key));
};
/** BENCH_IN_FLIGHT=12 measures one level only: for profiling. */
const inFlightLevels = (): readonly number[] => {
  const wanted = (process.env.BENCH_IN_FLIGHT ?? '')
    .split(',')
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
  return wanted.length ? wanted : IN_FLIGHT_LEVELS;
};

/** One measured configuration: a workload at an in-flight level. */
interface Setting {
  workload: Workload;
  inFlight: number;
  label: string;
}

// ---------------------------------------------------------------------------------------------
// The input

interface InputImage {
  path: string;
  bytes: Buffer;
  /** The upload's multipart body, made once for every upload. */
  multipart: PreparedUpload;
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
  // BENCH_CORPUS: the corpus of another checkout's bench (a worktree measuring an older build).
  const corpus = path.resolve(process.env.BENCH_CORPUS ?? path.join(ctx.repoRoot, '../shared/corpus'));
  if (process.env.BENCH_IMAGE !== 'synthetic') {
    try {
      const manifest = JSON.parse(fs.readFileSync(path.join(corpus, 'MANIFEST.json'), 'utf8')) as {
        path: string;
        format?: string;
        exercises?: string;
      }[];
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

function read(file: string): { bytes: Buffer; multipart: PreparedUpload } {
  const bytes = fs.readFileSync(file);
  return { bytes, multipart: prepareMultipart(bytes, path.basename(file), 'image/jpeg') };
}

/** Which allocator the process runs on: jemalloc when it is mapped (preloaded as `npm start` does), else glibc's. */
const allocatorOf = (pid: number): string => {
  try {
    return /libjemalloc/.test(fs.readFileSync(`/proc/${pid}/maps`, 'utf8')) ? 'jemalloc' : 'glibc malloc';
  } catch {
    return 'allocator unknown';
  }
};

const isWebp = (b: Buffer) => b.length > 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP';
const isJpeg = (b: Buffer) => b.length > 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff;
const isFormat = (b: Buffer, format: Workload['format']) => (format === 'webp' ? isWebp(b) : isJpeg(b));

// ---------------------------------------------------------------------------------------------
// Measurements common to the variants

interface RoundResult {
  wallMs: number;
  jobs: number;
  throughput: number;
  cpuSeconds: number | null;
  /** Service only: CPU of its main thread (tid = pid). */
  mainThreadCpuSeconds?: number | null;
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
  run(setting: Setting, jobs: number): Promise<RoundResult>;
  stop(): Promise<void>;
}

async function startBare(ctx: BenchContext, input: InputImage): Promise<BareWorker> {
  const { child, next, ready, stop } = await startWorkerProcess(ctx, 'bare-sharp.mjs', [input.path, String(WARMUP)], 'exit line');
  return {
    pid: child.pid!,
    info: ready,
    async run({ workload, inFlight }, jobs) {
      const pid = child.pid!;
      resetPeakRss(pid);
      const sampler = new RssSampler(() => [pid]).start();
      const foreign = new ForeignLoad();
      const cpu0 = cpuSecondsOf(pid);
      child.stdin!.write(`run ${jobs} ${inFlight} ${workload.width} ${workload.format}\n`);
      const done = await next();
      const cpu1 = cpuSecondsOf(pid);
      sampler.stop();
      const cpuSeconds = cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : null;
      const widths = done.widths as number[];
      const errors = widths.some((w) => w !== workload.width) ? [`output width ${widths.join(',')} ≠ ${workload.width}`] : [];
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
    stop,
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
}

async function serviceJob(client: ApiClient, input: InputImage, workload: Workload): Promise<JobTiming> {
  const t0 = Date.now();
  const fileId = await client.uploadPrepared(input.multipart);
  const t1 = Date.now();
  const taskId = await client.submit('resize', { fileId, width: workload.width, format: workload.format, quality: 80 });
  const t2 = Date.now();
  const task = await client.waitForTask(taskId, 30);
  const t3 = Date.now();
  if (task.status !== 'completed') throw new Error(`task ${taskId} ${task.status}: ${JSON.stringify(task.error)}`);
  const output = await client.download(task.outputFileId);
  const t4 = Date.now();
  if (!isFormat(output, workload.format)) throw new Error(`task ${taskId}: the download is not ${workload.format}`);
  if (task.result?.width !== workload.width) throw new Error(`task ${taskId}: output width ${task.result?.width} ≠ ${workload.width}`);
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
  };
}

async function measureService(
  service: Service,
  client: ApiClient,
  input: InputImage,
  { workload, inFlight }: Setting,
  jobs: number,
): Promise<RoundResult & { timings: JobTiming[] }> {
  const pid = service.pid;
  resetPeakRss(pid);
  const sampler = new RssSampler(() => [pid]).start();
  const foreign = new ForeignLoad();
  const cpu0 = cpuSecondsOf(pid);
  const main0 = threadCpuSecondsOf(pid, pid);
  const client0 = process.cpuUsage();
  const errors: string[] = [];
  const { wallMs, results } = await runPool(jobs, inFlight, async () => {
    try {
      return await serviceJob(client, input, workload);
    } catch (err) {
      errors.push((err as Error).message);
      return undefined;
    }
  });
  const cpu1 = cpuSecondsOf(pid);
  const main1 = threadCpuSecondsOf(pid, pid);
  const client1 = process.cpuUsage(client0);
  sampler.stop();
  const timings = results.filter((t): t is JobTiming => t !== undefined);
  const cpuSeconds = cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : null;
  return {
    wallMs,
    jobs,
    throughput: timings.length / (wallMs / 1000),
    cpuSeconds,
    mainThreadCpuSeconds: main0 !== undefined && main1 !== undefined ? main1 - main0 : null,
    foreignCpus: foreign.stop(cpuSeconds ?? 0),
    peakRss: Math.max(peakRssOf(pid) ?? 0, sampler.peakTotal) || null,
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
function findImageMagick(): ImageMagick | undefined {
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  const onPath = (name: string) =>
    dirs
      .map((d) => path.join(d, name))
      .filter((f) => {
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
    const child = spawn(im.command, [input, '-auto-orient', '-resize', `${IM_WIDTH}x`, '-quality', '80', output], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
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
  const { wallMs } = await runPool(jobs, IM_IN_FLIGHT, async (i) => {
    const output = path.join(outDir, `out-${i}.webp`);
    try {
      await convertOnce(im, input.path, output, live);
      const meta = await sharp(output).metadata();
      if (meta.width !== IM_WIDTH) errors.push(`output width ${meta.width} ≠ ${IM_WIDTH}`);
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

interface SettingRounds {
  setting: Setting;
  bare: RoundResult[];
  service: RoundResult[];
  timings: JobTiming[];
}

export const resizeThroughput: Scenario = {
  name: 'resize-throughput',
  title: `upload → resize a 12-megapixel JPEG (→ 1600 px WebP, → 720 px JPEG) → download, ${IN_FLIGHT_LEVELS.join(' and ')} in flight, against bare sharp`,
  async run(ctx: BenchContext): Promise<ScenarioResult> {
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
    const settings: Setting[] = workloads().flatMap((workload) =>
      inFlightLevels().map((inFlight) => ({ workload, inFlight, label: `${workload.width} px ${workload.format.toUpperCase()} @${inFlight}` })),
    );
    report.push(
      `input: ${input.description}: ${input.width}×${input.height} (${((input.width * input.height) / 1e6).toFixed(1)} MP), ${(input.bytes.length / MiB).toFixed(2)} MiB`,
    );
    report.push(
      `jobs per round: ${workloads()
        .map((w) => `${w.jobs} (${w.key})`)
        .join(
          ', ',
        )} after ${WARMUP} warm-up jobs; in flight ${IN_FLIGHT_LEVELS.join(', ')}; up to ${maxRounds} rounds, every setting in every round, ` +
        'bare and service back to back (order alternating); throughput = jobs / wall time; ratio = median of per-round ratios',
    );

    // Baseline
    ctx.log('starting the bare-sharp worker');
    const bare = await startBare(ctx, input);
    cleanups.push(() => bare.stop());
    report.push(
      `bare sharp: child process pid ${bare.pid}, ${allocatorOf(bare.pid)}, sharp ${bare.info.sharp} / libvips ${bare.info.vips}, sharp.concurrency() = ${bare.info.concurrency}, ` +
        `libuv threadpool ${process.env.UV_THREADPOOL_SIZE || 4} (at most that many images at once)`,
    );

    // Service
    const stale = distIsStale(ctx.repoRoot);
    if (stale) report.push(`WARNING: ${stale}`);
    const serviceEnv: Record<string, string> = process.env.BENCH_SERVICE_ENV ? JSON.parse(process.env.BENCH_SERVICE_ENV) : {};
    ctx.log('starting the service (node dist/src/main.js serve)');
    const service = await startService({
      repoRoot: ctx.repoRoot,
      dir: path.join(ctx.tmpDir, 'service'),
      plans: { max: { requestsPerSecond: 1_000_000, monthlyTasks: 1_000_000_000, maxQueuedTasks: 1_000_000 } },
      env: serviceEnv,
    });
    cleanups.push(() => service.stop());
    const client = new ApiClient(service.url, service.key);
    const workerConcurrency = Number(service.env.WORKER_CONCURRENCY ?? os.availableParallelism());
    report.push(
      `service: child process pid ${service.pid}, ${allocatorOf(service.pid)}, SQLite, WORKER_CONCURRENCY ${service.env.WORKER_CONCURRENCY ?? `default = ${workerConcurrency} CPUs`}` +
        `${Object.keys(serviceEnv).length ? `, BENCH_SERVICE_ENV ${JSON.stringify(serviceEnv)}` : ''}; the HTTP client runs in the bench process`,
    );
    ctx.log('warming up the service');
    for (const workload of workloads()) for (let i = 0; i < WARMUP; i++) await serviceJob(client, input, workload);

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
    const imJobs = allWorkloads()[0]!.jobs;
    const imRoundsDone: RoundResult[] = [];
    const webp4Measured = settings.some((x) => x.workload.key === 'webp1600' && x.inFlight === IM_IN_FLIGHT);

    // Rounds
    const measured: SettingRounds[] = settings.map((setting) => ({ setting, bare: [], service: [], timings: [] }));
    let lastRoundSeconds = 0;
    let roundsRun = 0;
    for (let r = 0; r < maxRounds; r++) {
      if (r > 0 && ctx.secondsLeft() < lastRoundSeconds * 1.2) {
        report.push(`stopped after ${r} round(s): another (~${lastRoundSeconds.toFixed(0)} s) would overrun the time budget`);
        break;
      }
      const t0 = Date.now();
      for (const [index, m] of measured.entries()) {
        const { setting } = m;
        const order = (r + index) % 2 === 0 ? (['bare', 'service'] as const) : (['service', 'bare'] as const);
        for (const variant of order) {
          ctx.log(`round ${r + 1}/${maxRounds}: ${setting.label}: ${variant}`);
          const result =
            variant === 'bare'
              ? await bare.run(setting, setting.workload.jobs)
              : await measureService(service, client, input, setting, setting.workload.jobs);
          if ('timings' in result) m.timings.push(...(result.timings as JobTiming[]));
          m[variant].push(result);
          ctx.log(
            `  ${fmt(result.throughput)} jobs/s in ${fmt(result.wallMs / 1000, 1)} s${result.errors.length ? `, ${result.errors.length} errors: ${result.errors[0]}` : ''}`,
          );
        }
      }
      if (im && !imProblem && webp4Measured && r < imRounds) {
        ctx.log(`round ${r + 1}/${maxRounds}: ImageMagick`);
        imRoundsDone.push(await measureImageMagick(im, input, imDir, imJobs));
      }
      lastRoundSeconds = (Date.now() - t0) / 1000;
      roundsRun++;
    }
    const serviceStderr = service.stderr().trim();
    await stopAll();

    // Summaries
    const perJob = (rs: RoundResult[], pick: (r: RoundResult) => number | null | undefined) =>
      rs.length ? median(rs.map((r) => (pick(r) ?? NaN) / r.jobs)) : null;
    const summary = (rs: RoundResult[]) => {
      const throughputs = rs.map((r) => r.throughput);
      return {
        rounds: rs.length,
        throughput: rs.length ? median(throughputs) : null,
        min: rs.length ? Math.min(...throughputs) : null,
        max: rs.length ? Math.max(...throughputs) : null,
        cpuPerJob: perJob(rs, (r) => r.cpuSeconds),
        mainThreadCpuPerJob: perJob(rs, (r) => r.mainThreadCpuSeconds),
        clientCpuPerJob: perJob(rs, (r) => r.clientCpuSeconds),
        foreignCpus: rs.length ? median(rs.map((r) => r.foreignCpus)) : null,
        peakRss: rs.length ? Math.max(...rs.map((r) => r.peakRss ?? 0)) || null : null,
        errors: rs.flatMap((r) => r.errors),
        wallMs: rs.map((r) => r.wallMs),
      };
    };
    /** Median of the per-round ratios: each round's two variants ran back to back, under the same load. */
    const ratio = (a: RoundResult[], b: RoundResult[]) => {
      const n = Math.min(a.length, b.length);
      return n ? median(Array.from({ length: n }, (_, i) => a[i]!.throughput / b[i]!.throughput)) : null;
    };

    const rows: Row[] = [];
    const diagnostics: Record<string, unknown> = {};
    report.push('');
    report.push('per round: jobs/s [CPUs used by the variant (service: + client) / CPUs busy with other work on the machine]');
    const cpusUsed = (r: RoundResult) => ((r.cpuSeconds ?? NaN) + (r.clientCpuSeconds ?? 0)) / (r.wallMs / 1000);
    const perRound = (rs: RoundResult[]) =>
      rs.map((r) => `${fmt(r.throughput).padStart(6)} [${fmt(cpusUsed(r), 1)}/${fmt(r.foreignCpus, 1)}]`).join('  ');
    for (const { setting, bare: bareRounds, service: serviceRounds } of measured) {
      report.push(`  ${setting.label.padEnd(18)} bare    ${perRound(bareRounds)}`);
      report.push(`  ${''.padEnd(18)} service ${perRound(serviceRounds)}`);
    }
    if (imRoundsDone.length) report.push(`  ${'1600 px WebP @4'.padEnd(18)} ImageMagick ${perRound(imRoundsDone)}`);

    report.push('');
    report.push(
      'service per job (ms, medians): upload · submit · queued→claimed · claimed→completed · completed→long-poll answer · download · whole job │ CPU: main thread · other threads · client',
    );
    for (const m of measured) {
      const { setting, timings } = m;
      const b = summary(m.bare);
      const s = summary(m.service);
      const serviceRatio = ratio(m.service, m.bare);
      const name = setting.workload.name;
      const inFlight = `${setting.inFlight} in flight`;
      const otherThreads = s.cpuPerJob !== null && s.mainThreadCpuPerJob !== null ? s.cpuPerJob - s.mainThreadCpuPerJob : null;
      rows.push({
        scenario: name,
        variant: `bare sharp, ${inFlight} (baseline)`,
        metric: 'throughput',
        value: b.throughput,
        unit: 'jobs/s',
        ratio: 1,
        baseline: 'bare sharp',
        peakRssBytes: b.peakRss,
        extra: { ...b, process: 'child (node bench/workers/bare-sharp.mjs)' },
        note: `CPU ${fmt((b.cpuPerJob ?? NaN) * 1000, 0)} ms/job; other work ${fmt(b.foreignCpus, 1)} CPUs`,
      });
      rows.push({
        scenario: name,
        variant: `service, ${inFlight}`,
        metric: 'throughput',
        value: s.throughput,
        unit: 'jobs/s',
        ratio: serviceRatio,
        baseline: 'bare sharp',
        target: { on: 'ratio', op: '>=', threshold: setting.workload.target },
        peakRssBytes: s.peakRss,
        extra: { ...s, process: 'child (node dist/src/main.js serve)' },
        note:
          `CPU ${fmt((s.cpuPerJob ?? NaN) * 1000, 0)} ms/job (+ client ${fmt((s.clientCpuPerJob ?? NaN) * 1000, 0)}); other work ${fmt(s.foreignCpus, 1)} CPUs` +
          `${s.errors.length ? `; ${s.errors.length} errors` : ''}`,
      });
      if (b.cpuPerJob && s.cpuPerJob) {
        rows.push({
          scenario: name,
          variant: `service CPU per job (service + client), ${inFlight}`,
          metric: 'CPU per job',
          value: (s.cpuPerJob + (s.clientCpuPerJob ?? 0)) * 1000,
          unit: 'ms',
          // Inverted so that, like the throughput ratio, higher is better: bare CPU / service CPU.
          ratio: b.cpuPerJob / (s.cpuPerJob + (s.clientCpuPerJob ?? 0)),
          baseline: 'bare sharp',
          extra: { service: s.cpuPerJob, client: s.clientCpuPerJob, bare: b.cpuPerJob },
          note: 'bare CPU ÷ (service + client CPU): the load-independent ceiling of the throughput ratio',
        });
      }
      rows.push({
        scenario: name,
        variant: `service main-thread CPU per job, ${inFlight}`,
        metric: 'main-thread CPU',
        value: s.mainThreadCpuPerJob === null ? null : s.mainThreadCpuPerJob * 1000,
        unit: 'ms',
        target: { on: 'value', op: '<=', threshold: MAIN_THREAD_TARGET_MS },
        extra: { mainThreadCpuPerJob: s.mainThreadCpuPerJob, otherThreadsCpuPerJob: otherThreads },
        note: `/proc/<pid>/task/<pid>/stat; other threads (libvips, libuv, V8 helpers) ${fmt((otherThreads ?? NaN) * 1000, 1)} ms/job`,
      });
      if (timings.length) {
        const phases = ['uploadMs', 'submitMs', 'queueWaitMs', 'processingMs', 'notifyMs', 'downloadMs', 'totalMs'] as const;
        const medians = Object.fromEntries(phases.map((p) => [p, median(timings.map((t) => t[p]))]));
        const p90 = Object.fromEntries(
          phases.map((p) => [
            p,
            percentile(
              timings.map((t) => t[p]),
              90,
            ),
          ]),
        );
        diagnostics[setting.label] = { medians, p90, jobs: timings.length };
        report.push(
          `  ${setting.label.padEnd(18)} ${phases.map((p) => fmt(medians[p], 0).padStart(4)).join(' · ')} │ ` +
            `${fmt((s.mainThreadCpuPerJob ?? NaN) * 1000, 1)} · ${fmt((otherThreads ?? NaN) * 1000, 1)} · ${fmt((s.clientCpuPerJob ?? NaN) * 1000, 1)}` +
            ` (bare: ${fmt((b.cpuPerJob ?? NaN) * 1000, 1)})`,
        );
      }
    }

    const m = summary(imRoundsDone);
    const webp4 = measured.find((x) => x.setting.workload.key === 'webp1600' && x.setting.inFlight === IM_IN_FLIGHT);
    const bareWebp4 = summary(webp4?.bare ?? []);
    rows.push({
      scenario: allWorkloads()[0]!.name,
      variant: im ? `ImageMagick ${/ImageMagick (\S+)/.exec(im.version)?.[1] ?? ''}, ${IM_IN_FLIGHT} in flight`.trim() : 'ImageMagick',
      metric: 'throughput',
      value: imProblem ? null : m.throughput,
      unit: 'jobs/s',
      ratio: imProblem || !webp4 ? null : ratio(imRoundsDone, webp4.bare),
      baseline: 'bare sharp',
      peakRssBytes: imProblem ? null : m.peakRss,
      extra: { ...m, command: im?.command, version: im?.version, problem: imProblem },
      note:
        imProblem ??
        `CPU ${fmt(m.cpuPerJob)} s/job (${fmt(m.cpuPerJob && bareWebp4.cpuPerJob ? m.cpuPerJob / bareWebp4.cpuPerJob : null, 1)}× bare); RSS = sum of ${IM_IN_FLIGHT} processes` +
          `${m.errors.length ? `; ${m.errors.length} errors` : ''}`,
    });

    const foreignCpus = median(measured.flatMap((x) => [...x.bare, ...x.service].map((r) => r.foreignCpus)));
    const cpus = os.availableParallelism();
    report.push('');
    report.push(
      `other work on the machine during the rounds: median ${fmt(foreignCpus, 2)} of ${cpus} CPUs busy (load average now ${loadAverage().join(' ')})`,
    );
    if (foreignCpus > 0.25 * cpus) {
      report.push(
        'WARNING: throughputs are low and their ratios unreliable: how the scheduler shares contended CPUs between the baseline and the ' +
          `service (WORKER_CONCURRENCY ${workerConcurrency}, sharp.concurrency() = ${bare.info.concurrency}) decides them more than the code does. ` +
          'The CPU-per-job figures do not depend on load; rerun on a quiet machine for the throughput targets.',
      );
    }
    if (serviceStderr) report.push(`service stderr: ${serviceStderr.slice(0, 500)}`);

    return {
      rows,
      report,
      details: {
        input: { file: input.path, description: input.description, width: input.width, height: input.height, bytes: input.bytes.length },
        roundsRun,
        warmup: WARMUP,
        foreignCpus,
        settings: measured.map(({ setting, bare: b, service: s }) => ({
          workload: setting.workload,
          inFlight: setting.inFlight,
          bare: b,
          service: s.map((r) => ({ ...r, timings: undefined })),
        })),
        service: { env: { ...service.env, PATH: undefined, HOME: undefined }, workerConcurrency, diagnostics },
        bare: bare.info,
        imagemagick: im ? { ...im, rounds: imRoundsDone, problem: imProblem } : null,
      },
    };
  },
};
