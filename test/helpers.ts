// Test harness: a real HTTP server on a loopback port, on a fresh data directory and a fresh
// database (SQLite file, or a new PostgreSQL database created for the test and dropped after).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../src/http/app.js';
import type { Clock } from '../src/clock.js';
import { loadConfig, type Config } from '../src/config.js';
import { createServices, type Services } from '../src/services.js';
import { WorkerPool } from '../src/worker/worker.js';
import { createAccount, createApiKey } from '../src/accounts/accounts.js';
import type { PlanName } from '../src/accounts/plans.js';
import { recordOutputs, recordingOutputs, type StoredOutput } from '../src/files/files.js';
import type { TaskQueue, TaskRow } from '../src/queue/queue.js';
import { assertMatchesContract } from './openapi-contract.js';
import { freshPostgres } from './fresh-postgres.js';

export const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
export const CORPUS = path.resolve(REPO_ROOT, '../shared/corpus');
export const corpusFile = (relative: string): string => path.join(CORPUS, relative);

export type Dialect = 'sqlite' | 'postgres';
/** Every dialect runs the same suites; TEST_DIALECTS=sqlite narrows a local run. */
export const DIALECTS: Dialect[] = (process.env.TEST_DIALECTS?.split(',') as Dialect[] | undefined) ?? ['sqlite', 'postgres'];
export const POSTGRES_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * NODE_OPTIONS as this process has it, for a child started with a scrubbed environment: under the
 * Node setup brought while node_modules are built for another (scripts/node-apart.mjs), it carries
 * the hook that finds native modules built for this Node.
 */
export const nodeOptions = (): { NODE_OPTIONS?: string } => (process.env.NODE_OPTIONS ? { NODE_OPTIONS: process.env.NODE_OPTIONS } : {});

/**
 * Why dist/ does not hold this checkout's code — no build, or a `.ts` under src/ or sdk/ (which it
 * is built from) newer than it — or undefined when it does. The bench warns with it; MAIN_ENTRY
 * runs the sources instead.
 */
export function distIsStale(repoRoot: string): string | undefined {
  const mainJs = path.join(repoRoot, 'dist', 'src', 'main.js');
  if (!fs.existsSync(mainJs)) return 'dist/src/main.js is missing: run `npm run build`';
  const built = fs.statSync(mainJs).mtimeMs;
  let newest = { file: '', mtime: -Infinity };
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'dist' && entry.name !== 'node_modules') walk(full);
      } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
        const mtime = fs.statSync(full).mtimeMs;
        if (mtime > newest.mtime) newest = { file: full, mtime };
      }
    }
  };
  walk(path.join(repoRoot, 'src'));
  walk(path.join(repoRoot, 'sdk'));
  return newest.mtime > built
    ? `${path.relative(repoRoot, newest.file)} is newer than dist/: the service runs the last build (npm run build)`
    : undefined;
}

/**
 * How a child process runs this checkout's `imgapi`: the build (dist/src/main.js) when it is
 * current, as after `npm test`'s setup, else src/main.ts through tsx. A process through tsx
 * spends about 0.7 s more CPU starting (its loader reads and maps every module): the
 * multi-process tests start one per service, CLI call and restart.
 */
export const MAIN_ENTRY: readonly string[] = distIsStale(REPO_ROOT)
  ? // tsx's ESM loader only: the sources are ES modules (its CommonJS hook costs another 0.2 s).
    ['--import', import.meta.resolve('tsx/esm'), path.join(REPO_ROOT, 'src', 'main.ts')]
  : [path.join(REPO_ROOT, 'dist', 'src', 'main.js')];

/**
 * Builds what `npm test`'s setup builds (dist/, web/dist) when it is stale: setup --build-only on
 * this Node, so that any npm it runs, and what that compiles, is this Node's — never the `node`
 * a PATH happens to find first.
 */
export function buildWithSetup(): void {
  const setup = spawnSync(process.execPath, [path.join(REPO_ROOT, 'scripts', 'setup.mjs'), '--build-only'], { cwd: REPO_ROOT, encoding: 'utf8' });
  assert.equal(setup.status, 0, setup.stderr);
}

/** web/dist, which `npm test`'s setup builds; a bare run of a browser test builds it here. */
export function ensureDashboardBuilt(): void {
  if (!fs.existsSync(path.join(REPO_ROOT, 'web', 'dist', 'index.html'))) buildWithSetup();
}

export function tempDir(prefix = 'imgapi-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/** A database URL for a fresh, empty database of the dialect, and a function that drops it. */
export async function freshDatabase(dialect: Dialect, dataDir: string): Promise<{ url: string; drop: () => Promise<void> }> {
  if (dialect === 'sqlite') return { url: `sqlite:${path.join(dataDir, 'test.db')}`, drop: async () => {} };
  return freshPostgres(POSTGRES_URL, 'imgapi_t_');
}

export interface TestServerOptions {
  dialect?: Dialect;
  /** PLANS_FILE contents (requestsPerSecond defaults to 100000 for every plan). */
  plans?: Record<string, Record<string, unknown>>;
  env?: Record<string, string>;
  clock?: Clock;
  /** In-process workers (default 2; 0 for none). */
  workers?: number;
  /** Adds to the app before it listens (a hook that plays a slow moment, say). */
  beforeListen?: (app: FastifyInstance) => void;
  /** The service's logger (default: silent). */
  logger?: pino.Logger;
}

export interface TestServer {
  url: string;
  config: Config;
  services: Services;
  app: FastifyInstance;
  workers: WorkerPool;
  dataDir: string;
  databaseUrl: string;
  /** Creates an account on `plan` and returns a fresh API key for it. */
  newKey(plan?: PlanName): Promise<string>;
  close(): Promise<void>;
}

/**
 * Completes a claimed task as a worker does: TaskQueue.complete, with the files module recording
 * `outputs` in its transaction (or as CTEs of its one statement). For tests that drive the queue by hand.
 */
export function completeTask(
  queue: TaskQueue,
  task: TaskRow,
  workerId: string,
  outputs: StoredOutput[] = [],
  terms: { result?: Record<string, unknown>; retentionMs?: number; storageLimit?: number } = {},
): Promise<boolean> {
  const termsAt = (now: number) => ({ now, retentionMs: terms.retentionMs ?? 1000, storageLimit: terms.storageLimit ?? Number.MAX_SAFE_INTEGER });
  const owner = { id: task.id, accountId: task.account_id };
  return queue.complete({
    task,
    workerId,
    result: terms.result ?? {},
    outputFileIds: outputs.map((o) => o.fileId),
    bundled: false,
    recordOutputs: (tx, now) => recordOutputs(queue.database, tx, owner, outputs, termsAt(now)),
    recordingOutputs: (now) => recordingOutputs(queue.database, owner, outputs, termsAt(now)),
  });
}

export async function startServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = tempDir();
  const database = await freshDatabase(options.dialect ?? 'sqlite', dataDir);
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    DATABASE_URL: database.url,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    QUEUE_POLL_MS: '200',
    ...options.env,
  };
  // Tests send requests faster than a person would: rate limits are raised unless a test sets them.
  const plans: Record<string, Record<string, unknown>> = {};
  for (const plan of ['free', 'pro', 'max']) plans[plan] = { requestsPerSecond: 100_000, ...options.plans?.[plan] };
  env.PLANS_FILE = path.join(dataDir, 'plans.json');
  fs.writeFileSync(env.PLANS_FILE, JSON.stringify(plans));
  const config = loadConfig(env);
  const services = await createServices(config, { clock: options.clock, logger: options.logger ?? pino({ level: 'silent' }) });
  const app = await buildApp(services);
  options.beforeListen?.(app);
  // PORT is 0 (any free port) unless a test needs a known one (PUBLIC_URL, say: presigned URLs name it).
  await app.listen({ port: config.port, host: '127.0.0.1' });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const workers = new WorkerPool(services, options.workers ?? 2);
  workers.start();
  services.maintenance.start();
  let accounts = 0;
  return {
    url,
    config,
    services,
    app,
    workers,
    dataDir,
    databaseUrl: database.url,
    async newKey(plan: PlanName = 'pro') {
      const account = await createAccount(services.database, services.clock, {
        email: `user${++accounts}-${crypto.randomBytes(3).toString('hex')}@example.com`,
        plan,
      });
      return (await createApiKey(services.database, services.clock, account.id, 'test')).key;
    },
    async close() {
      await workers.stop(2000);
      // A response the client has read to its end may not have ended on the server yet: close
      // what is left instead of waiting for keep-alive connections to go idle.
      const closing = app.close();
      app.server.closeAllConnections();
      await closing;
      await services.close();
      await database.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

// A small HTTP client for the API ---------------------------------------------------------

/**
 * fetch for this service: the response, its body read whole, held to the server's OpenAPI
 * document (test/openapi-contract.ts). Everything the tests send the service goes through here.
 */
export async function apiFetch(url: string, init: RequestInit = {}): Promise<{ response: Response; body: Buffer }> {
  const response = await fetch(url, init);
  const body = Buffer.from(await response.arrayBuffer());
  await assertMatchesContract({ method: init.method ?? 'GET', url, status: response.status, headers: response.headers, body });
  return { response, body };
}

/** A body as the tests read it: parsed JSON when it says so, else the bytes. */
export function parseBody(response: Response, body: Buffer): unknown {
  return (response.headers.get('content-type') ?? '').includes('application/json') && body.length > 0 ? JSON.parse(body.toString('utf8')) : body;
}

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export class Client {
  constructor(
    readonly baseUrl: string,
    readonly key?: string,
  ) {}

  async request<T = any>(
    method: string,
    route: string,
    init: { json?: unknown; headers?: Record<string, string>; body?: BodyInit } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...(this.key ? { 'x-api-key': this.key } : {}), ...init.headers };
    let body = init.body;
    if (init.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    const { response, body: bytes } = await apiFetch(this.baseUrl + route, { method, headers, body });
    return { status: response.status, headers: response.headers, body: parseBody(response, bytes) as T };
  }

  get<T = any>(route: string, headers?: Record<string, string>) {
    return this.request<T>('GET', route, { headers });
  }

  post<T = any>(route: string, json: unknown, headers?: Record<string, string>) {
    return this.request<T>('POST', route, { json, headers });
  }

  async upload(file: string | Buffer, filename = 'upload.bin', headers?: Record<string, string>): Promise<ApiResponse> {
    const bytes = typeof file === 'string' ? fs.readFileSync(file) : file;
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(bytes)]), typeof file === 'string' && filename === 'upload.bin' ? path.basename(file) : filename);
    return this.request('POST', '/api/upload', { body: form, headers });
  }

  /** Uploads and returns the fileId, failing the test on anything but 201. */
  async uploadOk(file: string | Buffer, filename?: string): Promise<string> {
    const response = await this.upload(file, filename);
    if (response.status !== 201) throw new Error(`upload failed: ${response.status} ${JSON.stringify(response.body)}`);
    return response.body.data.fileId;
  }

  /** Queues a task of `kind` (POST /api/process/{kind}) and returns its id, failing the test on anything but 202. */
  async submit(kind: string, body: Record<string, unknown>): Promise<string> {
    const response = await this.post(`/api/process/${kind}`, body);
    if (response.status !== 202) throw new Error(`POST /api/process/${kind} answered ${response.status}: ${JSON.stringify(response.body)}`);
    return response.body.data.taskId;
  }

  /** Polls (with long-poll) until the task finishes. */
  async waitForTask(taskId: string, timeoutMs = 60_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const response = await this.get(`/api/tasks/${taskId}?wait=5`);
      if (response.status !== 200) throw new Error(`task read failed: ${response.status} ${JSON.stringify(response.body)}`);
      if (['completed', 'failed', 'canceled'].includes(response.body.data.status)) return response.body.data;
    }
    throw new Error(`task ${taskId} did not finish in ${timeoutMs} ms`);
  }

  async download(fileId: string): Promise<Buffer> {
    const response = await this.get(`/api/download/${fileId}`);
    if (response.status !== 200) throw new Error(`download failed: ${response.status}`);
    return response.body as Buffer;
  }
}

/** What runJob needs of a client: this file's Client, and the benchmark's (bench/lib/client.ts). */
export interface JobClient {
  submit(kind: string, body: Record<string, unknown>): Promise<string>;
  waitForTask(taskId: string): Promise<any>;
  download(fileId: string): Promise<Buffer>;
}

/**
 * One task over the API: queue `kind` with `body` (its `fileId` or `fileIds` and options), wait
 * for it to finish, and download its first output. Fails the test unless the task completed —
 * a test that expects a failure passes `{ expect: 'any' }` and reads `task` (`output` is then
 * empty unless it completed).
 */
export async function runJob(
  client: JobClient,
  kind: string,
  body: Record<string, unknown>,
  { expect = 'completed' }: { expect?: 'completed' | 'any' } = {},
): Promise<{ task: any; output: Buffer }> {
  const task = await client.waitForTask(await client.submit(kind, body));
  if (expect === 'completed' && task.status !== 'completed') throw new Error(`${kind} ${task.status}: ${JSON.stringify(task.error)}`);
  return { task, output: task.status === 'completed' ? await client.download(task.outputFileId) : Buffer.alloc(0) };
}

/** The dashboard's (a browser's) way of calling: the session cookie, and its CSRF token on writes. */
export class SessionClient extends Client {
  cookie = '';
  csrf = '';
  /** Off to play a forged request that lacks the token. */
  sendCsrf = true;

  override async request<T = any>(
    method: string,
    route: string,
    init: { json?: unknown; headers?: Record<string, string>; body?: BodyInit } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = {
      ...(this.cookie ? { cookie: this.cookie } : {}),
      ...(this.sendCsrf && this.csrf && method !== 'GET' ? { 'x-csrf-token': this.csrf } : {}),
      ...init.headers,
    };
    const response = await super.request<T>(method, route, { ...init, headers });
    const setCookie = response.headers.get('set-cookie');
    if (setCookie?.startsWith('imgapi_session=')) this.cookie = setCookie.split(';')[0]!;
    const data = (response.body as { data?: { csrfToken?: string } } | undefined)?.data;
    if (data?.csrfToken) this.csrf = data.csrfToken;
    return response;
  }

  delete<T = any>(route: string, headers?: Record<string, string>) {
    return this.request<T>('DELETE', route, { headers });
  }

  patch<T = any>(route: string, json: unknown) {
    return this.request<T>('PATCH', route, { json });
  }

  login(email: string, password: string): Promise<ApiResponse> {
    return this.post('/auth/login', { email, password });
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
