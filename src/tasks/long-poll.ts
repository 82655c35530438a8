// Long-polls (`GET /api/tasks/{id}?wait=N`, and `GET /api/batches/{id}?wait=N` for any of the
// batch's unfinished tasks) wait for their task's `finished` event. A task
// finished in this process wakes its waiters at once, through QueueEvents; one finished in
// another process arrives the same way over PostgreSQL's NOTIFY. What neither carries (another
// process on SQLite, a notification lost) is found by one statement a second for all the tasks
// waited on in this process, not one read per waiting request.
import type { Database } from '../db/database.js';
import type { QueueEvents } from '../queue/events.js';
import { finishedTaskIds } from './tasks.js';

/** How often the tasks waited on are looked up together. */
const RECHECK_MS = 1000;
/** Ids per statement (well under either database's limit on parameters). */
const IDS_PER_STATEMENT = 500;

export class LongPolls {
  /** Task id → how many requests wait for it. */
  private readonly waiting = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(
    private readonly database: Database,
    private readonly events: QueueEvents,
    private readonly onError: (err: unknown) => void,
    private readonly recheckMs = RECHECK_MS,
  ) {}

  /** Resolves when `taskId` finishes (here, elsewhere, or found by the recheck), after `ms`, or on `signal`. */
  async wait(taskId: string, ms: number, signal?: AbortSignal): Promise<void> {
    this.waiting.set(taskId, (this.waiting.get(taskId) ?? 0) + 1);
    this.timer ??= setInterval(() => void this.recheck(), this.recheckMs).unref();
    try {
      await this.events.waitForFinish(taskId, ms, signal);
    } finally {
      const count = this.waiting.get(taskId)! - 1;
      if (count > 0) this.waiting.set(taskId, count);
      else this.waiting.delete(taskId);
      if (this.waiting.size === 0) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    }
  }

  /** Resolves when any of `taskIds` finishes, after `ms`, or on `signal`; the other waits are then let go. */
  async waitAny(taskIds: string[], ms: number, signal?: AbortSignal): Promise<void> {
    const done = new AbortController();
    const stop = () => done.abort();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      await Promise.race(taskIds.map((id) => this.wait(id, ms, done.signal)));
    } finally {
      signal?.removeEventListener('abort', stop);
      done.abort();
    }
  }

  /** Tasks waited on here: how many. */
  get size(): number {
    return this.waiting.size;
  }

  /** Looks up the tasks waited on, in one statement per IDS_PER_STATEMENT, and wakes the waiters of those finished. */
  async recheck(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const ids = [...this.waiting.keys()];
      for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT) {
        for (const id of await finishedTaskIds(this.database, ids.slice(i, i + IDS_PER_STATEMENT))) this.events.deliver(`finished:${id}`);
      }
    } catch (err) {
      this.onError(err);
    } finally {
      this.checking = false;
    }
  }
}
