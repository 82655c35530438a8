// Operations endpoints: liveness, readiness (database, storage, converters), Prometheus metrics.
import type { FastifyInstance } from 'fastify';
import { findExecutable } from '../../programs/processes.js';
import type { Sandbox } from '../../programs/sandbox.js';
import type { Services } from '../../services.js';
import { NO_SECURITY, bytes, publicResponses, type Success } from '../openapi.js';
import { COMPONENT_SCHEMAS, ref } from '../schemas.js';
import { VERSION } from '../../version.js';

interface Check {
  ok: boolean;
  required: boolean;
  detail?: string;
}

const UNAVAILABLE = {
  status: 'unavailable',
  checks: {
    database: { ok: false, required: true, detail: 'connect ECONNREFUSED 127.0.0.1:5432' },
    storage: { ok: true, required: true },
    libreoffice: { ok: true, required: false },
    poppler: { ok: true, required: false },
    ffmpeg: { ok: true, required: false },
    sandbox: { ok: true, required: false },
  },
};

export function opsRoutes(app: FastifyInstance, services: Services): void {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'getHealth',
        tags: ['Operations'],
        security: NO_SECURITY,
        summary: 'Liveness',
        response: publicResponses({ 200: plain('The process serves', 'Health') }),
      },
    },
    async () => ({ status: 'ok', version: VERSION }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'getReadiness',
        tags: ['Operations'],
        security: NO_SECURITY,
        summary: 'Readiness',
        description:
          '503 only when the database or storage is unreachable; a missing converter, or a converter sandbox that cannot be set up (`sandbox`), is reported, not fatal.',
        response: publicResponses({
          200: plain('Ready', 'Readiness'),
          503: plain('The database or storage is unreachable', 'Readiness', UNAVAILABLE),
        }),
      },
    },
    async (_request, reply) => {
      const checks = await readiness(services);
      const ready = Object.values(checks).every((c) => c.ok || !c.required);
      return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable', checks });
    },
  );

  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'getMetrics',
        tags: ['Operations'],
        security: NO_SECURITY,
        summary: 'Prometheus metrics',
        response: publicResponses({ 200: bytes('The Prometheus text format', [services.metrics.registry.contentType.split(';')[0]!]) }),
      },
    },
    async (_request, reply) => {
      // The readiness checks as gauges, so that alerts see a converter or the store going away.
      for (const [name, check] of Object.entries(await readiness(services))) services.metrics.checkUp.set({ check: name }, check.ok ? 1 : 0);
      const { registry } = services.metrics;
      return reply.type(registry.contentType).send(await registry.metrics());
    },
  );
}

/** The checks /readyz answers and /metrics reports as imgapi_check_up. */
async function readiness(services: Services): Promise<Record<string, Check>> {
  return {
    database: await probe(() => services.database.check(), true),
    storage: await probe(() => services.storage.check(), true),
    libreoffice: converterCheck(
      [services.config.sofficeCommand],
      'presentation-to-images fails with CONVERSION_FAILED until LibreOffice (libreoffice-impress-nogui) is installed',
    ),
    poppler: converterCheck(
      [services.config.pdftoppmCommand, services.config.pdfinfoCommand],
      'presentation-to-images, pdf-to-images and PDF previews are unavailable until poppler-utils is installed',
    ),
    ffmpeg: converterCheck(
      [services.config.ffmpegCommand],
      'animated AVIF (AV1 image sequences) fails with CONVERSION_FAILED, and animations written as AVIF keep only their first frame, until ffmpeg is installed',
    ),
    sandbox: await sandboxCheck(services.sandbox),
  };
}

/** A JSON body outside the envelope: the operations endpoints answer monitors, not API clients. */
function plain(description: string, schemaName: string, example = (COMPONENT_SCHEMAS[schemaName]!.examples as unknown[])[0]): Success {
  return { description, content: { 'application/json': { schema: ref(schemaName), example } } };
}

/** A converter is reported, never required: readiness does not depend on it. */
function converterCheck(commands: string[], consequence: string): Check {
  const missing = commands.filter((command) => !findExecutable(command));
  return missing.length
    ? { ok: false, required: false, detail: `${missing.join(' and ')} not found: ${consequence}` }
    : { ok: true, required: false };
}

/** Whether the converters run confined; reported, never required (CONVERTER_SANDBOX=required fails the conversions instead). */
async function sandboxCheck(sandbox: Sandbox): Promise<Check> {
  const status = await sandbox.status();
  if (status.confined) return { ok: true, required: false };
  const consequence =
    sandbox.mode === 'required'
      ? 'presentation-to-images, pdf-to-images, PDF previews and animated AVIF fail until it can (CONVERTER_SANDBOX=required)'
      : 'LibreOffice, poppler and ffmpeg run unconfined and can read any file this process can';
  return { ok: false, required: false, detail: `${status.reason}: ${consequence}` };
}

async function probe(fn: () => Promise<void>, required: boolean): Promise<Check> {
  try {
    await fn();
    return { ok: true, required };
  } catch (err) {
    return { ok: false, required, detail: (err as Error).message };
  }
}
