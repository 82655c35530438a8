import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Services } from '../../services.js';
import { dailyTaskCounts, readUsage } from '../../accounts/quota.js';
import { errors, ok } from '../schemas.js';

const security = [{ apiKey: [] }];
const counter = { type: 'object', properties: { used: { type: 'integer' }, limit: { type: 'integer' }, resetsAt: { type: 'string', format: 'date-time' } } };

export function accountRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock } = services;

  app.get(
    '/account',
    {
      schema: {
        tags: ['Account'],
        security,
        summary: 'The account, its plan\'s limits and its usage',
        response: {
          200: ok({
            type: 'object',
            properties: {
              email: { type: 'string' },
              plan: { type: 'string', enum: ['free', 'pro', 'max'] },
              limits: { type: 'object', additionalProperties: true },
              usage: { type: 'object', properties: { monthlyTasks: counter, dailyBatchFiles: counter, storageBytes: counter } },
            },
          }),
          ...errors(401, 403),
        },
      },
    },
    async (request) => ({
      success: true,
      data: {
        email: request.account.email,
        plan: request.account.plan,
        limits: request.limits,
        usage: await readUsage(database, request.account.id, request.limits, clock.now()),
      },
    }),
  );

  app.get(
    '/account/usage',
    {
      schema: {
        tags: ['Account'],
        security,
        summary: 'Tasks queued per day (UTC)',
        querystring: { type: 'object', additionalProperties: false, properties: { days: { type: 'integer', minimum: 1, maximum: 366, default: 30 } } },
        response: {
          200: ok({ type: 'object', properties: { days: { type: 'array', items: { type: 'object', properties: { date: { type: 'string' }, tasks: { type: 'integer' } } } } } }),
          ...errors(400, 401, 403),
        },
      },
    },
    async (request: FastifyRequest<{ Querystring: { days: number } }>) => ({
      success: true,
      data: { days: await dailyTaskCounts(database, request.account.id, request.query.days, clock.now()) },
    }),
  );
}
