// The workers of one process, put together: a Pool that claims tasks from the queue for its
// free slots (pool.ts), a TaskRunner that runs each claimed task to its outcome (runner.ts),
// the OutputStore its outputs go through (outputs.ts), and the lease reaper that puts back the
// tasks of workers that died.
import os from 'node:os';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import type { Sandbox } from '../documents/sandbox.js';
import { createDocumentTools, type DocumentTools } from '../documents/tools.js';
import { newId } from '../ids.js';
import type { PlanTable } from '../accounts/plans.js';
import type { Metrics } from '../metrics.js';
import type { TaskQueue, TaskRow } from '../queue/queue.js';
import type { ObjectStorage } from '../storage/storage.js';
import { OutputStore } from './outputs.js';
import { Pool } from './pool.js';
import { TaskRunner } from './runner.js';
import { WebhookDeliverer } from './webhooks.js';

export interface WorkerDeps {
  config: Config;
  database: Database;
  storage: ObjectStorage;
  queue: TaskQueue;
  clock: Clock;
  plans: PlanTable;
  logger: Logger;
  metrics: Metrics;
  sandbox: Sandbox;
}

export class WorkerPool {
  /** The lease owner of every task this pool claims. */
  readonly id = newId('req').replace('req_', `wrk_${os.hostname().slice(0, 20)}_`);
  /** LibreOffice (its pool caps conversions across this pool's tasks) and poppler. */
  readonly documents: DocumentTools;
  private readonly pool: Pool<TaskRow>;
  /** Webhook deliveries, in slots of their own (WEBHOOK_CONCURRENCY). */
  readonly webhooks: WebhookDeliverer;
  private started = false;
  private reaper: NodeJS.Timeout | undefined;
  private readonly onQueued = () => this.pool.wake();
  /** A task ended (here, or elsewhere on PostgreSQL): its webhook events are due now. */
  private readonly onFinished = () => this.webhooks.wake();

  constructor(
    private readonly deps: WorkerDeps,
    readonly concurrency: number,
  ) {
    const { config, queue, logger } = deps;
    this.documents = createDocumentTools(config, deps.sandbox, (event) =>
      logger.info(
        { converter: 'libreoffice', ...event },
        `presentation conversion ${event.outcome} (waited ${event.waitMs} ms, ran ${event.runMs} ms)`,
      ),
    );
    const runner = new TaskRunner({ ...deps, documents: this.documents, outputs: new OutputStore(deps) }, this.id);
    this.pool = new Pool<TaskRow>({
      concurrency,
      pollIntervalMs: config.pollIntervalMs,
      fetch: (free) => queue.claim(this.id, free, config.leaseMs),
      onFetch: (task, signal) => runner.run(task, signal),
      onError: (err, task) => (task ? logger.error({ err, taskId: task.id }, 'task bookkeeping failed') : logger.error({ err }, 'claim failed')),
    });
    this.webhooks = new WebhookDeliverer(deps, this.id, config.webhookConcurrency);
  }

  start(): void {
    if (this.started || this.concurrency <= 0) return;
    this.started = true;
    const { config, queue, logger } = this.deps;
    queue.events.on('queued', this.onQueued);
    queue.events.on('finished', this.onFinished);
    this.reaper = setInterval(
      () => {
        queue.reapExpiredLeases().catch((err) => logger.error({ err }, 'lease reaper failed'));
      },
      Math.max(500, Math.floor(config.leaseMs / 2)),
    );
    this.pool.start();
    this.webhooks.start();
  }

  /**
   * Stops claiming, lets running tasks finish until `deadlineMs`, then aborts the rest and puts
   * them back in the queue, where another worker picks them up at once.
   */
  async stop(deadlineMs = 10_000): Promise<void> {
    if (!this.started) return;
    this.started = false;
    clearInterval(this.reaper);
    this.deps.queue.events.off('queued', this.onQueued);
    this.deps.queue.events.off('finished', this.onFinished);
    await Promise.all([this.pool.stop(deadlineMs), this.webhooks.stop(deadlineMs)]);
    // The warm converters go with the worker that owned them, not only with the process.
    await this.documents.libreoffice.close();
  }

  /** Tasks running now. */
  get busy(): number {
    return this.pool.busy;
  }
}
