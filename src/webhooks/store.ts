// Webhook endpoints and their deliveries. A delivery is one event for one endpoint, and the
// table is its queue, as the task table is the tasks' (ARCHITECTURE.md): events are inserted in
// the transaction that ends the task, workers claim deliveries with a lease, an attempt that
// fails is tried again with backoff for 24 hours, and a worker that dies mid-attempt leaves a
// lease that lapses, so another worker tries again (at least once; receivers dedupe by event id).
import crypto from 'node:crypto';
import { sql, type Selectable } from 'kysely';
import { iso } from '../clock.js';
import type { Database, Tx } from '../db/database.js';
import type { WebhookDeliveriesTable, WebhooksTable } from '../db/schema.js';
import { AppError, notFound } from '../errors.js';
import { newId } from '../ids.js';
import { markWebhooksChanged } from '../accounts/accounts.js';
import { olderThan, pageOf } from '../db/pagination.js';

export type WebhookRow = Selectable<WebhooksTable>;
export type DeliveryRow = Selectable<WebhookDeliveriesTable>;

/** The events an endpoint can subscribe to. */
export const WEBHOOK_EVENTS = ['task.completed', 'task.failed', 'task.canceled', 'batch.completed'] as const;
type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];
/** What POST /api/webhooks/{id}/test sends: no task or batch, and no receiver should act on it. */
export const TEST_EVENT = 'webhook.test';

/** Endpoints one account may have: enough for every environment of a service, few enough to stay cheap per task. */
export const MAX_WEBHOOKS_PER_ACCOUNT = 10;
/** How long a delivery is retried. */
const RETRY_WINDOW_MS = 24 * 3600_000;
/** The waits after the 1st, 2nd, … failed attempt; after the last, every RETRY_EVERY_MS. */
const RETRY_DELAYS_MS = [10_000, 60_000, 5 * 60_000, 30 * 60_000, 2 * 3600_000];
const RETRY_EVERY_MS = 4 * 3600_000;
/** Finished deliveries are listed (and kept) this long. */
const DELIVERY_RETENTION_MS = 30 * 24 * 3600_000;
/** Attempts kept in a delivery's log (24 hours of the schedule above make about a dozen). */
const ATTEMPT_LOG_LIMIT = 30;

/** What the log says of an attempt whose worker died before recording its outcome. */
const LOST_ATTEMPT = 'no outcome recorded: the worker stopped during the attempt (the receiver may have had the event)';

/** The wait after `attempts` failed attempts. */
const retryDelayMs = (attempts: number): number => RETRY_DELAYS_MS[attempts - 1] ?? RETRY_EVERY_MS;

export function webhookToApi(row: WebhookRow) {
  return {
    webhookId: row.id,
    url: row.url,
    events: JSON.parse(row.events) as WebhookEventType[],
    ...(row.description !== null ? { description: row.description } : {}),
    createdAt: iso(row.created_at),
  };
}

export interface AttemptRecord {
  at: number;
  statusCode?: number;
  durationMs: number;
  error?: string;
  responseBody?: string;
}

function deliveryToApi(row: DeliveryRow) {
  const log = JSON.parse(row.attempt_log) as AttemptRecord[];
  return {
    deliveryId: row.id,
    eventId: row.event_id,
    event: row.event_type,
    status: row.status === 'delivering' ? ('pending' as const) : row.status,
    attempts: log.length,
    ...(row.last_status_code !== null ? { statusCode: row.last_status_code } : {}),
    ...(row.last_duration_ms !== null ? { durationMs: row.last_duration_ms } : {}),
    ...(row.last_error !== null ? { error: row.last_error } : {}),
    ...(row.status === 'pending' ? { nextAttemptAt: iso(row.run_at) } : {}),
    createdAt: iso(row.created_at),
    ...(row.finished_at !== null ? { finishedAt: iso(row.finished_at) } : {}),
    attemptLog: log.map((a) => ({
      at: iso(a.at),
      ...(a.statusCode !== undefined ? { statusCode: a.statusCode } : {}),
      durationMs: a.durationMs,
      ...(a.error !== undefined ? { error: a.error } : {}),
      ...(a.responseBody !== undefined ? { responseBody: a.responseBody } : {}),
    })),
  };
}

// Endpoints ------------------------------------------------------------------------------------

/**
 * Creates an endpoint with a new secret (returned here, and never again). The destination was
 * checked by the caller (it resolves names, which a transaction must not wait on). At most
 * MAX_WEBHOOKS_PER_ACCOUNT, counted under the account's lock.
 */
export async function createWebhook(tx: Tx, input: { accountId: string; url: string; events: readonly string[]; description?: string }, now: number) {
  // Locks the account's row too: the count below stays true until the commit.
  await markWebhooksChanged(tx, input.accountId);
  const { n } = await tx
    .selectFrom('webhooks')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', input.accountId)
    .executeTakeFirstOrThrow();
  if (Number(n) >= MAX_WEBHOOKS_PER_ACCOUNT) {
    throw new AppError('WEBHOOK_LIMIT_EXCEEDED', `An account may have ${MAX_WEBHOOKS_PER_ACCOUNT} webhook endpoints; delete one first`, {
      limit: MAX_WEBHOOKS_PER_ACCOUNT,
      used: Number(n),
    });
  }
  const row: WebhookRow = {
    id: newId('whk'),
    account_id: input.accountId,
    url: input.url,
    events: JSON.stringify(WEBHOOK_EVENTS.filter((e) => input.events.includes(e))),
    description: input.description ?? null,
    secret: `whsec_${crypto.randomBytes(32).toString('base64url')}`,
    created_at: now,
  };
  await tx.insertInto('webhooks').values(row).execute();
  return { ...webhookToApi(row), secret: row.secret };
}

export async function listWebhooks(database: Database, accountId: string) {
  const rows = await database.db
    .selectFrom('webhooks')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
  return rows.map(webhookToApi);
}

/** The caller's endpoint; another account's answers 404 as a missing one does. */
export async function getWebhook(database: Database | Tx, accountId: string, webhookId: string): Promise<WebhookRow> {
  const db = 'db' in database ? database.db : database;
  const row = await db.selectFrom('webhooks').selectAll().where('id', '=', webhookId).where('account_id', '=', accountId).executeTakeFirst();
  if (!row) throw notFound('Webhook');
  return row;
}

/** Deletes the endpoint and its deliveries: what is pending is not sent. */
export async function deleteWebhook(database: Database, accountId: string, webhookId: string): Promise<void> {
  await database.transaction(async (tx) => {
    // The account's row first (the lock order of src/accounts/quota.ts).
    await markWebhooksChanged(tx, accountId);
    await getWebhook(tx, accountId, webhookId);
    await tx.deleteFrom('webhook_deliveries').where('webhook_id', '=', webhookId).execute();
    await tx.deleteFrom('webhooks').where('id', '=', webhookId).execute();
  });
}

// Events ---------------------------------------------------------------------------------------

export interface Subscription {
  id: string;
  events: string[];
}

/** Accounts whose endpoints a process keeps (the most recently used). */
const SUBSCRIPTIONS_CACHED = 10_000;
/** Per database handle (each test server opens its own): account → its endpoints as of a version. */
const cachedSubscriptions = new WeakMap<Database, Map<string, { version: number; subscriptions: Subscription[] }>>();

/**
 * The account's endpoints and what each listens to (one indexed read; none on most accounts).
 * With `version`, the account's `webhooks_version` read earlier in the same transaction, a copy
 * kept from a read at that version answers instead: the endpoints change only with the version,
 * so the copy is what the read would return.
 */
export async function subscriptionsOf(database: Database, tx: Tx, accountId: string, version?: number): Promise<Subscription[]> {
  let cache = cachedSubscriptions.get(database);
  if (!cache) cachedSubscriptions.set(database, (cache = new Map()));
  const cached = cache.get(accountId);
  if (version !== undefined && cached?.version === version) {
    // Most recently used last: Map keeps insertion order.
    cache.delete(accountId);
    cache.set(accountId, cached);
    return cached.subscriptions;
  }
  const rows = await tx.selectFrom('webhooks').select(['id', 'events']).where('account_id', '=', accountId).execute();
  const subscriptions = rows.map((row) => ({ id: row.id, events: JSON.parse(row.events) as string[] }));
  if (version !== undefined) {
    cache.delete(accountId);
    cache.set(accountId, { version, subscriptions });
    if (cache.size > SUBSCRIPTIONS_CACHED) cache.delete(cache.keys().next().value!);
  }
  return subscriptions;
}

/**
 * The account's endpoints as this process last read them, with the `webhooks_version` they are
 * the endpoints of (undefined when it has not read them): true for as long as the account stays
 * at that version.
 */
export function knownSubscriptions(database: Database, accountId: string): { version: number; subscriptions: Subscription[] } | undefined {
  return cachedSubscriptions.get(database)?.get(accountId);
}

export interface WebhookEvent {
  type: string;
  data: Record<string, unknown>;
}

/** The body every attempt of the event sends, byte for byte. */
const eventBody = (eventId: string, event: WebhookEvent, now: number): string =>
  JSON.stringify({ id: eventId, type: event.type, createdAt: iso(now), data: event.data });

const newDelivery = (webhookId: string, accountId: string, eventId: string, type: string, payload: string, now: number): DeliveryRow => ({
  id: newId('dlv'),
  webhook_id: webhookId,
  account_id: accountId,
  event_id: eventId,
  event_type: type,
  payload,
  status: 'pending',
  attempts: 0,
  run_at: now,
  lease_owner: null,
  give_up_at: now + RETRY_WINDOW_MS,
  last_status_code: null,
  last_duration_ms: null,
  last_error: null,
  attempt_log: '[]',
  created_at: now,
  finished_at: null,
});

/**
 * Queues each event for every endpoint subscribed to its type, in the caller's transaction (the
 * one that ended the task). One event id per event, the same for every endpoint.
 */
export async function enqueueEvents(tx: Tx, accountId: string, subscriptions: Subscription[], events: WebhookEvent[], now: number): Promise<number> {
  const rows: DeliveryRow[] = [];
  for (const event of events) {
    const targets = subscriptions.filter((s) => s.events.includes(event.type));
    if (!targets.length) continue;
    const eventId = newId('evt');
    const payload = eventBody(eventId, event, now);
    for (const target of targets) rows.push(newDelivery(target.id, accountId, eventId, event.type, payload, now));
  }
  // A batch's event may be large (its tasks): a few rows per statement.
  for (let i = 0; i < rows.length; i += 20)
    await tx
      .insertInto('webhook_deliveries')
      .values(rows.slice(i, i + 20))
      .execute();
  return rows.length;
}

/** Queues a `webhook.test` event for the endpoint. */
export async function enqueueTestEvent(tx: Tx, accountId: string, webhookId: string, now: number) {
  const webhook = await getWebhook(tx, accountId, webhookId);
  const eventId = newId('evt');
  const payload = eventBody(eventId, { type: TEST_EVENT, data: { webhook: webhookToApi(webhook) } }, now);
  const row = newDelivery(webhook.id, accountId, eventId, TEST_EVENT, payload, now);
  await tx.insertInto('webhook_deliveries').values(row).execute();
  return deliveryToApi(row);
}

/** Sends a delivery's event again, as a new delivery with the same event id and body. */
export async function resendDelivery(tx: Tx, accountId: string, webhookId: string, deliveryId: string, now: number) {
  await getWebhook(tx, accountId, webhookId);
  const original = await tx
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', deliveryId)
    .where('webhook_id', '=', webhookId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  if (!original) throw notFound('Delivery');
  const row = newDelivery(webhookId, accountId, original.event_id, original.event_type, original.payload, now);
  await tx.insertInto('webhook_deliveries').values(row).execute();
  return deliveryToApi(row);
}

/** The endpoint's deliveries, newest first. */
export async function listDeliveries(database: Database, accountId: string, webhookId: string, page: { limit: number; cursor?: string }) {
  await getWebhook(database, accountId, webhookId);
  const after = olderThan(page.cursor, 'created_at', 'id');
  const rows = await database.db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('webhook_id', '=', webhookId)
    .where('account_id', '=', accountId)
    .$if(after !== undefined, (qb) => qb.where(after!))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit + 1)
    .execute();
  const { page: rowsOfPage, nextCursor } = pageOf(rows, page.limit);
  return { deliveries: rowsOfPage.map(deliveryToApi), nextCursor };
}

// The queue ------------------------------------------------------------------------------------

/** A claimed delivery with where it goes and the key that signs it. */
export interface ClaimedDelivery {
  delivery: DeliveryRow;
  url: string;
  secret: string;
}

/**
 * Takes up to `limit` deliveries that are due (pending with `run_at` passed, or delivering with
 * a lapsed lease: their worker died mid-attempt) under a lease held by `workerId` until
 * `now + leaseMs`, in one statement, as the task queue claims.
 */
export async function claimDeliveries(database: Database, now: number, workerId: string, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  if (limit <= 0) return [];
  const { db, skipLocked } = database;
  // A read first: the claim writes, and most looks (every task's end wakes this) find nothing.
  const any = await db
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('status', 'in', ['pending', 'delivering'])
    .where('run_at', '<=', now)
    .limit(1)
    .executeTakeFirst();
  if (!any) return [];
  const due = db
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('status', 'in', ['pending', 'delivering'])
    .where('run_at', '<=', now)
    .orderBy('run_at', 'asc')
    .limit(limit)
    .$if(skipLocked, (qb) => qb.forUpdate().skipLocked());
  const lease = { status: 'delivering' as const, lease_owner: workerId, run_at: now + leaseMs, attempts: sql<number>`attempts + 1` };
  const claimed = skipLocked
    ? await db
        .with(
          (cte) => cte('picked').materialized(),
          () => due,
        )
        .updateTable('webhook_deliveries')
        .set(lease)
        .from('picked')
        .whereRef('webhook_deliveries.id', '=', 'picked.id')
        .returningAll('webhook_deliveries')
        .execute()
    : await db
        .updateTable('webhook_deliveries')
        .set(lease)
        .where('id', 'in', due)
        .where('status', 'in', ['pending', 'delivering'])
        .where('run_at', '<=', now)
        .returningAll()
        .execute();
  if (!claimed.length) return [];
  const endpoints = await db
    .selectFrom('webhooks')
    .select(['id', 'url', 'secret'])
    .where('id', 'in', [...new Set(claimed.map((d) => d.webhook_id))])
    .execute();
  const byId = new Map(endpoints.map((e) => [e.id, e]));
  return claimed.flatMap((delivery) => {
    const endpoint = byId.get(delivery.webhook_id);
    // Deleted meanwhile: its deliveries went with it, this one's update will match nothing.
    return endpoint ? [{ delivery, url: endpoint.url, secret: endpoint.secret }] : [];
  });
}

export type AttemptOutcome = 'delivered' | 'retrying' | 'failed' | 'lost';

/**
 * Records an attempt, only while `workerId` still holds the lease: delivered on a 2xx; else
 * pending again after the backoff, or failed once the next attempt would start after
 * `give_up_at`.
 */
export async function recordAttempt(
  database: Database,
  claimed: DeliveryRow,
  workerId: string,
  attempt: AttemptRecord & { ok: boolean },
  now: number,
): Promise<AttemptOutcome> {
  const { ok, ...record } = attempt;
  const earlier = JSON.parse(claimed.attempt_log) as AttemptRecord[];
  // Claims before this one that recorded nothing: their worker died mid-attempt (the receiver
  // may have had the event). Logged as such, so the log counts every attempt.
  const lost = Math.max(0, claimed.attempts - 1 - earlier.length);
  const lostRecords = Array.from({ length: lost }, () => ({ at: record.at, durationMs: 0, error: LOST_ATTEMPT }));
  const log = [...earlier, ...lostRecords, record].slice(-ATTEMPT_LOG_LIMIT);
  const next = now + retryDelayMs(claimed.attempts);
  const outcome: AttemptOutcome = ok ? 'delivered' : next <= claimed.give_up_at ? 'retrying' : 'failed';
  const result = await database.db
    .updateTable('webhook_deliveries')
    .set({
      status: outcome === 'retrying' ? 'pending' : (outcome as 'delivered' | 'failed'),
      run_at: outcome === 'retrying' ? next : now,
      lease_owner: null,
      last_status_code: record.statusCode ?? null,
      last_duration_ms: record.durationMs,
      last_error: record.error ?? null,
      attempt_log: JSON.stringify(log),
      finished_at: outcome === 'retrying' ? null : now,
    })
    .where('id', '=', claimed.id)
    .where('lease_owner', '=', workerId)
    .where('status', '=', 'delivering')
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1 ? outcome : 'lost';
}

/** Gives a claimed delivery back at once (its worker is stopping): due again, the attempt not counted. */
export async function releaseDelivery(database: Database, claimed: DeliveryRow, workerId: string, now: number): Promise<void> {
  await database.db
    .updateTable('webhook_deliveries')
    .set({ status: 'pending', run_at: now, lease_owner: null, attempts: sql<number>`CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END` })
    .where('id', '=', claimed.id)
    .where('lease_owner', '=', workerId)
    .where('status', '=', 'delivering')
    .execute();
}

/** Forgets finished deliveries older than DELIVERY_RETENTION_MS. */
export async function pruneDeliveries(database: Database, now: number): Promise<void> {
  await database.db
    .deleteFrom('webhook_deliveries')
    .where('status', 'in', ['delivered', 'failed'])
    .where('created_at', '<', now - DELIVERY_RETENTION_MS)
    .execute();
}
