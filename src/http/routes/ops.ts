// Operations endpoints: liveness, readiness (database, storage, converters), Prometheus metrics.
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { findExecutable } from '../../documents/processes.js';
import type { Services } from '../../services.js';

interface Check {
  ok: boolean;
  required: boolean;
  detail?: string;
}

export function opsRoutes(app: FastifyInstance, services: Services): void {
  app.get('/healthz', { schema: { tags: ['Operations'], summary: 'Liveness', response: { 200: { type: 'object', properties: { status: { type: 'string' } } } } } }, async () => ({
    status: 'ok',
  }));

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['Operations'],
        summary: 'Readiness',
        description: '503 only when the database or storage is unreachable; a missing converter is reported, not fatal.',
        response: { 200: { type: 'object', additionalProperties: true }, 503: { type: 'object', additionalProperties: true } },
      },
    },
    async (_request, reply) => {
      const checks: Record<string, Check> = {
        database: await probe(async () => {
          await sql`select 1`.execute(services.database.db);
        }, true),
        storage: await probe(() => services.storage.check(), true),
        libreoffice: converterCheck(
          [services.config.sofficeCommand],
          'presentation-to-images fails with CONVERSION_FAILED until LibreOffice (libreoffice-impress-nogui) is installed',
        ),
        poppler: converterCheck(
          [services.config.pdftoppmCommand, services.config.pdfinfoCommand],
          'presentation-to-images and PDF previews are unavailable until poppler-utils is installed',
        ),
      };
      const ready = Object.values(checks).every((c) => c.ok || !c.required);
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable', checks });
    },
  );

  app.get('/metrics', { schema: { tags: ['Operations'], summary: 'Prometheus metrics', hide: false } }, async (_request, reply) => {
    const { registry } = services.metrics;
    return reply.type(registry.contentType).send(await registry.metrics());
  });
}

/** A converter is reported, never required: readiness does not depend on it. */
function converterCheck(commands: string[], consequence: string): Check {
  const missing = commands.filter((command) => !findExecutable(command));
  return missing.length ? { ok: false, required: false, detail: `${missing.join(' and ')} not found: ${consequence}` } : { ok: true, required: false };
}

async function probe(fn: () => Promise<void>, required: boolean): Promise<Check> {
  try {
    await fn();
    return { ok: true, required };
  } catch (err) {
    return { ok: false, required, detail: (err as Error).message };
  }
}
