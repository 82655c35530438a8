// The dashboard: its pages and static files at /, its session routes at /auth/*, and its own
// JSON routes at /dashboard-api/* (keys, the operator's page, the playground's operations).
// The dashboard's calls to /api/* use the same routes as API clients, authenticated by session.
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../../services.js';
import { sessionAuth } from '../../auth.js';
import { refuseUnknownQueries } from '../../validation.js';
import { adminRoutes } from './admin.js';
import { authRoutes } from './auth.js';
import { keyRoutes } from './keys.js';
import { operationsRoutes } from './operations.js';
import { webRoutes } from './web.js';

export async function dashboardRoutes(app: FastifyInstance, services: Services): Promise<void> {
  authRoutes(app, services);
  await app.register(
    async (dashboard) => {
      refuseUnknownQueries(dashboard);
      await dashboard.register(async (user) => {
        user.addHook('onRequest', sessionAuth(services));
        keyRoutes(user, services);
        operationsRoutes(user, services);
      });
      await dashboard.register(async (admin) => {
        admin.addHook('onRequest', sessionAuth(services, { admin: true }));
        adminRoutes(admin, services);
      });
    },
    { prefix: '/dashboard-api' },
  );
  await webRoutes(app, services);
}
