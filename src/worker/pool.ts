// A pool of slots that knows two functions, as pg-boss's worker does: `fetch` claims at most as
// many items as there are free slots, `onFetch` runs one. The pool owns only the loop: claim
// while slots are free and there may be work, sleep until woken (new work, or a slot freed while
// work may be waiting) or the poll interval ends, and at stop, no new claims, running items
// finish until the deadline and the rest are aborted. What an item is, how it runs and where its
// results go, it does not know.
//
// "There may be work" is known without asking: a claim says whether it left work behind, and
// whatever is queued after it wakes the pool (`wake`). So a freed slot claims again only after
// a claim that left work or a wake-up that found every slot busy, and a wake-up
// that arrives during a claim is kept for the next turn of the loop instead of being lost. The
// poll interval is the safety net (a missed wake-up, work that became due by the clock).

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
  /**
   * Claims at most `free` items (none when there is nothing to do), and says whether more may be
   * waiting after them (when it cannot tell: whether it filled every slot).
   */
  fetch(free: number): Promise<{ items: T[]; more: boolean }>;
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
  /** Work may be waiting: set by a wake-up, a full claim or the poll interval; a claim clears it. */
  private mayHaveWork = true;

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

  /** Claims again at once (or as soon as a slot is free) instead of at the end of the poll interval. */
  wake(): void {
    this.mayHaveWork = true;
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
      if (free > 0 && this.mayHaveWork) {
        this.mayHaveWork = false;
        try {
          const { items, more } = await this.options.fetch(free);
          for (const item of items) this.launch(item);
          // Work left behind waits for the next free slot.
          if (more) this.mayHaveWork = true;
        } catch (err) {
          this.options.onError(err);
        }
      }
      if (!this.running) break;
      if (!this.mayHaveWork || this.active.size >= concurrency) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            this.wakeUp = undefined;
            this.mayHaveWork = true;
            resolve();
          }, pollIntervalMs);
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
        // A free slot matters only when work may be waiting for it.
        if (this.mayHaveWork) this.wakeUp?.();
      });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
