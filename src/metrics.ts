// Prometheus metrics, one registry per app instance (tests build many apps in one process).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface Metrics {
  registry: Registry;
  httpRequests: Counter<'method' | 'route' | 'status'>;
  httpDuration: Histogram<'method' | 'route'>;
  taskDuration: Histogram<'kind' | 'outcome'>;
  queueDepth: Gauge<'status'>;
}

export function createMetrics(readQueueDepth: () => Promise<{ queued: number; processing: number }>): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    httpRequests: new Counter({
      name: 'imgapi_http_requests_total',
      help: 'HTTP requests by method, route and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'imgapi_http_request_duration_seconds',
      help: 'HTTP request duration',
      labelNames: ['method', 'route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    taskDuration: new Histogram({
      name: 'imgapi_task_duration_seconds',
      help: 'Task run time by kind and outcome',
      labelNames: ['kind', 'outcome'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'imgapi_queue_depth',
      help: 'Tasks queued or processing',
      labelNames: ['status'],
      registers: [registry],
      async collect() {
        const depth = await readQueueDepth();
        this.set({ status: 'queued' }, depth.queued);
        this.set({ status: 'processing' }, depth.processing);
      },
    }),
  };
}
