#!/usr/bin/env node
// The command line: a table of commands (COMMANDS), each run by its own module, loaded when
// called: serve and worker (src/commands/serve.ts), migrate, the operator's account and key
// commands (src/commands/admin.ts), backup, restore and copy-to (src/ops/cli.ts), and the
// client commands (run, upload, task, download, info, webhooks, url: src/cli/client.ts).
// Configuration errors end with a message naming the variable, not a stack trace.
import os from 'node:os';
import { ConfigError, environmentHelp } from './config.js';
import { AppError } from './errors.js';
import { present, UsageError } from './commands/usage.js';
import { VERSION } from './version.js';

const OPS_USAGE = `  backup DIR                      a consistent copy of a running SQLite install: the database and
                                  the objects (with S3, their checksums) and manifest.json
  restore DIR                     a backup into an empty DATA_DIR / database, all or nothing: every
                                  name, link and checksum checked before anything is in place
  copy-to --database URL [--storage s3://BUCKET?endpoint=URL&region=R&path-style=true]
                                  every table and object to another database (and S3 bucket),
                                  checked; run it again to resume; the source is only read`;

const USAGE = `Usage: imgapi <command> [options]   (imgapi ${VERSION})

  serve [--role all|api]          HTTP API with in-process workers (default role: all;
                                  api: HTTP only, for many API processes sharing PostgreSQL)
  worker                          workers only, no HTTP (and the periodic sweeps)
  migrate                         bring the database schema up to date and exit

  users create --email E --plan free|pro|max [--admin] [--password P]
  users set-plan --email E --plan free|pro|max
  users set-password --email E --password P   (ends the account's dashboard sessions)
  keys create --email E --name N  prints the new API key alone on stdout
  keys list --email E
  keys revoke --email E --id KEY_ID

${OPS_USAGE}

  run, upload, task, download, info, webhooks, url
                                  the client: see \`imgapi run --help\`
  --version                       prints imgapi and its version

Environment (also in docs/configuration.md):
${environmentHelp()}`;

/** A command: its arguments after the name, and the name it was called by. */
type Command = (args: string[], name: string) => Promise<number>;

const ops: Command = async (args, name) => (await import('./ops/cli.js')).opsCommand(name as 'backup' | 'restore' | 'copy-to', args);
// The client talks to a running service over HTTP: none of the server's configuration.
const client: Command = async (args, name) => (await import('./cli/client.js')).clientCommand(name, args);
const help: Command = async () => {
  console.log(USAGE);
  return 0;
};

/**
 * libuv's thread pool runs sharp's image work, file I/O and hashing. Node gives it 4 threads unless
 * UV_THREADPOOL_SIZE says otherwise: on more than four CPUs that would hold the image slots
 * (WORKER_CONCURRENCY and RENDER_CONCURRENCY, a CPU each by default) to four images at once, file
 * operations waiting behind them. The pool reads it when it starts (the first asynchronous file
 * operation, as the server's modules load), so it is set before they are imported.
 */
function sizeThreadPool(): void {
  process.env.UV_THREADPOOL_SIZE ??= String(Math.max(4, 2 * os.availableParallelism() + 2));
}

/** Every command of the binary and the module that runs it, each loaded only when called. */
const COMMANDS: Readonly<Record<string, Command>> = {
  serve: async (args) => {
    sizeThreadPool();
    return (await import('./commands/serve.js')).serve(args);
  },
  worker: async () => {
    sizeThreadPool();
    return (await import('./commands/serve.js')).worker();
  },
  migrate: async () => (await import('./commands/migrate.js')).migrate(),
  users: async (args, name) => (await import('./commands/admin.js')).admin(name, args),
  keys: async (args, name) => (await import('./commands/admin.js')).admin(name, args),
  backup: ops,
  restore: ops,
  'copy-to': ops,
  run: client,
  upload: client,
  task: client,
  download: client,
  info: client,
  webhooks: client,
  url: client,
  '--version': async () => {
    console.log(`imgapi ${VERSION}`);
    return 0;
  },
  help,
  '--help': help,
  '-h': help,
};

async function main([name, ...args]: string[]): Promise<number> {
  if (name === undefined) return help([], 'help');
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) throw new UsageError(`unknown command "${name}"`);
  return command(present(args), name);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    if (err instanceof ConfigError) {
      console.error(`imgapi: ${err.message}`);
      process.exit(78);
    }
    if (err instanceof UsageError || err instanceof AppError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`imgapi: ${(err as Error).message}\n\n${USAGE}`);
      process.exit(64);
    }
    console.error(err);
    process.exit(1);
  },
);
