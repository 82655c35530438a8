// The machinery of the hostile-input tables. A row is one object: an input (bytes from the
// corpus, damaged, or written by hand), what is done with it (a job, or a preview) and what must
// happen (the upload or the request refused with a code, the task failed with a code, or the task
// completed for a stated reason). `describeHostileTable` plays the rows against a real server
// process and after each row (or wave of rows run together) asserts that the process is still the
// one it started (alive, answering /healthz) and that the data directory holds nothing but the
// database, the files the API lists as live and ALLOWED_DATA_FILES.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { loadConfig } from '../../src/config.js';
import { getOperation } from '../../src/operations/registry.js';
import { createServices } from '../../src/services.js';
import { freePort, startProc, stopProc, waitServing, type Proc } from '../e2e/processes.js';
import { Client, corpusFile, freshDatabase, tempDir, type ApiResponse, type Dialect } from '../helpers.js';
import { startOrigin } from '../delivery/helpers.js';

// ---------------------------------------------------------------------------------------------
// What a row is

export interface HostileContext {
  /** The server's DATA_DIR. */
  dataDir: string;
  /** Another account's PNG, uploaded before any row runs: a row may try to reach it. */
  victim: { fileId: string; storagePath: string };
}

export interface HostileInput {
  /** Names the input in the rows' names; rows whose inputs share a label share one upload. */
  label: string;
  filename: string;
  /** The bytes uploaded (built once per label; a builder may be asynchronous). */
  bytes(ctx: HostileContext): Buffer | Promise<Buffer>;
}

/** The ids a row's options may name: its own input, a clean image of the same account, the victim's file. */
export interface RowIds {
  input: string;
  clean: string;
  victim: string;
}

export type Expectation =
  /** The upload answers `status` with the error `code`; nothing else is tried. */
  | { upload: 'refused'; status: number; code: string }
  /** The job request (or the preview) answers `status` with the error `code`. */
  | { request: 'refused'; status: number; code: string }
  | { task: 'failed'; code: string }
  /** The decoder legitimately recovers; `because` says why that is honest, not a gap. */
  | { task: 'completed'; because: string }
  /** A preview answers one of `statuses` (an image when 200, PREVIEW_UNAVAILABLE when 415). */
  | { preview: number[]; because: string };

export interface HostileRow {
  /** Defaults to "<input label> → <kind or preview>". */
  name?: string;
  input: HostileInput;
  /**
   * A job kind and its options. Given as an object, the row's input is added as `fileId` (or
   * `fileIds` for multi-input kinds); given as a function of the ids, the options place them.
   */
  job?: { kind: string; options?: Record<string, unknown> | ((ids: RowIds) => Record<string, unknown>) };
  /** Or a preview of the input. */
  preview?: { width?: number; height?: number };
  /**
   * Or a delivery URL (/r/…) with this transform, of the row's input (or of `source`: another
   * account's file, or `o/evil/<path>` on the table's hostile origin), signed by the attacker's
   * key unless `signature` says otherwise.
   */
  delivery?: { transform: string; source?: 'victim' | `o/${string}`; signature?: 'wrong' | '_' };
  expect: Expectation;
  /** Also played on PostgreSQL (SQLite plays every row). */
  everyDialect?: boolean;
  /** Further checks once the row has been played and the expectation holds. */
  verify?(result: RowResult, ctx: HostileContext & { client: Client }): Promise<void> | void;
}

export interface RowResult {
  upload?: ApiResponse;
  fileId?: string;
  /** The job request's or the preview's response. */
  response?: ApiResponse;
  /** The task when it finished (completed, failed or canceled). */
  task?: any;
  /** A completed task's first output, downloaded. */
  output?: ApiResponse;
  /** The server after the row's wave: the same process, answering /healthz. */
  alive: boolean;
  /** When it was not: the end of what the process wrote. */
  lastOutput?: string;
  /** Files under DATA_DIR after the row's wave that nothing accounts for. */
  strays: string[];
  /** Lines the server logged at level error or above while the row's wave played. */
  errorLogs: string[];
  /** A request of this row that could not be made at all (the server gone). */
  error?: string;
}

/** What playing a row gives, before the server is checked after it. */
type Played = Omit<RowResult, 'alive' | 'lastOutput' | 'strays' | 'errorLogs'>;

export const fails = (code: string): Expectation => ({ task: 'failed', code });
export const completes = (because: string): Expectation => ({ task: 'completed', because });
export const uploadRefused = (status: number, code: string): Expectation => ({ upload: 'refused', status, code });
export const refused = (status: number, code: string): Expectation => ({ request: 'refused', status, code });
export const previewAnswers = (statuses: number[], because: string): Expectation => ({ preview: statuses, because });

/**
 * Files under DATA_DIR (paths relative to it, '/'-separated) that may be there besides the
 * objects of live files: add a rule here, with the reason, when the service gains files of its
 * own. `liveFileIds` holds every file the API lists as live.
 */
export const ALLOWED_DATA_FILES: { allows(file: string, liveFileIds: ReadonlySet<string>): boolean; why: string }[] = [
  { allows: (file) => /^[^/]+\.db(-wal|-shm|-journal)?$/.test(file), why: 'the SQLite database' },
  { allows: (file) => file === 'upload-signing.key', why: 'the generated HMAC key of local upload URLs' },
  {
    allows: (file, live) => live.has(/^objects\/previews\/([^/]+)\//.exec(file)?.[1] ?? ''),
    why: 'cached previews of live files',
  },
  // Whole objects only: a write cut short leaves a temporary name, which is a stray.
  { allows: (file) => /^objects\/renders\/[0-9a-f]{64}$/.test(file), why: 'stored delivery-URL renders (a cache indexed by render_cache)' },
  { allows: (file) => /^objects\/origin-objects\/[0-9a-f]{40}$/.test(file), why: 'objects fetched from origins, kept to be revalidated' },
];

// ---------------------------------------------------------------------------------------------
// Inputs

/** A corpus file as it is. */
export function corpusInput(relative: string, label = path.basename(relative)): HostileInput {
  return { label, filename: path.basename(relative), bytes: () => fs.readFileSync(corpusFile(relative)) };
}

/** The first `fraction` of the input's bytes. */
export function truncated(input: HostileInput, fraction: number): HostileInput {
  return {
    label: `${input.label} cut to ${Math.round(fraction * 100)} %`,
    filename: input.filename,
    bytes: async (ctx) => {
      const bytes = await input.bytes(ctx);
      return bytes.subarray(0, Math.floor(bytes.length * fraction));
    },
  };
}

/** The first `bytes` bytes of the input (the issue's "a real PNG truncated to its first 60 KB"). */
export function firstBytes(input: HostileInput, count: number): HostileInput {
  return {
    label: `${input.label} cut to ${count} bytes`,
    filename: input.filename,
    bytes: async (ctx) => (await input.bytes(ctx)).subarray(0, count),
  };
}

/**
 * `flips` single-bit flips at pseudo-random places (a fixed seed: the same bytes every run)
 * past the first 10 % of the file, so the magic bytes and most headers still read.
 */
export function bitFlipped(input: HostileInput, flips = 32, seed = 1): HostileInput {
  return {
    label: `${input.label} with ${flips} bits flipped`,
    filename: input.filename,
    bytes: async (ctx) => {
      const out = Buffer.from(await input.bytes(ctx));
      let state = seed;
      const random = () => (state = (state * 1_103_515_245 + 12_345) & 0x7fffffff) / 0x7fffffff;
      const from = Math.floor(out.length * 0.1);
      for (let i = 0; i < flips; i++) {
        const at = from + Math.floor(random() * (out.length - from));
        out[at]! ^= 1 << Math.floor(random() * 8);
      }
      return out;
    },
  };
}

/** A PNG whose IDAT chunks hold random bytes (CRCs recomputed, so only the pixel data is bad). */
export function garbageIdat(input: HostileInput): HostileInput {
  return {
    label: `${input.label} with garbage IDAT`,
    filename: input.filename,
    bytes: async (ctx) => {
      const png = await input.bytes(ctx);
      const parts = [png.subarray(0, 8)];
      let state = 7;
      for (let at = 8; at + 12 <= png.length;) {
        const length = png.readUInt32BE(at);
        const type = png.subarray(at + 4, at + 8);
        let data = png.subarray(at + 8, at + 8 + length);
        if (type.toString('latin1') === 'IDAT') {
          data = Buffer.from(data.map(() => (state = (state * 1_103_515_245 + 12_345) & 0x7fffffff) & 0xff));
        }
        const header = Buffer.alloc(8);
        header.writeUInt32BE(length);
        type.copy(header, 4);
        const crc = Buffer.alloc(4);
        crc.writeUInt32BE(crc32(Buffer.concat([type, data])));
        parts.push(header, data, crc);
        at += 12 + length;
      }
      return Buffer.concat(parts);
    },
  };
}

function crc32(bytes: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

// ---------------------------------------------------------------------------------------------
// Playing a table

export interface TableOptions {
  /**
   * Rows played together before the server is checked. 1 (the default) checks after every row
   * and pins a stray file on its row; larger waves run tasks side by side, for big tables.
   */
  waveSize?: number;
  /** Requests in flight at once within a wave; default 8. */
  concurrency?: number;
  /** Extra environment for the server. */
  env?: Record<string, string>;
  /** Start a hostile origin on a loopback port, registered for the attacker as `evil` (delivery rows). */
  origin?: boolean;
}

export const rowName = (row: HostileRow): string =>
  row.name ?? `${row.input.label} → ${row.job ? row.job.kind : row.preview ? 'preview' : row.delivery ? `/r/ ${row.delivery.transform}` : 'upload'}`;

/**
 * A describe block that starts a server process on `dialect`, plays `rows` (on PostgreSQL only
 * those marked everyDialect) and reports one test per row.
 */
export function describeHostileTable(title: string, rows: HostileRow[], dialect: Dialect, options: TableOptions = {}): void {
  // HOSTILE_ROWS=<text> plays only the rows whose name contains it (while writing a row).
  const only = process.env.HOSTILE_ROWS;
  const played = (dialect === 'sqlite' ? rows : rows.filter((row) => row.everyDialect)).filter((row) => !only || rowName(row).includes(only));
  const names = new Set<string>();
  for (const row of played) {
    assert.ok(!names.has(rowName(row)), `two rows are named "${rowName(row)}": give one a name`);
    names.add(rowName(row));
  }

  describe(`${title} (${dialect})`, () => {
    let harness: Harness | undefined;
    const results = new Map<HostileRow, RowResult>();
    let stopped: string | undefined;

    before(async () => {
      harness = await startHarness(dialect, options.env ?? {}, options.origin ?? false);
      const waveSize = options.waveSize ?? 1;
      for (let at = 0; at < played.length && !stopped; at += waveSize) {
        const wave = played.slice(at, at + waveSize);
        const logsBefore = harness.proc.logs.length;
        const partial = new Map<HostileRow, Played>();
        await eachLimited(wave, options.concurrency ?? 8, async (row) => partial.set(row, await playRow(harness!, row)));
        const alive = await harness.alive();
        const strays = alive ? await strayFiles(harness) : [];
        const errorLogs = harness.proc.logs
          .slice(logsBefore)
          .filter((l) => Number(l.level) >= 50)
          .map((l) => JSON.stringify(l).slice(0, 500));
        const lastOutput = alive ? undefined : harness.proc.output().slice(-3000);
        for (const row of wave) results.set(row, { ...partial.get(row)!, alive, lastOutput, strays, errorLogs });
        if (!alive) stopped = `not played: the server died in the wave of rows ${at + 1}–${at + wave.length}`;
      }
    });

    after(async () => {
      await harness?.close();
    });

    for (const row of played) {
      it(rowName(row), async () => {
        const result = results.get(row);
        assert.ok(result, stopped ?? 'the row was not played (the setup failed)');
        assertRow(row, result);
        await row.verify?.(result, { ...harness!.context, client: harness!.client });
      });
    }
  });
}

function assertRow(row: HostileRow, result: RowResult): void {
  const expect = row.expect;
  const show = (r: ApiResponse | undefined) =>
    r ? `${r.status} ${Buffer.isBuffer(r.body) ? `<${r.body.length} bytes>` : JSON.stringify(r.body)}` : 'no response';
  assert.ok(result.alive, `the server process died or stopped answering /healthz in this row's wave; it wrote:\n${result.lastOutput}`);
  assert.equal(result.error, undefined, `a request failed outright: ${result.error}`);
  if ('upload' in expect) {
    assert.equal(result.upload?.status, expect.status, `upload: ${show(result.upload)}`);
    assert.equal(result.upload?.body?.error?.code, expect.code, `upload: ${show(result.upload)}`);
  } else {
    assert.equal(result.upload?.status, 201, `the upload was refused: ${show(result.upload)}`);
    if ('request' in expect) {
      assert.equal(result.response?.status, expect.status, show(result.response));
      assert.equal(result.response?.body?.error?.code, expect.code, show(result.response));
    } else if ('preview' in expect) {
      assert.ok(result.response && expect.preview.includes(result.response.status), `preview: ${show(result.response)}`);
      if (result.response.status === 200) assert.match(result.response.headers.get('content-type') ?? '', /^image\/(png|jpeg)/);
      else assert.equal(result.response.body?.error?.code, 'PREVIEW_UNAVAILABLE', show(result.response));
    } else {
      assert.equal(result.response?.status, 202, `the job was refused: ${show(result.response)}`);
      const task = result.task;
      assert.ok(task, 'the task did not finish');
      if (expect.task === 'failed') {
        assert.equal(
          task.status,
          'failed',
          `expected ${expect.code}, got ${JSON.stringify({ status: task.status, error: task.error, result: task.result })}`,
        );
        assert.equal(task.error?.code, expect.code, JSON.stringify(task.error));
      } else {
        assert.equal(
          task.status,
          'completed',
          `expected an output (${expect.because}), got ${JSON.stringify({ status: task.status, error: task.error })}`,
        );
        assert.equal(result.output?.status, 200, `the output cannot be downloaded: ${show(result.output)}`);
        assert.ok(result.output.body.length > 0, 'the output is empty');
      }
    }
  }
  assert.deepEqual(result.strays, [], 'files under the data directory that no live file accounts for');
  assert.deepEqual(result.errorLogs, [], 'the server logged errors while playing this row');
}

async function playRow(harness: Harness, row: HostileRow): Promise<Played> {
  const result: Played = {};
  try {
    result.upload = await harness.upload(row.input);
    if (result.upload.status !== 201) return result;
    const fileId: string = result.upload.body.data.fileId;
    result.fileId = fileId;
    if (row.preview) {
      const query = new URLSearchParams(Object.entries(row.preview).map(([k, v]) => [k, String(v)])).toString();
      result.response = await harness.client.get(`/api/preview/${fileId}${query ? `?${query}` : ''}`);
      return result;
    }
    if (row.delivery) {
      const { transform, source, signature } = row.delivery;
      const target = source === 'victim' ? harness.context.victim.fileId : (source ?? fileId);
      const signed = `${transform}/${target}`;
      const hmac = crypto
        .createHmac('sha256', signature === 'wrong' ? 'not-the-secret' : harness.signingKey.secret)
        .update(signed)
        .digest('base64url');
      result.response = await harness.publicClient.get(`/r/${harness.signingKey.keyId}/${signature === '_' ? '_' : hmac}/${signed}`);
      return result;
    }
    if (!row.job) return result;
    const ids: RowIds = { input: fileId, clean: harness.cleanFileId, victim: harness.context.victim.fileId };
    const given = row.job.options;
    const options =
      typeof given === 'function' ? given(ids) : { ...(getOperation(row.job.kind)?.multiInput ? { fileIds: [fileId] } : { fileId }), ...given };
    result.response = await harness.client.post(`/api/process/${row.job.kind}`, options);
    if (result.response.status !== 202) return result;
    result.task = await harness.client.waitForTask(result.response.body.data.taskId, 150_000);
    if (result.task.status === 'completed') result.output = await harness.client.get(`/api/download/${result.task.outputFileId}`);
  } catch (err) {
    result.error = String((err as Error)?.stack ?? err);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// The server under test

interface Harness {
  proc: Proc;
  client: Client;
  /** No key: for delivery URLs. */
  publicClient: Client;
  /** The attacker's signing key for delivery URLs. */
  signingKey: { keyId: string; secret: string };
  victimClient: Client;
  context: HostileContext;
  cleanFileId: string;
  upload(input: HostileInput): Promise<ApiResponse>;
  alive(): Promise<boolean>;
  close(): Promise<void>;
}

const PLANS = {
  pro: { requestsPerSecond: 100_000 },
  max: { requestsPerSecond: 100_000, monthlyTasks: 1_000_000, maxQueuedTasks: 100_000, dailyBatchFiles: 100_000, batchSize: 200 },
};

async function startHarness(dialect: Dialect, extraEnv: Record<string, string>, withOrigin: boolean): Promise<Harness> {
  const root = tempDir('imgapi-hostile-');
  const dataDir = path.join(root, 'data');
  fs.mkdirSync(dataDir);
  const database = await freshDatabase(dialect, dataDir);
  const plansFile = path.join(root, 'plans.json'); // outside DATA_DIR: the data directory holds only what the service writes
  fs.writeFileSync(plansFile, JSON.stringify(PLANS));
  const port = await freePort();
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    DATABASE_URL: dialect === 'sqlite' ? `sqlite:${path.join(dataDir, 'imgapi.db')}` : database.url,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    WORKER_CONCURRENCY: '2',
    QUEUE_POLL_MS: '100',
    TASK_TIMEOUT_SECONDS: '60',
    CONVERSION_TIMEOUT_SECONDS: '60',
    PLANS_FILE: plansFile,
    ...extraEnv,
  };

  // Accounts straight in the database, before the server starts (the CLI would do the same).
  const setup = await createServices(loadConfig(env), { logger: pino({ level: 'silent' }) });
  let attackerKey: string;
  let victimKey: string;
  try {
    const attacker = await createAccount(setup.database, setup.clock, { email: 'attacker@example.com', plan: 'max' });
    const victim = await createAccount(setup.database, setup.clock, { email: 'victim@example.com', plan: 'pro' });
    attackerKey = (await createApiKey(setup.database, setup.clock, attacker.id, 'hostile')).key;
    victimKey = (await createApiKey(setup.database, setup.clock, victim.id, 'victim')).key;
  } finally {
    await setup.close();
  }

  const origin = withOrigin ? await startOrigin(fs.readFileSync(corpusFile('images/sharp/320x240.jpg')), 1_000_000) : undefined;
  if (origin) env.ORIGIN_ALLOW_PRIVATE_NETWORKS = '1';
  const proc = startProc(`hostile-${dialect}`, ['serve'], env);
  const url = `http://127.0.0.1:${port}`;
  const close = async () => {
    await stopProc(proc, 'SIGTERM');
    await origin?.close();
    await database.drop();
    fs.rmSync(root, { recursive: true, force: true });
  };
  try {
    await waitServing(proc, url);
    const client = new Client(url, attackerKey);
    const victimClient = new Client(url, victimKey);
    const victimFileId = await victimClient.uploadOk(corpusFile('images/sharp/320x240.jpg'), 'victim-secret.jpg');
    const cleanFileId = await client.uploadOk(corpusFile('images/sharp/320x240.jpg'), 'clean.jpg');
    const signingKey = (await client.post('/api/signing-keys', {})).body.data as { keyId: string; secret: string };
    if (origin) assert.equal((await client.post('/api/origins', { name: 'evil', baseUrl: origin.url })).status, 201);
    const context: HostileContext = {
      dataDir,
      victim: { fileId: victimFileId, storagePath: path.join(dataDir, 'objects', 'uploads', victimFileId) },
    };
    const uploads = new Map<string, { filename: string; response: Promise<ApiResponse> }>();
    return {
      proc,
      client,
      publicClient: new Client(url),
      signingKey,
      victimClient,
      context,
      cleanFileId,
      upload(input) {
        const known = uploads.get(input.label);
        if (known) {
          assert.equal(known.filename, input.filename, `two inputs are labelled "${input.label}"`);
          return known.response;
        }
        const response = Promise.resolve(input.bytes(context)).then((bytes) => client.upload(bytes, input.filename));
        uploads.set(input.label, { filename: input.filename, response });
        return response;
      },
      async alive() {
        if (!proc.alive()) return false;
        const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5_000) }).catch(() => undefined);
        return response?.status === 200;
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Files under DATA_DIR that are neither allowed nor the object of a file the API lists as live. */
async function strayFiles(harness: Harness): Promise<string[]> {
  const live = new Set<string>();
  const liveFileIds = new Set<string>();
  const outputs = new Map<string, number>();
  for (const client of [harness.client, harness.victimClient]) {
    let cursor: string | undefined;
    do {
      const response = await client.get(`/api/files?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      assert.equal(response.status, 200, JSON.stringify(response.body));
      for (const file of response.body.data.files) {
        liveFileIds.add(file.fileId);
        if (file.origin === 'output') outputs.set(file.taskId, (outputs.get(file.taskId) ?? 0) + 1);
        else live.add(`objects/uploads/${file.fileId}`);
      }
      cursor = response.body.data.nextCursor ?? undefined;
    } while (cursor);
  }
  // Output objects are keyed by task and position: a task with n live outputs owns 0…n-1.
  for (const [taskId, count] of outputs) for (let i = 0; i < count; i++) live.add(`objects/outputs/${taskId}/${i}`);
  const files = fs
    .readdirSync(harness.context.dataDir, { recursive: true, withFileTypes: true })
    .filter((entry) => !entry.isDirectory())
    .map((entry) => path.relative(harness.context.dataDir, path.join(entry.parentPath, entry.name)).split(path.sep).join('/'));
  return files.filter((file) => !live.has(file) && !ALLOWED_DATA_FILES.some((rule) => rule.allows(file, liveFileIds))).sort();
}

async function eachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}
