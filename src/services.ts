// The services one process holds, created once from the configuration and passed explicitly
// (no module-level singletons), so tests can build as many independent instances as they need.
import pino, { type Logger } from 'pino';
import sharp from 'sharp';
import { systemClock, type Clock } from './clock.js';
import { prepareDataDir, uploadSigningSecret, type Config } from './config.js';
import { migrate, openDatabase, type Database } from './db/database.js';
import { forgetApiKeys } from './accounts/accounts.js';
import { loadPlans, type PlanTable } from './accounts/plans.js';
import { Maintenance } from './maintenance.js';
import { createMetrics, type Metrics } from './metrics.js';
import { DirectUploads } from './files/direct-upload.js';
import { pdfPageCounter } from './documents/pdf.js';
import { previewPoppler } from './programs/preview.js';
import { createSandbox, type Sandbox } from './programs/sandbox.js';
import { QueueEvents } from './queue/events.js';
import { PgWakeups } from './queue/notify.js';
import { TaskQueue } from './queue/queue.js';
import { quietCompletionVersion, recordTasksEnded } from './tasks/ended.js';
import { LocalStorage } from './storage/local.js';
import { S3Storage } from './storage/s3.js';
import type { ObjectStorage } from './storage/storage.js';
import { Delivery } from './delivery/delivery.js';
import { forgetSigningKeys } from './delivery/signing-keys.js';

export interface Services {
  config: Config;
  clock: Clock;
  logger: Logger;
  database: Database;
  storage: ObjectStorage;
  plans: PlanTable;
  events: QueueEvents;
  queue: TaskQueue;
  metrics: Metrics;
  /** Periodic work (retention sweep); started by the processes that serve or work. */
  maintenance: Maintenance;
  /** Presigned direct uploads (presign, the local PUT, confirm). */
  uploads: DirectUploads;
  /** Where LibreOffice and poppler run: the bwrap sandbox, when it can be set up. */
  sandbox: Sandbox;
  /** Delivery URLs (/r/…): their render cache, slots and single-flight, one per process. */
  delivery: Delivery;
  close(): Promise<void>;
}

export interface ServiceOverrides {
  clock?: Clock;
  logger?: Logger;
}

/** A direct upload's target, origin-form (`/uploads/…`) or absolute-form (`http://host/uploads/…`). */
const UPLOAD_TARGET = /^(?:[a-z][a-z0-9+.-]*:\/\/[^/?#]*)?\/uploads\//i;

/** The service's logger, to stdout (a test reading its lines gives a `destination`). */
export function createLogger(config: Config, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level: config.logLevel,
    // Never log credentials, even when a request is logged whole.
    redact: ['req.headers["x-api-key"]', 'req.headers.cookie', 'req.headers.authorization', 'headers["x-api-key"]'],
    serializers: {
      // A presigned upload URL's query is a credential until it expires: log the path only.
      req: (req: { method?: string; url?: string; hostname?: string; ip?: string }) => ({
        method: req.method,
        url: req.url !== undefined && UPLOAD_TARGET.test(req.url) ? req.url.replace(/\?.*$/, '?[signed]') : req.url,
        hostname: req.hostname,
        remoteAddress: req.ip,
      }),
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

export async function createServices(config: Config, overrides: ServiceOverrides = {}): Promise<Services> {
  prepareDataDir(config);
  sharp.concurrency(config.imageThreads);
  const plans = loadPlans(config.plansFile);
  const database = await openDatabase(config.database);
  try {
    await migrate(database);
  } catch (err) {
    await database.close();
    throw err;
  }
  const clock = overrides.clock ?? systemClock;
  const events = new QueueEvents();
  // A key revoked, a plan changed, an account disabled (here or, told through the database, in
  // another process): the credentials this process keeps in memory are read again.
  events.on('changed:accounts', () => {
    forgetApiKeys(database);
    forgetSigningKeys(database);
  });
  const queue = new TaskQueue(database, clock, events, {
    record: (tx, accountId, taskIds, now, webhooksVersion) => recordTasksEnded(database, tx, accountId, taskIds, now, webhooksVersion),
    quietVersion: (task) => quietCompletionVersion(database, task.account_id, task.batch_id !== null),
  });
  const storage: ObjectStorage = config.storage.kind === 's3' ? new S3Storage(config.storage) : new LocalStorage(config.storage.root);
  const logger = overrides.logger ?? createLogger(config);
  const sandbox = createSandbox(config, logger);
  const uploads = new DirectUploads({
    pdfPages: pdfPageCounter(previewPoppler(config, sandbox)),
    database,
    storage,
    clock,
    publicUrl: config.publicUrl,
    urlTtlMs: config.uploadUrlTtlMs,
    signingSecret: storage.presignPut ? undefined : uploadSigningSecret(config),
  });
  // Wake-ups across processes where the database carries them (PostgreSQL LISTEN/NOTIFY).
  const wakeups = database.postgresUrl ? new PgWakeups(database, database.postgresUrl, events, logger) : undefined;
  wakeups?.start();
  const maintenance = new Maintenance({ database, storage, clock, logger }, config.sweepIntervalMs);
  const metrics = createMetrics({
    queueDepth: () => queue.queueDepth(),
    oldestQueuedWaitMs: () => queue.oldestQueuedWaitMs(),
    dataDir: config.dataDir,
    renderCacheBytes: () => delivery.cache.totalBytes(),
  });
  const delivery = new Delivery({ config, clock, database, storage, plans, metrics, events, poppler: previewPoppler(config, sandbox), logger });
  return {
    config,
    delivery,
    clock,
    logger,
    maintenance,
    uploads,
    sandbox,
    database,
    storage,
    plans,
    events,
    queue,
    metrics,
    async close() {
      await maintenance.stop();
      // Delivery renders answered and still being stored need the storage and the database.
      await delivery.stored();
      await wakeups?.stop();
      storage.close?.();
      await database.close();
    },
  };
}
