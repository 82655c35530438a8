// The services one process holds, created once from the configuration and passed explicitly
// (no module-level singletons), so tests can build as many independent instances as they need.
import path from 'node:path';
import pino, { type Logger } from 'pino';
import sharp from 'sharp';
import { systemClock, type Clock } from './clock.js';
import { prepareDataDir, type Config } from './config.js';
import { migrate, openDatabase, type Database } from './db/database.js';
import { loadPlans, type PlanTable } from './accounts/plans.js';
import { Maintenance } from './maintenance.js';
import { createMetrics, type Metrics } from './metrics.js';
import { QueueEvents } from './queue/events.js';
import { TaskQueue } from './queue/queue.js';
import { LocalStorage } from './storage/local.js';
import type { ObjectStorage } from './storage/storage.js';

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
  close(): Promise<void>;
}

export interface ServiceOverrides {
  clock?: Clock;
  logger?: Logger;
}

export function createLogger(config: Config): Logger {
  return pino({
    level: config.logLevel,
    // Never log credentials, even when a request is logged whole.
    redact: ['req.headers["x-api-key"]', 'req.headers.cookie', 'req.headers.authorization', 'headers["x-api-key"]'],
  });
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
  const queue = new TaskQueue(database, clock, events);
  const storage = new LocalStorage(path.join(config.dataDir, 'objects'));
  const logger = overrides.logger ?? createLogger(config);
  const maintenance = new Maintenance({ database, storage, clock, logger }, config.sweepIntervalMs);
  return {
    config,
    clock,
    logger,
    maintenance,
    database,
    storage,
    plans,
    events,
    queue,
    metrics: createMetrics(() => queue.queueDepth()),
    async close() {
      await maintenance.stop();
      await database.close();
    },
  };
}
