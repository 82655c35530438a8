// Wake-ups across processes on PostgreSQL. Every process LISTENs on one channel with a
// connection of its own (reconnecting with backoff when it drops) and NOTIFYs it, through the
// pool, after a commit that queued or finished tasks (or from a statement of that commit's
// transaction, `QueueEvents.carried`: PostgreSQL sends it at the commit): workers in other processes claim at once,
// and long-polls in other API processes answer at once. Missed messages cost only latency: the
// workers' slow poll and the long-poll's periodic re-read are the safety net.
import crypto from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import type { Database } from '../db/database.js';
import type { QueueEvents, QueueMessage } from './events.js';

const CHANNEL = 'imgapi_queue';
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;

export class PgWakeups {
  /** Tags this process's messages, so it does not wake itself a second time. */
  private readonly origin = crypto.randomBytes(9).toString('base64url');
  private client: pg.Client | undefined;
  private stopped = true;
  private retryMs = RETRY_MIN_MS;
  private retryTimer: NodeJS.Timeout | undefined;
  /** Messages sent and not yet acknowledged: `stop` waits for them (a CLI command exits right after its change). */
  private readonly sending = new Set<Promise<unknown>>();

  constructor(
    private readonly database: Database,
    private readonly url: string,
    private readonly events: QueueEvents,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.events.bridge(
      (message) => this.publish(message),
      (message) => sql`pg_notify(${CHANNEL}, ${this.payload(message)})`,
    );
    void this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.events.bridge(undefined);
    await Promise.all(this.sending);
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }

  private payload(message: QueueMessage): string {
    return `${this.origin} ${message}`;
  }

  private publish(message: QueueMessage): void {
    const sent = sql`SELECT pg_notify(${CHANNEL}, ${this.payload(message)})`
      .execute(this.database.db)
      .catch((err) => this.logger.warn({ err }, 'queue wake-up NOTIFY failed; other processes will notice at their next poll'))
      .finally(() => this.sending.delete(sent));
    this.sending.add(sent);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.url, keepAlive: true, application_name: 'imgapi-listen' });
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => {});
      if (this.stopped) return;
      this.logger.warn({ err, retryMs: this.retryMs }, 'queue wake-up listener disconnected; reconnecting');
      this.retryTimer = setTimeout(() => void this.connect(), this.retryMs);
      this.retryTimer.unref();
      this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (notification) => {
      if (notification.channel !== CHANNEL || !notification.payload) return;
      const space = notification.payload.indexOf(' ');
      if (space < 0 || notification.payload.slice(0, space) === this.origin) return;
      this.events.deliver(notification.payload.slice(space + 1));
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.retryMs = RETRY_MIN_MS;
    // Whatever was queued while nobody listened: look now rather than at the next poll.
    this.events.deliver('queued');
  }
}
