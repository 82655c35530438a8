// The webhook events of tasks that ended (completed, failed, canceled) and of the batches they
// finished. Called inside the transaction that ends the tasks, so an event is committed with the
// end it reports, or not at all: a process that dies after the commit has lost nothing.
import type { Database, Tx } from '../db/database.js';
import { isFinished } from '../db/schema.js';
import { enqueueEvents, knownSubscriptions, subscriptionsOf, type WebhookEvent } from '../webhooks/store.js';
import { batchToApi, taskToApi } from './view.js';

/**
 * Queues `task.<status>` for each of `taskIds` (tasks of `accountId` that have just ended) and
 * `batch.completed` for each batch whose last unfinished task is among them, for the account's
 * endpoints that listen to them; returns how many deliveries it queued (the deliverer is woken
 * only then). Costs one indexed read when the account has no endpoint, and none when the caller
 * read the account's `webhooks_version` in this transaction and this process knows the
 * endpoints of that version.
 */
export async function recordTasksEnded(
  database: Database,
  tx: Tx,
  accountId: string,
  taskIds: readonly string[],
  now: number,
  webhooksVersion?: number,
): Promise<number> {
  if (!taskIds.length) return 0;
  const subscriptions = await subscriptionsOf(database, tx, accountId, webhooksVersion);
  if (!subscriptions.length) return 0;
  const wanted = new Set(subscriptions.flatMap((s) => s.events));
  const tasks = await tx
    .selectFrom('tasks')
    .selectAll()
    .where('id', 'in', [...taskIds])
    .where('account_id', '=', accountId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  const events: WebhookEvent[] = [];
  for (const task of tasks) {
    const type = `task.${task.status}`;
    if (isFinished(task.status) && wanted.has(type)) events.push({ type, data: { task: taskToApi(task) } });
  }
  if (wanted.has('batch.completed')) {
    const batchIds = [...new Set(tasks.flatMap((t) => (t.batch_id ? [t.batch_id] : [])))].sort();
    for (const batchId of batchIds) {
      // The batch's lock (last in the lock order, src/accounts/quota.ts) makes the ends of its
      // tasks take turns here: exactly one of them sees every task finished.
      await database.lockRow(tx, 'batches', batchId);
      const batch = await tx.selectFrom('batches').selectAll().where('id', '=', batchId).executeTakeFirst();
      if (!batch) continue;
      const members = await tx.selectFrom('tasks').selectAll().where('batch_id', '=', batchId).orderBy('batch_index').execute();
      if (members.every((t) => isFinished(t.status))) events.push({ type: 'batch.completed', data: { batch: batchToApi(batch, members) } });
    }
  }
  return enqueueEvents(tx, accountId, subscriptions, events, now);
}

/**
 * The account's `webhooks_version` at which this process knows that a task of it completing
 * queues no event (no endpoint listens to task.completed, nor, for a task of a batch, to
 * batch.completed), if it knows one: a completion that finds the account at that version, under
 * its lock, has no event to record with it (TaskEnds.quietVersion).
 */
export function quietCompletionVersion(database: Database, accountId: string, inBatch: boolean): number | undefined {
  const known = knownSubscriptions(database, accountId);
  if (!known) return undefined;
  const wanted = new Set(known.subscriptions.flatMap((s) => s.events));
  return wanted.has('task.completed') || (inBatch && wanted.has('batch.completed')) ? undefined : known.version;
}
