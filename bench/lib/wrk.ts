// wrk, the HTTP load generator (Debian package `wrk`, installed by `node scripts/setup.mjs --bench`
// as root): a Node client on this 2-core machine spends more CPU per request than the service
// does and would measure itself. Runs it and reads its `--latency` report.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface WrkResult {
  requests: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  non2xx: number;
  socketErrors: string | undefined;
  output: string;
}

/** "1.23ms", "850.00us", "1.02s" → milliseconds. */
function durationMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text.trim());
  if (!match) return NaN;
  const value = Number(match[1]);
  return { us: value / 1000, ms: value, s: value * 1000, m: value * 60_000 }[match[2] as 'us' | 'ms' | 's' | 'm'];
}

export function parseWrk(output: string): WrkResult {
  const pct = (p: string) => durationMs(new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(output)?.[1] ?? '');
  const done = /(\d+) requests in ([\d.]+)(us|ms|s|m)/.exec(output);
  const requests = Number(done?.[1] ?? NaN);
  const seconds = done ? durationMs(`${done[2]}${done[3]}`) / 1000 : NaN;
  return {
    requests,
    seconds,
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1] ?? NaN),
    p50Ms: pct('50'),
    p90Ms: pct('90'),
    p99Ms: pct('99'),
    maxMs: durationMs(/^\s+Latency\s+\S+\s+\S+\s+(\S+)/m.exec(output)?.[1] ?? ''),
    non2xx: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? 0),
    socketErrors: /Socket errors:.*/.exec(output)?.[0],
    output,
  };
}

export function runWrk(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`wrk exited with ${code}: ${out.trim()}`))));
  });
}

/** Throws with the way to install wrk when it is missing. */
export function requireWrk(): void {
  if (spawnSync('wrk', ['--version'], { encoding: 'utf8' }).error) {
    throw new Error('wrk is not installed: `node scripts/setup.mjs --bench` installs it as root (apt-get install wrk)');
  }
}

/** What wrkUrlList measured of one walk through its paths. */
export interface UrlListResult {
  wallMs: number;
  /** wrk's latency percentiles 1 … 100 (ms): the distribution, not every request's. */
  latencyPercentilesMs: number[];
  /** Each answer's length in bytes, in the order they came. */
  lengths: number[];
  /** Each answer's first 64 KiB, in the same order. */
  heads: Buffer[];
  errors: string[];
  /** wrk's own CPU from the first request to the last answer. */
  cpuSeconds: number;
}

const URL_LIST_SCRIPT = fileURLToPath(new URL('../workers/url-list.lua', import.meta.url));

/**
 * wrk asking each of `paths` (under `origin`) once, `inFlight` at a time, every answer checked
 * to be a 200 of `mime` (with `Imgapi-Cache: expectCache` when given): workers/url-list.lua.
 * A client written in C, so that what the bench spends asking (~0.1 ms per request here,
 * against ~1–2 ms for node:http under the same load) takes little from the side it measures.
 */
export async function wrkUrlList(
  origin: string,
  paths: string[],
  options: {
    inFlight: number;
    mime: string;
    expectCache?: string;
    dir: string;
    /** Called as wrk says it sent the first request and as it says the last answer came. */
    started?: () => void;
    stopped?: () => void;
  },
): Promise<UrlListResult> {
  const pathsFile = path.join(options.dir, 'url-list-paths');
  const headsFile = path.join(options.dir, 'url-list-heads');
  fs.writeFileSync(pathsFile, `${paths.join('\n')}\n`);
  const connections = Math.min(options.inFlight, paths.length);
  const args = ['-t1', `-c${connections}`, '-d3600s', '--timeout', '600s', '-s', URL_LIST_SCRIPT, origin, '--'];
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn('wrk', [...args, pathsFile, options.mime, options.expectCache ?? '-', headsFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      const seen = out;
      out += chunk;
      if (!seen.includes('url-list started\n') && out.includes('url-list started\n')) options.started?.();
      // wrk's main thread sleeps out -d whatever its threads do: the script says when it is done.
      if (!seen.includes('url-list stopped\n') && out.includes('url-list stopped\n')) {
        options.stopped?.();
        child.kill('SIGINT');
      }
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`wrk exited with ${code}: ${out.trim()}`))));
  });
  const values = (name: string) => [...output.matchAll(new RegExp(`^url-list ${name} (.*)$`, 'gm'))].map((m) => m[1]!);
  const heads: Buffer[] = [];
  const bytes = fs.readFileSync(headsFile);
  for (let at = 0; at < bytes.length;) {
    const newline = bytes.indexOf(0x0a, at);
    const length = Number(bytes.toString('latin1', at, newline));
    heads.push(bytes.subarray(newline + 1, newline + 1 + length));
    at = newline + 1 + length;
  }
  const errors = values('error');
  const answered = Number(values('requests')[0]);
  if (answered !== paths.length) errors.push(`wrk answered ${answered} of ${paths.length} requests: ${output.trim().slice(0, 500)}`);
  return {
    wallMs: Number(values('duration_us')[0]) / 1000,
    latencyPercentilesMs: values('latency_us').map((us) => Number(us) / 1000),
    lengths: values('length').map(Number),
    heads,
    errors,
    cpuSeconds: Number(values('cpu_seconds')[0]),
  };
}
