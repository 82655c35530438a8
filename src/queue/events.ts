// In-process wake-ups: workers wait for `queued`, long-polls wait for a task to finish, the
// webhook deliverer for any task to finish (`finished`: its events may be queued).
// Other processes are reached through the database: a bridge (LISTEN/NOTIFY on PostgreSQL,
// src/queue/notify.ts) publishes what happens here and delivers what happens elsewhere; the
// slow poll is the safety net either way.
import { EventEmitter } from 'node:events';
import type { RawBuilder } from 'kysely';

/**
 * What crosses processes: `queued` (every lane) or `queued:<lane>`, `finished:<taskId>`,
 * `deliveries` (webhook deliveries were queued), or `changed:<what>` (a cache to drop:
 * `changed:signing-keys`, `changed:accounts`).
 */
export type QueueMessage = string;

/**
 * A message as an expression that a statement of the committing transaction carries (PostgreSQL:
 * `pg_notify`, sent when the transaction commits, not at all when it rolls back or the statement
 * returns no row): the wake-up without a statement of its own.
 */
export type CarriedMessage = RawBuilder<unknown>;

/** The message that wakes the workers of `lane` (of every lane when it is not said). */
export const queuedMessage = (lane?: string): QueueMessage => (lane ? `queued:${lane}` : 'queued');
/** The message that a task finished. */
export const finishedMessage = (taskId: string): QueueMessage => `finished:${taskId}`;

export class QueueEvents extends EventEmitter {
  private publish: ((message: QueueMessage) => void) | undefined;
  private carry: ((message: QueueMessage) => CarriedMessage) | undefined;

  constructor() {
    super();
    this.setMaxListeners(0);
  }
  /**
   * Also tell other processes from now on (undefined: this process only): `publish` sends a
   * message, `carry` makes one a statement can carry (see `carried`).
   */
  bridge(publish: ((message: QueueMessage) => void) | undefined, carry?: (message: QueueMessage) => CarriedMessage): void {
    this.publish = publish;
    this.carry = publish ? carry : undefined;
  }
  /**
   * `message` for other processes as an expression to select in a statement of the transaction
   * that makes it true (undefined when there is no bridge, or it cannot): the event is then
   * emitted after the commit with `{ published: true }`, and not sent again.
   */
  carried(message: QueueMessage): CarriedMessage | undefined {
    return this.carry?.(message);
  }
  /**
   * Tasks became runnable in `lane` (in any lane when it is not said); call after the
   * transaction that queued them has committed. Listeners get the lane (or undefined): only
   * that lane's workers need to look.
   */
  queued(lane?: string, { published = false } = {}): void {
    this.emit('queued', lane);
    if (!published) this.publish?.(queuedMessage(lane));
  }
  /** Webhook deliveries were queued (are due now); call after their transaction has committed. */
  deliveries(): void {
    this.emit('deliveries');
    this.publish?.('deliveries');
  }
  /** A task finished; call after its transaction has committed. */
  finished(taskId: string, { published = false } = {}): void {
    this.emit(`finished:${taskId}`);
    this.emit('finished', taskId);
    if (!published) this.publish?.(finishedMessage(taskId));
  }
  /**
   * Something other processes cache changed (`signing-keys`; `accounts`: an API key revoked, a
   * plan changed, an account disabled): they drop their copies now, not at the end of their
   * cache's time bound. Listen with `on('changed:<what>')`.
   */
  changed(what: string): void {
    this.emit(`changed:${what}`);
    this.publish?.(`changed:${what}`);
  }
  /** A message from another process: woken here, not published again. */
  deliver(message: QueueMessage): void {
    if (message === 'queued') this.emit('queued', undefined);
    else if (message.startsWith('queued:')) this.emit('queued', message.slice('queued:'.length));
    else if (message === 'deliveries') this.emit('deliveries');
    else if (message.startsWith('changed:')) this.emit(message);
    else if (message.startsWith('finished:')) {
      this.emit(message);
      this.emit('finished', message.slice('finished:'.length));
    }
  }
  /** Resolves when `taskId` finishes in this process, or after `ms`. */
  waitForFinish(taskId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.off(`finished:${taskId}`, done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.once(`finished:${taskId}`, done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
