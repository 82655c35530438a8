// Periodic work: the retention sweep (expired files lose their bytes and their storage charge),
// the release of abandoned direct uploads, pruning of old idempotency records and rate-limit
// windows, and once an hour the render objects no cache entry names. Every process runs the ticker; a conditional update elects one of them per tick, so
// the work runs once however many run. This module owns `periodic_runs`; each sweep's queries
// are in the module that owns their table.
import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import type { Database } from './db/database.js';
import { sweepOrphanedIncoming, sweepUploads } from './files/direct-upload.js';
import { removeAbandonedWorkDirs } from './temp-files.js';
import { sweepExpiredFiles } from './files/files.js';
import { pruneRateLimits } from './accounts/rate-limit.js';
import { pruneSessions } from './accounts/sessions.js';
import { pruneIdempotencyKeys } from './db/idempotency.js';
import { pruneDeliveries } from './webhooks/store.js';
import { sweepExpiredRenders, sweepOrphanedRenders } from './delivery/render-cache.js';
import { deleteTaskOutputs, type ObjectStorage } from './storage/storage.js';
import { markOutputsSwept, unsweptEndedWithoutOutputs } from './tasks/tasks.js';

const SWEEP = 'retention-sweep';
/** Render objects without a row are looked for once an hour: it lists every stored render. */
const RENDER_ORPHAN_SWEEP = 'render-orphan-sweep';
const RENDER_ORPHAN_SWEEP_MS = 60 * 60_000;
const BATCH = 500;

export interface MaintenanceDeps {
  database: Database;
  storage: ObjectStorage;
  clock: Clock;
  logger: Logger;
}

/** True for the one process that gets this tick of `name`. */
async function claimTick(database: Database, name: string, now: number, intervalMs: number): Promise<boolean> {
  await database.db
    .insertInto('periodic_runs')
    .values({ name, last_run: 0 })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const result = await database.db
    .updateTable('periodic_runs')
    .set({ last_run: now })
    .where('name', '=', name)
    .where('last_run', '<=', now - intervalMs)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * Deletes the output objects of tasks that ended without outputs (failed, canceled), once per
 * task. A worker deletes what it wrote when it learns its task ended so; this catches what a
 * worker that died (SIGKILL) or lost its lease wrote before the task was canceled, or failed
 * by the reaper: objects that nothing records or charges. Such a task never owns a file, so
 * nothing live is touched. Each task is marked when swept, so one whose ending committed late
 * is not missed (as it could be behind a completed_at cursor). Returns how many objects went.
 */
async function sweepUnrecordedOutputs(deps: MaintenanceDeps): Promise<number> {
  const { database, storage } = deps;
  let removed = 0;
  for (;;) {
    const ended = await unsweptEndedWithoutOutputs(database, BATCH);
    for (const taskId of ended) removed += await deleteTaskOutputs(storage, taskId);
    await markOutputsSwept(database, ended);
    if (ended.length < BATCH) return removed;
  }
}

export class Maintenance {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private lastTemporarySweep = 0;

  constructor(
    private readonly deps: MaintenanceDeps,
    private readonly intervalMs: number,
  ) {}

  /** Sweeps abandoned temporary files at once, then runs the periodic work. */
  start(): void {
    const run = (work: () => Promise<unknown>) => {
      this.running ??= work()
        .catch((err) => this.deps.logger.error({ err }, 'maintenance tick failed'))
        .finally(() => (this.running = undefined));
    };
    run(() => this.sweepTemporary());
    const periodic = async () => {
      if (Date.now() - this.lastTemporarySweep >= this.intervalMs) await this.sweepTemporary();
      await this.tick();
    };
    this.timer = setInterval(() => run(periodic), Math.min(this.intervalMs, 10_000));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /**
   * Temporary files and directories that killed processes left (a SIGKILL mid-upload, a crash
   * mid-task). Every process sweeps, not one per tick: the system's temporary directory is
   * each machine's own. Returns how many entries went.
   */
  async sweepTemporary(): Promise<number> {
    this.lastTemporarySweep = Date.now();
    const removed = ((await this.deps.storage.sweepTemporary?.()) ?? 0) + (await removeAbandonedWorkDirs());
    if (removed) this.deps.logger.info({ removed }, 'removed temporary files left by stopped processes');
    return removed;
  }

  /** Runs the periodic work if this process wins the tick; true when it did. */
  async tick(force = false): Promise<boolean> {
    const { database, clock, logger } = this.deps;
    const now = clock.now();
    if (!force && !(await claimTick(database, SWEEP, now, this.intervalMs))) return false;
    const swept = await sweepExpiredFiles(database, this.deps.storage, now);
    const unrecorded = await sweepUnrecordedOutputs(this.deps);
    if (unrecorded) logger.info({ unrecorded }, 'deleted output objects of tasks that ended without outputs');
    // Presigned uploads never confirmed: bytes deleted, reservation released.
    const abandoned = await sweepUploads(this.deps, now);
    if (abandoned) logger.info({ abandoned }, 'upload sweep released abandoned direct uploads');
    const orphans = await sweepOrphanedIncoming(this.deps);
    if (orphans) logger.info({ orphans }, 'upload sweep deleted direct-upload bytes that no upload collects');
    await pruneIdempotencyKeys(database, now);
    await pruneRateLimits(database, now);
    await pruneSessions(database, now);
    await pruneDeliveries(database, now);
    const renders = await sweepExpiredRenders(database, this.deps.storage, now);
    if (renders) logger.info({ renders }, 'retention sweep deleted the delivery-URL renders of expired files');
    if (force || (await claimTick(database, RENDER_ORPHAN_SWEEP, now, RENDER_ORPHAN_SWEEP_MS))) {
      const orphans = await sweepOrphanedRenders(database, this.deps.storage, now);
      if (orphans) logger.info({ orphans }, 'deleted delivery-URL render objects that no cache entry names (stores cut between object and entry)');
    }
    if (swept) logger.info({ swept }, 'retention sweep deleted expired files');
    return true;
  }
}
