// Scenario: delivery URLs (`GET /r/{keyId}/{signature}/{transform}/{source}`, issue #24).
//
// Uncached renders — a DIV2K-sized photo (2040×1356) to fit inside 512×512 as JPEG q80, WebP q75,
// AVIF q65 and PNG — on three sides, round by round, the same in-flight count for each:
//   bare sharp — read the file, resize, encode with the service's encoder settings, in a child
//                process of its own (workers/bare-render.mjs): the baseline, ratio 1.00
//   service    — the real server as a child process, its /r/ route, URLs signed here
//   ipx        — unjs/ipx serving the same files from a folder (workers/ipx-server.mjs)
// Every request is a real miss with the same work: the photo is written as many files that differ
// only by a JPEG comment (COM segment; same pixels, same decoding), and no (file, format) is asked
// twice of a side. The service's files are uploaded first; ipx reads the same files from disk.
// Before the timed rounds every side renders BENCH_DELIVERY_WARMUP files per format, untimed:
// the comparison is of servers that have run a while (JIT-compiled), not of their first
// minute — the service's main thread spent 3.0–3.3 ms on its first hundred misses and 2.0–2.5 ms
// after a few hundred.
// Targets: service ≥ 0.85× bare sharp and ahead of ipx (per-round ratios, median), and the CPU per
// miss beyond libvips ≤ 3 ms: the service's CPU per render (all threads, /proc) minus bare
// sharp's, which is libvips's work plus a few lines of JavaScript.
//
// Cached hits: one render of about 20 KB asked again and again by wrk (one thread, 50
// connections, BENCH_HIT_SECONDS): req/s (target ≥ 10,000) and p99 (≤ 10 ms), and the service's
// CPU per hit. Miss and hit latencies, 4 in flight, beside (the misses' wrk, bench/lib/wrk.ts wrkUrlList).
//
// Environment: BENCH_DELIVERY_JOBS=96 (renders per format, round and side), BENCH_ROUNDS=5,
// BENCH_DELIVERY_WARMUP=48 (untimed renders per format and side before the rounds),
// BENCH_DELIVERY_IN_FLIGHT=4, BENCH_DELIVERY_FORMATS=jpeg,webp,avif,png, BENCH_HIT_SECONDS=10,
// BENCH_HIT_CONNECTIONS=50, BENCH_CORPUS; a profile: BENCH_SERVICE_NODE_ARGS='--cpu-prof …' with
// BENCH_DELIVERY_PARTS=misses (or hits: one render per format, then the hits) for one part alone;
// BENCH_DELIVERY_RUNNABLE=1 samples each side's runnable threads (RunnableSampler).
//
// Where the CPUs go during each side's runs is printed (machine = the side + the bench + other
// work): a side that leaves CPUs idle on a quiet machine (machine < 2 with other ≈ 0) is held
// back by its own waits, not by its CPU per render.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { ApiClient, ApiError, prepareMultipart } from '../lib/client.js';
import { envInt, median, percentile, sleep } from '../lib/pool.js';
import {
  cpuByThreadName,
  cpuSecondsOf,
  ForeignLoad,
  type CpuShares,
  loadAverage,
  MiB,
  RunnableSampler,
  threadCpuDelta,
  threadCpuSecondsOf,
} from '../lib/proc.js';
import { distIsStale, startService, type Service } from '../lib/service.js';
import { parseWrk, requireWrk, runWrk, wrkUrlList } from '../lib/wrk.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';
import { startWorkerProcess } from '../lib/worker-process.js';

const BOX = 512;
const TARGET_VS_BARE = 0.85;
const TARGET_VS_IPX = 1;
const TARGET_OVERHEAD_MS = 3;
const TARGET_HIT_RPS = 10_000;
const TARGET_HIT_P99_MS = 10;
const HIT_WARMUP_SECONDS = 2;
/** Requests of the hit render, BENCH_DELIVERY_IN_FLIGHT at a time, for its latency as a page sees it. */
const OWN_CLIENT_HITS = 400;

export interface Format {
  key: 'jpeg' | 'webp' | 'avif' | 'png';
  /** `q`, where the workload sets one (the PNG is lossless, zlib level 6). */
  quality?: number;
  mime: string;
}
export const ALL_FORMATS: Format[] = [
  { key: 'jpeg', quality: 80, mime: 'image/jpeg' },
  { key: 'webp', quality: 75, mime: 'image/webp' },
  { key: 'avif', quality: 65, mime: 'image/avif' },
  { key: 'png', mime: 'image/png' },
];
const fmt = (n: number | null | undefined, digits = 2) => (n === null || n === undefined || Number.isNaN(n) ? '—' : n.toFixed(digits));
/** The lowest and highest of some ratios, as `0.93–1.05`. */
const spread = (values: number[]) => (values.length ? `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}` : '—');
export const label = (f: Format) => `${f.key.toUpperCase()}${f.quality ? ` q${f.quality}` : ''}`;

type SideName = 'bare' | 'service' | 'ipx';
const SIDES: SideName[] = ['bare', 'service', 'ipx'];

interface RoundResult {
  wallMs: number;
  renders: number;
  throughput: number;
  cpuSeconds: number | null;
  /** Service only: its main thread (tid = pid), where JavaScript runs. */
  mainThreadCpuSeconds?: number | null;
  /** CPU seconds by thread name (bench/lib/proc.ts cpuByThreadName). */
  threads?: Record<string, number>;
  latenciesMs: number[];
  bytes: number[];
  errors: string[];
  /** CPUs busy meanwhile: the machine, this side's process, the bench (the HTTP sides' client), other work. */
  cpus: CpuShares;
  /** With BENCH_DELIVERY_RUNNABLE=1: the side's runnable threads, sampled (RunnableSampler). */
  runnable?: { mean: number; saturating: number };
}

/** BENCH_DELIVERY_RUNNABLE=1 samples each side's runnable threads every 5 ms (a diagnosis: it costs the bench's CPU). */
const sampleRunnable = (pid: number) => (process.env.BENCH_DELIVERY_RUNNABLE === '1' ? new RunnableSampler(pid).start() : undefined);

interface Side {
  name: SideName;
  pid: number;
  /** Renders files first … first + count − 1 in `format`, `inFlight` at a time. */
  run(format: Format, first: number, count: number, inFlight: number): Promise<RoundResult>;
}

// ---------------------------------------------------------------------------------------------
// The input: one DIV2K-sized photo, written as many byte-distinct files

interface Inputs {
  dir: string;
  files: string[];
  width: number;
  height: number;
  bytes: number;
  description: string;
}

const fileName = (index: number) => `photo-${String(index).padStart(4, '0')}.jpg`;

/**
 * The corpus' 12 MP camera photo (Carrie.jpg, 3000×4000) downscaled once to 2040 px wide and
 * cropped to DIV2K's 2040×1356 around its centre, JPEG q90; then `count` copies that differ only
 * by a COM segment after SOI, so every file is a distinct source with identical decoding work.
 */
export async function prepareInputs(ctx: BenchContext, count: number): Promise<Inputs> {
  const corpus = path.resolve(process.env.BENCH_CORPUS ?? path.join(ctx.repoRoot, '../shared/corpus'));
  const source = path.join(corpus, 'images/wikimedia/Carrie.jpg');
  const [width, height] = [2040, 1356];
  const scaled = sharp(await sharp(source).autoOrient().resize({ width }).toBuffer());
  const { height: scaledHeight = height } = await scaled.metadata();
  const photo = await scaled
    .extract({ left: 0, top: Math.max(0, Math.round((scaledHeight - height) / 2)), width, height })
    .jpeg({ quality: 90 })
    .toBuffer();
  const dir = path.join(ctx.tmpDir, 'photos');
  fs.mkdirSync(dir, { recursive: true });
  const files: string[] = [];
  for (let i = 0; i < count; i++) {
    const comment = Buffer.from(`imgapi bench copy ${i}`);
    const segment = Buffer.alloc(4);
    segment.writeUInt16BE(0xfffe, 0);
    segment.writeUInt16BE(comment.length + 2, 2);
    const file = path.join(dir, fileName(i));
    fs.writeFileSync(file, Buffer.concat([photo.subarray(0, 2), segment, comment, photo.subarray(2)]));
    files.push(file);
  }
  return {
    dir,
    files,
    width,
    height,
    bytes: photo.length,
    description: `images/wikimedia/Carrie.jpg (corpus, 12 MP camera photo) downscaled to ${width} px wide, cropped to ${width}×${height} (DIV2K's size), q90`,
  };
}

// ---------------------------------------------------------------------------------------------
// Child processes

async function startBare(ctx: BenchContext, inputs: Inputs, threads: number): Promise<Side & { info: Record<string, unknown> }> {
  const worker = await startWorkerProcess(ctx, 'bare-render.mjs', [inputs.dir, '0', String(threads)]);
  return {
    name: 'bare',
    pid: worker.pid,
    info: worker.ready,
    async run(format, first, count, inFlight) {
      const foreign = new ForeignLoad();
      const cpu0 = cpuSecondsOf(worker.pid);
      const threads0 = cpuByThreadName(worker.pid);
      const sampler = sampleRunnable(worker.pid);
      worker.child.stdin!.write(`run ${format.key} ${inFlight} ${first} ${count}\n`);
      const done = await worker.next();
      const runnable = sampler?.stop(os.availableParallelism());
      const cpu1 = cpuSecondsOf(worker.pid);
      const threads = threadCpuDelta(threads0, cpuByThreadName(worker.pid));
      const cpuSeconds = cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : null;
      const cpus = foreign.shares(cpuSeconds ?? 0);
      const widths = done.widths as number[];
      return {
        threads,
        runnable,
        wallMs: done.wallMs,
        renders: count,
        throughput: count / (done.wallMs / 1000),
        cpuSeconds,
        latenciesMs: done.latencies,
        bytes: done.sizes,
        errors: widths.some((w) => w !== BOX) ? [`output width ${widths.join(',')} ≠ ${BOX}`] : [],
        cpus,
      };
    },
  };
}

/**
 * CPU per empty file created in `dir` (the render cache's stores create one per miss there): bare
 * sharp and ipx create none, so what it costs on this machine's file system is the service's alone.
 * The files are left (their deletion would make the next creations dearer) for the cleanup.
 */
function fileCreateCpuMs(dir: string, count = 200): number {
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) fs.closeSync(fs.openSync(path.join(dir, `bench-create-probe-${i}`), 'w'));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / count;
}

/**
 * A side reached over HTTP: the service or ipx, asked by wrk walking the round's URLs once
 * (bench/lib/wrk.ts wrkUrlList, `inFlight` connections; each answer's head kept, the width check
 * after the round is timed). The client shares the CPUs with the side it drives, and bare sharp
 * has no client at all, so every ms it spends is taken from the service and ipx alike: it is
 * counted as the bench's share, and it is written in C. node:http in a process of its own had
 * cost 1–2 ms of CPU per miss at these latencies (0.1 of the 2 CPUs); in the bench's own
 * process, before that, ~5 ms per PNG answer (major collections of the bench's heap).
 */
function httpSide(
  name: SideName,
  pid: number,
  origin: string,
  pathOf: (format: Format, index: number) => string,
  dir: string,
  expectCache?: 'hit' | 'miss',
): Side {
  return {
    name,
    pid,
    async run(format, first, count, inFlight) {
      const paths = Array.from({ length: count }, (_, i) => pathOf(format, first + i));
      // Measured from wrk's first request to its last answer, its start and end left out.
      type Reading = { cpu: number | undefined; main: number | undefined; threads: ReturnType<typeof cpuByThreadName> };
      const reading = (): Reading => ({ cpu: cpuSecondsOf(pid), main: threadCpuSecondsOf(pid, pid), threads: cpuByThreadName(pid) });
      let from: (Reading & { foreign: ForeignLoad }) | undefined;
      let to: Reading | undefined;
      let sampler: RunnableSampler | undefined;
      const done = await wrkUrlList(origin, paths, {
        inFlight,
        mime: format.mime,
        expectCache,
        dir,
        started: () => {
          from = { foreign: new ForeignLoad(), ...reading() };
          sampler = sampleRunnable(pid);
        },
        stopped: () => {
          from?.foreign.end();
          to = reading();
        },
      });
      if (!from || !to) throw new Error(`${name}: wrk did not say when it started and stopped`);
      const runnable = sampler?.stop(os.availableParallelism());
      const threads = threadCpuDelta(from.threads, to.threads);
      const cpuSeconds = from.cpu !== undefined && to.cpu !== undefined ? to.cpu - from.cpu : null;
      const cpus = from.foreign.shares(cpuSeconds ?? 0, done.cpuSeconds);
      const widths = await Promise.all(done.heads.map(async (head) => (await sharp(head).metadata()).width));
      return {
        threads,
        runnable,
        wallMs: done.wallMs,
        renders: count,
        throughput: done.lengths.length / (done.wallMs / 1000),
        cpuSeconds,
        mainThreadCpuSeconds: name === 'service' && from.main !== undefined && to.main !== undefined ? to.main - from.main : undefined,
        latenciesMs: done.latencyPercentilesMs,
        bytes: done.lengths,
        errors: [...done.errors, ...widths.filter((w) => w !== BOX).map((w) => `output width ${w} ≠ ${BOX}`)],
        cpus,
      };
    },
  };
}

/** One GET: the whole answer (a 200 of type `mime`, else thrown) and its Imgapi-Cache header. */
async function get(url: string, mime: string): Promise<{ body: Buffer; cache: string | null }> {
  const response = await fetch(url);
  const body = Buffer.from(await response.arrayBuffer());
  if (response.status !== 200) throw new Error(`${response.status}: ${body.toString('utf8', 0, 300)}`);
  const type = response.headers.get('content-type');
  if (type !== mime) throw new Error(`content-type ${type} ≠ ${mime}`);
  return { body, cache: response.headers.get('imgapi-cache') };
}

const transformOf = (format: Format) => `w:${BOX},h:${BOX},f:${format.key}${format.quality ? `,q:${format.quality}` : ''}`;
const ipxModifiers = (format: Format) => `s_${BOX}x${BOX},fit_inside,f_${format.key}${format.quality ? `,q_${format.quality}` : ''}`;

/**
 * The files uploaded to the service and a signing key made: the signed path of file `index`'s
 * render in `format` (file ids in the order of `files`).
 */
export async function signedPathsOf(service: Service, files: string[]): Promise<(format: Format, index: number) => string> {
  const client = new ApiClient(service.url, service.key);
  const fileIds: string[] = [];
  for (const file of files) fileIds.push(await client.uploadPrepared(prepareMultipart(fs.readFileSync(file), path.basename(file), 'image/jpeg')));
  const created = await client.request('POST', '/api/signing-keys', { json: {} });
  if (created.status !== 201) throw new ApiError('POST /api/signing-keys', created);
  const key = created.body.data as { keyId: string; secret: string };
  return (format, index) => signedPath(key, transformOf(format), fileIds[index]!);
}

/** `/r/{keyId}/{signature}/{transform}/{source}`, signed as API.md says. */
function signedPath(key: { keyId: string; secret: string }, transform: string, source: string): string {
  const signed = `${transform}/${source}`;
  return `/r/${key.keyId}/${crypto.createHmac('sha256', key.secret).update(signed).digest('base64url')}/${signed}`;
}

interface HitTarget {
  pid: number;
  format: Format;
  connections: number;
  seconds: number;
  inFlight: number;
  /** The service's origin and the hit URL's path under it. */
  origin: string;
  path: string;
}

/** wrk on one URL for `seconds` (after a warm-up), with the CPU the serving process used meanwhile. */
async function wrkOn(ctx: BenchContext, pid: number, url: string, connections: number, seconds: number) {
  const args = (duration: number) => ['-t1', `-c${connections}`, `-d${duration}s`, '--latency', url];
  await runWrk(args(HIT_WARMUP_SECONDS));
  await sleep(500);
  const foreign = new ForeignLoad();
  const cpu0 = cpuSecondsOf(pid);
  const main0 = threadCpuSecondsOf(pid, pid);
  const wrk = parseWrk(await runWrk(args(seconds)));
  const cpu = (cpuSecondsOf(pid) ?? NaN) - (cpu0 ?? NaN);
  const mainCpu = (threadCpuSecondsOf(pid, pid) ?? NaN) - (main0 ?? NaN);
  return {
    wrk,
    cpuUs: (cpu * 1e6) / wrk.requests,
    mainUs: (mainCpu * 1e6) / wrk.requests,
    foreignCpus: foreign.stop(cpu), // wrk's own CPU counts as "other work" here
  };
}

/**
 * One stored render asked again and again: wrk's req/s and latency and the service's CPU per
 * hit, against plain node:http answering the same bytes from memory (workers/static-server.mjs:
 * what this machine and wrk allow at all), then its latency at BENCH_DELIVERY_IN_FLIGHT.
 */
async function measureHits(ctx: BenchContext, hit: HitTarget): Promise<{ rows: Row[]; report: string[]; details: Record<string, unknown> }> {
  const { pid, format, connections, seconds, inFlight, origin } = hit;
  const url = origin + hit.path;
  const report: string[] = [];
  const check = await get(url, format.mime);
  if (check.cache !== 'hit') report.push(`WARNING: the hit URL answered Imgapi-Cache: ${check.cache}`);
  const bodyFile = path.join(ctx.tmpDir, 'hit-render');
  fs.writeFileSync(bodyFile, check.body);
  const staticServer = await startWorkerProcess(ctx, 'static-server.mjs', [bodyFile, format.mime]);
  ctx.log(`cached hits: node:http from memory, ${connections} connections for ${seconds} s`);
  const bare = await wrkOn(ctx, staticServer.pid, `http://127.0.0.1:${staticServer.ready.port}/`, connections, seconds);
  await staticServer.stop();
  ctx.log(`cached hits: service, ${connections} connections for ${seconds} s`);
  const served = await wrkOn(ctx, pid, url, connections, seconds);
  const own = await httpSide('service', pid, origin, () => hit.path, ctx.tmpDir, 'hit').run(format, 0, OWN_CLIENT_HITS, inFlight);
  const ownLatency = { p50: percentile(own.latenciesMs, 50), p99: percentile(own.latenciesMs, 99) };

  const line = (name: string, r: typeof served) =>
    `  ${name}: ${r.wrk.requests} requests, ${fmt(r.wrk.rps, 0)} req/s; p50 ${fmt(r.wrk.p50Ms)} ms, p90 ${fmt(r.wrk.p90Ms)} ms, ` +
    `p99 ${fmt(r.wrk.p99Ms)} ms, max ${fmt(r.wrk.maxMs, 1)} ms; CPU ${fmt(r.cpuUs, 0)} µs per request (main thread ${fmt(r.mainUs, 0)} µs); ` +
    `other CPUs busy (wrk included) ${fmt(r.foreignCpus)}`;
  report.push(
    `cached hits: wrk -t1 -c${connections} -d${seconds}s --latency on one URL, ${check.body.length} bytes:`,
    line('node:http from memory', bare),
    line('service /r/ (signed)', served),
    `hits from wrk, ${inFlight} in flight: p50 ${fmt(ownLatency.p50)} ms, p99 ${fmt(ownLatency.p99)} ms` +
      `${own.errors.length ? `; ${own.errors.length} errors: ${own.errors[0]}` : ''}`,
  );
  for (const r of [bare, served]) {
    if (r.wrk.non2xx) report.push(`WARNING: ${r.wrk.non2xx} answers were not 2xx`);
    if (r.wrk.socketErrors) report.push(`WARNING: ${r.wrk.socketErrors}`);
  }
  const scenario = `delivery hit ${label(format)} ${fmt(check.body.length / 1024, 1)} KB`;
  const row = (metric: string, value: number, unit: string, target?: Row['target'], note?: string): Row => ({
    scenario,
    variant: `service /r/, wrk ${connections} connections`,
    metric,
    value,
    unit,
    target,
    note,
  });
  return {
    rows: [
      {
        scenario,
        variant: `node:http from memory, wrk ${connections} connections (baseline)`,
        metric: 'throughput',
        value: bare.wrk.rps,
        unit: 'req/s',
        ratio: 1,
        baseline: 'node:http from memory',
        note: `p50 ${fmt(bare.wrk.p50Ms)} ms, p99 ${fmt(bare.wrk.p99Ms)} ms; CPU ${fmt(bare.cpuUs, 0)} µs/request; other work ${fmt(bare.foreignCpus, 1)} CPUs (wrk included)`,
      },
      {
        ...row(
          'throughput',
          served.wrk.rps,
          'req/s',
          { on: 'value', op: '>=', threshold: TARGET_HIT_RPS },
          served.wrk.non2xx ? `${served.wrk.non2xx} non-2xx` : undefined,
        ),
        ratio: served.wrk.rps / bare.wrk.rps,
        baseline: 'node:http from memory',
      },
      row(
        'p99',
        served.wrk.p99Ms,
        'ms',
        { on: 'value', op: '<=', threshold: TARGET_HIT_P99_MS },
        `p50 ${fmt(served.wrk.p50Ms)} ms; other work ${fmt(served.foreignCpus, 1)} CPUs (wrk included)`,
      ),
      {
        ...row('CPU per hit', served.cpuUs, 'µs', undefined, `main thread ${fmt(served.mainUs, 0)} µs; ratio: baseline CPU ÷ service CPU`),
        // Inverted, as resize-throughput's CPU rows are, so that higher is better.
        ratio: bare.cpuUs / served.cpuUs,
        baseline: 'node:http from memory',
      },
      { ...row('p99', ownLatency.p99, 'ms', undefined, `p50 ${fmt(ownLatency.p50)} ms`), variant: `service /r/, ${inFlight} in flight` },
    ],
    report,
    details: {
      bytes: check.body.length,
      baseline: { ...bare, wrk: { ...bare.wrk, output: undefined } },
      service: { ...served, wrk: { ...served.wrk, output: undefined } },
      ownClient: ownLatency,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The scenario

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  requireWrk();
  const maxRounds = envInt('BENCH_ROUNDS', 5);
  const jobs = envInt('BENCH_DELIVERY_JOBS', 96);
  const warmup = envInt('BENCH_DELIVERY_WARMUP', 48);
  const inFlight = envInt('BENCH_DELIVERY_IN_FLIGHT', 4);
  const hitSeconds = envInt('BENCH_HIT_SECONDS', 10);
  const connections = envInt('BENCH_HIT_CONNECTIONS', 50);
  const wanted = process.env.BENCH_DELIVERY_FORMATS?.split(',').filter(Boolean);
  const formats = ALL_FORMATS.filter((f) => !wanted?.length || wanted.includes(f.key));
  const parts = process.env.BENCH_DELIVERY_PARTS?.split(',') ?? ['misses', 'hits'];
  const report: string[] = [];

  // File 0 is the cached hit; it and files 1 … warmup warm every side up; round r uses files
  // 1 + warmup + r·jobs … warmup + (r+1)·jobs.
  const inputs = await prepareInputs(ctx, 1 + warmup + maxRounds * jobs);
  report.push(`input: ${inputs.description}: ${(inputs.bytes / MiB).toFixed(2)} MiB, ${inputs.files.length} files differing by a JPEG comment only`);

  const serviceEnv: Record<string, string> = process.env.BENCH_SERVICE_ENV ? JSON.parse(process.env.BENCH_SERVICE_ENV) : {};
  // The service's libvips threads per image (IMAGE_THREADS, default the CPU count), given to both
  // baselines too: sharp's own default on glibc is 1, and AVIF's encoder (libaom) spends about
  // 20 ms more CPU per render here with 2 threads than with 1 (and writes other bytes: 30,404
  // against 30,151), so at sharp's default the comparison measured the thread count, not the service.
  const threads = Number(serviceEnv.IMAGE_THREADS ?? Math.max(1, os.availableParallelism()));
  ctx.log('starting bare sharp and ipx');
  const bare = await startBare(ctx, inputs, threads);
  const ipxWorker = await startWorkerProcess(ctx, 'ipx-server.mjs', [inputs.dir, String(threads)]);
  const ipxUrl = `http://127.0.0.1:${ipxWorker.ready.port}`;
  const ipx = httpSide('ipx', ipxWorker.pid, ipxUrl, (format, index) => `/${ipxModifiers(format)}/${fileName(index)}`, ctx.tmpDir);

  const stale = distIsStale(ctx.repoRoot);
  if (stale) report.push(`WARNING: ${stale}`);
  ctx.log('starting the service and uploading the files');
  const service = await startService({
    repoRoot: ctx.repoRoot,
    dir: path.join(ctx.tmpDir, 'service'),
    plans: { max: { requestsPerSecond: 1_000_000, monthlyRenders: 1_000_000_000 } },
    env: serviceEnv,
  });
  ctx.onCleanup(() => service.stop());
  const pathOf = await signedPathsOf(service, inputs.files);
  const serviceSide = httpSide('service', service.pid, service.url, pathOf, ctx.tmpDir, 'miss');
  const sides: Record<SideName, Side> = { bare, service: serviceSide, ipx };
  report.push(
    `bare sharp: child process, sharp ${bare.info.sharp} / libvips ${bare.info.vips}, sharp.concurrency() ${bare.info.concurrency}; ` +
      `service: child process, SQLite, RENDER_CONCURRENCY ${service.env.RENDER_CONCURRENCY ?? `default (${os.availableParallelism()} CPUs)`}` +
      `${Object.keys(serviceEnv).length ? `, BENCH_SERVICE_ENV ${JSON.stringify(serviceEnv)}` : ''}; ipx: child process (workers/ipx-server.mjs)`,
  );
  report.push(
    `transform: service ${transformOf(formats[0]!)} (fit inside by default), ipx ${ipxModifiers(formats[0]!)}, bare resize({width: ${BOX}, height: ${BOX}, fit: 'inside'}); ` +
      `${jobs} renders per format, round and side, ${inFlight} in flight; up to ${maxRounds} rounds, the sides back to back in a rotating order`,
  );

  // Untimed: file 0 on every side (the cached hit's render), and with misses to measure the
  // BENCH_DELIVERY_WARMUP files after it (see the header).
  const warmRenders = parts.includes('misses') ? 1 + warmup : 1;
  ctx.log(`warming up: ${warmRenders} render(s) per format and side`);
  for (const format of formats) {
    for (const side of Object.values(sides)) {
      const warm = await side.run(format, 0, warmRenders, inFlight);
      if (warm.errors.length) throw new Error(`${side.name} warm-up (${format.key}): ${warm.errors[0]}`);
    }
  }

  // What the service spends doing nothing (its task workers polling the queue), part of every
  // CPU-per-render figure below: measured for the record.
  const idleCpu0 = cpuSecondsOf(service.pid) ?? NaN;
  await sleep(2000);
  const idleMsPerSecond = (((cpuSecondsOf(service.pid) ?? NaN) - idleCpu0) * 1000) / 2;
  report.push(`service idle (no request, task workers waiting): ${fmt(idleMsPerSecond, 1)} ms of CPU a second`);
  report.push(
    `a file created where the service's stores create theirs: ${fmt(fileCreateCpuMs(path.join(service.env.DATA_DIR!, 'objects', '.tmp')), 3)} ms of CPU ` +
      '(each miss creates one; ext4 without a journal skips the inodes freed near it in the last minutes, so after mass deletions there it costs up to 0.9 ms)',
  );

  // Rounds
  const measured = new Map(formats.map((f) => [f.key, { bare: [] as RoundResult[], service: [] as RoundResult[], ipx: [] as RoundResult[] }]));
  let lastRoundSeconds = 0;
  let roundsRun = 0;
  for (let r = 0; r < (parts.includes('misses') ? maxRounds : 0); r++) {
    if (r > 0 && ctx.secondsLeft() < lastRoundSeconds * 1.2 + hitSeconds + 10) {
      report.push(`stopped after ${r} round(s): another (~${lastRoundSeconds.toFixed(0)} s) would overrun the time budget`);
      break;
    }
    const t0 = Date.now();
    for (const [index, format] of formats.entries()) {
      const shift = (r + index) % SIDES.length;
      for (const name of [...SIDES.slice(shift), ...SIDES.slice(0, shift)]) {
        ctx.log(`round ${r + 1}/${maxRounds}: ${label(format)}: ${name}`);
        const result = await sides[name].run(format, 1 + warmup + r * jobs, jobs, inFlight);
        measured.get(format.key)![name].push(result);
        ctx.log(`  ${fmt(result.throughput)} renders/s${result.errors.length ? `, ${result.errors.length} errors: ${result.errors[0]}` : ''}`);
      }
    }
    lastRoundSeconds = (Date.now() - t0) / 1000;
    roundsRun++;
  }

  // Cached hits: the render of file 0 (made at the warm-up), about 20 KB.
  const hitFormat = formats.find((f) => f.key === 'webp') ?? formats[0]!;
  const hits = parts.includes('hits')
    ? await measureHits(ctx, {
        pid: service.pid,
        origin: service.url,
        path: pathOf(hitFormat, 0),
        format: hitFormat,
        connections,
        seconds: hitSeconds,
        inFlight,
      })
    : undefined;
  const serviceStderr = service.stderr().trim();

  // Summaries
  const rows: Row[] = [];
  const perRender = (rs: RoundResult[], pick: (r: RoundResult) => number | null | undefined) =>
    rs.length ? median(rs.map((r) => ((pick(r) ?? NaN) * 1000) / r.renders)) : NaN;
  const roundRatios = (a: RoundResult[], b: RoundResult[]) =>
    Array.from({ length: Math.min(a.length, b.length) }, (_, i) => a[i]!.throughput / b[i]!.throughput);
  const ratio = (a: RoundResult[], b: RoundResult[]) => {
    const ratios = roundRatios(a, b);
    return ratios.length ? median(ratios) : null;
  };
  const all = <T>(rs: RoundResult[], pick: (r: RoundResult) => T[]): T[] => rs.flatMap(pick);
  const details: Record<string, unknown> = {};
  report.push('');
  report.push('per round: renders/s [CPUs busy with other work on the machine meanwhile]');
  for (const format of formats) {
    const m = measured.get(format.key)!;
    for (const name of SIDES) {
      report.push(
        `  ${label(format).padEnd(9)} ${name.padEnd(7)} ${m[name].map((r) => `${fmt(r.throughput).padStart(6)} [${fmt(r.cpus.foreign, 1)}]`).join('  ')}`,
      );
    }
  }
  report.push('');
  report.push(
    `CPUs busy during each side's runs (medians of ${os.availableParallelism()}): machine = the side's process + the bench (its HTTP client) + other work`,
  );
  for (const format of formats) {
    const m = measured.get(format.key)!;
    for (const name of SIDES) {
      const share = (pick: (c: CpuShares) => number) => fmt(median(m[name].map((r) => pick(r.cpus))));
      const runnable = m[name].every((r) => r.runnable)
        ? `; runnable threads: mean ${fmt(median(m[name].map((r) => r.runnable!.mean)))}, ≥ ${os.availableParallelism()} in ${fmt(100 * median(m[name].map((r) => r.runnable!.saturating)), 0)} % of samples`
        : '';
      report.push(
        `  ${label(format).padEnd(9)} ${name.padEnd(7)} machine ${share((c) => c.machine)} = ${name} ${share((c) => c.measured)} + bench ${share((c) => c.bench)} + other ${share((c) => c.foreign)}${runnable}`,
      );
    }
  }
  report.push('');
  report.push('per render (medians): CPU ms (service: main thread) · latency p50 / p99 ms · bytes');
  for (const format of formats) {
    const m = measured.get(format.key)!;
    const name = `delivery miss 2MP→${BOX} ${label(format)}`;
    const cpu = {
      bare: perRender(m.bare, (r) => r.cpuSeconds),
      service: perRender(m.service, (r) => r.cpuSeconds),
      ipx: perRender(m.ipx, (r) => r.cpuSeconds),
    };
    const serviceMain = perRender(m.service, (r) => r.mainThreadCpuSeconds);
    const latency = (name: SideName) => {
      const l = all(m[name], (r) => r.latenciesMs);
      return { p50: percentile(l, 50), p99: percentile(l, 99) };
    };
    const errors = (name: SideName) => all(m[name], (r) => r.errors);
    const throughput = (name: SideName) => (m[name].length ? median(m[name].map((r) => r.throughput)) : null);
    for (const side of SIDES) {
      const l = latency(side);
      report.push(
        `  ${label(format).padEnd(9)} ${side.padEnd(7)} CPU ${fmt(cpu[side], 1)}${side === 'service' ? ` (main ${fmt(serviceMain, 1)})` : ''} · ` +
          `${fmt(l.p50, 0)} / ${fmt(l.p99, 0)} ms · ${fmt(median(all(m[side], (r) => r.bytes)), 0)} B${errors(side).length ? ` · ${errors(side).length} errors: ${errors(side)[0]}` : ''}`,
      );
    }
    const foreign = median(SIDES.flatMap((s) => m[s].map((r) => r.cpus.foreign)));
    const note = (side: SideName) => {
      const l = latency(side);
      return `CPU ${fmt(cpu[side], 1)} ms/render; p50 ${fmt(l.p50, 0)} ms, p99 ${fmt(l.p99, 0)} ms; other work ${fmt(foreign, 1)} CPUs${errors(side).length ? `; ${errors(side).length} errors` : ''}`;
    };
    rows.push({
      scenario: name,
      variant: `bare sharp, ${inFlight} in flight (baseline)`,
      metric: 'throughput',
      value: throughput('bare'),
      unit: 'renders/s',
      ratio: 1,
      baseline: 'bare sharp',
      note: note('bare'),
    });
    rows.push({
      scenario: name,
      variant: `service /r/, ${inFlight} in flight`,
      metric: 'throughput',
      value: throughput('service'),
      unit: 'renders/s',
      ratio: ratio(m.service, m.bare),
      baseline: 'bare sharp',
      target: { on: 'ratio', op: '>=', threshold: TARGET_VS_BARE },
      note: `${note('service')}; main thread ${fmt(serviceMain, 1)} ms`,
    });
    rows.push({
      scenario: name,
      variant: `ipx ${inFlight} in flight`,
      metric: 'throughput',
      value: throughput('ipx'),
      unit: 'renders/s',
      ratio: ratio(m.ipx, m.bare),
      baseline: 'bare sharp',
      note: note('ipx'),
    });
    rows.push({
      scenario: name,
      variant: 'service ÷ ipx',
      metric: 'throughput ratio',
      value: null,
      unit: '',
      ratio: ratio(m.service, m.ipx),
      baseline: 'ipx',
      target: { on: 'ratio', op: '>=', threshold: TARGET_VS_IPX },
      // One round's ratio moves by up to ±0.1 here: the spread tells a lead from parity.
      note: `rounds ${spread(roundRatios(m.service, m.ipx))}; CPU per render ipx ÷ service ${fmt(cpu.ipx / cpu.service, 2)}`,
    });
    rows.push({
      scenario: name,
      variant: 'service CPU per miss beyond libvips',
      metric: 'CPU per miss − bare CPU per render',
      value: cpu.service - cpu.bare,
      unit: 'ms',
      target: { on: 'value', op: '<=', threshold: TARGET_OVERHEAD_MS },
      note: `service ${fmt(cpu.service, 1)} − bare ${fmt(cpu.bare, 1)} ms (ipx: ${fmt(cpu.ipx - cpu.bare, 1)} ms beyond)`,
    });
    details[format.key] = {
      cpuMsPerRender: cpu,
      serviceMainThreadMs: serviceMain,
      rounds: m,
      latency: { bare: latency('bare'), service: latency('service'), ipx: latency('ipx') },
    };
  }

  report.push('');
  report.push('CPU per render by thread (ms, all rounds; libvips works on libuv-worker threads and its own pool)');
  for (const format of formats) {
    const m = measured.get(format.key)!;
    for (const side of SIDES) {
      const renders = m[side].reduce((n, r) => n + r.renders, 0);
      const sums: Record<string, number> = {};
      for (const r of m[side]) for (const [name, seconds] of Object.entries(r.threads ?? {})) sums[name] = (sums[name] ?? 0) + seconds;
      const parts = Object.entries(sums)
        .sort((a, b) => b[1] - a[1])
        .map(([name, seconds]) => `${name} ${fmt((seconds * 1000) / renders, 1)}`);
      details[format.key] = { ...(details[format.key] as object), [`${side}ThreadsMs`]: sums };
      report.push(`  ${label(format).padEnd(9)} ${side.padEnd(7)} ${parts.join(' · ')}`);
    }
  }

  if (hits) {
    report.push('', ...hits.report);
    rows.push(...hits.rows);
  }

  const foreignCpus = median([...measured.values()].flatMap((m) => SIDES.flatMap((s) => m[s].map((r) => r.cpus.foreign))));
  const cpus = os.availableParallelism();
  report.push('');
  report.push(
    `other work on the machine during the rounds: median ${fmt(foreignCpus)} of ${cpus} CPUs busy (load average now ${loadAverage().join(' ')})`,
  );
  if (foreignCpus > 0.25 * cpus) {
    report.push(
      'WARNING: throughputs are low and their ratios approximate: other work took CPUs from all three sides. The CPU-per-render figures do not depend on load.',
    );
  }
  if (serviceStderr) report.push(`service stderr: ${serviceStderr.slice(0, 500)}`);
  await service.stop();

  return {
    rows,
    report,
    details: {
      input: { description: inputs.description, width: inputs.width, height: inputs.height, bytes: inputs.bytes, files: inputs.files.length },
      jobs,
      inFlight,
      roundsRun,
      serviceIdleCpuMsPerSecond: idleMsPerSecond,
      foreignCpus,
      formats: details,
      hits: hits?.details,
      bare: bare.info,
    },
  };
}

export const deliveryScenario: Scenario = {
  name: 'delivery',
  title: `delivery URLs: uncached renders of a 2 MP photo to fit ${BOX} px (JPEG, WebP, AVIF, PNG) against bare sharp and ipx; cached hits with wrk`,
  run,
};
