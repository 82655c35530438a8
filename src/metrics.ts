// Prometheus metrics, one registry per app instance (tests build many apps in one process).
// ops/alerts.yml holds alert rules on them; docs/operations.md says what to watch.
import fs from 'node:fs';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  registry: Registry;
  httpRequests: Counter<'method' | 'route' | 'status'>;
  httpDuration: Histogram<'method' | 'route'>;
  taskDuration: Histogram<'kind' | 'outcome'>;
  queueDepth: Gauge<'status'>;
  /** How long the oldest runnable queued task has waited (0 with none): the same from every process. */
  queueOldestAge: Gauge;
  /** Runs that ended with the task failed, by kind and error code (this process's workers). */
  taskFailures: Counter<'kind' | 'code'>;
  /** Readiness checks (database, storage, libreoffice, poppler, sandbox): 1 passing, 0 not; set at each scrape. */
  checkUp: Gauge<'check'>;
  /** The file system holding DATA_DIR (the SQLite database, local objects, temporary files). */
  dataDirAvailable: Gauge;
  dataDirSize: Gauge;
  /** Previews: renditions decoded from the original, read from the cache, refused (busy), unavailable. */
  previews: Counter<'event'>;
  /** Webhook delivery attempts by outcome: delivered, retrying (failed, tried again later), failed (given up), lost (lease lapsed). */
  webhookAttempts: Counter<'outcome'>;
  webhookAttemptDuration: Histogram;
  /** Delivery-URL answers by outcome: hit, miss (rendered), or the error code; the hit ratio is hit / (hit + miss). */
  renders: Counter<'outcome'>;
  /** Time of one render (a miss): source read, decode, steps, encode, store. */
  renderDuration: Histogram;
  /** Time of one origin fetch by outcome (fetched, revalidated, stale, not_found, error). */
  originFetchDuration: Histogram<'outcome'>;
  /** Bytes of stored renders (every process sees the same index). */
  renderCacheBytes: Gauge;
}

export interface MetricSources {
  queueDepth(): Promise<{ queued: number; processing: number }>;
  /** Milliseconds the oldest runnable queued task has waited, 0 when none waits. */
  oldestQueuedWaitMs(): Promise<number>;
  dataDir: string;
  /** Bytes of stored renders. */
  renderCacheBytes(): Promise<number>;
}

const EVENT_LOOP_SAMPLE_MS = 100;

export function createMetrics(sources: MetricSources): Metrics {
  const registry = new Registry();
  // The event-loop delay is sampled every 100 ms, not prom-client's 10: each sample wakes the
  // loop, and 100 wake-ups a second cost an idle process ~6 ms of CPU a second here (~1.7 at 100).
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  const registers = [registry];
  /** Durations in seconds, in buckets that fit what is timed. */
  const seconds = <L extends string>(name: string, help: string, labelNames: L[], buckets: number[]) =>
    new Histogram<L>({ name, help, labelNames, buckets, registers });
  return {
    registry,
    httpRequests: new Counter({
      name: 'imgapi_http_requests_total',
      help: 'HTTP requests by method, route and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    }),
    httpDuration: seconds(
      'imgapi_http_request_duration_seconds',
      'HTTP request duration',
      ['method', 'route'],
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    ),
    taskDuration: seconds(
      'imgapi_task_duration_seconds',
      'Task run time by kind and outcome',
      ['kind', 'outcome'],
      [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    ),
    queueDepth: new Gauge({
      name: 'imgapi_queue_depth',
      help: 'Tasks queued or processing',
      labelNames: ['status'],
      registers,
      async collect() {
        const depth = await sources.queueDepth();
        this.set({ status: 'queued' }, depth.queued);
        this.set({ status: 'processing' }, depth.processing);
      },
    }),
    queueOldestAge: new Gauge({
      name: 'imgapi_queue_oldest_age_seconds',
      help: 'How long the oldest queued task that may run now has waited (0 when none waits)',
      registers,
      async collect() {
        this.set((await sources.oldestQueuedWaitMs()) / 1000);
      },
    }),
    taskFailures: new Counter({
      name: 'imgapi_task_failures_total',
      help: 'Task runs that ended with the task failed, by kind and error code',
      labelNames: ['kind', 'code'],
      registers,
    }),
    checkUp: new Gauge({
      name: 'imgapi_check_up',
      help: 'Readiness checks as /readyz reports them: 1 passing, 0 failing (database, storage, libreoffice, poppler, sandbox)',
      labelNames: ['check'],
      registers,
    }),
    dataDirAvailable: new Gauge({
      name: 'imgapi_data_dir_available_bytes',
      help: 'Bytes available to this process on the file system holding DATA_DIR',
      registers,
      async collect() {
        const stats = await fs.promises.statfs(sources.dataDir);
        this.set(stats.bavail * stats.bsize);
      },
    }),
    dataDirSize: new Gauge({
      name: 'imgapi_data_dir_size_bytes',
      help: 'Size of the file system holding DATA_DIR',
      registers,
      async collect() {
        const stats = await fs.promises.statfs(sources.dataDir);
        this.set(stats.blocks * stats.bsize);
      },
    }),
    webhookAttempts: new Counter({
      name: 'imgapi_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome (delivered, retrying, failed: given up after 24 hours, lost: lease lapsed)',
      labelNames: ['outcome'],
      registers,
    }),
    webhookAttemptDuration: seconds(
      'imgapi_webhook_attempt_duration_seconds',
      'Webhook delivery attempt time',
      [],
      [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    ),
    previews: new Counter({
      name: 'imgapi_previews_total',
      help: 'Previews: renditions rendered from the original or read from the cache, requests refused as busy (503) or unavailable (415)',
      labelNames: ['event'],
      registers,
    }),
    renders: new Counter({
      name: 'imgapi_renders_total',
      help: 'Delivery-URL requests by outcome: hit, miss (rendered now), or the error code answered',
      labelNames: ['outcome'],
      registers,
    }),
    renderDuration: seconds(
      'imgapi_render_duration_seconds',
      'Delivery-URL render time (cache misses)',
      [],
      [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20],
    ),
    originFetchDuration: seconds(
      'imgapi_origin_fetch_duration_seconds',
      'Origin fetch time by outcome (fetched, revalidated, stale, not_found, error)',
      ['outcome'],
      [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    ),
    renderCacheBytes: new Gauge({
      name: 'imgapi_render_cache_bytes',
      help: 'Bytes of stored delivery-URL renders (capped by RENDER_CACHE_MAX_BYTES)',
      registers,
      async collect() {
        this.set(await sources.renderCacheBytes());
      },
    }),
  };
}
