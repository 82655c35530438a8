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

/** What every job's thread sends back: replies name their job's id; `error` ends the job as failed. */
export type ThreadReply = { type: string; id: number };

/** How one job talks to its thread, for SerialThread.request. */
export interface ThreadRequest<Job, Reply extends ThreadReply, T> {
  /** The job's message, given the id its replies will carry. */
  job(id: number): Job;
  /**
   * Aborting before the job's turn rejects it unposted, with the signal's reason; while it runs,
   * onAbort is called (a thread busy computing reads no message: it sets the job's shared cancel
   * flag), and the job ends with the reply the thread sends when it stops.
   */
  signal?: AbortSignal;
  onAbort?(): void;
  /** Each reply of the job but `error`: the job's outcome when the reply ends it, else undefined (progress). */
  onReply(reply: Exclude<Reply, { type: 'error' }>): Promise<T> | undefined;
}

/**
 * A thread of `name` (as startWorkerThread) started on first use, that runs one job at a time in
 * the order asked: a network's thread, its model loaded once and its memory bounded. A thread
 * that exits or fails is started again by the next job.
 */
export class SerialThread {
  private worker: Worker | undefined;
  private turn: Promise<unknown> = Promise.resolve();
  private nextId = 1;

  /** `what` names the work in errors: "<what> failed: …", "the <what> worker exited (1)". */
  constructor(
    private readonly callerUrl: string,
    private readonly name: string,
    private readonly what: string,
  ) {}

  /**
   * Posts a job once the jobs asked before it have ended, and settles on its outcome: the one its
   * replies answer, an `error` reply, or the thread failing or exiting under it.
   */
  request<Job, Reply extends ThreadReply, T>(request: ThreadRequest<Job, Reply, T>): Promise<T> {
    // A job aborted while it waited is not posted, nor a thread started for it.
    const next = this.turn.then(() => (request.signal?.aborted ? Promise.reject(request.signal.reason) : this.post(this.spawn(), request)));
    this.turn = next.catch(() => undefined);
    return next;
  }

  /** Ends the thread (and what it loaded); the next job starts a new one. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private post<Job, Reply extends ThreadReply, T>(worker: Worker, request: ThreadRequest<Job, Reply, T>): Promise<T> {
    const { signal } = request;
    const id = this.nextId++;
    return new Promise<T>((resolve) => {
      const onAbort = () => request.onAbort?.();
      const settle = (outcome: Promise<T>) => {
        signal?.removeEventListener('abort', onAbort);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
        resolve(outcome);
      };
      const onMessage = (reply: Reply) => {
        if (reply.id !== id) return;
        if (reply.type === 'error') {
          const message = (reply as { message?: unknown }).message;
          settle(Promise.reject(new Error(`${this.what} failed: ${String(message)}`)));
          return;
        }
        let outcome: Promise<T> | undefined;
        try {
          outcome = request.onReply(reply as Exclude<Reply, { type: 'error' }>);
        } catch (err) {
          outcome = Promise.reject(err);
        }
        if (outcome) settle(outcome);
      };
      const onError = (err: Error) => settle(Promise.reject(err));
      const onExit = (code: number) => settle(Promise.reject(new Error(`the ${this.what} worker exited (${code})`)));
      worker.on('message', onMessage);
      worker.once('error', onError);
      worker.once('exit', onExit);
      signal?.addEventListener('abort', onAbort, { once: true });
      worker.postMessage(request.job(id));
    });
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
