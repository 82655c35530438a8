// Quotas charged inside the transaction that queues the work. Each charge is one conditional
// UPDATE (`used + n <= limit`), so parallel requests at the edge admit exactly what is left.
//
// THE LOCK ORDER. Every transaction that changes an account's work or storage takes its row
// locks in this order, skipping what it does not need but never going back up:
//
//   1. the account row (`lockAccount`; queuing's `lockAccountForWork`, an UPDATE of its
//      work_version on PostgreSQL; or the UPDATE of its storage_used when that is the
//      transaction's first write: upload, presign);
//   2. upload rows (confirm, expiry of an unconfirmed upload);
//   3. task rows (completion, failure, cancel; several at once in one statement);
//   4. file rows (delete, retention);
//   5. counters and new rows: usage_counters, idempotency keys, batches, task inputs.
//   6. the batch row, locked by a task's end to tell whether it finished the batch
//      (batch.completed, src/tasks/ended.ts), then the new webhook deliveries.
//
// So enqueue (account, quota counters, new task rows), completion (account, task, new output
// files; the account locked by the statement that completes the task, before it takes the
// task's row, and the storage charge updates the account row it holds already), cancel (account, tasks),
// file delete and the retention sweep (account, file) serialise per account on its row and
// cannot wait on one another in a circle. The queue's own paths hold one row at a time or skip
// locked ones: a claim takes free tasks with SKIP LOCKED and stamps their accounts served (in
// the order of their ids, in the claim's statement on PostgreSQL); heartbeats, failures and the reaper hold one task (then, for a refund,
// its counter). On PostgreSQL the account lock is FOR NO KEY UPDATE, so inserting rows that
// reference the account (their FOR KEY SHARE check) never waits for it, and a transaction that
// still meets a deadlock or serialization failure is run again (`Database.transaction`).
// SQLite has one writer.
import { sql, type Expression, type ExpressionBuilder, type QueryCreator, type RawBuilder, type SqlBool } from 'kysely';
import { dayKey, iso, monthKey, nextDayStart, nextMonthStart } from '../clock.js';
import type { Database, Tx } from '../db/database.js';
import { ACTIVE_STATUSES, type DB } from '../db/schema.js';
import { AppError } from '../errors.js';
import type { PlanLimits } from './plans.js';

export const periods = {
  monthlyTasks: (now: number) => `tasks:${monthKey(now)}`,
  dailyBatchFiles: (now: number) => `batch:${dayKey(now)}`,
  /** Delivery-URL renders (cache misses). */
  monthlyRenders: (now: number) => `renders:${monthKey(now)}`,
  /** Tasks per day, for the usage chart; never limited. */
  dailyTasks: (now: number) => `tasks-day:${dayKey(now)}`,
};

/**
 * Adds `amount` to a counter if it stays within `limit`, in one statement: the first use of a
 * period inserts its row, a later one updates it only while the sum fits (the conflicting row is
 * locked and the condition read again on PostgreSQL; SQLite has one writer): exact under
 * concurrency on both.
 */
async function increment(tx: Tx | Database['db'], accountId: string, period: string, amount: number, limit: number): Promise<boolean> {
  if (amount > limit) return false;
  const result = await tx
    .insertInto('usage_counters')
    .values({ account_id: accountId, period, used: amount })
    .onConflict((oc) =>
      oc
        .columns(['account_id', 'period'])
        .doUpdateSet({ used: sql`usage_counters.used + ${amount}` })
        .where(sql<boolean>`usage_counters.used + ${amount} <= ${limit}`),
    )
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows) === 1;
}

async function counterValue(db: Tx | Database['db'], accountId: string, period: string): Promise<number> {
  const row = await db
    .selectFrom('usage_counters')
    .select('used')
    .where('account_id', '=', accountId)
    .where('period', '=', period)
    .executeTakeFirst();
  return Number(row?.used ?? 0);
}

/**
 * The first lock of a transaction that changes the account's work or storage (see the lock
 * order above): what it reads of the account's tasks, files and counters stays true until it
 * commits.
 */
export async function lockAccount(database: Database, tx: Tx, accountId: string): Promise<void> {
  await database.lockRow(tx, 'accounts', accountId);
}

/**
 * `lockAccount` as a CTE of another statement (PostgreSQL; its row locks only where the dialect
 * has them): the account's row, locked, with its `webhooks_version` as the lock found it (a
 * locking read that waited sees the row its holder committed). The statement must read the CTE
 * before it locks anything else (the lock order above): a completion joins it in its UPDATE.
 */
export const lockingAccount = (qb: QueryCreator<DB>, accountId: string) =>
  qb.selectFrom('accounts').select('accounts.webhooks_version').where('accounts.id', '=', accountId).forNoKeyUpdate();

/**
 * Adds `amount` to the month's task counter if it stays within `limit`, and to the day's (the
 * usage chart's, never limited), in one statement; false when the month's would not fit (the
 * day's may then have been counted: the caller's transaction is rolled back by its refusal).
 */
async function incrementTasks(tx: Tx, accountId: string, amount: number, limit: number, now: number): Promise<boolean> {
  if (amount > limit) return false;
  const result = await countingTasks(tx, accountId, amount, limit, now).executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows) === 2;
}

/**
 * The month's and the day's task counters plus `amount`, the month's only within `limit`: one
 * upsert, run alone or as a CTE; with `when` (PostgreSQL), only where that holds.
 */
function countingTasks(qb: QueryCreator<DB>, accountId: string, amount: number, limit: number, now: number, when?: Expression<SqlBool>) {
  const month = periods.monthlyTasks(now);
  const day = periods.dailyTasks(now);
  const insert = qb.insertInto('usage_counters');
  const rows =
    when === undefined
      ? insert.values([
          { account_id: accountId, period: month, used: amount },
          { account_id: accountId, period: day, used: amount },
        ])
      : insert
          .columns(['account_id', 'period', 'used'])
          .expression(
            sql`SELECT v.account_id, v.period, v.used FROM (VALUES (${accountId}, ${month}, CAST(${amount} AS bigint)), (${accountId}, ${day}, CAST(${amount} AS bigint))) AS v (account_id, period, used) WHERE ${when}`,
          );
  return rows.onConflict((oc) =>
    oc
      .columns(['account_id', 'period'])
      .doUpdateSet({ used: sql`usage_counters.used + ${amount}` })
      .where(sql<boolean>`usage_counters.period <> ${month} OR usage_counters.used + ${amount} <= ${limit}`),
  );
}

/**
 * `chargeTasks`'s counting as a CTE of another statement (`Database.writingCtes`): a row per
 * counter it added to, so two when the month's took `amount` within the plan's limit (the
 * statement writes only then). Undefined when `amount` cannot fit at all.
 */
export function chargingTasks(qb: QueryCreator<DB>, accountId: string, limits: PlanLimits, amount: number, now: number, when?: Expression<SqlBool>) {
  if (amount > limits.monthlyTasks) return undefined;
  return countingTasks(qb, accountId, amount, limits.monthlyTasks, now, when).returning('usage_counters.period');
}

export async function chargeTasks(tx: Tx, accountId: string, limits: PlanLimits, count: number, now: number): Promise<void> {
  if (!(await incrementTasks(tx, accountId, count, limits.monthlyTasks, now))) throw await monthlyQuotaExceeded(tx, accountId, limits, count, now);
}

/** MONTHLY_QUOTA_EXCEEDED for `count` more tasks (the month's counter read again, for the details). */
export async function monthlyQuotaExceeded(tx: Tx, accountId: string, limits: PlanLimits, count: number, now: number): Promise<AppError> {
  const used = await counterValue(tx, accountId, periods.monthlyTasks(now));
  return new AppError(
    'MONTHLY_QUOTA_EXCEEDED',
    `This request needs ${count} task(s); ${Math.max(0, limits.monthlyTasks - used)} of the monthly quota remain`,
    {
      limit: limits.monthlyTasks,
      used,
      requested: count,
      resetsAt: iso(nextMonthStart(now)),
    },
  );
}

export async function chargeBatchFiles(tx: Tx, accountId: string, limits: PlanLimits, count: number, now: number): Promise<void> {
  const period = periods.dailyBatchFiles(now);
  if (!(await increment(tx, accountId, period, count, limits.dailyBatchFiles))) {
    const used = await counterValue(tx, accountId, period);
    throw new AppError(
      'DAILY_BATCH_QUOTA_EXCEEDED',
      `This batch has ${count} file(s); ${Math.max(0, limits.dailyBatchFiles - used)} of today's batch quota remain`,
      {
        limit: limits.dailyBatchFiles,
        used,
        requested: count,
        resetsAt: iso(nextDayStart(now)),
      },
    );
  }
}

/**
 * Charges one delivery-URL render (a cache miss) against monthlyRenders, or refuses with 429
 * RENDER_QUOTA_EXCEEDED. Outside any transaction: the conditional UPDATE alone admits exactly
 * what is left, on both dialects.
 */
export async function chargeRender(database: Database, accountId: string, limits: PlanLimits, now: number): Promise<void> {
  const period = periods.monthlyRenders(now);
  if (await increment(database.db, accountId, period, 1, limits.monthlyRenders)) return;
  const used = await counterValue(database.db, accountId, period);
  throw new AppError('RENDER_QUOTA_EXCEEDED', `The plan's ${limits.monthlyRenders} renders this month are used up`, {
    limit: limits.monthlyRenders,
    used,
    requested: 1,
    resetsAt: iso(nextMonthStart(now)),
  });
}

/** Gives back a render's charge (it failed through no fault of the request: a timeout, the service). */
export async function refundRender(database: Database, accountId: string, chargedAt: number): Promise<void> {
  await database.db
    .updateTable('usage_counters')
    .set({ used: sql`used - 1` })
    .where('account_id', '=', accountId)
    .where('period', '=', periods.monthlyRenders(chargedAt))
    .where('used', '>', 0)
    .execute();
}

/** What queuing new work checks of an account, read under its lock (lockAccountForWork). */
export interface AccountWork {
  storageUsed: number;
  /** Tasks queued or running. */
  activeTasks: number;
}

/**
 * lockAccount, and what queuing work checks under that lock — the storage used and the tasks
 * queued or running —, with `also` (another module's read, such as the work's input files).
 * Tasks are only added under this lock, so the count read here can only fall before the
 * commit: the limit is never passed. SQLite: one statement (its transactions are serializable).
 * PostgreSQL: the lock, then the reads in a statement of their own, because a statement reads
 * as of its start: one that waited for the lock would miss the tasks (and the deletions) its
 * holder committed meanwhile (only the locked row itself is read again as it is then).
 */
export async function lockAccountForWork<T = never>(
  database: Database,
  tx: Tx,
  accountId: string,
  also?: (eb: ExpressionBuilder<DB, never>) => RawBuilder<T>,
  /** Only read, in one statement, without the lock: a statement that then writes alone checks again (markingAccountForWork). */
  options: { unlocked?: boolean } = {},
): Promise<AccountWork & { also: T | undefined }> {
  const reads = (eb: ExpressionBuilder<DB, never>) => [
    eb
      .selectFrom('tasks')
      .select(eb.fn.countAll<number>().as('n'))
      .where('tasks.account_id', '=', accountId)
      .where('tasks.status', 'in', ACTIVE_STATUSES)
      .as('active'),
    (also ? also(eb) : sql<T | null>`NULL`).as('also'),
  ];
  let storageUsed: number | undefined;
  let row: { active: number | null; also: unknown } | undefined;
  if (database.rowLocks && !options.unlocked) {
    // The lock leaves its mark (work_version, see markingAccountForWork).
    const locked = await markingAccountForWork(tx, accountId).executeTakeFirst();
    storageUsed = locked?.storage_used;
    row = await tx.selectNoFrom(reads).executeTakeFirst();
  } else {
    const read = await tx
      .selectFrom('accounts')
      .select((eb) => ['storage_used', ...reads(eb as unknown as ExpressionBuilder<DB, never>)])
      .where('accounts.id', '=', accountId)
      .executeTakeFirst();
    storageUsed = read?.storage_used;
    row = read;
  }
  return { storageUsed: Number(storageUsed ?? 0), activeTasks: Number(row?.active ?? 0), also: (row?.also ?? undefined) as T | undefined };
}

/**
 * PostgreSQL, work queued without a transaction: `lockAccountForWork`'s lock as a CTE of the
 * statement that queues (the account's row, its storage used as the lock found it). Every
 * queuing, in a transaction or not, bumps the account's work_version with its lock, so that
 * `stillFits` can tell whether tasks were added since the statement's snapshot: one that waited
 * for the lock counts the tasks as of before.
 */
export const markingAccountForWork = (qb: QueryCreator<DB>, accountId: string) =>
  qb
    .updateTable('accounts')
    .set({ work_version: sql<number>`work_version + 1` })
    .where('id', '=', accountId)
    .returning(['accounts.storage_used', 'accounts.work_version']);

/**
 * Over the statement's CTE `marked` (markingAccountForWork): nobody queued work since the
 * statement's snapshot (the version it bumped is the one the snapshot shows), the storage is
 * not full (checkStorage) and `adding` more tasks leave the queued and running ones within the
 * plan (checkQueuedTasks), counted in that snapshot: true only when what the caller read still
 * holds. A count the snapshot took before tasks ended overcounts: it refuses, never admits.
 */
export const stillFits = (marked: string, accountId: string, limits: PlanLimits, adding: number) =>
  sql<SqlBool>`${sql.ref(`${marked}.work_version`)} = (SELECT a.work_version FROM accounts AS a WHERE a.id = ${accountId}) + 1
    AND ${sql.ref(`${marked}.storage_used`)} < ${limits.storageBytes}
    AND (SELECT count(*) FROM tasks AS t WHERE t.account_id = ${accountId} AND t.status IN (${sql.join([...ACTIVE_STATUSES])})) + ${adding} <= ${limits.maxQueuedTasks}`;

export function checkQueuedTasks(work: AccountWork, limits: PlanLimits, adding: number): void {
  const active = work.activeTasks;
  if (active + adding > limits.maxQueuedTasks) {
    throw new AppError('TOO_MANY_QUEUED_TASKS', `${active} task(s) are queued or running; the plan allows ${limits.maxQueuedTasks} at once`, {
      limit: limits.maxQueuedTasks,
      used: active,
      requested: adding,
      resetsAt: null,
    });
  }
}

/** Gives back a task's charge (it failed through no fault of its input). */
export async function refundTask(tx: Tx, accountId: string, createdAt: number): Promise<void> {
  await tx
    .updateTable('usage_counters')
    .set({ used: sql`used - 1` })
    .where('account_id', '=', accountId)
    .where('period', '=', periods.monthlyTasks(createdAt))
    .where('used', '>', 0)
    .execute();
}

async function storageUsed(db: Tx | Database['db'], accountId: string): Promise<number> {
  const row = await db.selectFrom('accounts').select('storage_used').where('id', '=', accountId).executeTakeFirst();
  return Number(row?.storage_used ?? 0);
}

/** Adds `bytes` to the account's storage when the total stays within `limit`; false when it would not. */
async function tryChargeStorage(tx: Tx, accountId: string, limit: number, bytes: number): Promise<boolean> {
  if (bytes === 0) return true; // nothing stored: fits even an account over its limit (a smaller plan)
  return (await chargingStorage(tx, accountId, limit, bytes).executeTakeFirst()) !== undefined;
}

/**
 * `tryChargeStorage` as a CTE of another statement (`Database.writingCtes`): the account's id
 * when the bytes were added, no row when they would not fit. It is the statement's first lock
 * (the lock order above), as the charge is an upload's first write.
 */
export const chargingStorage = (qb: QueryCreator<DB>, accountId: string, limit: number, bytes: number) =>
  qb
    .updateTable('accounts')
    .set({ storage_used: sql`storage_used + ${bytes}` })
    .where('id', '=', accountId)
    // Nothing stored fits even an account over its limit (a smaller plan), as in tryChargeStorage.
    .where(sql<boolean>`(${bytes} = 0 OR storage_used + ${bytes} <= ${limit})`)
    .returning('accounts.id');

/**
 * SQLite's `chargingStorage`: whether `bytes` more fit the account's storage, as the condition
 * of an INSERT into the view charged_files, whose trigger charges each row's size (migration
 * 0014). Uncorrelated, it is read once per statement, before the first row is charged.
 */
export const storageFits = (accountId: string, limit: number, bytes: number) =>
  sql<SqlBool>`(${bytes} = 0 OR (SELECT storage_used FROM accounts WHERE id = ${accountId}) + ${bytes} <= ${limit})`;

/** STORAGE_LIMIT_EXCEEDED for `bytes` more (the storage used read again, for the error's details). */
export async function storageRefused(db: Tx | Database['db'], accountId: string, limits: PlanLimits, bytes: number): Promise<AppError> {
  return new AppError('STORAGE_LIMIT_EXCEEDED', `Storing ${bytes} more bytes would pass the plan's storage limit`, {
    limit: limits.storageBytes,
    used: await storageUsed(db, accountId),
    requested: bytes,
    resetsAt: null,
  });
}

/** Reserves `bytes` of the account's storage, or refuses with STORAGE_LIMIT_EXCEEDED. */
export async function chargeStorage(tx: Tx, accountId: string, limits: PlanLimits, bytes: number): Promise<void> {
  if (!(await tryChargeStorage(tx, accountId, limits.storageBytes, bytes))) throw await storageRefused(tx, accountId, limits, bytes);
}

/**
 * Refuses new work while the account's storage is full (at or over its limit): its outputs
 * would have nowhere to go. Call it under the account's lock.
 */
export function checkStorage(work: AccountWork, limits: PlanLimits): void {
  const used = work.storageUsed;
  if (used >= limits.storageBytes) {
    throw new AppError(
      'STORAGE_LIMIT_EXCEEDED',
      `The account's storage is full (${used} of ${limits.storageBytes} bytes); delete files to queue new work`,
      {
        limit: limits.storageBytes,
        used,
        resetsAt: null,
      },
    );
  }
}

/**
 * Frees a file's or a reservation's bytes. Each caller releases in the transaction that moves
 * the file or upload out of its live state, conditionally, so nothing is released twice.
 */
export async function releaseStorage(tx: Tx, accountId: string, bytes: number): Promise<void> {
  await tx
    .updateTable('accounts')
    .set({ storage_used: sql`CASE WHEN storage_used >= ${bytes} THEN storage_used - ${bytes} ELSE 0 END` })
    .where('id', '=', accountId)
    .execute();
}

export async function readUsage(database: Database, accountId: string, limits: PlanLimits, now: number) {
  const [monthly, batch, renders, account] = await Promise.all([
    counterValue(database.db, accountId, periods.monthlyTasks(now)),
    counterValue(database.db, accountId, periods.dailyBatchFiles(now)),
    counterValue(database.db, accountId, periods.monthlyRenders(now)),
    database.db.selectFrom('accounts').select('storage_used').where('id', '=', accountId).executeTakeFirst(),
  ]);
  return {
    monthlyTasks: { used: monthly, limit: limits.monthlyTasks, resetsAt: iso(nextMonthStart(now)) },
    dailyBatchFiles: { used: batch, limit: limits.dailyBatchFiles, resetsAt: iso(nextDayStart(now)) },
    monthlyRenders: { used: renders, limit: limits.monthlyRenders, resetsAt: iso(nextMonthStart(now)) },
    storageBytes: { used: Number(account?.storage_used ?? 0), limit: limits.storageBytes },
  };
}

export async function dailyTaskCounts(database: Database, accountId: string, days: number, now: number) {
  const keys: string[] = [];
  for (let i = days - 1; i >= 0; i--) keys.push(dayKey(now - i * 86_400_000));
  const rows = await database.db
    .selectFrom('usage_counters')
    .select(['period', 'used'])
    .where('account_id', '=', accountId)
    .where(
      'period',
      'in',
      keys.map((k) => `tasks-day:${k}`),
    )
    .execute();
  const byPeriod = new Map(rows.map((r) => [r.period, Number(r.used)]));
  return keys.map((date) => ({ date, tasks: byPeriod.get(`tasks-day:${date}`) ?? 0 }));
}
