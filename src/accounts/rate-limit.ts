// Per-key (and per-session) request rate limits in fixed one-second windows, shared by every API
// process through the database without a write per request.
//
// The database row of a subject holds its current window and how many requests of it have been
// *reserved* so far, by all processes together. A process does not write per request: it reserves
// a batch of the window's budget at once (one atomic upsert, the same statement on both dialects),
// admits requests from that batch in memory, and reserves the next batch when a quarter of the
// current one is left. A reservation is granted only what is left under the limit, so the
// processes together never admit more than the limit in a window; what a process reserved and
// did not use by the end of the window is lost, which is why a batch is sized from the process's
// own demand (a tenth of a second of it) and capped at a twenty-fifth of the limit: a process
// holds at most 1¼ batches, so with two processes at most a tenth of the limit goes unused (when
// their demand stops short), and nothing while they are busy. Once the database says the window
// is spent, the process refuses the rest of it from memory, asking the database again at most
// every SPENT_RECHECK_MS (another host, its clock ahead, may have started the next window).
//
// Writes per subject: one per admitted request while the limit is small (under 50/s every batch
// is one request and nothing is reserved ahead, which keeps small limits exact), then about
// 25 + P per second however many requests arrive.
//
// A process alone on a key writes far less: the row also names the process that reserved last
// and the latest window in which two processes did, so each reservation tells a process whether
// it has had the key to itself for SHARED_QUIET_WINDOWS. From the window after the first that
// said so (two processes starting on a key at once each find the row theirs at first), it
// reserves the rest of its expected demand for the window at once (the previous window's, or
// this one's so far, and a quarter more; never more than is left), so a steady client costs
// about one write a second. Nothing else can use what it holds until the window ends: a second
// process that starts on the key meanwhile may be refused for the rest of that window, and from
// its first reservation both reserve in small batches again. The limit is exact either way: a
// process admits only what the database granted it in its window. (Hosts whose clocks differ
// by more than a window: a lone host joined by one ahead of it may spend its window's
// reservation while the other counts the next, so that second may see up to twice the limit
// once, where small batches let it see one batch more.) The window follows the application's
// clock, so tests move it with ManualClock.
import { sql } from 'kysely';
import type { Database } from '../db/database.js';
import { iso, type Clock } from '../clock.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';

const WINDOW_MS = 1000;
/** A batch is what the process expects to use in this much of a window... */
const BATCH_SHARE_OF_DEMAND = 10;
/** ...and never more than this share of the limit. */
const BATCH_SHARE_OF_LIMIT = 25;
/** How often a process whose window is spent asks the database whether a later one has begun. */
const SPENT_RECHECK_MS = 100;
/** Windows without another process's reservation after which a process counts itself alone on a key. */
const SHARED_QUIET_WINDOWS = 10;

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  reset: number;
  /** When the window resets (ms since epoch). */
  resetsAt: number;
  exceeded: boolean;
}

/** One subject's window as this process sees it. */
interface Window {
  window: number;
  limit: number;
  /** Reserved for this process and not used yet. */
  tokens: number;
  /** Requests of the window reserved by every process, as of this process's last reservation. */
  reservedEverywhere: number;
  /** The database granted less than asked: the window is spent everywhere. */
  spent: boolean;
  /** When a spent window may ask the database again (application clock, ms). */
  recheckAt: number;
  /** Requests that arrived in this window (admitted, refused or waiting): the demand. */
  demand: number;
  /** Demand of the window before, when it was the previous second. */
  previousDemand: number;
  /** Size of the last batch asked for. */
  lastBatch: number;
  /**
   * Since which window every reservation has said no other process reserved for the subject
   * lately (undefined: the last one did not say so).
   */
  aloneSince: number | undefined;
  /** Reserved in this window under an earlier limit and not admitted: given back by the next reservation. */
  unused: number;
  reserving?: Promise<void>;
}

export class RateLimiter {
  private readonly windows = new Map<string, Window>();
  private prunedAt = 0;
  /** Reservations written to the database so far (what a request costs the database, on average). */
  reservations = 0;
  /** Names this process in the rows it reserves in (who else reserves is what `aloneSince` is told from). */
  private readonly holder = newId('req');

  constructor(
    private readonly database: Database,
    private readonly clock: Clock,
  ) {}

  /** Counts one request of `subject` against `limit` per second. */
  async take(subject: string, limit: number): Promise<RateLimitState> {
    const window = Math.floor(this.clock.now() / WINDOW_MS);
    const w = this.windowOf(subject, window, limit);
    w.demand++;
    for (;;) {
      if (w.tokens > 0) {
        w.tokens--;
        // Batches of more than one: the next is reserved before this one runs out, so a busy
        // key does not wait for the database. (One at a time, nothing is reserved ahead: a small
        // limit stays exact.)
        if (w.lastBatch > 1 && !w.reserving && !w.spent && w.tokens < w.lastBatch / 4) this.reserveInBackground(subject, w);
        return this.state(w, false);
      }
      if (w.spent && this.clock.now() < w.recheckAt) return this.state(w, true);
      w.spent = false;
      if (!w.reserving) w.reserving = this.reserve(subject, w);
      await w.reserving;
    }
  }

  private windowOf(subject: string, window: number, limit: number): Window {
    const current = this.windows.get(subject);
    if (current && current.window === window && current.limit === limit) return current;
    if (current && current.window > window) return current; // a request that waited past the next second's start
    const fresh: Window = {
      window,
      limit,
      tokens: 0,
      reservedEverywhere: 0,
      spent: false,
      recheckAt: 0,
      demand: 0,
      previousDemand: current && current.window >= window - 1 ? Math.max(current.demand, current.previousDemand) : 0,
      lastBatch: 0,
      aloneSince: current?.aloneSince,
      unused: 0,
    };
    // A plan change within the second: the new limit applies, and what this process already
    // reserved in the window still counts against it (the row keeps the window's count), except
    // the reserved requests it has not admitted: its next reservation gives them back.
    if (current && current.window === window) {
      fresh.unused = current.tokens + current.unused;
      fresh.reservedEverywhere = Math.max(0, current.reservedEverywhere - fresh.unused);
    }
    this.windows.set(subject, fresh);
    this.prune(window);
    return fresh;
  }

  private reserveInBackground(subject: string, w: Window): void {
    // Errors are left to the request that needs the tokens: it reserves again and fails then.
    w.reserving = this.reserve(subject, w).catch(() => undefined);
  }

  private async reserve(subject: string, w: Window): Promise<void> {
    const cap = Math.max(1, Math.floor(w.limit / BATCH_SHARE_OF_LIMIT));
    // Alone since an earlier window: not on the evidence of this window alone (two processes
    // starting on a key at once each find the row theirs at first).
    const alone = w.aloneSince !== undefined && w.aloneSince < w.window;
    const wanted = alone
      ? // The rest of the window's expected demand (the request waiting now included), and a quarter more.
        Math.max(1, Math.min(w.limit - w.reservedEverywhere, Math.ceil(this.expectedDemand(w) * 1.25) - w.demand + 1))
      : Math.max(1, Math.min(cap, Math.ceil(Math.max(w.demand, w.previousDemand) / BATCH_SHARE_OF_DEMAND)));
    w.lastBatch = wanted;
    this.reservations++;
    try {
      const unused = w.unused;
      const { window, reserved, sharedWindow } = await reserveInDatabase(this.database, subject, w.window, wanted, unused, this.holder);
      w.unused -= unused;
      const current = Math.max(window, w.window);
      w.aloneSince = sharedWindow < current - SHARED_QUIET_WINDOWS ? (w.aloneSince ?? current) : undefined;
      if (window > w.window) {
        // Another process has moved the row to a later second: its clock is ahead of ours (hosts'
        // clocks differ by a little, or by more). That window is the current one for everybody,
        // so this process takes it up and reserves in it; refusing instead would starve a host
        // whose clock lags for as long as another keeps the key busy.
        Object.assign(w, { window, tokens: 0, reservedEverywhere: 0, spent: false });
        return;
      }
      const before = reserved - wanted;
      const granted = Math.max(0, Math.min(wanted, w.limit - before));
      w.tokens += granted;
      w.reservedEverywhere = Math.max(w.reservedEverywhere, Math.min(reserved, w.limit));
      if (granted < wanted) Object.assign(w, { spent: true, recheckAt: this.clock.now() + SPENT_RECHECK_MS });
    } finally {
      w.reserving = undefined;
    }
  }

  /**
   * Requests expected in the whole window: the window before's, or this one's so far at its rate
   * so far (counted over at least a tenth of the window, so the first requests do not promise a
   * flood).
   */
  private expectedDemand(w: Window): number {
    const elapsed = Math.max(WINDOW_MS / 10, this.clock.now() - w.window * WINDOW_MS);
    return Math.max(w.previousDemand, Math.ceil((w.demand * WINDOW_MS) / elapsed));
  }

  private state(w: Window, exceeded: boolean): RateLimitState {
    const resetsAt = (w.window + 1) * WINDOW_MS;
    const reset = Math.max(1, Math.ceil((resetsAt - this.clock.now()) / 1000));
    const remaining = exceeded ? 0 : w.tokens + (w.spent ? 0 : Math.max(0, w.limit - w.reservedEverywhere));
    return { limit: w.limit, remaining, reset, resetsAt, exceeded };
  }

  /** Forgets the windows of subjects that sent nothing for a few seconds. */
  private prune(window: number): void {
    if (window - this.prunedAt < 10) return;
    this.prunedAt = window;
    for (const [subject, w] of this.windows) if (w.window < window - 2 && !w.reserving) this.windows.delete(subject);
  }
}

/**
 * Adds `count` to the subject's reservations in `window`, less `giveBack` of this process's
 * unused ones (starting the window over when the row holds an earlier one; a row already in a
 * later window is left alone), as `holder`, and returns the row: its window, its reservations
 * (so `reserved - count` were reserved by others before), and the latest window in which another
 * process than the one that reserved before had reserved in it or the window before.
 */
async function reserveInDatabase(
  database: Database,
  subject: string,
  window: number,
  count: number,
  giveBack: number,
  holder: string,
): Promise<{ window: number; reserved: number; sharedWindow: number }> {
  const row = await database.db
    .insertInto('rate_limits')
    .values({ subject, window, count, holder })
    .onConflict((oc) =>
      oc.column('subject').doUpdateSet({
        count: sql`CASE WHEN rate_limits.window = ${window} THEN rate_limits.count + ${count - giveBack} WHEN rate_limits.window < ${window} THEN ${count} ELSE rate_limits.count END`,
        window: sql`CASE WHEN rate_limits.window < ${window} THEN ${window} ELSE rate_limits.window END`,
        holder,
        shared_window: sql`CASE WHEN rate_limits.holder <> ${holder} AND rate_limits.window >= ${window - 1} AND rate_limits.shared_window < ${window} THEN ${window} ELSE rate_limits.shared_window END`,
      }),
    )
    .returning(['window', 'count', 'shared_window'])
    .executeTakeFirstOrThrow();
  return { window: Number(row.window), reserved: Number(row.count), sharedWindow: Number(row.shared_window) };
}

// One limiter per database handle: every Services instance (and every test server) opens its own.
const limiters = new WeakMap<Database, RateLimiter>();

/** Counts one request of `subject` (e.g. `key:<id>`) against `limit` requests per second. */
export function takeRequest(database: Database, clock: Clock, subject: string, limit: number): Promise<RateLimitState> {
  let limiter = limiters.get(database);
  if (!limiter) limiters.set(database, (limiter = new RateLimiter(database, clock)));
  return limiter.take(subject, limit);
}

export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  return {
    'ratelimit-limit': String(state.limit),
    'ratelimit-remaining': String(state.remaining),
    'ratelimit-reset': String(state.reset),
  };
}

export function rateLimited(state: RateLimitState): AppError {
  return new AppError(
    'RATE_LIMITED',
    `More than ${state.limit} requests per second; retry after ${state.reset} s`,
    {
      limit: state.limit,
      used: state.limit,
      resetsAt: iso(state.resetsAt),
      retryAfterSeconds: state.reset,
    },
    { ...rateLimitHeaders(state), 'retry-after': String(state.reset) },
  );
}

/** Drops windows that ended (the sweeper calls this). */
export async function pruneRateLimits(database: Database, now: number): Promise<void> {
  await database.db
    .deleteFrom('rate_limits')
    .where('window', '<', Math.floor(now / WINDOW_MS) - 60)
    .execute();
}
