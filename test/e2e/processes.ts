// The service as child processes, run as this checkout is (MAIN_ENTRY: the build when it is
// current, else the sources through tsx) or from the build: what the multi-process tests
// (scale-out, PostgreSQL stress, storage invariant with a SIGKILL) start and watch.
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { MAIN_ENTRY, REPO_ROOT, nodeOptions, sleep } from '../helpers.js';

/** The built entry point (dist/), for tests that run what `npm start` runs. */
export const BUILT_MAIN = path.join(REPO_ROOT, 'dist', 'src', 'main.js');

export interface Proc {
  name: string;
  child: ChildProcess;
  /** The JSON log lines so far. */
  logs: Record<string, unknown>[];
  /** Everything it wrote (stdout and stderr), up to 1 MB. */
  output(): string;
  alive(): boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `imgapi <args>` in a child process with exactly `env` (plus PATH and HOME), from this checkout as it is (MAIN_ENTRY) or from the build. */
export function startProc(name: string, args: string[], env: Record<string, string>, from: 'current' | 'build' = 'current'): Proc {
  const entry = from === 'build' ? [BUILT_MAIN] : MAIN_ENTRY;
  const child = spawn(process.execPath, [...entry, ...args], {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...nodeOptions(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let text = '';
  let partial = '';
  const keep = (chunk: string) => {
    if (text.length < 1_000_000) text += chunk;
  };
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    keep(chunk);
    partial += chunk;
    const lines = partial.split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      try {
        logs.push(JSON.parse(line));
      } catch {
        // not a log line
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', keep);
  // Should the test process die without cleaning up, take the child down with it.
  const orphan = () => child.kill('SIGKILL');
  process.once('exit', orphan);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      process.off('exit', orphan);
      resolve({ code, signal });
    }),
  );
  const alive = () => child.exitCode === null && child.signalCode === null;
  return { name, child, logs, output: () => text, alive, exited };
}

export async function stopProc(proc: Proc, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (proc.alive()) proc.child.kill(signal);
  await proc.exited;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** Polls `probe` every 50 ms until it returns a value. */
export async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** Waits until an API process answers /healthz, failing early when it exits. */
export async function waitServing(proc: Proc, url: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(`${proc.name} to answer`, timeoutMs, async () => {
    if (!proc.alive()) throw new Error(`${proc.name} exited: ${proc.output().slice(-3000)}`);
    const response = await fetch(`${url}/healthz`).catch(() => undefined);
    return response?.ok ? true : undefined;
  });
}

/** Waits until a worker process has logged that it started; answers its worker id. */
export async function waitWorking(proc: Proc, timeoutMs = 60_000): Promise<string> {
  return waitFor(`${proc.name} to start`, timeoutMs, () => {
    if (!proc.alive()) throw new Error(`${proc.name} exited: ${proc.output().slice(-3000)}`);
    return proc.logs.find((l) => l.msg === 'imgapi worker started')?.workerId as string | undefined;
  });
}
