#!/usr/bin/env node
// The command line: serve (API and workers), worker, migrate, the operator's account and key
// commands, backup, restore and copy-to (src/ops/cli.ts), and the client commands (run, upload,
// task, download, webhooks, url: src/cli/client.ts).
// Configuration errors end with a message naming the variable, not a stack trace.
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { buildApp } from './http/app.js';
import { ConfigError, environmentHelp, loadConfig, type Config } from './config.js';
import { createServices, type Services } from './services.js';
import { WorkerPool } from './worker/worker.js';
import { checkPlan, createAccount, createApiKey, findAccountByEmail, listApiKeys, revokeApiKey, setPassword, setPlan } from './accounts/accounts.js';
import { announceSetupToken, setupInstructions } from './accounts/onboarding.js';
import { deleteSessionsOf } from './accounts/sessions.js';
import { AppError } from './errors.js';
import { iso } from './clock.js';
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

  run, upload, task, download, webhooks, url
                                  the client: see \`imgapi run --help\`
  --version                       prints imgapi and its version

Environment (also in README.md):
${environmentHelp()}`;

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  const [command, sub, ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve(
        parseArgs({ args: [sub, ...rest].filter((a): a is string => a !== undefined), options: { role: { type: 'string', default: 'all' } } }).values
          .role!,
      );
    case 'worker':
      return serve('worker');
    case 'migrate': {
      const services = await createServices(loadConfig());
      await services.close();
      console.error('migrations are up to date');
      return 0;
    }
    case 'users':
    case 'keys':
      return admin(command, sub, rest);
    case 'backup':
    case 'restore':
    case 'copy-to': {
      // Loaded on use: the operator's whole-service commands (src/ops/).
      const { opsCommand } = await import('./ops/cli.js');
      return opsCommand(
        command,
        [sub, ...rest].filter((a): a is string => a !== undefined),
      );
    }
    case 'run':
    case 'upload':
    case 'task':
    case 'download':
    case 'info':
    case 'webhooks':
    case 'url': {
      // The client talks to a running service over HTTP: none of the server's configuration.
      const { clientCommand } = await import('./cli/client.js');
      return clientCommand(
        command,
        [sub, ...rest].filter((a): a is string => a !== undefined),
      );
    }
    case '--version':
      console.log(`imgapi ${VERSION}`);
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return 0;
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

async function serve(role: string): Promise<number> {
  if (!['all', 'api', 'worker'].includes(role)) throw new UsageError(`--role must be all or api, got "${role}"`);
  const config = loadConfig();
  const services = await createServices(config);
  const workers = new WorkerPool(services, role === 'api' ? 0 : config.workerConcurrency);
  const app = role === 'worker' ? undefined : await buildApp(services);
  const started = {
    role,
    workers: workers.concurrency,
    aiWorkers: workers.aiConcurrency,
    workerId: workers.id,
    database: config.database.dialect,
    storage: services.storage.name,
  };
  if (app) {
    try {
      await app.listen({ port: config.port, host: config.host });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (!['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL', 'ENOTFOUND', 'EAI_AGAIN'].includes(code ?? '')) throw err;
      await app.close().catch(() => {});
      await services.close();
      throw new ConfigError([`PORT/HOST: cannot listen on ${config.host}:${config.port} (${code})`]);
    }
    services.logger.info({ url: config.publicUrl, ...started }, 'imgapi is serving');
    // A fresh installation: the operator creates the first administrator with a one-time token.
    const token = await announceSetupToken({ database: services.database, clock: services.clock, logger: services.logger });
    const { port } = app.server.address() as AddressInfo; // PORT=0 listens on a port of the system's choosing
    const parts = [`imgapi ${VERSION} listening on ${config.host}:${port}`, `dashboard: ${config.publicUrl}/`];
    if (token) parts.push(setupInstructions(config.publicUrl, token));
    say(config, parts.join('; '));
  } else {
    services.logger.info(started, 'imgapi worker started');
    say(config, `imgapi ${VERSION} worker running ${workers.concurrency} image and ${workers.aiConcurrency} AI task slots`);
  }
  workers.start();
  services.maintenance.start();
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      services.logger.info({ signal }, 'shutting down: no new work, finishing running tasks');
      resolve();
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await shutdown(services, workers, app);
  return 0;
}

/**
 * One plain line on stderr, whatever the log's format (pino's JSON is on stdout): what an
 * operator reads first in a terminal or `docker logs`. LOG_LEVEL=silent silences it too.
 */
function say(config: Config, line: string): void {
  if (config.logLevel !== 'silent') process.stderr.write(`${line}\n`);
}

async function shutdown(services: Services, workers: WorkerPool, app: Awaited<ReturnType<typeof buildApp>> | undefined) {
  const force = setTimeout(() => process.exit(1), 30_000).unref();
  // At once and together: no new requests and no new claims; in-flight requests end, running
  // tasks finish within 20 s or go back to the queue.
  await Promise.all([app?.close(), workers.stop(20_000)]);
  await services.close();
  clearTimeout(force);
}

async function admin(group: string, command: string | undefined, args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      email: { type: 'string' },
      plan: { type: 'string' },
      admin: { type: 'boolean', default: false },
      password: { type: 'string' },
      name: { type: 'string' },
      id: { type: 'string' },
    },
  });
  const need = (name: keyof typeof values): string => {
    const value = values[name];
    if (typeof value !== 'string' || !value) throw new UsageError(`${group} ${command} needs --${name}`);
    return value;
  };
  const services = await createServices(loadConfig(), {});
  try {
    const { database, clock } = services;
    const account = async () => {
      const found = await findAccountByEmail(database, need('email'));
      if (!found) throw new UsageError(`no account for ${values.email}`);
      return found;
    };
    const action = `${group} ${command ?? ''}`.trim();
    switch (action) {
      case 'users create': {
        const created = await createAccount(database, clock, {
          email: need('email'),
          plan: checkPlan(need('plan')),
          admin: values.admin,
          password: values.password,
        });
        console.error(`created ${created.plan} account ${created.email} (${created.id})${created.is_admin ? ', admin' : ''}`);
        return 0;
      }
      case 'users set-plan': {
        const found = await account();
        const plan = checkPlan(need('plan'));
        await setPlan(database, found.id, plan);
        console.error(`${found.email}: plan ${found.plan} → ${plan}`);
        return 0;
      }
      case 'users set-password': {
        const found = await account();
        const password = need('password');
        if (password.length < 8) throw new UsageError('--password needs at least 8 characters');
        await setPassword(database, found.id, password);
        await deleteSessionsOf(database, found.id);
        console.error(`${found.email}: password set; dashboard sessions ended`);
        return 0;
      }
      case 'keys create': {
        const created = await createApiKey(database, clock, (await account()).id, need('name'));
        // The key alone on stdout, so `KEY=$(imgapi keys create …)` works.
        process.stdout.write(`${created.key}\n`);
        console.error(`created key ${created.prefix}… (${created.id}); it is shown only once`);
        return 0;
      }
      case 'keys list': {
        for (const key of await listApiKeys(database, (await account()).id)) {
          const state = key.revoked_at ? `revoked ${iso(key.revoked_at)}` : `last used ${key.last_used_at ? iso(key.last_used_at) : 'never'}`;
          console.log(`${key.id}\t${key.prefix}…\t${key.name}\tcreated ${iso(key.created_at)}\t${state}`);
        }
        return 0;
      }
      case 'keys revoke': {
        const revoked = await revokeApiKey(database, clock, (await account()).id, need('id'));
        if (!revoked) throw new UsageError(`no active key ${values.id} for ${values.email}`);
        console.error(`revoked ${values.id}`);
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${action}"`);
    }
  } finally {
    await services.close();
  }
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
