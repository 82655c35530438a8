// The task table is the queue: claim with a lease, renew it by heartbeat, complete only while
// holding it, put lapsed leases back, retry transient faults with capped exponential backoff.
import { sql, type ExpressionBuilder, type Selectable, type SqlBool } from 'kysely';
import type { Clock } from '../clock.js';
import { jsonRows, type Database, type Tx } from '../db/database.js';
import { ACTIVE_STATUSES, type DB, type SqliteViews, type TaskLane, type TasksTable } from '../db/schema.js';
import { lockingAccount, refundTask } from '../accounts/quota.js';
import { inputFilesOfTask, type FileRecord, type OutputsRecording } from '../files/files.js';
import { finishedMessage, type CarriedMessage, type QueueEvents } from './events.js';

export type TaskRow = Selectable<TasksTable>;

/**
 * A claimed task, with its account's plan and storage used as the claim found them (the run's
 * limits), and the files it reads, in order (deleted ones too: the run fails INPUT_MISSING).
 */
export type ClaimedTask = TaskRow & { account: { plan: string; storageUsed: number } | undefined; inputs: FileRecord[] };

/**
 * Called inside the transaction that ends `taskIds` (tasks of `accountId` that have just
 * completed or failed): the tasks module queues their webhook events there, so an event is
 * committed with the end it reports, and answers how many deliveries it queued (after the
 * commit, `events.deliveries()` wakes the deliverers, only then). `webhooksVersion` is the
 * account's, read earlier in the transaction (it spares reading the endpoints again). Passed in,
 * as `recordOutputs` is, so that the queue knows nothing of tasks' views or webhooks.
 */
type TasksEnded = (tx: Tx, accountId: string, taskIds: readonly string[], now: number, webhooksVersion?: number) => Promise<number>;

/** What the tasks module tells the queue of tasks' ends (passed in: the queue knows nothing of webhooks). */
export interface TaskEnds {
  record: TasksEnded;
  /**
   * The account's `webhooks_version` at which `task` completing queues no webhook event, when
   * this process knows one: its completion then has no event to write with it.
   */
  quietVersion(task: TaskRow): number | undefined;
}

export interface TaskFailure {
  code: string;
  message: string;
  /** Transient faults (disk, database, a crashed converter) are retried; input faults are not. */
  transient: boolean;
  /** The error's `details` (INVALID_OPTIONS: the option, in `field`). */
  details?: Record<string, unknown>;
}

/** What a worker reports when its task ran to the end (see `TaskQueue.complete`). */
export interface Completion {
  task: TaskRow;
  workerId: string;
  /** The task's `result`. */
  result: Record<string, unknown>;
  /** The outputs' file ids in order: the first is the task's outputFileId; with `bundled`, the rest its outputFileIds. */
  outputFileIds: string[];
  bundled: boolean;
  /**
   * Records the outputs (the files module), inside the completing transaction once the lease is
   * known to be held, under the account's and the task's locks. A refusal it answers fails the
   * task instead, refunded, and nothing it did is kept.
   */
  recordOutputs(tx: Tx, now: number): Promise<Pick<TaskFailure, 'code' | 'message'> | undefined>;
  /**
   * The same as CTEs of the completing statement (PostgreSQL, `Database.writingCtes`; the files
   * module's `recordingOutputs`): with them a completion with no webhook event to write is one
   * statement, without a transaction (`TaskQueue.completeAlone`).
   */
  recordingOutputs?(now: number): OutputsRecording;
}

const BACKOFF_BASE_MS = 2_000;
const BACKOFF_CAP_MS = 5 * 60_000;

/**
 * A task whose claims end this many times with its lease lapsing fails INTERNAL_ERROR, whatever
 * attempts remain: an input that crashes or hangs the worker must not take down a third one.
 */
export const MAX_LOST_LEASES = 2;

/**
 * Failures refunded (API.md): an internal error is nobody's input's fault, and a task whose
 * outputs the storage rules refuse keeps nothing.
 */
const REFUNDED_FAILURES = new Set(['INTERNAL_ERROR', 'STORAGE_LIMIT_EXCEEDED', 'OUTPUT_TOO_LARGE']);

/** What SQLite's task_completions trigger answers when it writes nothing (migration 0014). */
const COMPLETION_REFUSED = 'completion refused';

/** A completed task's columns (SQLite's task_completions trigger sets the same, migration 0014). */
const completedColumns = ({ outputFileIds, bundled, result }: Completion, now: number) => ({
  status: 'completed' as const,
  progress: 100,
  output_file_id: outputFileIds[0] ?? null,
  output_file_ids: bundled ? JSON.stringify(outputFileIds.slice(1)) : null,
  result: JSON.stringify(result),
  error_code: null,
  error_message: null,
  error_details: null,
  lease_owner: null,
  lease_expires_at: null,
  completed_at: now,
});

/** A task put back in the queue (a retry, a release, a lapsed lease): no lease, runnable at `runAt`. */
const backInQueue = (runAt: number) => ({ status: 'queued' as const, lease_owner: null, lease_expires_at: null, progress: 0, run_at: runAt });

/** The account's `webhooks_version`, read with a task's row by the statement that checks its lease. */
const webhooksVersion = (eb: ExpressionBuilder<DB, 'tasks'>) =>
  eb.selectFrom('accounts').select('accounts.webhooks_version').whereRef('accounts.id', '=', 'tasks.account_id').as('webhooks_version');

/** The task's account's plan and storage used, read by the claim's statement. */
const accountOfTask = (eb: ExpressionBuilder<DB, 'tasks'>) => [
  eb.selectFrom('accounts').select('accounts.plan').whereRef('accounts.id', '=', 'tasks.account_id').as('account_plan'),
  eb.selectFrom('accounts').select('accounts.storage_used').whereRef('accounts.id', '=', 'tasks.account_id').as('account_storage_used'),
];

export const backoffMs = (attempts: number): number => Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, attempts - 1));

export class TaskQueue {
  constructor(
    readonly database: Database,
    private readonly clock: Clock,
    readonly events: QueueEvents,
    private readonly ends: TaskEnds,
  ) {}

  /**
   * Takes up to `limit` runnable tasks of `lane` in one statement and marks them processing under
   * a lease held by `workerId`. Order: highest priority (plan) first; within a priority the
   * account served longest ago in this lane, so one account's large batch does not hold back
   * another's single task (and an account busy in one lane keeps its turn in the other); then
   * the oldest task.
   */
  async claim(workerId: string, limit: number, leaseMs: number, lane: TaskLane = 'image'): Promise<TaskRow[]> {
    return (await this.claimSome(workerId, limit, leaseMs, lane)).tasks;
  }

  /**
   * `claim`, and whether runnable tasks of the lane are left after it (`more`; it may say so of
   * tasks another worker is taking at the same moment, never the other way): a worker pool
   * claims again when a slot frees only then, or when it is woken.
   */
  async claimSome(workerId: string, limit: number, leaseMs: number, lane: TaskLane = 'image'): Promise<{ tasks: ClaimedTask[]; more: boolean }> {
    if (limit <= 0) return { tasks: [], more: false };
    const now = this.clock.now();
    const { db, skipLocked } = this.database;
    const runnable = db
      .selectFrom('tasks')
      .leftJoin('account_lanes as served', (join) => join.onRef('served.account_id', '=', 'tasks.account_id').on('served.lane', '=', lane))
      .select('tasks.id')
      .where('tasks.status', '=', 'queued')
      .where('tasks.lane', '=', lane)
      .where('tasks.run_at', '<=', now)
      .orderBy('tasks.priority', 'desc')
      .orderBy((eb) => eb.fn.coalesce('served.last_served_at', eb.lit(0)), 'asc')
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
      // Stamps the account served in the lane: on SQLite through the trigger that watches this
      // column (migration 0014), on PostgreSQL in the statement below.
      claimed_at: now,
    };
    // Runnable tasks of the lane (up to one past the claim's), counted in the claim's statement.
    const waiting =
      sql<number>`(SELECT count(*) FROM (SELECT 1 FROM tasks AS w WHERE w.status = 'queued' AND w.lane = ${lane} AND w.run_at <= ${now} LIMIT ${limit + 1}) AS waiting)`.as(
        'waiting',
      );
    const claimed = skipLocked
      ? // PostgreSQL: pick the rows once, in a materialized CTE (as graphile-worker does). As a
        // plain `IN (subquery)` the locking subquery may be re-run during the update and, skipping
        // the rows it has just taken, hand back many more than `limit` tasks. The same statement
        // stamps their accounts served, in the order of their ids (two claims never wait on each
        // other's stamps in a circle; the tasks themselves are taken with SKIP LOCKED).
        await db
          .with(
            (cte) => cte('picked').materialized(),
            () => runnable.select('tasks.account_id'),
          )
          .with('stamped', (qb) =>
            qb
              .insertInto('account_lanes')
              .columns(['account_id', 'lane', 'last_served_at'])
              .expression(sql`SELECT DISTINCT account_id, CAST(${lane} AS text), CAST(${now} AS bigint) FROM picked ORDER BY account_id`)
              .onConflict((oc) => oc.columns(['account_id', 'lane']).doUpdateSet({ last_served_at: now })),
          )
          .updateTable('tasks')
          .set(lease)
          .from('picked')
          .whereRef('tasks.id', '=', 'picked.id')
          .where('tasks.status', '=', 'queued')
          .returningAll('tasks')
          .returning(waiting)
          .returning(accountOfTask)
          .returning((eb) => inputFilesOfTask(this.database, eb).as('inputs'))
          .execute()
      : await db
          .updateTable('tasks')
          .set(lease)
          .where('id', 'in', runnable)
          .where('status', '=', 'queued')
          .returningAll()
          .returning(waiting)
          .returning(accountOfTask)
          .returning((eb) => inputFilesOfTask(this.database, eb).as('inputs'))
          .execute();
    // PostgreSQL's RETURNING sees the table as the statement found it (the claimed tasks still
    // queued); SQLite's, as each row is updated, so its smallest count is what is left after.
    const counts = claimed.map((row) => Number(row.waiting));
    const more = claimed.length > 0 && (skipLocked ? Math.max(...counts) > claimed.length : Math.min(...counts) > 0);
    const tasks: ClaimedTask[] = claimed.map(({ waiting: _waiting, account_plan, account_storage_used, inputs, ...task }) => ({
      ...task,
      account: account_plan === null ? undefined : { plan: account_plan, storageUsed: Number(account_storage_used ?? 0) },
      inputs: jsonRows(inputs),
    }));
    return { tasks, more };
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
   * Completes the task, only while `workerId` still holds the lease, in one transaction with the
   * recording of its outputs (`recordOutputs`). Returns true when the task completed; false when
   * the outputs were refused (the task failed so: STORAGE_LIMIT_EXCEEDED, refunded) or the lease
   * was not held (a stale worker's late completion, or a cancel). The caller then deletes the
   * output objects it wrote.
   */
  async complete(completion: Completion): Promise<boolean> {
    const { task, workerId } = completion;
    const now = this.clock.now();
    // Other processes hear that the task finished from the statement that ends it (completed, or
    // failed below), sent at the commit.
    const finished = this.events.carried(finishedMessage(task.id));
    if (await this.completeAlone(completion, now, finished)) {
      this.events.finished(task.id, { published: finished !== undefined });
      return true;
    }
    const completed = completedColumns(completion, now);
    const outcome = await this.database.transaction(async (tx) => {
      // Completed in one statement with the check that the lease is still this worker's (which
      // locks the task's row); outputs refused below turn it into a failure in this transaction.
      const held = this.database.rowLocks
        ? // The lock order of quota.ts: the account (locked by the joined CTE, read before the
          // task's row is locked), then the task (then the new output files).
          await tx
            .with(
              (cte) => cte('account').materialized(),
              (qb) => lockingAccount(qb, task.account_id),
            )
            .updateTable('tasks')
            .set(completed)
            .from('account')
            .where('tasks.id', '=', task.id)
            .where('tasks.lease_owner', '=', workerId)
            .where('tasks.status', '=', 'processing')
            .returning(['tasks.charged', 'account.webhooks_version'])
            .$if(finished !== undefined, (qb) => qb.returning(finished!.as('finished')))
            .executeTakeFirst()
        : await tx
            .updateTable('tasks')
            .set(completed)
            .where('id', '=', task.id)
            .where('lease_owner', '=', workerId)
            .where('status', '=', 'processing')
            .returning((eb) => ['charged', webhooksVersion(eb)])
            .$if(finished !== undefined, (qb) => qb.returning(finished!.as('finished')))
            .executeTakeFirst();
      if (!held) return { outcome: 'lost' as const, deliveries: 0 };
      const refused = await completion.recordOutputs(tx, now);
      if (refused) {
        const deliveries = await this.markFailed(
          tx,
          task.id,
          task.account_id,
          task.created_at,
          held.charged === 1,
          refused,
          now,
          held.webhooks_version,
        );
        return { outcome: 'failed' as const, deliveries };
      }
      const deliveries = await this.ends.record(tx, task.account_id, [task.id], now, held.webhooks_version ?? undefined);
      return { outcome: 'completed' as const, deliveries };
    });
    if (outcome.outcome !== 'lost') this.events.finished(task.id, { published: finished !== undefined });
    if (outcome.deliveries) this.events.deliveries();
    return outcome.outcome === 'completed';
  }

  /**
   * `complete` in one statement, without a transaction, when this process knows the account's
   * endpoints want no event of it (`TaskEnds.quietVersion`): the task completed and its outputs
   * recorded only while the lease is still this worker's, the account still at that version and
   * the outputs fit its storage. Anything else — the lease lost, the endpoints changed, the
   * outputs refused — writes nothing and answers false: `complete`'s transaction then decides,
   * as without it. SQLite: a row of the view task_completions, whose trigger checks and writes
   * (migration 0014). PostgreSQL: the account locked, then the task's row while the lease is
   * held and the account at that version (the lock order of quota.ts), the outputs' charge and
   * rows, and the task completed from the charge's row.
   */
  private async completeAlone(completion: Completion, now: number, finished: CarriedMessage | undefined): Promise<boolean> {
    const { task, workerId } = completion;
    if (!completion.recordingOutputs) return false;
    const quiet = this.ends.quietVersion(task);
    if (quiet === undefined) return false;
    const outputs = completion.recordingOutputs(now);
    if (!this.database.writingCtes) {
      const { output_file_id, output_file_ids, result, completed_at } = completedColumns(completion, now);
      try {
        await this.database.db
          .withTables<SqliteViews>()
          .insertInto('task_completions')
          .values({
            task_id: task.id,
            worker_id: workerId,
            webhooks_version: quiet,
            outputs: JSON.stringify(outputs.rows),
            bytes: outputs.bytes,
            storage_limit: outputs.storageLimit,
            output_file_id,
            output_file_ids,
            result,
            completed_at,
          })
          .execute();
        return true;
      } catch (err) {
        if ((err as Error).message === COMPLETION_REFUSED) return false;
        throw err;
      }
    }
    const row = await this.database.db
      .with(
        (cte) => cte('account').materialized(),
        (qb) => lockingAccount(qb, task.account_id),
      )
      .with(
        (cte) => cte('held').materialized(),
        (qb) =>
          qb
            .selectFrom(['tasks', 'account'])
            .select('tasks.id')
            .where('tasks.id', '=', task.id)
            .where('tasks.lease_owner', '=', workerId)
            .where('tasks.status', '=', 'processing')
            .where('account.webhooks_version', '=', quiet)
            .forNoKeyUpdate('tasks'),
      )
      .with('charged', () => outputs.charge(sql<SqlBool>`EXISTS (SELECT 1 FROM held)`))
      .with('inserted', () => outputs.insert('charged'))
      .updateTable('tasks')
      .set(completedColumns(completion, now))
      .from('charged')
      .where('tasks.id', '=', task.id)
      .returning('tasks.id')
      .$if(finished !== undefined, (qb) => qb.returning(finished!.as('finished')))
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Fails the task, or puts a transient fault back in the queue with backoff while attempts
   * remain. Internal errors and storage refusals that end a task refund its quota charge.
   */
  async fail(task: TaskRow, workerId: string, failure: TaskFailure): Promise<'retrying' | 'failed' | 'lost'> {
    const now = this.clock.now();
    const outcome = await this.database.transaction(async (tx) => {
      const current = await tx
        .selectFrom('tasks')
        .select((eb) => ['attempts', 'max_attempts', 'charged', webhooksVersion(eb)])
        .where('id', '=', task.id)
        .where('lease_owner', '=', workerId)
        .where('status', '=', 'processing')
        // Lock the row (PostgreSQL) so a cancel or reap committing meanwhile is not overwritten.
        .$if(this.database.skipLocked, (qb) => qb.forUpdate())
        .executeTakeFirst();
      if (!current) return { outcome: 'lost' as const, deliveries: 0 };
      if (failure.transient && current.attempts < current.max_attempts) {
        await tx
          .updateTable('tasks')
          .set({
            ...backInQueue(now + backoffMs(current.attempts)),
            error_code: failure.code,
            error_message: failure.message,
            error_details: failure.details ? JSON.stringify(failure.details) : null,
          })
          .where('id', '=', task.id)
          .execute();
        return { outcome: 'retrying' as const, deliveries: 0 };
      }
      const deliveries = await this.markFailed(
        tx,
        task.id,
        task.account_id,
        task.created_at,
        current.charged === 1,
        failure,
        now,
        current.webhooks_version,
      );
      return { outcome: 'failed' as const, deliveries };
    });
    if (outcome.outcome === 'failed') this.events.finished(task.id);
    if (outcome.deliveries) this.events.deliveries();
    if (outcome.outcome === 'retrying') setTimeout(() => this.events.queued(task.lane), backoffMs(task.attempts)).unref();
    return outcome.outcome;
  }

  private async markFailed(
    tx: Tx,
    taskId: string,
    accountId: string,
    createdAt: number,
    charged: boolean,
    failure: Pick<TaskFailure, 'code' | 'message' | 'details'>,
    now: number,
    webhooksVersion?: number | null,
  ): Promise<number> {
    const refund = charged && REFUNDED_FAILURES.has(failure.code);
    await tx
      .updateTable('tasks')
      .set({
        status: 'failed',
        // No outputs (a completion whose outputs were refused had set them).
        output_file_id: null,
        output_file_ids: null,
        result: null,
        error_code: failure.code,
        error_message: failure.message,
        error_details: failure.details ? JSON.stringify(failure.details) : null,
        lease_owner: null,
        lease_expires_at: null,
        completed_at: now,
        ...(refund ? { charged: 0 } : {}),
      })
      .where('id', '=', taskId)
      .execute();
    if (refund) await refundTask(tx, accountId, createdAt);
    // Its webhook events, in the transaction that fails it.
    return this.ends.record(tx, accountId, [taskId], now, webhooksVersion ?? undefined);
  }

  /**
   * Gives a claimed task back at once (its worker is shutting down): queued again, the attempt
   * it interrupted not counted. False when the lease was no longer held.
   */
  async release(task: TaskRow, workerId: string): Promise<boolean> {
    const result = await this.database.db
      .updateTable('tasks')
      .set({
        ...backInQueue(this.clock.now()),
        attempts: sql<number>`CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END`,
      })
      .where('id', '=', task.id)
      .where('lease_owner', '=', workerId)
      .where('status', '=', 'processing')
      .executeTakeFirst();
    const released = Number(result.numUpdatedRows) === 1;
    if (released) this.events.queued(task.lane);
    return released;
  }

  /**
   * Puts tasks whose lease lapsed (their worker died or stalled) back in the queue, or fails
   * them once they have used all their attempts or lost their lease MAX_LOST_LEASES times
   * (a poison input). Returns how many were re-queued and how many failed.
   */
  async reapExpiredLeases(): Promise<{ requeued: number; failed: number }> {
    const now = this.clock.now();
    const lapsed = await this.database.db
      .selectFrom('tasks')
      .select(['id', 'account_id', 'created_at', 'attempts', 'max_attempts', 'lost_leases', 'charged', 'lease_owner'])
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
        if (!still) return { outcome: 'skipped' as const, deliveries: 0 };
        const lostLeases = task.lost_leases + 1;
        if (lostLeases >= MAX_LOST_LEASES || task.attempts >= task.max_attempts) {
          const failure = {
            code: 'INTERNAL_ERROR',
            message: `The task's worker stopped responding ${lostLeases === 1 ? 'once' : `${lostLeases} times`} while running it; it is not retried`,
          };
          await tx.updateTable('tasks').set({ lost_leases: lostLeases }).where('id', '=', task.id).execute();
          const deliveries = await this.markFailed(tx, task.id, task.account_id, task.created_at, task.charged === 1, failure, now);
          return { outcome: 'failed' as const, deliveries };
        }
        await tx
          .updateTable('tasks')
          .set({ ...backInQueue(now), lost_leases: lostLeases })
          .where('id', '=', task.id)
          .execute();
        return { outcome: 'requeued' as const, deliveries: 0 };
      });
      if (outcome.outcome === 'requeued') requeued++;
      if (outcome.outcome === 'failed') {
        failed++;
        this.events.finished(task.id);
      }
      if (outcome.deliveries) this.events.deliveries();
    }
    if (requeued) this.events.queued();
    return { requeued, failed };
  }

  /** The task's status now (undefined when there is no such task). */
  async statusOf(taskId: string): Promise<TaskRow['status'] | undefined> {
    const row = await this.database.db.selectFrom('tasks').select('status').where('id', '=', taskId).executeTakeFirst();
    return row?.status;
  }

  async queueDepth(): Promise<{ queued: number; processing: number }> {
    const rows = await this.database.db
      .selectFrom('tasks')
      .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
      .where('status', 'in', ACTIVE_STATUSES)
      .groupBy('status')
      .execute();
    const count = (status: string) => Number(rows.find((r) => r.status === status)?.n ?? 0);
    return { queued: count('queued'), processing: count('processing') };
  }

  /** How long the oldest queued task that may run now has waited, in ms; 0 when none waits (metrics). */
  async oldestQueuedWaitMs(): Promise<number> {
    const now = this.clock.now();
    const row = await this.database.db
      .selectFrom('tasks')
      .select((eb) => eb.fn.min<number | null>('run_at').as('oldest'))
      .where('status', '=', 'queued')
      .where('run_at', '<=', now)
      .executeTakeFirst();
    const oldest = row?.oldest;
    return oldest === null || oldest === undefined ? 0 : Math.max(0, now - Number(oldest));
  }

  /** Queued and running tasks counted by kind and status (the operator's page). */
  async depthByKind(): Promise<{ type: string; status: string; count: number }[]> {
    const rows = await this.database.db
      .selectFrom('tasks')
      .select(['type', 'status', (eb) => eb.fn.countAll<number>().as('n')])
      .where('status', 'in', ACTIVE_STATUSES)
      .groupBy(['type', 'status'])
      .execute();
    return rows.map((row) => ({ type: row.type, status: row.status, count: Number(row.n) }));
  }

  /** The latest failed tasks, newest first, with their account's email (the operator's page). */
  async recentFailures(limit: number) {
    return this.database.db
      .selectFrom('tasks')
      .innerJoin('accounts', 'accounts.id', 'tasks.account_id')
      .select([
        'tasks.id',
        'tasks.type',
        'tasks.error_code',
        'tasks.error_message',
        'tasks.attempts',
        'tasks.completed_at',
        'tasks.created_at',
        'accounts.email',
      ])
      .where('tasks.status', '=', 'failed')
      .orderBy('tasks.completed_at', 'desc')
      .limit(limit)
      .execute();
  }
}
