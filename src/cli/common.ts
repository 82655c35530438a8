// What the client commands share: their options and I/O, the SDK client they connect with,
// the input files they expand, bounded concurrency, and how they word progress and failures.
import fs from 'node:fs';
import path from 'node:path';
import { glob, isDynamicPattern } from 'tinyglobby';
import { Imgapi, ImgapiError, type RetryEvent } from '../../sdk/node.js';
import { Board } from './progress.js';
import { printable, type Terminal } from './terminal.js';

export class UsageError extends Error {}

/** Where a command writes: each stream a Terminal (nothing the server sent reaches it raw). */
export interface ClientIo {
  stdout: Terminal;
  stderr: Terminal;
  env: NodeJS.ProcessEnv;
}

/** The options every client command shares; `rest` keeps the others, in order, for the command. */
export interface CommonOptions {
  url: string;
  key: string | undefined;
  concurrency: number;
  output: string | undefined;
  /** Replace files that exist (by default an existing file is a failure, never replaced). */
  overwrite: boolean;
  /** run: on Ctrl-C leave the tasks started running (by default they are canceled). */
  keepRunning: boolean;
  json: boolean;
  wait: boolean;
  batch: boolean;
  help: boolean;
  rest: string[];
}

/** The SDK client for the options; `onRetry` says what is retried. */
export function connect(options: CommonOptions, onRetry?: (event: RetryEvent) => void): Imgapi {
  if (!options.key) throw new UsageError('no API key: set IMGAPI_KEY or pass --key');
  try {
    new URL(options.url);
  } catch {
    throw new UsageError(`--url (or IMGAPI_URL) is not a URL: "${options.url}"`);
  }
  // Paced to the plan's rate: a run of many files waits its turn rather than collecting 429s.
  return new Imgapi({ baseUrl: options.url, apiKey: options.key, onRetry, paceRequests: true });
}

export const retryLine = (event: RetryEvent): string =>
  printable(
    `retrying ${event.method} ${new URL(event.url).pathname} in ${(event.delayMs / 1000).toFixed(1)} s (${event.code ?? event.status ?? describeError(event.error).message})`,
  );

/** A failure's code and message: the API's, a file system's (ENOENT…), or ERROR. */
export function describeError(err: unknown): { code: string; message: string; requestId?: string } {
  if (err instanceof ImgapiError) {
    const message = err.code === 'FILE_EXISTS' ? `${err.message} (--overwrite replaces it)` : err.message;
    return { code: err.code, message, ...(err.requestId ? { requestId: err.requestId } : {}) };
  }
  const code = (err as { code?: unknown } | undefined)?.code;
  return { code: typeof code === 'string' ? code : 'ERROR', message: err instanceof Error ? err.message : String(err) };
}

export interface InputFile {
  /** As the user named it (or the glob found it). */
  name: string;
  path: string;
  size: number;
}

/** The files named or matched, each once, in order; a name or glob matching nothing is a usage error. */
export async function expandInputs(patterns: string[]): Promise<InputFile[]> {
  if (patterns.length === 0) throw new UsageError('name at least one file (or a glob such as "photos/*.jpg")');
  const files: InputFile[] = [];
  const seen = new Set<string>();
  for (const pattern of patterns) {
    const stat = fs.statSync(pattern, { throwIfNoEntry: false });
    let names: string[];
    if (stat?.isDirectory()) throw new UsageError(`${pattern} is a directory: name its files, e.g. "${path.join(pattern, '*')}"`);
    if (stat) names = [pattern];
    else if (isDynamicPattern(pattern))
      names = (await glob(pattern, { onlyFiles: true, expandDirectories: false, absolute: path.isAbsolute(pattern) })).sort();
    else throw new UsageError(`no such file: ${pattern}`);
    if (names.length === 0) throw new UsageError(`no file matches ${pattern}`);
    for (const name of names) {
      const resolved = path.resolve(name);
      if (seen.has(resolved)) continue;
      seen.add(resolved);
      files.push({ name, path: resolved, size: fs.statSync(resolved).size });
    }
  }
  return files;
}

/** Runs `work` over `items`, at most `limit` at once, keeping the order of the results. */
export async function mapLimit<T, R>(items: T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}

export function boardFor(options: CommonOptions, io: ClientIo): Board {
  return new Board(io.stderr, options.json ? 'silent' : io.stderr.isTTY ? 'tty' : 'plain');
}

/** A failure line: the file, the code and the message (and the request id to quote), on one line. */
export const failureLine = (name: string, error: { code: string; message: string; requestId?: string }): string =>
  printable(`${name}: failed: ${error.code}: ${error.message}${error.requestId ? ` (request ${error.requestId})` : ''}`);
