// serve (the API with in-process workers, or the API alone) and worker (workers and the periodic
// sweeps, no HTTP): one process of the service, until SIGTERM or SIGINT.
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import { parseArgs } from 'node:util';
import { announceSetupToken, setupInstructions } from '../accounts/onboarding.js';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { buildApp } from '../http/app.js';
import { createServices, type Services } from '../services.js';
import { VERSION } from '../version.js';
import { WorkerPool } from '../worker/worker.js';
import { UsageError } from './usage.js';

/** `imgapi serve [--role all|api]`. */
export const serve = (args: string[]): Promise<number> =>
  start(parseArgs({ args, options: { role: { type: 'string', default: 'all' } } }).values.role!);

/** `imgapi worker`. */
export const worker = (): Promise<number> => start('worker');

async function start(role: string): Promise<number> {
  if (!['all', 'api', 'worker'].includes(role)) throw new UsageError(`--role must be all or api, got "${role}"`);
  startFullCollectionsAtHalfTheHeadroom();
  const config = loadConfig();
  const services = await createServices(config);
  const workers = new WorkerPool(services, role === 'api' ? 0 : config.workerConcurrency);
  const app = role === 'worker' ? undefined : await buildApp(services);
  const started = {
    role,
    workers: workers.concurrency,
    aiWorkers: workers.aiConcurrency,
    workerId: workers.id,
    database: config.database.dialect,
    storage: services.storage.name,
  };
  if (app) {
    try {
      await app.listen({ port: config.port, host: config.host });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (!['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL', 'ENOTFOUND', 'EAI_AGAIN'].includes(code ?? '')) throw err;
      await app.close().catch(() => {});
      await services.close();
      throw new ConfigError([`PORT/HOST: cannot listen on ${config.host}:${config.port} (${code})`]);
    }
    services.logger.info({ url: config.publicUrl, ...started }, 'imgapi is serving');
    // A fresh installation: the operator creates the first administrator with a one-time token.
    const token = await announceSetupToken({ database: services.database, clock: services.clock, logger: services.logger });
    const { port } = app.server.address() as AddressInfo; // PORT=0 listens on a port of the system's choosing
    const parts = [`imgapi ${VERSION} listening on ${config.host}:${port}`, `dashboard: ${config.publicUrl}/`];
    if (token) parts.push(setupInstructions(config.publicUrl, token));
    say(config, parts.join('; '));
  } else {
    services.logger.info(started, 'imgapi worker started');
    say(config, `imgapi ${VERSION} worker running ${workers.concurrency} image and ${workers.aiConcurrency} AI task slots`);
  }
  workers.start();
  services.maintenance.start();
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      services.logger.info({ signal }, 'shutting down: no new work, finishing running tasks');
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await shutdown(services, workers, app);
  return 0;
}

/**
 * One plain line on stderr, whatever the log's format (pino's JSON is on stdout): what an
 * operator reads first in a terminal or `docker logs`. LOG_LEVEL=silent silences it too.
 */
function say(config: Config, line: string): void {
  if (config.logLevel !== 'silent') process.stderr.write(`${line}\n`);
}

async function shutdown(services: Services, workers: WorkerPool, app: Awaited<ReturnType<typeof buildApp>> | undefined) {
  const force = setTimeout(() => process.exit(1), 30_000).unref();
  // At once and together: no new requests and no new claims; in-flight requests end, running
  // tasks finish within 20 s or go back to the queue.
  await Promise.all([app?.close(), workers.stop(20_000)]);
  await services.close();
  clearTimeout(force);
}

/**
 * V8 starts a full collection (mark-compact, ~40 MB of heap marked on its helper threads) once the
 * old generation's headroom is below the young generation's capacity. With this service's heap
 * (~40 MB live, young generation grown to 32 MB at start-up) the limit V8 sets after a collection
 * is already that close, so under load it marked the whole heap again about every second: 14–20
 * full collections per 48 thumbnails, ~12 ms of CPU per job on V8's threads (issue #28). Started
 * at half the headroom instead, 4 per 48; the heap may grow ~20 MB more before one. A GC
 * heuristic read at each allocation check, so setting it after start-up takes effect.
 */
function startFullCollectionsAtHalfTheHeadroom(): void {
  v8.setFlagsFromString('--incremental-marking-soft-trigger=50');
}
