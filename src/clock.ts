// One clock owned by the application and passed to every query that compares times,
// so tests can move time (retention, leases, quota periods). No now() inside SQL.
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock a test can move forward. */
export class ManualClock implements Clock {
  private offsetMs = 0;
  constructor(private readonly base: Clock = systemClock) {}
  now(): number {
    return this.base.now() + this.offsetMs;
  }
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}

export const iso = (ms: number): string => new Date(ms).toISOString();

/** Start of the next calendar month (UTC) after `ms`. */
export function nextMonthStart(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** Start of the next calendar day (UTC) after `ms`. */
export function nextDayStart(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
}

/** "2026-11" — the key of a monthly quota period. */
export const monthKey = (ms: number): string => new Date(ms).toISOString().slice(0, 7);
/** "2026-11-21" — the key of a daily quota period. */
export const dayKey = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
