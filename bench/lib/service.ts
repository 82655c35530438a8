// The service under test as a child process — `node dist/src/main.js serve` on SQLite in a temp
// DATA_DIR — so its memory and CPU are measured apart from the bench's own HTTP client. It runs on
// the allocator `npm start` gives it (scripts/start.mjs: jemalloc preloaded when installed);
// IMGAPI_JEMALLOC=0 in its environment keeps glibc's.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { findJemalloc, serverEnvironment } from '../../scripts/start.mjs';
import { sleep } from './pool.js';
import { freePort } from '../../test/e2e/processes.js';

/** Whether dist/ holds this checkout's code, as the tests decide it (MAIN_ENTRY). */
export { distIsStale } from '../../test/helpers.js';

export interface ServiceOptions {
  repoRoot: string;
  /** A directory of its own; the data dir and plans file go in it. */
  dir: string;
  /** PLANS_FILE contents. */
  plans?: Record<string, Record<string, unknown>>;
  /** Extra environment for the service (e.g. QUEUE_POLL_MS for experiments). */
  env?: Record<string, string>;
  plan?: 'pro' | 'max';
}

export interface Service {
  url: string;
  pid: number;
  key: string;
  env: Record<string, string>;
  /** stderr of the service so far (it runs with LOG_LEVEL=silent, so only crashes). */
  stderr(): string;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** Only what the service needs from our environment: no stray DATABASE_URL, WORKER_CONCURRENCY… */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  // IMGAPI_JEMALLOC=0: the whole bench on glibc's allocator (the baselines too: lib/worker-process.ts).
  for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG', 'LC_ALL', 'TZ', 'IMGAPI_JEMALLOC']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

export async function startService(options: ServiceOptions): Promise<Service> {
  const mainJs = path.join(options.repoRoot, 'dist', 'src', 'main.js');
  const dataDir = path.join(options.dir, 'data');
  fs.mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const env = serverEnvironment(
    {
      ...baseEnv(),
      DATA_DIR: dataDir,
      DATABASE_URL: `sqlite:${path.join(dataDir, 'imgapi.db')}`,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      ...options.env,
    },
    findJemalloc(),
  ) as Record<string, string>;
  if (options.plans) {
    env.PLANS_FILE = path.join(options.dir, 'plans.json');
    fs.writeFileSync(env.PLANS_FILE, JSON.stringify(options.plans));
  }

  // The account and its key through the operator CLI, before the server opens the database.
  const cli = (args: string[]) => {
    const r = spawnSync(process.execPath, [mainJs, ...args], { env, encoding: 'utf8', timeout: 60_000 });
    if (r.status !== 0) throw new Error(`imgapi ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stderr || r.error?.message}`);
    return r.stdout.trim();
  };
  const email = 'bench@example.com';
  cli(['users', 'create', '--email', email, '--plan', options.plan ?? 'max']);
  const key = cli(['keys', 'create', '--email', email, '--name', 'bench']);

  // BENCH_SERVICE_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof': Node options for the server
  // alone (not its CLI calls above); --cpu-prof is refused in NODE_OPTIONS.
  const nodeArgs = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, mainJs, 'serve'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    if (stderr.length < 100_000) stderr += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;

  const stop = async (graceMs = 25_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(killer);
  };

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode} before it served: ${stderr.trim()}`);
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop(1000);
      throw new Error(`the service did not answer /healthz within 30 s: ${stderr.trim()}`);
    }
    await sleep(100);
  }
  return { url, pid: child.pid!, key, env, stderr: () => stderr, stop };
}
