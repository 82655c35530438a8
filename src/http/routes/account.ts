import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Services } from '../../services.js';
import { dailyTaskCounts, readUsage } from '../../accounts/quota.js';
import { API_READ, API_SECURITY, VALIDATED, apiResponses, jsonData } from '../openapi.js';

export function accountRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock } = services;

  app.get(
    '/account',
    {
      schema: {
        operationId: 'getAccount',
        tags: ['Account'],
        security: API_SECURITY,
        summary: "The account, its plan's limits and its usage",
        response: apiResponses({ 200: jsonData('The account', 'Account') }, API_READ),
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
        operationId: 'getUsage',
        tags: ['Account'],
        security: API_SECURITY,
        summary: 'Tasks queued per day (UTC)',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            days: { type: 'integer', minimum: 1, maximum: 366, default: 30, description: 'How many days back, today included (1–366, default 30).' },
          },
        },
        response: apiResponses({ 200: jsonData('Tasks per day', 'DailyUsage') }, [...API_READ, ...VALIDATED]),
      },
    },
    async (request: FastifyRequest<{ Querystring: { days: number } }>) => ({
      success: true,
      data: { days: await dailyTaskCounts(database, request.account.id, request.query.days, clock.now()) },
    }),
  );
}
