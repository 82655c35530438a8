// wrk, the HTTP load generator (Debian package `wrk`, installed by `node scripts/setup.mjs --bench`
// as root): a Node client on this 2-core machine spends more CPU per request than the service
// does and would measure itself. Runs it and reads its `--latency` report.
import { spawn, spawnSync } from 'node:child_process';

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
