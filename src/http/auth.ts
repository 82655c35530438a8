// Authentication of /api/*: an API key in `x-api-key`. Free accounts reach the API only through
// the dashboard, so their keys are refused with PLAN_NO_API_ACCESS. Then the key's rate limit.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticateApiKey, type Account } from '../accounts/accounts.js';
import { isPlanName, type PlanLimits } from '../accounts/plans.js';
import { rateLimited, rateLimitHeaders, takeRequest } from '../accounts/rate-limit.js';
import { AppError } from '../errors.js';
import type { Services } from '../services.js';

declare module 'fastify' {
  interface FastifyRequest {
    account: Account;
    limits: PlanLimits;
  }
}

export function apiKeyAuth(services: Services) {
  return async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const header = request.headers['x-api-key'];
    const key = Array.isArray(header) ? header[0] : header;
    if (!key) throw new AppError('API_KEY_MISSING', 'Send your API key in the x-api-key header');
    const account = await authenticateApiKey(services.database, services.clock, key);
    if (!account) throw new AppError('API_KEY_INVALID', 'The API key is unknown or has been revoked');
    // The plan is read on every request, so a plan change applies to the next one.
    const limits = services.plans[isPlanName(account.plan) ? account.plan : 'free'];
    if (!limits.apiAccess) {
      throw new AppError('PLAN_NO_API_ACCESS', `The ${account.plan} plan has no API access; upgrade the account to use API keys`);
    }
    request.account = account;
    request.limits = limits;
    // Rate limit after authentication, before validation (the contract's order of errors).
    const state = await takeRequest(services.database, `key:${account.keyId}`, limits.requestsPerSecond, services.clock.now());
    reply.headers(rateLimitHeaders(state));
    if (state.exceeded) throw rateLimited(state);
  };
}
