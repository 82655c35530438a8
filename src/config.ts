// The one place that reads the environment. Every value is validated at boot and every
// problem names its variable; all problems are reported together.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export type DatabaseConfig =
  | { dialect: 'sqlite'; file: string }
  | { dialect: 'postgres'; url: string };

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
  workerConcurrency: number;
  taskTimeoutMs: number;
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
  /** A LibreOffice run taking longer is killed (its whole process group): CONVERSION_TIMEOUT. */
  conversionTimeoutMs: number;
  /** LibreOffice processes this process runs at once; further conversions wait their turn. */
  converterConcurrency: number;
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

export const SIGNUP_MODES = ['open', 'invite', 'closed'] as const;
export type SignupMode = (typeof SIGNUP_MODES)[number];

/** The checkout's root (the nearest folder above this module with a package.json): src/ and dist/src/ alike. */
function repositoryRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];

  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      problems.push(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
      return fallback;
    }
    return value;
  };

  /** A program, run without a shell: a bare name looked up on PATH, or a path (resolved now). */
  const command = (name: string, fallback: string): string => {
    const raw = env[name]?.trim();
    if (!raw) return fallback;
    return raw.includes('/') ? path.resolve(raw) : raw;
  };

  const port = int('PORT', 3000, 0, 65535);
  const host = env.HOST || '0.0.0.0';
  const dataDir = path.resolve(env.DATA_DIR || './data');
  const database = parseDatabaseUrl(env.DATABASE_URL, dataDir, problems);

  const plansFile = env.PLANS_FILE ? path.resolve(env.PLANS_FILE) : undefined;
  if (plansFile && !fs.existsSync(plansFile)) problems.push(`PLANS_FILE: no such file "${plansFile}"`);

  const publicUrl = (env.PUBLIC_URL || `http://localhost:${port}`).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/.test(publicUrl)) problems.push(`PUBLIC_URL must be an http(s) URL, got "${env.PUBLIC_URL}"`);

  const signupMode = (env.SIGNUP_MODE || 'invite') as SignupMode;
  if (!SIGNUP_MODES.includes(signupMode)) problems.push(`SIGNUP_MODE must be one of ${SIGNUP_MODES.join(', ')}, got "${env.SIGNUP_MODE}"`);
  const dashboardDir = env.DASHBOARD_DIR ? path.resolve(env.DASHBOARD_DIR) : path.join(repositoryRoot(), 'web', 'dist');
  if (env.DASHBOARD_DIR && !fs.existsSync(path.join(dashboardDir, 'index.html'))) problems.push(`DASHBOARD_DIR: no index.html in "${dashboardDir}"`);
  const trustProxy = env.TRUST_PROXY ?? '';
  if (!['', '0', '1', 'true', 'false'].includes(trustProxy)) problems.push(`TRUST_PROXY must be true or false, got "${trustProxy}"`);

  const storage = parseStorage(env, dataDir, problems);
  const uploadSigningSecret = env.UPLOAD_SIGNING_SECRET || undefined;
  if (uploadSigningSecret !== undefined && uploadSigningSecret.length < 32) {
    problems.push('UPLOAD_SIGNING_SECRET must be at least 32 characters (e.g. `openssl rand -hex 32`)');
  }

  const logLevel = env.LOG_LEVEL || 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    problems.push(`LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "${logLevel}"`);
  }

  const config: Config = {
    port,
    host,
    publicUrl,
    dataDir,
    database,
    plansFile,
    signupMode,
    sessionTtlMs: int('SESSION_TTL_HOURS', 168, 1, 24 * 366) * 3600_000,
    dashboardDir,
    trustProxy: trustProxy === '1' || trustProxy === 'true',
    workerConcurrency: int('WORKER_CONCURRENCY', Math.max(1, os.availableParallelism()), 0, 256),
    taskTimeoutMs: int('TASK_TIMEOUT_SECONDS', 120, 1, 86_400) * 1000,
    leaseMs: int('TASK_LEASE_SECONDS', 30, 2, 3600) * 1000,
    pollIntervalMs: int('QUEUE_POLL_MS', 2000, 10, 60_000),
    sweepIntervalMs: int('SWEEP_INTERVAL_SECONDS', 60, 1, 86_400) * 1000,
    imageThreads: int('IMAGE_THREADS', Math.max(1, os.availableParallelism()), 1, 256),
    storage,
    // S3 accepts presigned URLs valid for up to 7 days.
    uploadUrlTtlMs: int('UPLOAD_URL_TTL_SECONDS', 900, 10, 7 * 86_400) * 1000,
    uploadSigningSecret,
    logLevel,
    sofficeCommand: command('SOFFICE_COMMAND', 'soffice'),
    pdftoppmCommand: command('PDFTOPPM_COMMAND', 'pdftoppm'),
    pdfinfoCommand: command('PDFINFO_COMMAND', 'pdfinfo'),
    conversionTimeoutMs: int('CONVERSION_TIMEOUT_SECONDS', 120, 1, 3600) * 1000,
    converterConcurrency: int('CONVERTER_CONCURRENCY', 2, 1, 64),
  };
  if (problems.length) throw new ConfigError(problems);
  return config;
}

function parseStorage(env: Env, dataDir: string, problems: string[]): StorageConfig {
  const kind = env.STORAGE || 'local';
  if (kind === 'local') return { kind: 'local', root: path.join(dataDir, 'objects') };
  if (kind !== 's3') {
    problems.push(`STORAGE must be local or s3, got "${kind}"`);
    return { kind: 'local', root: path.join(dataDir, 'objects') };
  }
  const bucket = env.S3_BUCKET ?? '';
  if (!bucket) problems.push('S3_BUCKET is required when STORAGE=s3');
  else if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) problems.push(`S3_BUCKET is not a valid bucket name, got "${bucket}"`);
  const endpoint = env.S3_ENDPOINT ? env.S3_ENDPOINT.replace(/\/+$/, '') : undefined;
  if (endpoint !== undefined && !/^https?:\/\/[^/]+$/.test(endpoint)) problems.push(`S3_ENDPOINT must be an http(s) URL without a path, got "${env.S3_ENDPOINT}"`);
  const pathStyle = env.S3_FORCE_PATH_STYLE ?? '';
  if (!['', '0', '1', 'true', 'false'].includes(pathStyle)) problems.push(`S3_FORCE_PATH_STYLE must be true or false, got "${pathStyle}"`);
  const accessKeyId = env.AWS_ACCESS_KEY_ID || undefined;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY || undefined;
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    problems.push(`${accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID'} is required when ${accessKeyId ? 'AWS_ACCESS_KEY_ID' : 'AWS_SECRET_ACCESS_KEY'} is set`);
  }
  return {
    kind: 's3',
    bucket,
    endpoint,
    region: env.S3_REGION || env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1',
    // Path-style addressing by default for a custom endpoint (MinIO and most S3-compatible stores).
    forcePathStyle: pathStyle === '' ? endpoint !== undefined : pathStyle === '1' || pathStyle === 'true',
    credentials:
      accessKeyId && secretAccessKey
        ? { accessKeyId, secretAccessKey, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) }
        : undefined,
  };
}

function parseDatabaseUrl(raw: string | undefined, dataDir: string, problems: string[]): DatabaseConfig {
  if (!raw) return { dialect: 'sqlite', file: path.join(dataDir, 'imgapi.db') };
  if (/^postgres(ql)?:\/\//.test(raw)) {
    try {
      new URL(raw);
      return { dialect: 'postgres', url: raw };
    } catch {
      problems.push('DATABASE_URL is not a valid postgres:// URL');
    }
  } else if (raw.startsWith('sqlite:')) {
    const file = raw.slice('sqlite:'.length).replace(/^\/\//, '');
    if (file) return { dialect: 'sqlite', file: path.resolve(file) };
    problems.push('DATABASE_URL "sqlite:" needs a file path, e.g. sqlite:./data/imgapi.db');
  } else {
    problems.push('DATABASE_URL must start with postgres://, postgresql:// or sqlite:');
  }
  return { dialect: 'sqlite', file: path.join(dataDir, 'imgapi.db') };
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
  if (secret.length < 32) throw new ConfigError([`UPLOAD_SIGNING_SECRET is unset and "${file}" holds no usable key: delete it to generate a new one`]);
  return secret;
}
