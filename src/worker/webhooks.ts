// The webhook delivery loop of a worker process: a Pool of its own (WEBHOOK_CONCURRENCY slots,
// apart from the image-task slots, so a receiver that hangs for its 10 s never holds up an image)
// that claims due deliveries from the database with a lease, signs and POSTs each one, and
// records the attempt. The queue itself (claim, backoff, give-up) is src/webhooks/store.ts.
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import type { Metrics } from '../metrics.js';
import { postWebhook } from '../webhooks/send.js';
import { EVENT_ID_HEADER, SIGNATURE_HEADER, signatureHeader } from '../webhooks/signature.js';
import { claimDeliveries, recordAttempt, releaseDelivery, type ClaimedDelivery } from '../webhooks/store.js';
import { Pool, Released } from './pool.js';

/** A receiver has this long to answer (API.md). */
const DELIVERY_TIMEOUT_MS = 10_000;

export interface DelivererDeps {
  config: Config;
  database: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
}

export class WebhookDeliverer {
  private readonly pool: Pool<ClaimedDelivery>;
  /** A claim lasts past the attempt's own limit, so only a dead or stalled worker loses it. */
  private readonly leaseMs: number;

  constructor(
    private readonly deps: DelivererDeps,
    /** The lease owner of every delivery this loop claims. */
    private readonly workerId: string,
    readonly concurrency: number,
  ) {
    const { config, database, clock, logger } = deps;
    this.leaseMs = DELIVERY_TIMEOUT_MS + config.leaseMs;
    this.pool = new Pool<ClaimedDelivery>({
      concurrency,
      pollIntervalMs: config.pollIntervalMs,
      fetch: async (free) => {
        const items = await claimDeliveries(database, clock.now(), workerId, free, this.leaseMs);
        return { items, more: items.length >= free };
      },
      onFetch: (claimed, signal) => this.deliver(claimed, signal),
      onError: (err, claimed) =>
        claimed
          ? logger.error({ err, deliveryId: claimed.delivery.id }, 'webhook delivery bookkeeping failed')
          : logger.error({ err }, 'webhook delivery claim failed'),
    });
  }

  start(): void {
    this.pool.start();
  }

  /** Lets attempts under way finish until `deadlineMs`, then gives the rest back. */
  stop(deadlineMs: number): Promise<void> {
    return this.pool.stop(deadlineMs);
  }

  wake(): void {
    this.pool.wake();
  }

  get busy(): number {
    return this.pool.busy;
  }

  private async deliver({ delivery, url, secret }: ClaimedDelivery, signal: AbortSignal): Promise<void> {
    const { config, database, clock, logger, metrics } = this.deps;
    const timestamp = Math.floor(clock.now() / 1000);
    const result = await postWebhook(url, delivery.payload, {
      timeoutMs: DELIVERY_TIMEOUT_MS,
      allowPrivate: config.webhookAllowPrivateNetworks,
      signal,
      headers: {
        [EVENT_ID_HEADER]: delivery.event_id,
        [SIGNATURE_HEADER]: signatureHeader(secret, delivery.payload, timestamp),
      },
    });
    if (signal.aborted && signal.reason instanceof Released) {
      // Stopping: the attempt did not finish; another worker makes it at once.
      await releaseDelivery(database, delivery, this.workerId, clock.now());
      return;
    }
    const now = clock.now();
    const outcome = await recordAttempt(database, delivery, this.workerId, { at: now, ...result }, now);
    metrics.webhookAttempts.inc({ outcome });
    metrics.webhookAttemptDuration.observe(result.durationMs / 1000);
    const line = { deliveryId: delivery.id, eventId: delivery.event_id, event: delivery.event_type, attempt: delivery.attempts, outcome };
    if (result.ok) logger.info({ ...line, statusCode: result.statusCode, durationMs: result.durationMs }, 'webhook delivered');
    else logger.warn({ ...line, statusCode: result.statusCode, error: result.error }, 'webhook delivery attempt failed');
  }
}
