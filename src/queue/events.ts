// In-process wake-ups: workers wait for `queued`, long-polls wait for a task to finish.
// Other processes are reached through the database (LISTEN/NOTIFY or the slow poll).
import { EventEmitter } from 'node:events';

export class QueueEvents extends EventEmitter {
  constructor() {
    super();
    this.setMaxListeners(0);
  }
  queued(): void {
    this.emit('queued');
  }
  finished(taskId: string): void {
    this.emit(`finished:${taskId}`);
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
