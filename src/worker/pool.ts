// A pool of slots that knows two functions, as pg-boss's worker does: `fetch` claims at most as
// many items as there are free slots, `onFetch` runs one. The pool owns only the loop: claim
// while slots are free, sleep until woken (new work, a slot freed) or the poll interval ends,
// and at stop, no new claims, running items finish until the deadline and the rest are aborted.
// What an item is, how it runs and where its results go, it does not know.

/** The abort reason of an item still running when stop's deadline passed. */
export class Released extends Error {
  constructor() {
    super('released at shutdown');
  }
}

export interface PoolOptions<T> {
  concurrency: number;
  /** How long to sleep when nothing was claimed or no slot is free, unless woken sooner. */
  pollIntervalMs: number;
  /** Claims at most `free` items; none when there is nothing to do. */
  fetch(free: number): Promise<T[]>;
  /** Runs one claimed item. `signal` aborts, with `Released`, when stop's deadline passes. */
  onFetch(item: T, signal: AbortSignal): Promise<void>;
  /** A claim (no item) or a run that threw; the pool goes on. */
  onError(err: unknown, item?: T): void;
}

export class Pool<T> {
  private running = false;
  private readonly active = new Set<AbortController>();
  private wakeUp: (() => void) | undefined;
  private loopDone: Promise<void> | undefined;

  constructor(private readonly options: PoolOptions<T>) {}

  /** Items running now. */
  get busy(): number {
    return this.active.size;
  }

  start(): void {
    if (this.running || this.options.concurrency <= 0) return;
    this.running = true;
    this.loopDone = this.loop();
  }

  /** Claims again at once instead of at the end of the poll interval. */
  wake(): void {
    this.wakeUp?.();
  }

  /** Stops claiming, lets running items finish until `deadlineMs`, then aborts the rest and waits for them. */
  async stop(deadlineMs: number): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wake();
    await this.loopDone;
    const deadline = Date.now() + deadlineMs;
    while (this.active.size && Date.now() < deadline) await sleep(50);
    for (const controller of this.active) controller.abort(new Released());
    while (this.active.size) await sleep(20);
  }

  private async loop(): Promise<void> {
    const { concurrency, pollIntervalMs } = this.options;
    while (this.running) {
      const free = concurrency - this.active.size;
      let claimed: T[] = [];
      if (free > 0) {
        try {
          claimed = await this.options.fetch(free);
        } catch (err) {
          this.options.onError(err);
        }
      }
      for (const item of claimed) this.launch(item);
      if (claimed.length === 0 || this.active.size >= concurrency) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollIntervalMs);
          this.wakeUp = () => {
            clearTimeout(timer);
            this.wakeUp = undefined;
            resolve();
          };
        });
      }
    }
  }

  private launch(item: T): void {
    const controller = new AbortController();
    this.active.add(controller);
    this.options
      .onFetch(item, controller.signal)
      .catch((err) => this.options.onError(err, item))
      .finally(() => {
        this.active.delete(controller);
        this.wake();
      });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
