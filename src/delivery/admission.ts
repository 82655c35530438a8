// Admission of renders: RENDER_CONCURRENCY slots per process, and a wait for one bounded by
// RENDER_QUEUE_SECONDS — past it, 503 RENDER_BUSY with Retry-After instead of an unbounded line
// (STYLE.md 7: how many run, how long one may wait, then refuse quickly). Renders have their
// own slots, apart from the task workers', so neither starves the other of slots.
import { AppError } from '../errors.js';

interface Waiter {
  resolve: () => void;
  timer: NodeJS.Timeout | undefined;
}

export class RenderSlots {
  private running = 0;
  private readonly waiting: Waiter[] = [];

  constructor(
    private readonly concurrency: number,
    private readonly maxWaitMs: number,
  ) {}

  /** Takes a slot, waiting at most maxWaitMs; RENDER_BUSY when none came. Call release() after. */
  acquire(): Promise<void> {
    if (this.running < this.concurrency) {
      this.running++;
      return Promise.resolve();
    }
    if (this.maxWaitMs === 0) return Promise.reject(this.busy());
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { resolve, timer: undefined };
      waiter.timer = setTimeout(() => {
        const index = this.waiting.indexOf(waiter);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(this.busy());
      }, this.maxWaitMs);
      this.waiting.push(waiter);
    });
  }

  release(): void {
    // The slot passes straight to the next in line; `running` only drops when nobody waits.
    const next = this.waiting.shift();
    if (next) {
      clearTimeout(next.timer);
      next.resolve();
    } else {
      this.running--;
    }
  }

  private busy(): AppError {
    const retryAfter = Math.max(1, Math.ceil(this.maxWaitMs / 1000));
    return new AppError(
      'RENDER_BUSY',
      `Every render slot is taken (${this.concurrency}); retry in ${retryAfter} s`,
      { retryAfterSeconds: retryAfter },
      { 'retry-after': String(retryAfter) },
    );
  }
}
