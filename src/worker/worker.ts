// The workers of one process, put together: a Pool per lane that claims that lane's tasks from
// the queue for its free slots (pool.ts) — image tasks in WORKER_CONCURRENCY's, AI tasks in
// AI_CONCURRENCY's, so neither waits for the other's slots —, a TaskRunner that runs each
// claimed task to its outcome (runner.ts), the OutputStore its outputs go through (outputs.ts),
// and the lease reaper that puts back the tasks of workers that died.
import os from 'node:os';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import type { TaskLane } from '../db/schema.js';
import type { Sandbox } from '../programs/sandbox.js';
import { createDocumentTools, type DocumentTools } from '../programs/tools.js';
import { newId } from '../ids.js';
import type { PlanTable } from '../accounts/plans.js';
import type { Metrics } from '../metrics.js';
import type { ClaimedTask, TaskQueue } from '../queue/queue.js';
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
  /** One pool per lane, each with its own slots. */
  private readonly pools: { lane: TaskLane; pool: Pool<ClaimedTask> }[];
  /** Webhook deliveries, in slots of their own (WEBHOOK_CONCURRENCY). */
  readonly webhooks: WebhookDeliverer;
  private started = false;
  private reaper: NodeJS.Timeout | undefined;
  /** Tasks were queued in `lane` (in any, when not said): that lane's pool looks. */
  private readonly onQueued = (lane?: string) => {
    for (const p of this.pools) if (lane === undefined || p.lane === lane) p.pool.wake();
  };
  /** Webhook deliveries were queued (here, or elsewhere on PostgreSQL): they are due now. */
  private readonly onDeliveries = () => this.webhooks.wake();

  constructor(
    private readonly deps: WorkerDeps,
    /** Image tasks run at once (0: no task at all, of either lane). */
    readonly concurrency: number,
    /** AI tasks run at once, in slots of their own. */
    readonly aiConcurrency = concurrency > 0 ? deps.config.aiConcurrency : 0,
  ) {
    const { config, queue, logger } = deps;
    this.documents = createDocumentTools(config, deps.sandbox, (event) =>
      logger.info(
        { converter: 'libreoffice', ...event },
        `presentation conversion ${event.outcome} (waited ${event.waitMs} ms, ran ${event.runMs} ms)`,
      ),
    );
    const runner = new TaskRunner({ ...deps, documents: this.documents, outputs: new OutputStore(deps) }, this.id);
    const lanePool = (lane: TaskLane, slots: number) =>
      new Pool<ClaimedTask>({
        concurrency: slots,
        pollIntervalMs: config.pollIntervalMs,
        fetch: async (free) => {
          const { tasks, more } = await queue.claimSome(this.id, free, config.leaseMs, lane);
          return { items: tasks, more };
        },
        onFetch: (task, signal) => runner.run(task, signal),
        onError: (err, task) =>
          task ? logger.error({ err, taskId: task.id }, 'task bookkeeping failed') : logger.error({ err, lane }, 'claim failed'),
      });
    this.pools = [
      { lane: 'image', pool: lanePool('image', concurrency) },
      { lane: 'ai', pool: lanePool('ai', this.aiConcurrency) },
    ];
    this.webhooks = new WebhookDeliverer(deps, this.id, config.webhookConcurrency);
  }

  start(): void {
    if (this.started || this.concurrency + this.aiConcurrency <= 0) return;
    this.started = true;
    const { config, queue, logger } = this.deps;
    queue.events.on('queued', this.onQueued);
    queue.events.on('deliveries', this.onDeliveries);
    this.reaper = setInterval(
      () => {
        queue.reapExpiredLeases().catch((err) => logger.error({ err }, 'lease reaper failed'));
      },
      Math.max(500, Math.floor(config.leaseMs / 2)),
    );
    for (const { pool } of this.pools) pool.start();
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
    this.deps.queue.events.off('deliveries', this.onDeliveries);
    await Promise.all([...this.pools.map(({ pool }) => pool.stop(deadlineMs)), this.webhooks.stop(deadlineMs)]);
    // The warm converters go with the worker that owned them, not only with the process.
    await this.documents.libreoffice.close();
  }

  /** Tasks running now, in every lane. */
  get busy(): number {
    return this.pools.reduce((n, { pool }) => n + pool.busy, 0);
  }
}
