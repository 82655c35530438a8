// The operator's page: accounts (with their plan and usage), plan changes, disabling accounts, the queue's depth and
// recent failures, sign-up invitations and password-reset links. Administrators only (accounts.is_admin).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { iso } from '../../../clock.js';
import { findAccountById, listAccountsWithUsage, setDisabled, setPlan } from '../../../accounts/accounts.js';
import { deleteSessionsOf } from '../../../accounts/sessions.js';
import { createInvite, listInvites, revokeInvite } from '../../../accounts/onboarding.js';
import { resetToken } from '../../../accounts/password-reset.js';
import { PLAN_NAMES, type PlanName } from '../../../accounts/plans.js';
import { AppError, notFound } from '../../../errors.js';
import type { Services } from '../../../services.js';
import { paginationQuery } from '../../pagination.js';
import { idParam } from '../../schemas.js';
import { accountView } from './auth.js';

const hidden = { hide: true, tags: ['Dashboard'] };
const RECENT_FAILURES = 40;

/**
 * Failures that are the service's fault, not the input's: a bug, a worker lost twice (poison
 * task), a job over its time budget. Everything else (a broken image, a target size that
 * cannot be reached, an encrypted document, a quota) is the input's or the account's.
 */
const SYSTEM_FAULTS = new Set(['INTERNAL_ERROR', 'PROCESSING_TIMEOUT', 'CONVERSION_TIMEOUT']);

export function adminRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock, config, events } = services;

  app.get(
    '/admin/accounts',
    {
      schema: {
        ...hidden,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { ...paginationQuery, q: { type: 'string', maxLength: 320, description: 'Part of an email address.' } },
        },
      },
    },
    async (request: FastifyRequest<{ Querystring: { limit: number; cursor?: string; q?: string } }>) => {
      const { limit, cursor, q } = request.query;
      const { accounts, nextCursor } = await listAccountsWithUsage(database, { limit, cursor, emailContains: q, now: clock.now() });
      return {
        success: true,
        data: {
          plans: PLAN_NAMES,
          accounts: accounts.map((row) => ({
            accountId: row.id,
            email: row.email,
            plan: row.plan,
            isAdmin: row.is_admin === 1,
            createdAt: iso(row.created_at),
            storageBytes: Number(row.storage_used),
            monthlyTasks: Number(row.monthly_tasks ?? 0),
            activeKeys: Number(row.active_keys ?? 0),
            disabledAt: row.disabled_at === null ? null : iso(row.disabled_at),
          })),
          nextCursor,
        },
      };
    },
  );

  // A plan change, or disabling / enabling the account (keys 403 ACCOUNT_DISABLED, sessions ended,
  // logins refused; files, keys and tasks kept, queued tasks still run). Not the operator's own.
  app.patch(
    '/admin/accounts/:accountId',
    {
      schema: {
        ...hidden,
        params: idParam('accountId', 'acct'),
        body: {
          type: 'object',
          additionalProperties: false,
          minProperties: 1,
          properties: {
            plan: { type: 'string', enum: [...PLAN_NAMES] },
            disabled: { type: 'boolean', description: 'True disables the account, false enables it again.' },
          },
        },
      },
    },
    async (request: FastifyRequest<{ Params: { accountId: string }; Body: { plan?: PlanName; disabled?: boolean } }>) => {
      const account = await findAccountById(database, request.params.accountId);
      if (!account) throw notFound('Account');
      const { plan, disabled } = request.body;
      if (disabled === true && account.id === request.account.id) {
        throw new AppError('FORBIDDEN', 'An operator cannot disable their own account; another administrator can');
      }
      if (plan !== undefined) {
        await setPlan(database, account.id, plan);
        events.changed('accounts');
        request.log.info({ by: request.account.id, accountId: account.id, from: account.plan, to: plan }, 'plan changed by the operator');
      }
      if (disabled !== undefined && disabled !== (account.disabled_at !== null)) {
        await setDisabled(database, clock, account.id, disabled);
        events.changed('accounts');
        if (disabled) await deleteSessionsOf(database, account.id);
        request.log.warn(
          { by: request.account.id, accountId: account.id, email: account.email },
          disabled ? 'account disabled by the operator' : 'account enabled by the operator',
        );
      }
      const updated = (await findAccountById(database, account.id))!;
      return { success: true, data: { ...accountView(updated), disabledAt: updated.disabled_at === null ? null : iso(updated.disabled_at) } };
    },
  );

  // A link that lets the account set a new password (valid a day, once): the operator sends it.
  app.post(
    '/admin/accounts/:accountId/reset-link',
    { schema: { ...hidden, params: idParam('accountId', 'acct') } },
    async (request: FastifyRequest<{ Params: { accountId: string } }>, reply) => {
      const account = await findAccountById(database, request.params.accountId);
      if (!account) throw notFound('Account');
      const { token, expiresAt } = resetToken(account, clock);
      request.log.info({ by: request.account.id, accountId: account.id }, 'password-reset link made by the operator');
      return reply
        .code(201)
        .header('cache-control', 'no-store')
        .send({
          success: true,
          data: { email: account.email, url: `${config.publicUrl}/reset-password?token=${encodeURIComponent(token)}`, expiresAt: iso(expiresAt) },
        });
    },
  );

  app.get('/admin/queue', { schema: hidden }, async () => {
    const depth = await services.queue.queueDepth();
    const byKind = await services.queue.depthByKind();
    const failures = await services.queue.recentFailures(RECENT_FAILURES);
    return {
      success: true,
      data: {
        queued: depth.queued,
        processing: depth.processing,
        byKind,
        recentFailures: failures.map((row) => ({
          taskId: row.id,
          type: row.type,
          email: row.email,
          error: { code: row.error_code ?? 'INTERNAL_ERROR', message: row.error_message ?? '' },
          fault: SYSTEM_FAULTS.has(row.error_code ?? 'INTERNAL_ERROR') ? 'system' : 'input',
          attempts: row.attempts,
          createdAt: iso(row.created_at),
          failedAt: row.completed_at === null ? null : iso(row.completed_at),
        })),
      },
    };
  });

  app.get('/admin/invites', { schema: hidden }, async () => ({
    success: true,
    data: {
      signupMode: config.signupMode,
      invites: (await listInvites(database)).map((row) => ({
        inviteId: row.id,
        prefix: row.prefix,
        email: row.email,
        createdAt: iso(row.created_at),
        expiresAt: iso(row.expires_at),
        usedAt: row.used_at === null ? null : iso(row.used_at),
        usedBy: row.used_by_email ?? null,
      })),
    },
  }));

  app.post(
    '/admin/invites',
    {
      schema: {
        ...hidden,
        body: {
          type: 'object',
          additionalProperties: false,
          properties: { email: { type: 'string', minLength: 3, maxLength: 320, description: 'Only this address may use the code.' } },
        },
      },
    },
    async (request: FastifyRequest<{ Body: { email?: string } | undefined }>, reply) => {
      const { row, code } = await createInvite(database, clock, request.account.id, request.body?.email);
      return reply
        .code(201)
        .header('cache-control', 'no-store')
        .send({
          success: true,
          data: {
            inviteId: row.id,
            code,
            email: row.email,
            signupUrl: `${config.publicUrl}/signup?invite=${encodeURIComponent(code)}`,
            expiresAt: iso(row.expires_at),
          },
        });
    },
  );

  app.delete(
    '/admin/invites/:inviteId',
    { schema: { ...hidden, params: idParam('inviteId', 'inv') } },
    async (request: FastifyRequest<{ Params: { inviteId: string } }>) => {
      if (!(await revokeInvite(database, clock, request.params.inviteId))) throw notFound('Invitation');
      return { success: true, data: { inviteId: request.params.inviteId, revoked: true } };
    },
  );
}
