// The dashboard's API keys: list (prefix, created, last used), create (the key shown once), revoke.
// Session only: a key never manages keys.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { iso } from '../../../clock.js';
import { createApiKey, listApiKeys, revokeApiKey } from '../../../accounts/accounts.js';
import { notFound } from '../../../errors.js';
import type { Services } from '../../../services.js';
import { idParam } from '../../schemas.js';

const hidden = { hide: true, tags: ['Dashboard'] };

export function keyRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock, events } = services;

  app.get('/keys', { schema: hidden }, async (request) => ({
    success: true,
    data: {
      apiAccess: request.limits.apiAccess,
      keys: (await listApiKeys(database, request.account.id)).map((key) => ({
        keyId: key.id,
        name: key.name,
        prefix: key.prefix,
        createdAt: iso(key.created_at),
        lastUsedAt: key.last_used_at === null ? null : iso(key.last_used_at),
        revokedAt: key.revoked_at === null ? null : iso(key.revoked_at),
      })),
    },
  }));

  app.post(
    '/keys',
    {
      schema: {
        ...hidden,
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['name'],
          properties: { name: { type: 'string', minLength: 1, maxLength: 100, pattern: '\\S' } },
        },
      },
    },
    async (request: FastifyRequest<{ Body: { name: string } }>, reply) => {
      const created = await createApiKey(database, clock, request.account.id, request.body.name.trim());
      request.log.info({ accountId: request.account.id, keyId: created.id }, 'API key created from the dashboard');
      return reply
        .code(201)
        .header('cache-control', 'no-store')
        .send({
          success: true,
          data: {
            keyId: created.id,
            name: created.name,
            prefix: created.prefix,
            key: created.key,
            createdAt: iso(created.createdAt),
            apiAccess: request.limits.apiAccess,
          },
        });
    },
  );

  app.delete(
    '/keys/:keyId',
    { schema: { ...hidden, params: idParam('keyId', 'key') } },
    async (request: FastifyRequest<{ Params: { keyId: string } }>) => {
      // Another account's key, an unknown one and a revoked one all answer 404.
      if (!(await revokeApiKey(database, clock, request.account.id, request.params.keyId))) throw notFound('API key');
      events.changed('accounts');
      request.log.info({ accountId: request.account.id, keyId: request.params.keyId }, 'API key revoked from the dashboard');
      return { success: true, data: { keyId: request.params.keyId, revokedAt: iso(clock.now()) } };
    },
  );
}
