// Authentication of /api/*: an API key in `x-api-key` (or `Authorization: Bearer <key>`). A disabled account's keys are refused with
// ACCOUNT_DISABLED; Free accounts reach the API only through the dashboard, so their keys are
// refused with PLAN_NO_API_ACCESS. Then the key's rate limit.
// Without a key, the dashboard's session cookie authenticates instead (any plan, Free included);
// a state-changing request on a session must also prove it comes from the dashboard (CSRF).
// A session's state-changing requests take the plan's rate limit as a key's do; its reads have
// the dashboard's own budget (SESSION_READS_PER_SECOND), so a page of thumbnails never sees 429.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticateApiKey, type Account } from '../accounts/accounts.js';
import { limitsOf, type PlanLimits } from '../accounts/plans.js';
import { rateLimited, rateLimitHeaders, takeRequest } from '../accounts/rate-limit.js';
import { CSRF_HEADER, SESSION_COOKIE, csrfMatches, findSession, type Session } from '../accounts/sessions.js';
import { AppError } from '../errors.js';
import type { Services } from '../services.js';

declare module 'fastify' {
  interface FastifyRequest {
    account: Account;
    limits: PlanLimits;
    /** Set when the request was authenticated by the dashboard's session cookie. */
    session?: Session;
  }
}

export function apiKeyAuth(services: Services) {
  return async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const key = requestApiKey(request);
    if (!key) {
      // The dashboard's calls: its session instead of a key, within the plan's limits.
      if (await authenticateSession(services, request, reply)) return;
      throw new AppError('API_KEY_MISSING', 'Send your API key in the x-api-key header (or as Authorization: Bearer <key>)');
    }
    const account = await authenticateApiKey(services.database, services.clock, key);
    if (!account) throw new AppError('API_KEY_INVALID', 'The API key is unknown or has been revoked');
    // The key's account and plan are at most a second old (accounts.ts KEY_CACHE_MS): a plan change,
    // a revocation or a disable applies within a second everywhere, at once in the process that made it.
    if (account.disabled_at !== null) throw accountDisabled();
    const limits = limitsOf(services.plans, account.plan);
    if (!limits.apiAccess) {
      throw new AppError('PLAN_NO_API_ACCESS', `The ${account.plan} plan has no API access; upgrade the account to use API keys`);
    }
    request.account = account;
    request.limits = limits;
    // Rate limit after authentication, before validation (the contract's order of errors).
    const state = await takeRequest(services.database, services.clock, `key:${account.keyId}`, limits.requestsPerSecond);
    reply.headers(rateLimitHeaders(state));
    if (state.exceeded) throw rateLimited(state);
  };
}

/**
 * The key in `x-api-key` or in `Authorization: Bearer <key>` (another scheme is not ours, and is
 * ignored). Both naming different keys is ambiguous: 401 API_KEY_INVALID, neither key tried, so
 * the answer says nothing of either. A key in either wins over a session cookie.
 */
function requestApiKey(request: FastifyRequest): string | undefined {
  const header = request.headers['x-api-key'];
  const apiKey = (Array.isArray(header) ? header[0] : header) || undefined;
  const bearer = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(request.headers.authorization ?? '')?.[1];
  if (apiKey && bearer && apiKey !== bearer) {
    throw new AppError('API_KEY_INVALID', 'x-api-key and Authorization name different keys: send one key');
  }
  return apiKey ?? bearer;
}

/** A valid key or password of an account the operator has disabled. */
export const accountDisabled = (): AppError =>
  new AppError('ACCOUNT_DISABLED', 'This account has been disabled by the operator; contact them to have it enabled again');

// Sessions ---------------------------------------------------------------------------------

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Reads per second of one dashboard session, whatever the plan (a plan with a higher
 * requestsPerSecond keeps its own): enough for a page of thumbnails at once. Reads create no work
 * and every quota still applies; requests that change something share the plan's rate.
 */
export const SESSION_READS_PER_SECOND = 50;

/** The value of one cookie in the request's Cookie header. */
export function readCookie(request: FastifyRequest, name: string): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return percentDecoded(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** A cookie value percent-decoded; one that is not valid percent-encoding as it is (a token that opens nothing). */
function percentDecoded(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/** Set-Cookie for the session: HttpOnly, SameSite=Strict, Path=/, and Secure behind https. */
export function sessionCookie(services: Services, token: string, maxAgeMs: number): string {
  const secure = services.config.publicUrl.startsWith('https:') ? '; Secure' : '';
  return `${SESSION_COOKIE}=${token}; Path=/; Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}; HttpOnly; SameSite=Strict${secure}`;
}

export const clearSessionCookie = (services: Services): string => sessionCookie(services, '', 0);

/**
 * Whether the request comes from a page of this origin, as far as the browser says: an Origin
 * header, when sent, names this server (its PUBLIC_URL or the Host it was reached at), and
 * Sec-Fetch-Site, when sent, is same-origin. Browsers send both on cross-site POSTs.
 */
export function isSameOrigin(services: Services, request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  try {
    const url = new URL(origin);
    return url.origin === new URL(services.config.publicUrl).origin || (url.host === request.headers.host && url.protocol === `${request.protocol}:`);
  } catch {
    return false; // "null" and other opaque origins
  }
}

/** Refuses a state-changing request on a session that lacks the CSRF proof. */
export function checkCsrf(services: Services, request: FastifyRequest, session: Session): void {
  if (SAFE_METHODS.has(request.method)) return;
  if (!isSameOrigin(services, request)) {
    throw new AppError('CSRF_TOKEN_INVALID', 'Cross-site request refused: the dashboard sends its requests from its own origin');
  }
  if (!csrfMatches(session, request.headers[CSRF_HEADER])) {
    throw new AppError('CSRF_TOKEN_INVALID', `Send the session's CSRF token (from GET /auth/session) in the ${CSRF_HEADER} header`);
  }
}

/** The live session of the request's cookie, renewing the cookie when the session was renewed. */
export async function readSession(services: Services, request: FastifyRequest, reply: FastifyReply) {
  const token = readCookie(request, SESSION_COOKIE);
  if (!token) return undefined;
  const found = await findSession(services.database, services.clock, token, services.config.sessionTtlMs);
  if (found?.renewed) reply.header('set-cookie', sessionCookie(services, token, services.config.sessionTtlMs));
  return found;
}

/**
 * Authenticates the request by its session cookie: sets account, limits and session, checks the
 * CSRF proof and takes the session's rate limit. False when there is no live session.
 */
async function authenticateSession(services: Services, request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  const found = await readSession(services, request, reply);
  if (!found) return false;
  checkCsrf(services, request, found.session);
  request.account = found.account;
  request.session = found.session;
  request.limits = limitsOf(services.plans, found.account.plan);
  // Dashboard traffic is not API traffic: a page of thumbnails and lists is many reads at once,
  // so a session's reads have their own budget (at least SESSION_READS_PER_SECOND); whatever
  // changes something (uploads, jobs, deletes) is held to the plan's rate exactly as a key is.
  const reads = SAFE_METHODS.has(request.method);
  const state = reads
    ? await takeRequest(
        services.database,
        services.clock,
        `session-reads:${found.session.id}`,
        Math.max(request.limits.requestsPerSecond, SESSION_READS_PER_SECOND),
      )
    : await takeRequest(services.database, services.clock, `session:${found.session.id}`, request.limits.requestsPerSecond);
  reply.headers(rateLimitHeaders(state));
  if (state.exceeded) throw rateLimited(state);
  return true;
}

/** onRequest hook of the dashboard's own routes: a session is required (and admin, if asked). */
export function sessionAuth(services: Services, options: { admin?: boolean } = {}) {
  return async function requireSession(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (!(await authenticateSession(services, request, reply))) throw new AppError('NOT_AUTHENTICATED', 'Log in to the dashboard first');
    if (options.admin && request.account.is_admin !== 1) throw new AppError('FORBIDDEN', 'Only the operator (an administrator) may do this');
  };
}
