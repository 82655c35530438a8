// Starting a worker thread whose code is a module of this service, beside its caller: compiled
// (`.js`, from dist) or run through tsx (`.ts`: tests, `node --import tsx`). A worker thread does
// not get the main thread's loader hooks, so from the sources it registers tsx's first.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/** A new thread running the module `name` (without extension) in the directory of `callerUrl`. */
export function startWorkerThread(callerUrl: string, name: string): Worker {
  const here = fileURLToPath(callerUrl);
  const entry = path.join(path.dirname(here), `${name}${path.extname(here)}`);
  if (!entry.endsWith('.ts')) return new Worker(entry);
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(pathToFileURL(entry).href)}); });`;
  return new Worker(code, { eval: true });
}

/**
 * A thread of `name` (as startWorkerThread) started on first use, that runs one job at a time in
 * the order asked: a network's thread, its model loaded once and its memory bounded. A thread
 * that exits or fails is started again by the next job.
 */
export class SerialThread {
  private worker: Worker | undefined;
  private turn: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly callerUrl: string,
    private readonly name: string,
  ) {}

  /** Runs `job` on the thread once the jobs asked before it have ended. */
  run<T>(job: (worker: Worker) => Promise<T>): Promise<T> {
    const next = this.turn.then(() => job(this.spawn()));
    this.turn = next.catch(() => undefined);
    return next;
  }

  /** Ends the thread (and what it loaded); the next job starts a new one. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private spawn(): Worker {
    if (this.worker) return this.worker;
    const worker = startWorkerThread(this.callerUrl, this.name);
    // A process with nothing else to do may exit with the model loaded.
    worker.unref();
    const forget = () => {
      if (this.worker === worker) this.worker = undefined;
    };
    worker.once('exit', forget);
    worker.once('error', forget);
    this.worker = worker;
    return worker;
  }
}
