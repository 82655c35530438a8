// The task table is the queue: claim with a lease, renew it by heartbeat, complete only while
// holding it, put lapsed leases back, retry transient faults with capped exponential backoff.
import { sql, type Selectable } from 'kysely';
import type { Clock } from '../clock.js';
import type { Database, Tx } from '../db/database.js';
import type { TasksTable } from '../db/schema.js';
import { refundTask } from '../accounts/quota.js';
import type { QueueEvents } from './events.js';

export type TaskRow = Selectable<TasksTable>;

export interface TaskFailure {
  code: string;
  message: string;
  /** Transient faults (disk, database, a crashed converter) are retried; input faults are not. */
  transient: boolean;
}

export interface CompletedOutput {
  fileId: string;
  storageKey: string;
  filename: string;
  mimeType: string;
  format: string;
  size: number;
  etag: string;
  width?: number;
  height?: number;
  pages?: number;
}

const BACKOFF_BASE_MS = 2_000;
const BACKOFF_CAP_MS = 5 * 60_000;

export const backoffMs = (attempts: number): number => Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, attempts - 1));

export class TaskQueue {
  constructor(
    private readonly database: Database,
    private readonly clock: Clock,
    readonly events: QueueEvents,
  ) {}

  /**
   * Takes up to `limit` runnable tasks in one statement and marks them processing under a lease
   * held by `workerId`. Order: highest priority (plan) first; within a priority the account
   * served longest ago, so one account's large batch does not hold back another's single task;
   * then the oldest task.
   */
  async claim(workerId: string, limit: number, leaseMs: number): Promise<TaskRow[]> {
    if (limit <= 0) return [];
    const now = this.clock.now();
    const { db, skipLocked } = this.database;
    const runnable = db
      .selectFrom('tasks')
      .innerJoin('accounts', 'accounts.id', 'tasks.account_id')
      .select('tasks.id')
      .where('tasks.status', '=', 'queued')
      .where('tasks.run_at', '<=', now)
      .orderBy('tasks.priority', 'desc')
      .orderBy('accounts.last_served_at', 'asc')
      .orderBy('tasks.run_at', 'asc')
      .orderBy('tasks.created_at', 'asc')
      .limit(limit)
      .$if(skipLocked, (qb) => qb.forUpdate('tasks').skipLocked());
    const lease = {
      status: 'processing' as const,
      lease_owner: workerId,
      lease_expires_at: now + leaseMs,
      attempts: sql<number>`attempts + 1`,
      started_at: sql<number>`COALESCE(started_at, ${now})`,
    };
    const claimed = skipLocked
      ? // PostgreSQL: pick the rows once, in a materialized CTE (as graphile-worker does). As a
        // plain `IN (subquery)` the locking subquery may be re-run during the update and, skipping
        // the rows it has just taken, hand back many more than `limit` tasks.
        await db
          .with((cte) => cte('picked').materialized(), () => runnable)
          .updateTable('tasks')
          .set(lease)
          .from('picked')
          .whereRef('tasks.id', '=', 'picked.id')
          .where('tasks.status', '=', 'queued')
          .returningAll('tasks')
          .execute()
      : await db.updateTable('tasks').set(lease).where('id', 'in', runnable).where('status', '=', 'queued').returningAll().execute();
    const accounts = [...new Set(claimed.map((t) => t.account_id))];
    if (accounts.length) await db.updateTable('accounts').set({ last_served_at: now }).where('id', 'in', accounts).execute();
    return claimed;
  }

  /** Renews the lease; false when it was lost (reaped, canceled or finished elsewhere). */
  async heartbeat(taskId: string, workerId: string, leaseMs: number, progress?: number): Promise<boolean> {
    const result = await this.database.db
      .updateTable('tasks')
      .set({ lease_expires_at: this.clock.now() + leaseMs, ...(progress !== undefined ? { progress } : {}) })
      .where('id', '=', taskId)
      .where('lease_owner', '=', workerId)
      .where('status', '=', 'processing')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * Records the outputs and completes the task, in one transaction, only while `workerId`
   * still holds the lease. Returns false when it does not (a stale worker's late completion).
   */
  async complete(
    task: TaskRow,
    workerId: string,
    outputs: CompletedOutput[],
    result: Record<string, unknown>,
    bundled: boolean,
    retentionMs: number,
    onCommit: (tx: Tx) => Promise<void>,
  ): Promise<boolean> {
    const now = this.clock.now();
    const done = await this.database.transaction(async (tx) => {
      const updated = await tx
        .updateTable('tasks')
        .set({
          status: 'completed',
          progress: 100,
          output_file_id: outputs[0]?.fileId ?? null,
          output_file_ids: bundled ? JSON.stringify(outputs.slice(1).map((o) => o.fileId)) : null,
          result: JSON.stringify(result),
          error_code: null,
          error_message: null,
          lease_owner: null,
          lease_expires_at: null,
          completed_at: now,
        })
        .where('id', '=', task.id)
        .where('lease_owner', '=', workerId)
        .where('status', '=', 'processing')
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) return false;
      if (outputs.length) {
        await tx
          .insertInto('files')
          .values(
            outputs.map((o, index) => ({
              id: o.fileId,
              account_id: task.account_id,
              origin: 'output' as const,
              storage_key: o.storageKey,
              filename: o.filename,
              mime_type: o.mimeType,
              format: o.format,
              size: o.size,
              width: o.width ?? null,
              height: o.height ?? null,
              pages: o.pages ?? null,
              etag: o.etag,
              task_id: task.id,
              output_index: index,
              created_at: now,
              expires_at: now + retentionMs,
              deleted_at: null,
            })),
          )
          .execute();
      }
      await onCommit(tx);
      return true;
    });
    if (done) this.events.finished(task.id);
    return done;
  }

  /**
   * Fails the task, or puts a transient fault back in the queue with backoff while attempts
   * remain. Internal errors that end a task refund its quota charge.
   */
  async fail(task: TaskRow, workerId: string, failure: TaskFailure): Promise<'retrying' | 'failed' | 'lost'> {
    const now = this.clock.now();
    const outcome = await this.database.transaction(async (tx) => {
      const current = await tx
        .selectFrom('tasks')
        .select(['attempts', 'max_attempts', 'charged'])
        .where('id', '=', task.id)
        .where('lease_owner', '=', workerId)
        .where('status', '=', 'processing')
        // Lock the row (PostgreSQL) so a cancel or reap committing meanwhile is not overwritten.
        .$if(this.database.skipLocked, (qb) => qb.forUpdate())
        .executeTakeFirst();
      if (!current) return 'lost' as const;
      if (failure.transient && current.attempts < current.max_attempts) {
        await tx
          .updateTable('tasks')
          .set({
            status: 'queued',
            lease_owner: null,
            lease_expires_at: null,
            progress: 0,
            run_at: now + backoffMs(current.attempts),
            error_code: failure.code,
            error_message: failure.message,
          })
          .where('id', '=', task.id)
          .execute();
        return 'retrying' as const;
      }
      await this.markFailed(tx, task.id, task.account_id, task.created_at, current.charged === 1, failure, now);
      return 'failed' as const;
    });
    if (outcome === 'failed') this.events.finished(task.id);
    if (outcome === 'retrying') setTimeout(() => this.events.queued(), backoffMs(task.attempts)).unref();
    return outcome;
  }

  private async markFailed(
    tx: Tx,
    taskId: string,
    accountId: string,
    createdAt: number,
    charged: boolean,
    failure: Pick<TaskFailure, 'code' | 'message'>,
    now: number,
  ): Promise<void> {
    const refund = charged && failure.code === 'INTERNAL_ERROR';
    await tx
      .updateTable('tasks')
      .set({
        status: 'failed',
        error_code: failure.code,
        error_message: failure.message,
        lease_owner: null,
        lease_expires_at: null,
        completed_at: now,
        ...(refund ? { charged: 0 } : {}),
      })
      .where('id', '=', taskId)
      .execute();
    if (refund) await refundTask(tx, accountId, createdAt);
  }

  /**
   * Gives a claimed task back at once (its worker is shutting down): queued again, the attempt
   * it interrupted not counted. False when the lease was no longer held.
   */
  async release(task: TaskRow, workerId: string): Promise<boolean> {
    const result = await this.database.db
      .updateTable('tasks')
      .set({
        status: 'queued',
        lease_owner: null,
        lease_expires_at: null,
        progress: 0,
        run_at: this.clock.now(),
        attempts: sql<number>`CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END`,
      })
      .where('id', '=', task.id)
      .where('lease_owner', '=', workerId)
      .where('status', '=', 'processing')
      .executeTakeFirst();
    const released = Number(result.numUpdatedRows) === 1;
    if (released) this.events.queued();
    return released;
  }

  /**
   * Puts tasks whose lease lapsed (their worker died or stalled) back in the queue, or fails
   * them once they have used all their attempts. Returns how many were re-queued.
   */
  async reapExpiredLeases(): Promise<{ requeued: number; failed: number }> {
    const now = this.clock.now();
    const lapsed = await this.database.db
      .selectFrom('tasks')
      .select(['id', 'account_id', 'created_at', 'attempts', 'max_attempts', 'charged', 'lease_owner'])
      .where('status', '=', 'processing')
      .where('lease_expires_at', '<', now)
      .limit(500)
      .execute();
    let requeued = 0;
    let failed = 0;
    for (const task of lapsed) {
      const outcome = await this.database.transaction(async (tx) => {
        // Re-check under the write: the worker may have renewed or finished meanwhile.
        const still = await tx
          .selectFrom('tasks')
          .select('id')
          .where('id', '=', task.id)
          .where('status', '=', 'processing')
          .where('lease_owner', '=', task.lease_owner)
          .where('lease_expires_at', '<', now)
          .$if(this.database.skipLocked, (qb) => qb.forUpdate().skipLocked())
          .executeTakeFirst();
        if (!still) return 'skipped';
        if (task.attempts >= task.max_attempts) {
          const failure = { code: 'INTERNAL_ERROR', message: 'The task was interrupted too many times (its worker stopped responding)' };
          await this.markFailed(tx, task.id, task.account_id, task.created_at, task.charged === 1, failure, now);
          return 'failed';
        }
        await tx
          .updateTable('tasks')
          .set({ status: 'queued', lease_owner: null, lease_expires_at: null, progress: 0, run_at: now })
          .where('id', '=', task.id)
          .execute();
        return 'requeued';
      });
      if (outcome === 'requeued') requeued++;
      if (outcome === 'failed') {
        failed++;
        this.events.finished(task.id);
      }
    }
    if (requeued) this.events.queued();
    return { requeued, failed };
  }

  async queueDepth(): Promise<{ queued: number; processing: number }> {
    const rows = await this.database.db
      .selectFrom('tasks')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .where('status', 'in', ['queued', 'processing'])
      .groupBy('status')
      .execute();
    const count = (status: string) => Number(rows.find((r) => r.status === status)?.n ?? 0);
    return { queued: count('queued'), processing: count('processing') };
  }
}
