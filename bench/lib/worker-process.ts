// A bench worker script (bench/workers/*.mjs) in a child process that speaks JSON lines: its
// first line says it is ready, and each command written to its stdin is answered by one line.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { findJemalloc, serverEnvironment } from '../../scripts/start.mjs';
import type { BenchContext } from './types.js';

export interface WorkerProcess {
  child: ChildProcess;
  pid: number;
  /** The worker's first line. */
  ready: any;
  /** The worker's next line (throws, with its stderr, when it ended instead). */
  next(): Promise<any>;
  stop(): Promise<void>;
}

/**
 * Starts `bench/workers/<script>` and waits for its first line. It runs on the allocator the
 * service runs on (lib/service.ts: jemalloc when installed, as `npm start` preloads it), so a
 * baseline's libvips threads allocate as the service's do. `stop` sends `quit` — the line
 * `exit` for workers that read commands, else SIGTERM — then SIGKILL after 5 s; it is also run
 * at the bench's cleanup.
 */
export async function startWorkerProcess(
  ctx: BenchContext,
  script: string,
  args: string[],
  quit: 'exit line' | 'SIGTERM' = 'SIGTERM',
): Promise<WorkerProcess> {
  const child: ChildProcess = spawn(process.execPath, [path.join(ctx.repoRoot, 'bench', 'workers', script), ...args], {
    cwd: ctx.repoRoot,
    env: serverEnvironment(process.env, findJemalloc()),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<any> => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`${script} ended: ${stderr.trim() || `exit ${child.exitCode}`}`);
    return JSON.parse(value);
  };
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    if (quit === 'exit line') child.stdin!.write('exit\n');
    else child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killer);
  };
  ctx.onCleanup(stop);
  return { child, pid: child.pid!, ready: await next(), next, stop };
}
