// Dashboard sessions and the throttle on password attempts.
//
// The session cookie holds 256 random bits; the table keeps only their SHA-256, so a copy of the
// database opens no session. Each session has its own CSRF token, which the dashboard reads from
// GET /auth/session and sends back in `x-csrf-token` with every state-changing request.
import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import { AppError } from '../errors.js';
import { sha256Hex } from '../ids.js';
import type { Account } from './accounts.js';

export const SESSION_COOKIE = 'imgapi_session';
export const CSRF_HEADER = 'x-csrf-token';
/** A session's expiry moves forward when it is used, at most this often (no write per request). */
const RENEW_AFTER_MS = 3600_000;

export interface Session {
  /** SHA-256 of the cookie's token: the row's id, and the rate-limit subject. */
  id: string;
  accountId: string;
  csrfToken: string;
  expiresAt: number;
}

const hashSessionToken = (token: string): string => sha256Hex(`session:${token}`);

export async function createSession(
  database: Database,
  clock: Clock,
  accountId: string,
  ttlMs: number,
  userAgent?: string,
): Promise<{ token: string; session: Session }> {
  const token = crypto.randomBytes(32).toString('base64url');
  const now = clock.now();
  const session: Session = {
    id: hashSessionToken(token),
    accountId,
    csrfToken: crypto.randomBytes(32).toString('base64url'),
    expiresAt: now + ttlMs,
  };
  await database.db
    .insertInto('sessions')
    .values({
      id: session.id,
      account_id: accountId,
      csrf_token: session.csrfToken,
      created_at: now,
      expires_at: session.expiresAt,
      user_agent: userAgent?.slice(0, 300) ?? null,
    })
    .execute();
  return { token, session };
}

/**
 * The live session a cookie's token opens, with its account, or undefined. A session used more
 * than an hour after its last renewal is renewed (`renewed` tells the caller to re-send the cookie).
 */
export async function findSession(
  database: Database,
  clock: Clock,
  token: string,
  ttlMs: number,
): Promise<{ session: Session; account: Account; renewed: boolean } | undefined> {
  if (!/^[A-Za-z0-9_-]{20,100}$/.test(token)) return undefined;
  const id = hashSessionToken(token);
  const row = await database.db
    .selectFrom('sessions')
    .innerJoin('accounts', 'accounts.id', 'sessions.account_id')
    .selectAll('accounts')
    .select(['sessions.csrf_token', 'sessions.expires_at as session_expires_at'])
    .where('sessions.id', '=', id)
    // A disabled account's sessions are deleted when it is disabled; this also refuses any
    // session created by a login racing the disable.
    .where('accounts.disabled_at', 'is', null)
    .executeTakeFirst();
  const now = clock.now();
  if (!row || row.session_expires_at <= now) return undefined;
  const { csrf_token: csrfToken, session_expires_at: expiresAt, ...account } = row;
  const session: Session = { id, accountId: account.id, csrfToken, expiresAt };
  let renewed = false;
  if (now + ttlMs - expiresAt > RENEW_AFTER_MS) {
    session.expiresAt = now + ttlMs;
    await database.db.updateTable('sessions').set({ expires_at: session.expiresAt }).where('id', '=', id).execute();
    renewed = true;
  }
  return { session, account, renewed };
}

export async function deleteSession(database: Database, sessionId: string): Promise<void> {
  await database.db.deleteFrom('sessions').where('id', '=', sessionId).execute();
}

export async function deleteSessionsOf(database: Database, accountId: string): Promise<void> {
  await database.db.deleteFrom('sessions').where('account_id', '=', accountId).execute();
}

export async function pruneSessions(database: Database, now: number): Promise<void> {
  await database.db.deleteFrom('sessions').where('expires_at', '<=', now).execute();
  await database.db
    .deleteFrom('auth_throttle')
    .where('window_start', '<=', now - THROTTLE_WINDOW_MS)
    .execute();
}

/** Compares a presented CSRF token with the session's in constant time. */
export function csrfMatches(session: Session, presented: string | string[] | undefined): boolean {
  const value = Array.isArray(presented) ? presented[0] : presented;
  if (!value) return false;
  const a = Buffer.from(value);
  const b = Buffer.from(session.csrfToken);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}

// Throttle ---------------------------------------------------------------------------------

const THROTTLE_WINDOW_MS = 15 * 60_000;
/** Failed passwords for one email in a window before it is guarded: enough for typos, far too few to guess. */
export const FAILURES_PER_EMAIL = 10;
/** Failed logins, and sign-up and setup attempts, per client address in a window. */
export const ATTEMPTS_PER_ADDRESS = 100;
/** How long a guarded email's login waits when it comes from an address that has not failed for it. */
export const GUARDED_LOGIN_DELAY_MS = 1500;

interface WindowCount {
  count: number;
  windowStart: number;
}

/**
 * Adds one to `subject` in its window, which opens at the subject's first attempt and lasts
 * THROTTLE_WINDOW_MS (not a wall-clock slot shared by every subject, which would let guesses
 * made either side of a slot's edge count twice the budget). One upsert: parallel requests
 * each see their own count.
 */
async function bump(database: Database, subject: string, now: number): Promise<WindowCount> {
  const open = sql<boolean>`auth_throttle.window_start > ${now - THROTTLE_WINDOW_MS}`;
  const row = await database.db
    .insertInto('auth_throttle')
    .values({ subject, window_start: now, count: 1 })
    .onConflict((oc) =>
      oc.column('subject').doUpdateSet({
        count: sql`CASE WHEN ${open} THEN auth_throttle.count + 1 ELSE 1 END`,
        window_start: sql`CASE WHEN ${open} THEN auth_throttle.window_start ELSE ${now} END`,
      }),
    )
    .returning(['count', 'window_start'])
    .executeTakeFirstOrThrow();
  return { count: row.count, windowStart: Number(row.window_start) };
}

/** Takes back one count of `subject`, if its window is still the one it was made in. */
async function unbump(database: Database, subject: string, windowStart: number): Promise<void> {
  await database.db
    .updateTable('auth_throttle')
    .set({ count: sql`count - 1` })
    .where('subject', '=', subject)
    .where('window_start', '=', windowStart)
    .where('count', '>', 0)
    .execute();
}

/** 429 RATE_LIMITED with Retry-After: the end of the window. */
function throttled(limit: number, { count, windowStart }: WindowCount, now: number): AppError {
  const retryAfter = Math.max(1, Math.ceil((windowStart + THROTTLE_WINDOW_MS - now) / 1000));
  return new AppError(
    'RATE_LIMITED',
    `Too many attempts; try again in ${Math.ceil(retryAfter / 60)} minute(s)`,
    { limit, used: count - 1, resetsAt: new Date(windowStart + THROTTLE_WINDOW_MS).toISOString(), retryAfterSeconds: retryAfter },
    { 'retry-after': String(retryAfter) },
  );
}

/** Counts one attempt against `subject` in the current window and refuses past `limit`. */
export async function takeAttempt(database: Database, subject: string, limit: number, now: number): Promise<void> {
  const counted = await bump(database, subject, now);
  if (counted.count > limit) throw throttled(limit, counted, now);
}

export interface LoginAdmission {
  /** Wait this long before checking the password (a guarded email, from a new address). */
  delayMs: number;
  /** The password was right: the attempt was no failure. */
  succeeded(): Promise<void>;
}

/**
 * Admits a login attempt, or refuses it with 429, before the password is checked. Failures are
 * counted in the database (every process agrees) per client address, per email, and per
 * (email, address). An address past its budget is refused for every email. An email past its
 * budget is guarded, not locked: refused to the addresses that have failed for it, while any
 * other address is let through after a short delay, one attempt at a time — so guessing from
 * one place cannot lock the owner out, and guessing from many places gets one slow guess per
 * place. Each attempt counts as a failure from the start, so parallel attempts cannot slip
 * past a budget; `succeeded` takes it back.
 */
export async function admitLogin(database: Database, email: string, address: string, now: number): Promise<LoginAdmission> {
  const subjects = { address: `login-address:${address}`, email: `login-email:${email}`, pair: `login-pair:${address} ${email}` };
  const byAddress = await bump(database, subjects.address, now);
  if (byAddress.count > ATTEMPTS_PER_ADDRESS) throw throttled(ATTEMPTS_PER_ADDRESS, byAddress, now);
  const byEmail = await bump(database, subjects.email, now);
  const byPair = await bump(database, subjects.pair, now);
  let delayMs = 0;
  if (byEmail.count > FAILURES_PER_EMAIL) {
    // This address failed for this email before, or has an attempt in flight for it.
    if (byPair.count > 1) throw throttled(FAILURES_PER_EMAIL, byEmail, now);
    delayMs = GUARDED_LOGIN_DELAY_MS;
  }
  return {
    delayMs,
    async succeeded() {
      await unbump(database, subjects.address, byAddress.windowStart);
      await unbump(database, subjects.email, byEmail.windowStart);
      await database.db.deleteFrom('auth_throttle').where('subject', '=', subjects.pair).execute();
    },
  };
}
