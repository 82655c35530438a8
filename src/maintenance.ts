// Periodic work: the retention sweep (expired files lose their bytes and their storage charge),
// the release of abandoned direct uploads, and pruning of old idempotency records and rate-limit
// windows. Every process runs the ticker; a conditional update elects one of them per tick, so
// the work runs once however many run.
import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import type { Database } from './db/database.js';
import { releaseStorage } from './accounts/quota.js';
import { sweepUploads } from './files/direct-upload.js';
import { pruneRateLimits } from './accounts/rate-limit.js';
import { pruneSessions } from './accounts/sessions.js';
import { IDEMPOTENCY_WINDOW_MS } from './http/idempotency.js';
import type { ObjectStorage } from './storage/storage.js';

const SWEEP = 'retention-sweep';
const BATCH = 500;

export interface MaintenanceDeps {
  database: Database;
  storage: ObjectStorage;
  clock: Clock;
  logger: Logger;
}

/** True for the one process that gets this tick of `name`. */
export async function claimTick(database: Database, name: string, now: number, intervalMs: number): Promise<boolean> {
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
 * Deletes the bytes of expired files and marks them, freeing their storage. Files that a queued
 * or running task reads are kept until it ends. Returns how many files were swept.
 */
export async function sweepExpiredFiles(deps: MaintenanceDeps, now: number): Promise<number> {
  const { database, storage } = deps;
  let swept = 0;
  for (;;) {
    const expired = await database.db
      .selectFrom('files')
      .select(['id', 'account_id', 'storage_key', 'size'])
      .where('deleted_at', 'is', null)
      .where('expires_at', '<=', now)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('task_inputs')
              .innerJoin('tasks', 'tasks.id', 'task_inputs.task_id')
              .select('tasks.id')
              .whereRef('task_inputs.file_id', '=', 'files.id')
              .where('tasks.status', 'in', ['queued', 'processing']),
          ),
        ),
      )
      .limit(BATCH)
      .execute();
    for (const file of expired) {
      // Bytes first: a crash between the two steps leaves a row that the next sweep finishes.
      await storage.delete(file.storage_key);
      await database.transaction(async (tx) => {
        const marked = await tx.updateTable('files').set({ deleted_at: now }).where('id', '=', file.id).where('deleted_at', 'is', null).executeTakeFirst();
        if (Number(marked.numUpdatedRows) === 1) await releaseStorage(tx, file.account_id, Number(file.size));
      });
      swept++;
    }
    if (expired.length < BATCH) return swept;
  }
}

export class Maintenance {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;

  constructor(
    private readonly deps: MaintenanceDeps,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.tick()
        .catch((err) => this.deps.logger.error({ err }, 'maintenance tick failed'))
        .finally(() => (this.running = undefined));
    }, Math.min(this.intervalMs, 10_000));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** Runs the periodic work if this process wins the tick; true when it did. */
  async tick(force = false): Promise<boolean> {
    const { database, clock, logger } = this.deps;
    const now = clock.now();
    if (!force && !(await claimTick(database, SWEEP, now, this.intervalMs))) return false;
    const swept = await sweepExpiredFiles(this.deps, now);
    // Presigned uploads never confirmed: bytes deleted, reservation released.
    const abandoned = await sweepUploads(this.deps, now);
    if (abandoned) logger.info({ abandoned }, 'upload sweep released abandoned direct uploads');
    await database.db.deleteFrom('idempotency_keys').where('created_at', '<', now - IDEMPOTENCY_WINDOW_MS).execute();
    await pruneRateLimits(database, now);
    await pruneSessions(database, now);
    if (swept) logger.info({ swept }, 'retention sweep deleted expired files');
    return true;
  }
}
