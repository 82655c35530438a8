// The one place that reads the environment. Every variable is declared once in VARIABLES (its
// default as the docs show it, what it does, its parser); docs/configuration.md's table and `imgapi help`
// are generated from it (`npm run docs:config`). Every value is validated at boot and every
// problem names its variable; all problems are reported together.
//
// To add a variable: a row in VARIABLES (in the order docs/configuration.md should list it), a field in
// Config, and one line in loadConfig reading it with `read('NAME')`; then `npm run docs:config`.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repositoryRoot } from './version.js';

export type DatabaseConfig = { dialect: 'sqlite'; file: string } | { dialect: 'postgres'; url: string };

export interface Config {
  port: number;
  host: string;
  publicUrl: string;
  dataDir: string;
  database: DatabaseConfig;
  plansFile: string | undefined;
  /** Who may create an account from the dashboard: anyone, holders of an invite code, nobody. */
  signupMode: SignupMode;
  /** A dashboard session lasts this long after login (renewed while used). */
  sessionTtlMs: number;
  /** The built dashboard (web/dist); served at / when it holds an index.html. */
  dashboardDir: string;
  /** Take the client address from X-Forwarded-For (behind a reverse proxy); used to throttle logins. */
  trustProxy: boolean;
  /** A request whose body is still arriving this long after it started is answered 408 REQUEST_TIMEOUT. */
  requestTimeoutMs: number;
  /** A body that sends no byte for this long is answered 408 REQUEST_TIMEOUT. */
  bodyStallMs: number;
  workerConcurrency: number;
  /** AI tasks (the `ai` lane) run at once by this process, in slots apart from workerConcurrency's. */
  aiConcurrency: number;
  taskTimeoutMs: number;
  /** An AI upscale's (`upscale` with `model: "esrgan"`) time limit, in place of taskTimeoutMs. */
  aiTaskTimeoutMs: number;
  leaseMs: number;
  pollIntervalMs: number;
  sweepIntervalMs: number;
  /** libvips threads per image (sharp defaults to 1 on glibc Linux, leaving cores idle). */
  imageThreads: number;
  /** Where the bytes live: a directory under DATA_DIR (default) or an S3-compatible bucket. */
  storage: StorageConfig;
  /** How long a presigned direct-upload URL stays valid. */
  uploadUrlTtlMs: number;
  /** HMAC key for local-storage upload URLs; when unset, one is generated and kept in DATA_DIR. */
  uploadSigningSecret: string | undefined;
  logLevel: string;
  /** LibreOffice and poppler: the programs document tasks run (a name on PATH, or a path). */
  sofficeCommand: string;
  pdftoppmCommand: string;
  pdfinfoCommand: string;
  ffmpegCommand: string;
  /** A LibreOffice run taking longer is killed (its whole process group): CONVERSION_TIMEOUT. */
  conversionTimeoutMs: number;
  /** LibreOffice processes this process runs at once; further conversions wait their turn. */
  converterConcurrency: number;
  /** Conversions one warm LibreOffice instance makes before it is replaced; 0: one soffice per document. */
  converterRestartAfter: number;
  /** Whether LibreOffice and poppler run in the bwrap sandbox (src/programs/sandbox.ts), and bwrap's program. */
  converterSandbox: SandboxMode;
  bwrapCommand: string;
  /** Previews one API process renders at once, and how many more may wait; past that 503. */
  previewConcurrency: number;
  previewQueue: number;
  /** Webhook deliveries one worker process makes at once, apart from its image-task slots. */
  webhookConcurrency: number;
  /** Deliver webhooks to loopback, private and link-local addresses too (self-hosters, tests). */
  webhookAllowPrivateNetworks: boolean;
  /** Delivery-URL renders this process makes at once (src/delivery/). */
  renderConcurrency: number;
  /** The longest a render waits for a slot; past that 503 RENDER_BUSY. */
  renderQueueMs: number;
  /** A render taking longer is abandoned: 504 RENDER_TIMEOUT. */
  renderTimeoutMs: number;
  /** The Cache-Control of a delivered render. */
  renderCacheControl: string;
  /** Bytes of stored renders kept; past that the least recently used go. */
  renderCacheMaxBytes: number;
  /** RENDER_MEMORY_CACHE_BYTES: small renders kept in this process's memory too. */
  renderMemoryCacheBytes: number;
  /** How long a fetched origin object is served before it is revalidated. */
  originCacheMs: number;
  /** An origin fetch taking longer fails: 502 ORIGIN_FAILED. */
  originTimeoutMs: number;
  /** Fetch origins on loopback, private and link-local addresses too. */
  originAllowPrivateNetworks: boolean;
}

export type StorageConfig =
  | { kind: 'local'; root: string }
  | {
      kind: 's3';
      bucket: string;
      /** For S3-compatible stores (MinIO, R2, Ceph…); unset for AWS itself. */
      endpoint: string | undefined;
      region: string;
      forcePathStyle: boolean;
      /** From AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; unset: the SDK's default chain (profiles, instance roles). */
      credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | undefined;
    };

const SANDBOX_MODES = ['auto', 'required', 'off'] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];

const SIGNUP_MODES = ['open', 'invite', 'closed'] as const;
export type SignupMode = (typeof SIGNUP_MODES)[number];

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

// ---------------------------------------------------------------------------------------------
// The variables

/** A variable's value is unusable; the message names the variable. */
class Problem extends Error {}

interface Variable<T> {
  /** The default as docs/configuration.md and `imgapi help` show it (Markdown). */
  default: string;
  /** What it does, one line of Markdown. */
  doc: string;
  /** The value from the variable's text (undefined when unset or empty); throws Problem when unusable. */
  parse(raw: string | undefined, name: string): T;
}

type Parser<T> = Pick<Variable<T>, 'default' | 'parse'>;

function integer(fallback: number, min: number, max: number, shown = `\`${fallback}\``): Parser<number> {
  return {
    default: shown,
    parse: (raw, name) => {
      if (raw === undefined) return fallback;
      const value = Number(raw);
      if (!Number.isInteger(value) || value < min || value > max) throw new Problem(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
      return value;
    },
  };
}

function oneOf<const T extends readonly string[]>(choices: T, fallback: T[number]): Parser<T[number]> {
  const list = choices.length === 2 ? choices.join(' or ') : `one of ${choices.join(', ')}`;
  return {
    default: `\`${fallback}\``,
    parse: (raw, name) => {
      if (raw === undefined) return fallback;
      if (!(choices as readonly string[]).includes(raw)) throw new Problem(`${name} must be ${list}, got "${raw}"`);
      return raw as T[number];
    },
  };
}

/** true/1 or false/0; undefined when unset (the default may depend on other variables). */
function flag(shown: string): Parser<boolean | undefined> {
  return {
    default: shown,
    parse: (raw, name) => {
      if (raw === undefined) return undefined;
      if (!['0', '1', 'true', 'false'].includes(raw)) throw new Problem(`${name} must be true or false, got "${raw}"`);
      return raw === '1' || raw === 'true';
    },
  };
}

/** Free text; undefined when unset. */
function text(shown = '—'): Parser<string | undefined> {
  return { default: shown, parse: (raw) => raw };
}

/** Free text with a default. */
function string(fallback: string): Parser<string> {
  return { default: `\`${fallback}\``, parse: (raw) => raw ?? fallback };
}

/** A program, run without a shell: a bare name looked up on PATH, or a path (resolved now). */
function command(fallback: string): Parser<string> {
  return {
    default: `\`${fallback}\``,
    parse: (raw) => {
      const value = raw?.trim();
      if (!value) return fallback;
      return value.includes('/') ? path.resolve(value) : value;
    },
  };
}

const cpuCount = Math.max(1, os.availableParallelism());

/** Every environment variable the service reads, in the order docs/configuration.md lists them. */
export const VARIABLES = {
  PORT: { ...integer(3000, 0, 65535), doc: 'HTTP port' },
  HOST: { ...string('0.0.0.0'), doc: 'address to listen on' },
  PUBLIC_URL: {
    default: '`http://localhost:$PORT`',
    doc: 'the address clients use: presigned upload URLs and the links the service gives point at it',
    parse: (raw, name) => {
      if (raw === undefined) return undefined;
      const url = raw.replace(/\/+$/, '');
      if (!/^https?:\/\/[^/]+/.test(url)) throw new Problem(`${name} must be an http(s) URL, got "${raw}"`);
      return url;
    },
  } satisfies Variable<string | undefined>,
  DATA_DIR: {
    default: '`./data`',
    doc: 'SQLite database and stored files (`objects/`); must be writable',
    parse: (raw) => path.resolve(raw ?? './data'),
  } satisfies Variable<string>,
  DATABASE_URL: {
    default: '`sqlite:$DATA_DIR/imgapi.db`',
    doc: '`sqlite:/path/file.db` or `postgres://user@host:5432/db`',
    parse: parseDatabaseUrl,
  } satisfies Variable<DatabaseConfig | undefined>,
  PLANS_FILE: {
    default: '—',
    doc: 'JSON merged over the default plan table, e.g. `{"pro":{"requestsPerSecond":50}}`; read at start',
    parse: (raw, name) => {
      if (raw === undefined) return undefined;
      const file = path.resolve(raw);
      if (!fs.existsSync(file)) throw new Problem(`${name}: no such file "${file}"`);
      return file;
    },
  } satisfies Variable<string | undefined>,
  WORKER_CONCURRENCY: {
    ...integer(cpuCount, 0, 256, 'CPU count'),
    doc: 'image tasks run at once by this process (0: none, and no AI task either: an API-only process)',
  },
  AI_CONCURRENCY: {
    ...integer(1, 0, 16),
    doc: 'AI tasks (`upscale` with `model: "esrgan"`, or a pipeline with such a step) run at once by this process, in slots of their own: they never take a `WORKER_CONCURRENCY` slot, so image tasks do not wait behind them. Their networks run one at a time on one inference thread per process, so more than 1 only queues them there (0: this process runs none)',
  },
  TASK_TIMEOUT_SECONDS: { ...integer(120, 1, 86_400), doc: 'a task running longer fails with `PROCESSING_TIMEOUT`' },
  AI_TASK_TIMEOUT_SECONDS: {
    ...integer(900, 1, 86_400),
    doc: 'the time limit of an AI upscale (`upscale` with `model: "esrgan"`), in place of `TASK_TIMEOUT_SECONDS`; longer fails with `PROCESSING_TIMEOUT`',
  },
  TASK_LEASE_SECONDS: { ...integer(30, 2, 3600), doc: 'how long a claimed task stays with a worker that stops heart-beating' },
  QUEUE_POLL_MS: { ...integer(2000, 10, 60_000), doc: 'how often idle workers look for work they were not woken for' },
  IMAGE_THREADS: { ...integer(cpuCount, 1, 256, 'CPU count'), doc: 'libvips threads per image being processed' },
  SWEEP_INTERVAL_SECONDS: { ...integer(60, 1, 86_400), doc: 'how often expired files are deleted (one process does it per interval)' },
  REQUEST_TIMEOUT_SECONDS: {
    ...integer(600, 1, 86_400),
    doc: 'a request whose body is still arriving this long after it started is answered 408 `REQUEST_TIMEOUT`',
  },
  BODY_STALL_SECONDS: { ...integer(30, 1, 3600), doc: 'a request body that sends no byte for this long is answered 408 `REQUEST_TIMEOUT`' },
  LOG_LEVEL: { ...oneOf(LOG_LEVELS, 'info'), doc: '`fatal` … `trace`, or `silent`' },
  SOFFICE_COMMAND: {
    ...command('soffice'),
    doc: "LibreOffice's program (a name on `PATH` or a path), run as `soffice --headless --convert-to pdf …`",
  },
  PDFTOPPM_COMMAND: { ...command('pdftoppm'), doc: "poppler's page rasteriser: a name on `PATH` or a path" },
  PDFINFO_COMMAND: { ...command('pdfinfo'), doc: "poppler's document inspector: a name on `PATH` or a path" },
  FFMPEG_COMMAND: {
    ...command('ffmpeg'),
    doc: 'decodes and writes animated AVIF (AV1 image sequences), in the converter sandbox: a name on `PATH` or a path',
  },
  CONVERSION_TIMEOUT_SECONDS: {
    ...integer(120, 1, 3600),
    doc: 'a LibreOffice conversion running longer is killed (its whole process group) and its task fails with `CONVERSION_TIMEOUT`',
  },
  CONVERTER_CONCURRENCY: { ...integer(2, 1, 64), doc: 'LibreOffice conversions one process runs at once; the rest wait for a slot' },
  CONVERTER_RESTART_AFTER: {
    ...integer(10, 0, 1000),
    doc: 'documents one warm LibreOffice instance converts (one at a time, each closed and its files removed before the next) before it is replaced by a fresh one with a new profile; an instance is also replaced after any failure, timeout or cancel, and stopped after 5 idle minutes. `0`: a new LibreOffice for every document (slower: ~1 s of start-up each). Warm instances need python3-uno (installed by `npm start`); without it every document gets a new LibreOffice',
  },
  CONVERTER_SANDBOX: {
    // Secure by default: unconfined, a deck can draw any file the service can read (another
    // account's included). `auto` is for single-tenant installs where bubblewrap cannot run.
    ...oneOf(SANDBOX_MODES, 'required'),
    doc: 'LibreOffice and poppler run in a bubblewrap sandbox that sees only their work directory: `required` (default; where it cannot be set up, presentation tasks fail `CONVERSION_FAILED` and `/readyz` says why), `auto` (sandboxed when possible, else unconfined and reported by `/readyz`: only for single-tenant installs), `off`',
  },
  BWRAP_COMMAND: { ...command('bwrap'), doc: "bubblewrap's program (package `bubblewrap`): a name on `PATH` or a path" },
  PREVIEW_CONCURRENCY: { ...integer(2, 1, 64), doc: 'previews one API process renders at once' },
  PREVIEW_QUEUE: { ...integer(16, 0, 10_000), doc: 'previews that may wait for a slot; past that, 503' },
  WEBHOOK_CONCURRENCY: {
    ...integer(4, 0, 256),
    doc: 'webhook deliveries a worker process makes at once, in slots of their own: a slow receiver never holds a slot meant for image tasks (0: this process delivers none)',
  },
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: {
    ...flag('`false`'),
    doc: '`true` delivers webhooks to loopback, private (RFC 1918, ULA), link-local and other non-public addresses too: for an install whose receivers are on its internal network. Off, such URLs are refused at creation and at each delivery',
  },
  RENDER_CONCURRENCY: {
    // Two per CPU: with one, the CPUs idle while a render's file reads (and, for a source libvips
    // reads the header of, that read) go through libuv and back (docs/benchmarks.md, 2026-11-27:
    // JPEG misses 0.67 → 0.76 of bare sharp).
    ...integer(2 * cpuCount, 1, 256, 'twice the CPU count'),
    doc: 'delivery-URL renders (cache misses of `/r/…`) this process makes at once, beside the task workers',
  },
  RENDER_QUEUE_SECONDS: {
    ...integer(5, 0, 600),
    doc: 'the longest a delivery-URL render waits for a slot; when it would wait longer the answer is 503 `RENDER_BUSY` with `Retry-After`',
  },
  RENDER_TIMEOUT_SECONDS: { ...integer(20, 1, 3600), doc: 'a delivery-URL render running longer is abandoned: 504 `RENDER_TIMEOUT`' },
  RENDER_CACHE_CONTROL: {
    ...string('public, max-age=31536000, immutable'),
    doc: 'the `Cache-Control` of a delivered render (a URL names one render for ever: its source version is part of the cache key)',
  },
  RENDER_CACHE_MAX_BYTES: {
    ...integer(10 * 1024 ** 3, 0, 2 ** 52, '`10737418240` (10 GiB)'),
    doc: "bytes of stored renders (in the storage, under `renders/`); past it the least recently used are deleted. Not counted in any account's `storageBytes`",
  },
  RENDER_MEMORY_CACHE_BYTES: {
    ...integer(64 * 1024 ** 2, 0, 2 ** 40, '`67108864` (64 MiB)'),
    doc: 'bytes of recently served renders (each up to 256 KiB) each process also keeps in memory, so that a hit reads no file; `0` keeps none. A purge (file, origin or preset deleted, preset changed) drops them at once in its process, and in the others at once through PostgreSQL or within 0.9 s',
  },
  ORIGIN_CACHE_SECONDS: {
    ...integer(3600, 0, 30 * 86_400),
    doc: "how long an object fetched from an origin is used before it is revalidated with the origin's `ETag`/`Last-Modified`",
  },
  ORIGIN_TIMEOUT_SECONDS: { ...integer(10, 1, 600), doc: 'an origin fetch (connection, answer and body) taking longer fails: 502 `ORIGIN_FAILED`' },
  ORIGIN_ALLOW_PRIVATE_NETWORKS: {
    ...flag('`false`'),
    doc: '`true` lets origins be on loopback, private (RFC 1918, ULA), link-local and other non-public addresses. Off, such origins are refused at creation and at each fetch, on the address connected to',
  },
  SIGNUP_MODE: {
    ...oneOf(SIGNUP_MODES, 'invite'),
    doc: 'who can create an account in the dashboard: `open` (anyone), `invite` (a code from the operator page), `closed` (nobody; use the CLI)',
  },
  SESSION_TTL_HOURS: { ...integer(168, 1, 24 * 366), doc: 'how long a dashboard login lasts; renewed while it is used' },
  DASHBOARD_DIR: {
    default: '`web/dist`',
    doc: 'the built dashboard served at `/`',
    parse: (raw, name) => {
      if (raw === undefined) return path.join(repositoryRoot(), 'web', 'dist');
      const dir = path.resolve(raw);
      if (!fs.existsSync(path.join(dir, 'index.html'))) throw new Problem(`${name}: no index.html in "${dir}"`);
      return dir;
    },
  } satisfies Variable<string>,
  TRUST_PROXY: {
    ...flag('`false`'),
    doc: '`true` behind a reverse proxy: the client address (for login throttling) comes from `X-Forwarded-For`',
  },
  STORAGE: { ...oneOf(['local', 's3'], 'local'), doc: 'where file bytes live: `local` (`$DATA_DIR/objects`) or `s3` (an S3-compatible bucket)' },
  S3_BUCKET: {
    default: '—',
    doc: 'the bucket, which must exist; required with `STORAGE=s3`',
    parse: (raw, name) => {
      if (raw !== undefined && !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(raw)) throw new Problem(`${name} is not a valid bucket name, got "${raw}"`);
      return raw;
    },
  } satisfies Variable<string | undefined>,
  S3_ENDPOINT: {
    default: 'AWS',
    doc: "an S3-compatible store's address, e.g. `http://minio:9000`; unset for AWS S3",
    parse: (raw, name) => {
      if (raw === undefined) return undefined;
      const endpoint = raw.replace(/\/+$/, '');
      if (!/^https?:\/\/[^/]+$/.test(endpoint)) throw new Problem(`${name} must be an http(s) URL without a path, got "${raw}"`);
      return endpoint;
    },
  } satisfies Variable<string | undefined>,
  S3_REGION: { ...text('`$AWS_REGION`, else `us-east-1`'), doc: "the bucket's region" },
  AWS_REGION: { ...text('—'), doc: "the AWS SDK's region variable: the region when `S3_REGION` is unset" },
  AWS_DEFAULT_REGION: { ...text('—'), doc: 'read when neither `S3_REGION` nor `AWS_REGION` is set' },
  S3_FORCE_PATH_STYLE: {
    ...flag('`true` with `S3_ENDPOINT`, else `false`'),
    doc: '`https://host/bucket/key` addresses instead of `https://bucket.host/key`',
  },
  AWS_ACCESS_KEY_ID: {
    ...text(),
    doc: "S3 credentials, with `AWS_SECRET_ACCESS_KEY`; unset: the AWS SDK's default chain (`AWS_PROFILE`, web identity, instance or task role)",
  },
  AWS_SECRET_ACCESS_KEY: { ...text(), doc: 'the secret of `AWS_ACCESS_KEY_ID`' },
  AWS_SESSION_TOKEN: { ...text(), doc: 'a temporary session token with those credentials' },
  UPLOAD_URL_TTL_SECONDS: {
    // S3 accepts presigned URLs valid for up to 7 days.
    ...integer(900, 10, 7 * 86_400),
    doc: 'how long a direct-upload URL works (10 s to 7 days)',
  },
  UPLOAD_SIGNING_SECRET: {
    default: 'generated',
    doc: 'HMAC key of local-storage upload URLs, at least 32 characters; unset: generated once and kept in `$DATA_DIR/upload-signing.key` (mode 0600)',
    parse: (raw, name) => {
      if (raw !== undefined && raw.length < 32) throw new Problem(`${name} must be at least 32 characters (e.g. \`openssl rand -hex 32\`)`);
      return raw;
    },
  } satisfies Variable<string | undefined>,
} satisfies Record<string, Variable<unknown>>;

type Name = keyof typeof VARIABLES;
type Value<N extends Name> = ReturnType<(typeof VARIABLES)[N]['parse']>;
type Env = Record<string, string | undefined>;

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const values = new Map<Name, unknown>();
  /** The variable's value (parsed once); an unusable one is a problem, and its default stands in. */
  const read = <N extends Name>(name: N): Value<N> => {
    if (!values.has(name)) {
      const variable: Variable<unknown> = VARIABLES[name];
      const raw = env[name] === '' ? undefined : env[name];
      try {
        values.set(name, variable.parse(raw, name));
      } catch (err) {
        if (!(err instanceof Problem)) throw err;
        problems.push(err.message);
        values.set(name, variable.parse(undefined, name));
      }
    }
    return values.get(name) as Value<N>;
  };

  const port = read('PORT');
  const dataDir = read('DATA_DIR');
  const config: Config = {
    port,
    host: read('HOST'),
    publicUrl: read('PUBLIC_URL') ?? `http://localhost:${port}`,
    dataDir,
    database: read('DATABASE_URL') ?? { dialect: 'sqlite', file: path.join(dataDir, 'imgapi.db') },
    plansFile: read('PLANS_FILE'),
    signupMode: read('SIGNUP_MODE'),
    sessionTtlMs: read('SESSION_TTL_HOURS') * 3600_000,
    dashboardDir: read('DASHBOARD_DIR'),
    trustProxy: read('TRUST_PROXY') ?? false,
    requestTimeoutMs: read('REQUEST_TIMEOUT_SECONDS') * 1000,
    bodyStallMs: read('BODY_STALL_SECONDS') * 1000,
    workerConcurrency: read('WORKER_CONCURRENCY'),
    aiConcurrency: read('AI_CONCURRENCY'),
    taskTimeoutMs: read('TASK_TIMEOUT_SECONDS') * 1000,
    aiTaskTimeoutMs: read('AI_TASK_TIMEOUT_SECONDS') * 1000,
    leaseMs: read('TASK_LEASE_SECONDS') * 1000,
    pollIntervalMs: read('QUEUE_POLL_MS'),
    sweepIntervalMs: read('SWEEP_INTERVAL_SECONDS') * 1000,
    imageThreads: read('IMAGE_THREADS'),
    storage: read('STORAGE') === 's3' ? s3Storage(read, problems) : { kind: 'local', root: path.join(dataDir, 'objects') },
    uploadUrlTtlMs: read('UPLOAD_URL_TTL_SECONDS') * 1000,
    uploadSigningSecret: read('UPLOAD_SIGNING_SECRET'),
    logLevel: read('LOG_LEVEL'),
    sofficeCommand: read('SOFFICE_COMMAND'),
    pdftoppmCommand: read('PDFTOPPM_COMMAND'),
    pdfinfoCommand: read('PDFINFO_COMMAND'),
    ffmpegCommand: read('FFMPEG_COMMAND'),
    conversionTimeoutMs: read('CONVERSION_TIMEOUT_SECONDS') * 1000,
    converterConcurrency: read('CONVERTER_CONCURRENCY'),
    converterRestartAfter: read('CONVERTER_RESTART_AFTER'),
    converterSandbox: read('CONVERTER_SANDBOX'),
    bwrapCommand: read('BWRAP_COMMAND'),
    previewConcurrency: read('PREVIEW_CONCURRENCY'),
    previewQueue: read('PREVIEW_QUEUE'),
    webhookConcurrency: read('WEBHOOK_CONCURRENCY'),
    webhookAllowPrivateNetworks: read('WEBHOOK_ALLOW_PRIVATE_NETWORKS') ?? false,
    renderConcurrency: read('RENDER_CONCURRENCY'),
    renderQueueMs: read('RENDER_QUEUE_SECONDS') * 1000,
    renderTimeoutMs: read('RENDER_TIMEOUT_SECONDS') * 1000,
    renderCacheControl: read('RENDER_CACHE_CONTROL'),
    renderCacheMaxBytes: read('RENDER_CACHE_MAX_BYTES'),
    renderMemoryCacheBytes: read('RENDER_MEMORY_CACHE_BYTES'),
    originCacheMs: read('ORIGIN_CACHE_SECONDS') * 1000,
    originTimeoutMs: read('ORIGIN_TIMEOUT_SECONDS') * 1000,
    originAllowPrivateNetworks: read('ORIGIN_ALLOW_PRIVATE_NETWORKS') ?? false,
  };
  if (problems.length) throw new ConfigError(problems);
  return config;
}

/** The S3 variables are read only with STORAGE=s3: left-over ones do not stop a local setup. */
function s3Storage(read: <N extends Name>(name: N) => Value<N>, problems: string[]): StorageConfig {
  const bucket = read('S3_BUCKET') ?? '';
  if (!bucket) problems.push('S3_BUCKET is required when STORAGE=s3');
  const endpoint = read('S3_ENDPOINT');
  const accessKeyId = read('AWS_ACCESS_KEY_ID');
  const secretAccessKey = read('AWS_SECRET_ACCESS_KEY');
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    problems.push(
      `${accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID'} is required when ${accessKeyId ? 'AWS_ACCESS_KEY_ID' : 'AWS_SECRET_ACCESS_KEY'} is set`,
    );
  }
  const sessionToken = read('AWS_SESSION_TOKEN');
  return {
    kind: 's3',
    bucket,
    endpoint,
    region: read('S3_REGION') ?? read('AWS_REGION') ?? read('AWS_DEFAULT_REGION') ?? 'us-east-1',
    // Path-style addressing by default for a custom endpoint (MinIO and most S3-compatible stores).
    forcePathStyle: read('S3_FORCE_PATH_STYLE') ?? endpoint !== undefined,
    credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } : undefined,
  };
}

function parseDatabaseUrl(raw: string | undefined, name: string): DatabaseConfig | undefined {
  if (raw === undefined) return undefined;
  if (/^postgres(ql)?:\/\//.test(raw)) {
    try {
      new URL(raw);
    } catch {
      throw new Problem(`${name} is not a valid postgres:// URL`);
    }
    return { dialect: 'postgres', url: raw };
  }
  if (raw.startsWith('sqlite:')) {
    const file = raw.slice('sqlite:'.length).replace(/^\/\//, '');
    if (!file) throw new Problem(`${name} "sqlite:" needs a file path, e.g. sqlite:./data/imgapi.db`);
    return { dialect: 'sqlite', file: path.resolve(file) };
  }
  throw new Problem(`${name} must start with postgres://, postgresql:// or sqlite:`);
}

// ---------------------------------------------------------------------------------------------
// Documentation generated from VARIABLES

/** docs/configuration.md's table of variables (Markdown). */
export function environmentTable(): string {
  const rows = Object.entries(VARIABLES).map(([name, v]) => `| \`${name}\` | ${v.default} | ${v.doc} |`);
  return ['| variable | default | what it does |', '|---|---|---|', ...rows].join('\n');
}

/** The variables for `imgapi help`: name, default and what it does, wrapped to `width` columns. */
export function environmentHelp(width = 100): string {
  const plain = (markdown: string) => markdown.replace(/`/g, '');
  const entries = Object.entries(VARIABLES);
  const column = Math.max(...entries.map(([name]) => name.length)) + 4;
  const lines: string[] = [];
  for (const [name, v] of entries) {
    let line = `  ${name}`.padEnd(column);
    let empty = true;
    const text = v.default === '—' ? plain(v.doc) : `${plain(v.doc)} (default: ${plain(v.default)})`;
    for (const word of text.split(' ')) {
      if (!empty && line.length + 1 + word.length > width) {
        lines.push(line);
        line = ' '.repeat(column);
        empty = true;
      }
      line += empty ? word : ` ${word}`;
      empty = false;
    }
    lines.push(line);
  }
  return lines.join('\n');
}

/** Checks that need the file system; run once at start-up, after loadConfig. */
export function prepareDataDir(config: Config): void {
  try {
    fs.mkdirSync(config.dataDir, { recursive: true });
    const probe = path.join(config.dataDir, `.write-test-${process.pid}`);
    fs.writeFileSync(probe, '');
    fs.rmSync(probe);
  } catch (err) {
    throw new ConfigError([`DATA_DIR "${config.dataDir}" is not a writable directory (${(err as NodeJS.ErrnoException).code ?? 'error'})`]);
  }
}

/**
 * The key that signs local-storage upload URLs: UPLOAD_SIGNING_SECRET, else a random one generated
 * on first start and kept in DATA_DIR (mode 0600), shared by every process using that directory.
 */
export function uploadSigningSecret(config: Config): string {
  if (config.uploadSigningSecret) return config.uploadSigningSecret;
  const file = path.join(config.dataDir, 'upload-signing.key');
  if (!fs.existsSync(file)) {
    // Written whole under a temporary name, then linked into place: a process starting at the
    // same moment sees either no key or the complete one, and the first link wins.
    const tmp = `${file}.${process.pid}.tmp`;
    try {
      fs.writeFileSync(tmp, `${crypto.randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
      fs.linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new ConfigError([`UPLOAD_SIGNING_SECRET is unset and "${file}" cannot be written (${(err as NodeJS.ErrnoException).code ?? 'error'})`]);
      }
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  }
  const secret = fs.readFileSync(file, 'utf8').trim();
  if (secret.length < 32)
    throw new ConfigError([`UPLOAD_SIGNING_SECRET is unset and "${file}" holds no usable key: delete it to generate a new one`]);
  return secret;
}
