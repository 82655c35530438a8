// The operator's commands that take the whole service: backup, restore, copy-to. They read the
// same environment as the server (DATA_DIR, DATABASE_URL, STORAGE and the S3 variables).
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { openDatabase } from '../db/database.js';
import { backup } from './backup.js';
import { restore } from './restore.js';
import { copyTo, type CopyProgress } from './copy.js';
import { OpsError, openStorage } from './objects.js';

const log = (line: string) => process.stderr.write(`${line}\n`);

/** The S3 variables a `--storage s3://bucket?endpoint=…&region=…&path-style=…` URL stands for. */
export function s3Environment(url: string): Record<string, string> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new OpsError(`--storage "${url}" is not a URL: s3://BUCKET?endpoint=URL&region=R`);
  }
  if (parsed.protocol !== 's3:' || !parsed.hostname)
    throw new OpsError(`--storage must be s3://BUCKET[?endpoint=URL&region=R&path-style=true], got "${url}"`);
  const env: Record<string, string> = { STORAGE: 's3', S3_BUCKET: parsed.hostname };
  const endpoint = parsed.searchParams.get('endpoint');
  const region = parsed.searchParams.get('region');
  const pathStyle = parsed.searchParams.get('path-style');
  if (endpoint) env.S3_ENDPOINT = endpoint;
  if (region) env.S3_REGION = region;
  if (pathStyle) env.S3_FORCE_PATH_STYLE = pathStyle;
  return env;
}

/** The configuration copy-to writes to: this one with another database and, given, another store. */
export function targetConfig(databaseUrl: string, storageUrl: string | undefined, env: NodeJS.ProcessEnv = process.env): Config {
  const overrides: Record<string, string> = { DATABASE_URL: databaseUrl, ...(storageUrl ? s3Environment(storageUrl) : {}) };
  return loadConfig({ ...env, ...overrides });
}

function describe(progress: CopyProgress): string | undefined {
  if (progress.phase === 'objects' && (progress.done % 500 === 0 || progress.done === progress.total))
    return `objects: ${progress.done}/${progress.total} (${progress.copied} copied by this run)`;
  if (progress.phase === 'verify' && (progress.done % 500 === 0 || progress.done === progress.total))
    return `checked ${progress.done}/${progress.total} objects`;
  return undefined;
}

export async function opsCommand(command: 'backup' | 'restore' | 'copy-to', args: string[]): Promise<number> {
  try {
    if (command === 'backup' || command === 'restore') {
      const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
      if (positionals.length !== 1) throw new OpsError(`usage: imgapi ${command} DIR`);
      if (command === 'backup') await backup(loadConfig(), positionals[0]!, log);
      else await restore(loadConfig(), positionals[0]!, log);
      return 0;
    }
    const { values } = parseArgs({ args, options: { database: { type: 'string' }, storage: { type: 'string' } } });
    if (!values.database) throw new OpsError('usage: imgapi copy-to --database URL [--storage s3://BUCKET?endpoint=URL&region=R]');
    const config = loadConfig();
    const target = targetConfig(values.database, values.storage);
    if (JSON.stringify(target.database) === JSON.stringify(config.database))
      throw new OpsError('--database names the database this configuration already uses');
    const source = { database: await openDatabase(config.database), storage: openStorage(config.storage) };
    try {
      const to = { database: await openDatabase(target.database), storage: values.storage ? openStorage(target.storage) : undefined };
      try {
        await to.storage?.check().catch((err: Error) => {
          throw new OpsError(`--storage: the bucket cannot be reached or written (${err.message})`);
        });
        const report = await copyTo({
          source,
          target: to,
          onProgress: (progress) => {
            const line = describe(progress);
            if (line) log(line);
          },
        });
        for (const [table, count] of Object.entries(report.counts)) log(`  ${table}: ${count} rows`);
        log(
          `copied and checked: ${report.objects} objects (${report.bytes} bytes; ${report.copied} written by this run), ` +
            `every table's count${report.removed ? `; ${report.removed} rows the source no longer has removed` : ''}`,
        );
        return 0;
      } finally {
        to.storage?.close?.();
        await to.database.close();
      }
    } finally {
      source.storage.close?.();
      await source.database.close();
    }
  } catch (err) {
    // The configuration's errors are main's to say (exit 78); any other failure is one line, no stack.
    if (err instanceof ConfigError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    const message =
      err instanceof OpsError
        ? err.message
        : `failed: ${(err as Error).message ?? String(err)}${code && !String((err as Error).message).includes(code) ? ` (${code})` : ''}`;
    process.stderr.write(`imgapi ${command}: ${message.split('\n')[0]}\n`);
    return 1;
  }
}
