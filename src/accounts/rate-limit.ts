// Per-key request rate limits in fixed one-second windows, counted in the database so that
// every API process shares them. One upsert per request: atomic in both dialects.
import { sql } from 'kysely';
import type { Database } from '../db/database.js';
import { AppError } from '../errors.js';

const WINDOW_MS = 1000;

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  reset: number;
  exceeded: boolean;
}

export async function takeRequest(database: Database, subject: string, limit: number, now: number): Promise<RateLimitState> {
  const window = Math.floor(now / WINDOW_MS);
  const row = await database.db
    .insertInto('rate_limits')
    .values({ subject, window, count: 1 })
    .onConflict((oc) =>
      oc.column('subject').doUpdateSet({
        count: sql`CASE WHEN rate_limits.window = ${window} THEN rate_limits.count + 1 ELSE 1 END`,
        window,
      }),
    )
    .returning('count')
    .executeTakeFirstOrThrow();
  const reset = Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - now) / 1000));
  return { limit, remaining: Math.max(0, limit - row.count), reset, exceeded: row.count > limit };
}

export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  return {
    'ratelimit-limit': String(state.limit),
    'ratelimit-remaining': String(state.remaining),
    'ratelimit-reset': String(state.reset),
  };
}

export function rateLimited(state: RateLimitState): AppError {
  return new AppError('RATE_LIMITED', `More than ${state.limit} requests per second; retry after ${state.reset} s`, {
    limit: state.limit,
    used: state.limit,
    resetsAt: null,
    retryAfterSeconds: state.reset,
  }, { ...rateLimitHeaders(state), 'retry-after': String(state.reset) });
}

/** Drops windows that ended (the sweeper calls this). */
export async function pruneRateLimits(database: Database, now: number): Promise<void> {
  await database.db.deleteFrom('rate_limits').where('window', '<', Math.floor(now / WINDOW_MS) - 60).execute();
}
