// A server on a given configuration (an existing DATA_DIR and database), for the tests of
// restore and copy-to: helpers.startServer always starts on a fresh one.
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { buildApp } from '../../src/http/app.js';
import { loadConfig } from '../../src/config.js';
import { createServices } from '../../src/services.js';
import { WorkerPool } from '../../src/worker/worker.js';
import { Client, type ApiResponse } from '../helpers.js';

export interface ServerOn {
  url: string;
  client(key?: string): Client;
  close(): Promise<void>;
}

export async function serveOn(env: Record<string, string>, workers = 0): Promise<ServerOn> {
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', QUEUE_POLL_MS: '200', ...env });
  const services = await createServices(config, { logger: pino({ level: 'silent' }) });
  const app = await buildApp(services);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const pool = new WorkerPool(services, workers);
  pool.start();
  return {
    url,
    client: (key) => new Client(url, key),
    async close() {
      await pool.stop(2000);
      const closing = app.close();
      app.server.closeAllConnections();
      await closing;
      await services.close();
    },
  };
}

/** A page of a list: its items (under the list's own name) and where the next page starts. */
type Page = { data: Record<string, unknown> & { nextCursor: string | null } };

/** Every item of a paged list (`/api/files`, `/api/tasks`), first page to last. */
export async function listAll(client: Client, route: string, items: string): Promise<unknown[]> {
  const all: unknown[] = [];
  let cursor: string | null = null;
  do {
    const response: ApiResponse<Page> = await client.get(`${route}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    if (response.status !== 200) throw new Error(`${route}: ${response.status} ${JSON.stringify(response.body)}`);
    all.push(...(response.body.data[items] as unknown[]));
    cursor = response.body.data.nextCursor;
  } while (cursor);
  return all;
}
