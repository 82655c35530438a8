// The one place that reads the environment. Every value is validated at boot and every
// problem names its variable; all problems are reported together.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

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
  workerConcurrency: number;
  taskTimeoutMs: number;
  leaseMs: number;
  pollIntervalMs: number;
  sweepIntervalMs: number;
  /** libvips threads per image (sharp defaults to 1 on glibc Linux, leaving cores idle). */
  imageThreads: number;
  logLevel: string;
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

  const port = int('PORT', 3000, 0, 65535);
  const host = env.HOST || '0.0.0.0';
  const dataDir = path.resolve(env.DATA_DIR || './data');
  const database = parseDatabaseUrl(env.DATABASE_URL, dataDir, problems);

  const plansFile = env.PLANS_FILE ? path.resolve(env.PLANS_FILE) : undefined;
  if (plansFile && !fs.existsSync(plansFile)) problems.push(`PLANS_FILE: no such file "${plansFile}"`);

  const publicUrl = (env.PUBLIC_URL || `http://localhost:${port}`).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/.test(publicUrl)) problems.push(`PUBLIC_URL must be an http(s) URL, got "${env.PUBLIC_URL}"`);

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
    workerConcurrency: int('WORKER_CONCURRENCY', Math.max(1, os.availableParallelism()), 0, 256),
    taskTimeoutMs: int('TASK_TIMEOUT_SECONDS', 120, 1, 86_400) * 1000,
    leaseMs: int('TASK_LEASE_SECONDS', 30, 2, 3600) * 1000,
    pollIntervalMs: int('QUEUE_POLL_MS', 2000, 10, 60_000),
    sweepIntervalMs: int('SWEEP_INTERVAL_SECONDS', 60, 1, 86_400) * 1000,
    imageThreads: int('IMAGE_THREADS', Math.max(1, os.availableParallelism()), 1, 256),
    logLevel,
  };
  if (problems.length) throw new ConfigError(problems);
  return config;
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
