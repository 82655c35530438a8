// The dashboard's sign-up, login, logout, session, first-run setup and password reset: /auth/*.
//
// These answer JSON in the usual envelope and are not part of the public API (hidden from the
// OpenAPI document). Requests that start a session are refused from other origins (Origin and
// Sec-Fetch-Site), take only application/json (which a cross-site form cannot send), and are
// throttled per client address; failed logins also per email and per (email, address), so that
// guessing an owner's password never locks the owner out (see admitLogin).
import { setTimeout } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { iso } from '../../../clock.js';
import type { Account } from '../../../accounts/accounts.js';
import { adminExists, checkCredentials, completeSetup, signUp } from '../../../accounts/onboarding.js';
import {
  admitLogin,
  ATTEMPTS_PER_ADDRESS,
  createSession,
  deleteSession,
  SESSION_COOKIE,
  takeAttempt,
  type Session,
} from '../../../accounts/sessions.js';
import { normaliseEmail } from '../../../accounts/accounts.js';
import { resetPassword } from '../../../accounts/password-reset.js';
import { AppError } from '../../../errors.js';
import type { Services } from '../../../services.js';
import { accountDisabled, checkCsrf, clearSessionCookie, isSameOrigin, readCookie, readSession, sessionCookie } from '../../auth.js';

const email = { type: 'string', minLength: 3, maxLength: 320 };
const newPassword = { type: 'string', minLength: 8, maxLength: 1024, description: 'At least 8 characters.' };

export function accountView(account: Account) {
  return { accountId: account.id, email: account.email, plan: account.plan, isAdmin: account.is_admin === 1, createdAt: iso(account.created_at) };
}

export function authRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock, config } = services;

  const sessionData = async (account: Account | undefined, session: Session | undefined) => ({
    authenticated: account !== undefined,
    ...(account && session ? { account: accountView(account), csrfToken: session.csrfToken, expiresAt: iso(session.expiresAt) } : {}),
    signupMode: config.signupMode,
    setupRequired: !(await adminExists(database)),
  });

  /** Starts a session for `account`: a fresh token in the cookie, its CSRF token in the body. */
  async function startSession(request: FastifyRequest, reply: FastifyReply, account: Account, status: number) {
    // A disabled account's right password opens nothing (nor does a reset link: the password is set, no session).
    if (account.disabled_at !== null) throw accountDisabled();
    // A session cookie the browser already holds is replaced, never reused (no session fixation).
    const previous = await readSession(services, request, reply);
    if (previous) await deleteSession(database, previous.session.id);
    const { token, session } = await createSession(database, clock, account.id, config.sessionTtlMs, request.headers['user-agent']);
    reply.header('set-cookie', sessionCookie(services, token, config.sessionTtlMs)).header('cache-control', 'no-store');
    return reply.code(status).send({ success: true, data: await sessionData(account, session) });
  }

  function refuseCrossSite(request: FastifyRequest): void {
    if (!isSameOrigin(services, request)) throw new AppError('CSRF_TOKEN_INVALID', 'Cross-site request refused: log in from the dashboard itself');
  }

  const hidden = { hide: true, tags: ['Dashboard'] };

  app.get(
    '/auth/session',
    { schema: { ...hidden, summary: 'The current session, its CSRF token, and how accounts can be created' } },
    async (request, reply) => {
      const found = await readSession(services, request, reply);
      reply.header('cache-control', 'no-store');
      // A cookie that opens no session (expired, logged out elsewhere) is dropped.
      if (!found && readCookie(request, SESSION_COOKIE) !== undefined) reply.header('set-cookie', clearSessionCookie(services));
      return { success: true, data: await sessionData(found?.account, found?.session) };
    },
  );

  app.post(
    '/auth/login',
    {
      schema: {
        ...hidden,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['email', 'password'],
          properties: { email, password: { type: 'string', minLength: 1, maxLength: 1024 } },
        },
      },
    },
    async (request: FastifyRequest<{ Body: { email: string; password: string } }>, reply) => {
      refuseCrossSite(request);
      const admission = await admitLogin(database, normaliseEmail(request.body.email), request.ip, clock.now());
      if (admission.delayMs) await setTimeout(admission.delayMs);
      const account = await checkCredentials(database, request.body.email, request.body.password);
      if (!account) throw new AppError('INVALID_CREDENTIALS', 'The email address or the password is wrong');
      await admission.succeeded();
      return startSession(request, reply, account, 200);
    },
  );

  app.post(
    '/auth/signup',
    {
      schema: {
        ...hidden,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['email', 'password'],
          properties: { email, password: newPassword, inviteCode: { type: 'string', minLength: 1, maxLength: 200 } },
        },
      },
    },
    async (request: FastifyRequest<{ Body: { email: string; password: string; inviteCode?: string } }>, reply) => {
      refuseCrossSite(request);
      await takeAttempt(database, `address:${request.ip}`, ATTEMPTS_PER_ADDRESS, clock.now());
      const account = await signUp(database, clock, config.signupMode, request.body);
      request.log.info({ accountId: account.id }, 'account signed up');
      return startSession(request, reply, account, 201);
    },
  );

  app.post(
    '/auth/setup',
    {
      schema: {
        ...hidden,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['token', 'email', 'password'],
          properties: { token: { type: 'string', minLength: 1, maxLength: 200 }, email, password: newPassword },
        },
      },
    },
    async (request: FastifyRequest<{ Body: { token: string; email: string; password: string } }>, reply) => {
      refuseCrossSite(request);
      await takeAttempt(database, `address:${request.ip}`, ATTEMPTS_PER_ADDRESS, clock.now());
      const account = await completeSetup(database, clock, request.body);
      request.log.warn({ accountId: account.id, email: account.email }, 'first administrator created through the setup page; setup is now closed');
      return startSession(request, reply, account, 201);
    },
  );

  // A reset link from the operator (password-reset.ts): the new password, every old session
  // ended, and a fresh session here.
  app.post(
    '/auth/reset-password',
    {
      schema: {
        ...hidden,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['token', 'password'],
          properties: { token: { type: 'string', minLength: 1, maxLength: 300 }, password: newPassword },
        },
      },
    },
    async (request: FastifyRequest<{ Body: { token: string; password: string } }>, reply) => {
      refuseCrossSite(request);
      await takeAttempt(database, `address:${request.ip}`, ATTEMPTS_PER_ADDRESS, clock.now());
      const account = await resetPassword(database, clock, request.body.token, request.body.password);
      request.log.info({ accountId: account.id }, 'password reset with a link from the operator; its sessions ended');
      return startSession(request, reply, account, 200);
    },
  );

  app.post('/auth/logout', { schema: { ...hidden } }, async (request, reply) => {
    const found = await readSession(services, request, reply);
    if (found) {
      checkCsrf(services, request, found.session);
      await deleteSession(database, found.session.id);
    }
    reply.header('set-cookie', clearSessionCookie(services));
    return reply.code(204).send();
  });
}
