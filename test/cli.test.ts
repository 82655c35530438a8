// The command line as an operator uses it: the compiled CLI (dist/src/main.js, and once through
// bin/imgapi.mjs) run as a child process on a fresh DATA_DIR per test. Needs `npm run build`
// first; `npm test`'s setup does that.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import pino from 'pino';
import { REPO_ROOT, apiFetch, freshDatabase, sleep, tempDir } from './helpers.js';
import { loadConfig } from '../src/config.js';
import { createServices } from '../src/services.js';
import { findAccountByEmail, verifyPassword } from '../src/accounts/accounts.js';
import { freePort } from './e2e/processes.js';

const MAIN = path.join(REPO_ROOT, 'dist', 'src', 'main.js');
const VERSION = (JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const BIN = path.join(REPO_ROOT, 'bin', 'imgapi.mjs');
const KEY_PATTERN = /^ik_[A-Za-z0-9_-]{20,}$/;
/** A line of a printed stack trace. */
const STACK_LINE = /^ {4}at /m;

// The CLI must see only what a test gives it, not the configuration of the shell running the tests.
const CONFIG_VARS = [
  'PORT',
  'HOST',
  'PUBLIC_URL',
  'DATA_DIR',
  'DATABASE_URL',
  'PLANS_FILE',
  'WORKER_CONCURRENCY',
  'TASK_TIMEOUT_SECONDS',
  'TASK_LEASE_SECONDS',
  'QUEUE_POLL_MS',
  'LOG_LEVEL',
];
const baseEnv: Record<string, string> = Object.fromEntries(
  Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined && !CONFIG_VARS.includes(entry[0])),
);

interface Result {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

const describeResult = (r: Result) => `exit ${r.code ?? r.signal}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

/** Runs the CLI to completion (killing it after `timeoutMs`, which fails the caller's assertions). */
function cli(args: string[], env: Record<string, string>, options: { bin?: boolean; timeoutMs?: number } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [options.bin ? BIN : MAIN, ...args], {
      cwd: REPO_ROOT,
      env: { ...baseEnv, LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    // A guard against a hang, not a speed check: a cold start on a busy machine can take many
    // seconds, and bin/imgapi.mjs first rebuilds when dist/ is older than src/.
    const timeoutMs = options.timeoutMs ?? (options.bin ? 180_000 : 60_000);
    const timer = setTimeout(() => {
      stderr += `\n[test: killed after ${timeoutMs} ms]`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

async function ok(args: string[], env: Record<string, string>, options?: { bin?: boolean }): Promise<Result> {
  const result = await cli(args, env, options);
  assert.equal(result.code, 0, `imgapi ${args.join(' ')}: ${describeResult(result)}`);
  return result;
}

/** A failure an operator can read: non-zero exit, the message names `name`, no stack trace. */
function assertCleanFailure(result: Result, name: string | RegExp, what: string): void {
  assert.equal(result.signal, null, `${what}: ended by a signal (hung?): ${describeResult(result)}`);
  assert.notEqual(result.code, 0, `${what}: exited 0: ${describeResult(result)}`);
  if (typeof name === 'string') assert.ok(result.stderr.includes(name), `${what}: stderr does not name ${name}: ${describeResult(result)}`);
  else assert.match(result.stderr, name, `${what}: ${describeResult(result)}`);
  assert.doesNotMatch(result.stderr + result.stdout, STACK_LINE, `${what}: printed a stack trace: ${describeResult(result)}`);
}

// Servers --------------------------------------------------------------------------------------

interface Serving {
  child: ChildProcess;
  url: string;
  output: () => string;
  /** Standard output and standard error apart: the JSON log and the plain start-up line. */
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code and signal once the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ChildProcess>();

function killRunning(): void {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  running.clear();
}

after(killRunning);

/** `imgapi serve` on a free loopback port; resolves once /healthz answers. */
async function serve(env: Record<string, string>): Promise<Serving> {
  const port = await freePort();
  const child = spawn(process.execPath, [MAIN, 'serve'], {
    cwd: REPO_ROOT,
    env: { ...baseEnv, LOG_LEVEL: 'warn', WORKER_CONCURRENCY: '1', QUEUE_POLL_MS: '200', ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let output = '';
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => ((output += chunk), (stdout += chunk)));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => ((output += chunk), (stderr += chunk)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`serve exited early (${child.exitCode ?? child.signalCode}):\n${output}`);
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`serve did not answer /healthz within 60 s:\n${output}`);
    }
    await sleep(100);
  }
  return { child, url, output: () => output, stdout: () => stdout, stderr: () => stderr, exited };
}

async function stop(server: Serving, timeoutMs = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGTERM');
  const timeout = sleep(timeoutMs).then(() => 'timeout' as const);
  const result = await Promise.race([server.exited, timeout]);
  if (result === 'timeout') {
    server.child.kill('SIGKILL');
    assert.fail(`serve did not exit within ${timeoutMs} ms of SIGTERM:\n${server.output()}`);
  }
  return result;
}

async function getAccount(url: string, key: string): Promise<{ status: number; body: any }> {
  const { response, body } = await apiFetch(`${url}/api/account`, { headers: { 'x-api-key': key } });
  return { status: response.status, body: JSON.parse(body.toString('utf8')) };
}

/**
 * GET /api/account once a change made by another process shows: a server keeps a key's account
 * and plan for up to KEY_CACHE_MS (under a second), so it is asked until `applied`, for at most
 * three seconds (the last answer is returned either way, for the caller's assertions).
 */
async function getAccountOnceApplied(url: string, key: string, applied: (answer: { status: number; body: any }) => boolean) {
  const deadline = Date.now() + 3000;
  for (;;) {
    const answer = await getAccount(url, key);
    if (applied(answer) || Date.now() > deadline) return answer;
    await sleep(50);
  }
}

/** A fresh DATA_DIR for one test, removed after it. */
function scratch(t: TestContext): { dir: string; env: Record<string, string> } {
  const dir = tempDir('imgapi-cli-');
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, env: { DATA_DIR: dir } };
}

// Tests ----------------------------------------------------------------------------------------

// The tests are independent (own DATA_DIR, database and port), so two run side by side.
describe('imgapi CLI', { concurrency: 2 }, () => {
  it('help prints the usage and exits 0; an unknown command prints it and fails', async (t) => {
    const { env } = scratch(t);
    const [help, unknown, unknownSub] = await Promise.all([
      ok(['help'], env),
      cli(['frobnicate'], env),
      cli(['users', 'frobnicate', '--email', 'a@example.com'], env),
    ]);
    assert.match(help.stdout, /^Usage: imgapi <command>/);
    assert.match(help.stdout, /keys create --email E --name N/);
    assert.equal((await ok(['--version'], env)).stdout, `imgapi ${VERSION}\n`, "package.json's version");

    assertCleanFailure(unknown, 'unknown command "frobnicate"', 'unknown command');
    assert.match(unknown.stderr, /Usage: imgapi <command>/);

    assertCleanFailure(unknownSub, 'unknown command "users frobnicate"', 'unknown subcommand');
    assert.match(unknownSub.stderr, /Usage: imgapi <command>/);
  });

  it('users create: creates, refuses a duplicate, names the plans for a bad one, makes admins with passwords', async (t) => {
    const { env, dir } = scratch(t);
    const created = await ok(['users', 'create', '--email', 'a@example.com', '--plan', 'pro'], env);
    assert.match(created.stderr, /created pro account a@example\.com/);

    // Independent of each other, so run together (several CLI processes on one SQLite file).
    const [again, otherCase, gold, noPlan, badEmail] = await Promise.all([
      cli(['users', 'create', '--email', 'a@example.com', '--plan', 'pro'], env),
      // Email addresses are case-insensitive: the same person cannot register twice.
      cli(['users', 'create', '--email', 'A@Example.com', '--plan', 'max'], env),
      cli(['users', 'create', '--email', 'g@example.com', '--plan', 'gold'], env),
      cli(['users', 'create', '--email', 'n@example.com'], env),
      cli(['users', 'create', '--email', 'not-an-email', '--plan', 'pro'], env),
      ok(['users', 'create', '--email', 'root@example.com', '--plan', 'max', '--admin', '--password', 'secret'], env),
    ]);
    assertCleanFailure(again, 'already exists', 'duplicate account');
    assert.match(again.stderr, /a@example\.com/);
    assertCleanFailure(otherCase, 'already exists', 'duplicate account, other case');
    assertCleanFailure(gold, '"gold"', 'unknown plan');
    assert.match(gold.stderr, /free, pro, max/);
    assertCleanFailure(noPlan, '--plan', 'missing --plan');
    assertCleanFailure(badEmail, 'not-an-email', 'bad email');

    // What the CLI wrote, read back through the same code the server uses.
    const services = await createServices(loadConfig({ DATA_DIR: dir, LOG_LEVEL: 'silent' }), { logger: pino({ level: 'silent' }) });
    try {
      const admin = await findAccountByEmail(services.database, 'root@example.com');
      assert.ok(admin);
      assert.equal(admin.plan, 'max');
      assert.equal(Boolean(admin.is_admin), true);
      assert.equal(await verifyPassword('secret', admin.password_hash), true);
      assert.equal(await verifyPassword('wrong', admin.password_hash), false);
      const plain = await findAccountByEmail(services.database, 'a@example.com');
      assert.ok(plain);
      assert.equal(plain.plan, 'pro');
      assert.equal(Boolean(plain.is_admin), false);
      assert.equal(plain.password_hash, null);
      assert.equal(await findAccountByEmail(services.database, 'g@example.com'), undefined);
    } finally {
      await services.close();
    }
  });

  it('keys create prints the key alone (also through bin/imgapi.mjs); plan changes and revocation apply to a running server', async (t) => {
    const { env } = scratch(t);
    await ok(['users', 'create', '--email', 'a@example.com', '--plan', 'pro'], env);

    // Through the bin entry: setup's notes must not reach stdout.
    const created = await ok(['keys', 'create', '--email', 'a@example.com', '--name', 'ci'], env, { bin: true });
    const lines = created.stdout.split('\n');
    assert.equal(lines.length, 2, `stdout must be the key and a newline, got ${JSON.stringify(created.stdout)}`);
    assert.equal(lines[1], '');
    const key = lines[0]!;
    assert.match(key, KEY_PATTERN);
    assert.doesNotMatch(created.stderr, new RegExp(key), 'the whole key must not be repeated on stderr');

    const [server, noAccount] = await Promise.all([serve(env), cli(['keys', 'create', '--email', 'nobody@example.com', '--name', 'ci'], env)]);
    assertCleanFailure(noAccount, 'nobody@example.com', 'key for unknown account');
    try {
      let account = await getAccount(server.url, key);
      assert.equal(account.status, 200, JSON.stringify(account.body));
      assert.equal(account.body.data.email, 'a@example.com');
      assert.equal(account.body.data.plan, 'pro');

      // The CLI writes to the database while the server holds it open.
      const [, badPlan] = await Promise.all([
        ok(['users', 'set-plan', '--email', 'a@example.com', '--plan', 'max'], env),
        cli(['users', 'set-plan', '--email', 'a@example.com', '--plan', 'gold'], env),
      ]);
      assertCleanFailure(badPlan, '"gold"', 'set-plan to unknown plan');
      account = await getAccountOnceApplied(server.url, key, (a) => a.body.data?.plan === 'max');
      assert.equal(account.status, 200, JSON.stringify(account.body));
      assert.equal(account.body.data.plan, 'max');

      await ok(['users', 'set-plan', '--email', 'a@example.com', '--plan', 'free'], env);
      account = await getAccountOnceApplied(server.url, key, (a) => a.status !== 200);
      assert.equal(account.status, 403, JSON.stringify(account.body));
      assert.equal(account.body.error.code, 'PLAN_NO_API_ACCESS');

      const [, list] = await Promise.all([
        ok(['users', 'set-plan', '--email', 'a@example.com', '--plan', 'pro'], env),
        ok(['keys', 'list', '--email', 'a@example.com'], env),
      ]);
      assert.equal((await getAccountOnceApplied(server.url, key, (a) => a.status === 200)).status, 200);
      const rows = list.stdout.trim().split('\n');
      assert.equal(rows.length, 1, list.stdout);
      const [keyId, prefix, name] = rows[0]!.split('\t');
      assert.match(keyId!, /^key_/);
      assert.ok(key.startsWith(prefix!.replace(/…$/, '')), `listed prefix ${prefix} is not the key's`);
      assert.ok(prefix!.replace(/…$/, '').length < key.length / 2, 'the list must not show the whole key');
      assert.equal(name, 'ci');
      assert.doesNotMatch(list.stdout, new RegExp(key));
      assert.match(rows[0]!, /last used \d{4}-/, 'the server recorded the key as used');

      const [unknownKey] = await Promise.all([
        cli(['keys', 'revoke', '--email', 'a@example.com', '--id', 'key_nope'], env),
        ok(['keys', 'revoke', '--email', 'a@example.com', '--id', keyId!], env),
      ]);
      assertCleanFailure(unknownKey, 'key_nope', 'revoke unknown key');
      account = await getAccountOnceApplied(server.url, key, (a) => a.status !== 200);
      assert.equal(account.status, 401, JSON.stringify(account.body));
      assert.equal(account.body.error.code, 'API_KEY_INVALID');
      const [listed, twice] = await Promise.all([
        ok(['keys', 'list', '--email', 'a@example.com'], env),
        cli(['keys', 'revoke', '--email', 'a@example.com', '--id', keyId!], env),
      ]);
      assert.match(listed.stdout, /\trevoked \d{4}-/);
      assertCleanFailure(twice, keyId!, 'revoke twice');
    } finally {
      await stop(server);
    }
  });

  it('serve prints one plain start-up line: version, address, dashboard and, until an administrator exists, a one-time setup link', async (t) => {
    const { env: base } = scratch(t);
    // JSON logs on stdout, as in production; the line is on stderr whatever they are.
    const env = { ...base, LOG_LEVEL: 'info', PUBLIC_URL: 'https://images.example.test' };
    const startUpLine = async (server: Serving) => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const line = server
          .stderr()
          .split('\n')
          .find((l) => l.startsWith('imgapi '));
        if (line) return line;
        assert.ok(Date.now() < deadline, `no start-up line within 30 s:\n${server.output()}`);
        await sleep(50);
      }
    };
    const fresh = await serve(env);
    const port = new URL(fresh.url).port;
    const line = await startUpLine(fresh);
    const expected = `imgapi ${VERSION} listening on 127.0.0.1:${port}; dashboard: https://images.example.test/; no administrator yet: create one at https://images.example.test/setup#token=TOKEN (one-time link, valid 24 hours) or run: imgapi users create --email you@example.com --plan max --admin --password …`;
    const setup = new RegExp(`^${expected.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace('TOKEN', '([A-Za-z0-9_-]{32})')}$`).exec(line);
    assert.ok(setup, line);
    const token = setup[1]!;
    const log = fresh.stdout().trim().split('\n');
    assert.ok(
      log.every((l) => JSON.parse(l)),
      'stdout is the JSON log alone',
    );
    assert.ok(!fresh.stdout().includes(token), 'the JSON log never holds the setup token');
    assert.ok(log.some((l) => (JSON.parse(l) as { msg: string }).msg.startsWith('No administrator account exists yet')));
    assert.equal(fresh.stderr().split(token).length, 2, 'the token is printed once');
    const health = await apiFetch(`${fresh.url}/healthz`);
    assert.deepEqual(JSON.parse(health.body.toString('utf8')), { status: 'ok', version: VERSION });

    // The link's token creates the first administrator; from then on the line gives no link.
    const created = await fetch(`${fresh.url}/auth/setup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token, email: 'op@example.com', password: 'operator-pw-1' }),
    });
    assert.equal(created.status, 201, await created.text());
    assert.equal((await stop(fresh)).code, 0);
    const again = await serve(env);
    assert.equal(
      await startUpLine(again),
      `imgapi ${VERSION} listening on 127.0.0.1:${new URL(again.url).port}; dashboard: https://images.example.test/`,
    );
    assert.equal((await stop(again)).code, 0);
  });

  it('SIGTERM stops a serving process with exit 0 within a few seconds; LOG_LEVEL=silent prints nothing, not even the start-up line', async (t) => {
    const { env } = scratch(t);
    const server = await serve({ ...env, LOG_LEVEL: 'silent' });
    const started = Date.now();
    const result = await stop(server, 5000);
    assert.deepEqual(result, { code: 0, signal: null }, server.output());
    assert.ok(Date.now() - started < 5000);
    assert.equal(server.output(), '');
  });

  it('honours DATABASE_URL: accounts, keys and the server on a fresh PostgreSQL database', async (t) => {
    const { env: base, dir } = scratch(t);
    const database = await freshDatabase('postgres', dir); // fails, never skips, when PostgreSQL is down
    t.after(() => database.drop());
    const env = { ...base, DATABASE_URL: database.url };

    await ok(['users', 'create', '--email', 'pg@example.com', '--plan', 'pro'], env);
    assertCleanFailure(
      await cli(['users', 'create', '--email', 'pg@example.com', '--plan', 'pro'], env),
      'already exists',
      'duplicate account (postgres)',
    );
    const key = (await ok(['keys', 'create', '--email', 'pg@example.com', '--name', 'ci'], env)).stdout.trim();
    assert.match(key, KEY_PATTERN);
    // Nothing went to the SQLite default in DATA_DIR.
    assert.equal(fs.existsSync(path.join(dir, 'imgapi.db')), false, 'DATABASE_URL was ignored: an SQLite file appeared in DATA_DIR');

    const server = await serve(env);
    try {
      let account = await getAccount(server.url, key);
      assert.equal(account.status, 200, JSON.stringify(account.body));
      assert.equal(account.body.data.plan, 'pro');
      // Another process's change reaches the server through NOTIFY (`changed:accounts`), and
      // within KEY_CACHE_MS (0.9 s) without it: waited for, not read at once, as it is a message.
      await ok(['users', 'set-plan', '--email', 'pg@example.com', '--plan', 'max'], env);
      account = await getAccountOnceApplied(server.url, key, (a) => a.body.data?.plan === 'max');
      assert.equal(account.body.data.plan, 'max');

      const [keyId] = (await ok(['keys', 'list', '--email', 'pg@example.com'], env)).stdout.trim().split('\t');
      assert.match(keyId!, /^key_/);
      await ok(['keys', 'revoke', '--email', 'pg@example.com', '--id', keyId!], env);
      account = await getAccountOnceApplied(server.url, key, (a) => a.status !== 200);
      assert.equal(account.status, 401, JSON.stringify(account.body));
    } finally {
      assert.equal((await stop(server)).code, 0, server.output());
    }
  });

  it('honours PLANS_FILE, and a bad one stops start-up with a message naming it', async (t) => {
    const { env: base, dir } = scratch(t);
    const write = (name: string, contents: string) => {
      const file = path.join(dir, name);
      fs.writeFileSync(file, contents);
      return file;
    };
    const env = { ...base, PLANS_FILE: write('plans.json', JSON.stringify({ pro: { monthlyTasks: 7 } })) };
    const badJson = write('bad-json.json', '{"pro": {"monthlyTasks": 7');
    const bad: Array<[string, Record<string, string>, string[]]> = [
      ['unknown limit', { PLANS_FILE: write('unknown-limit.json', JSON.stringify({ pro: { monthlyTaskz: 7 } })) }, ['serve']],
      ['unknown plan', { PLANS_FILE: write('unknown-plan.json', JSON.stringify({ gold: { monthlyTasks: 7 } })) }, ['serve']],
      ['bad JSON', { PLANS_FILE: badJson }, ['serve']],
      ['a missing file', { PLANS_FILE: path.join(dir, 'missing.json') }, ['serve']],
      // The operator's commands read the plan table too, and refuse a bad file the same way.
      ['bad JSON (operator command)', { PLANS_FILE: badJson }, ['users', 'create', '--email', 'b@example.com', '--plan', 'pro']],
    ];
    const failures = Promise.all(bad.map(([, extra, args]) => cli(args, { ...base, PORT: '0', HOST: '127.0.0.1', ...extra })));

    await ok(['users', 'create', '--email', 'a@example.com', '--plan', 'pro'], env);
    const key = (await ok(['keys', 'create', '--email', 'a@example.com', '--name', 'ci'], env)).stdout.trim();
    const server = await serve(env);
    try {
      const account = await getAccount(server.url, key);
      assert.equal(account.status, 200, JSON.stringify(account.body));
      assert.equal(account.body.data.limits.monthlyTasks, 7);
      assert.equal(account.body.data.limits.batchSize, 50, 'limits the file does not name keep their defaults');
      assert.equal(account.body.data.usage.monthlyTasks.limit, 7);
    } finally {
      await stop(server);
    }

    const results = await failures;
    bad.forEach(([what], i) => assertCleanFailure(results[i]!, 'PLANS_FILE', `PLANS_FILE with ${what}`));
    assert.match(results[0]!.stderr, /monthlyTaskz/, 'the message names the unknown limit');
  });

  it('configuration errors stop start-up naming the variable, without a stack trace', async (t) => {
    const { env: base, dir } = scratch(t);
    const regularFile = path.join(dir, 'a-regular-file');
    fs.writeFileSync(regularFile, 'not a directory');

    // A port another process holds.
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const heldPort = String((holder.address() as net.AddressInfo).port);

    try {
      const cases: Array<[string, Record<string, string>, string, string[]]> = [
        ['unsupported database scheme', { DATABASE_URL: 'mysql://x' }, 'DATABASE_URL', ['serve']],
        ['unreachable PostgreSQL', { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/nope' }, 'DATABASE_URL', ['serve']],
        ['SQLite file under a regular file', { DATABASE_URL: `sqlite:${path.join(regularFile, 'imgapi.db')}` }, 'DATABASE_URL', ['serve']],
        ['DATA_DIR is a regular file', { DATA_DIR: regularFile }, 'DATA_DIR', ['serve']],
        // Root ignores permission bits, but nobody can create a directory under a regular file.
        ['DATA_DIR cannot be created', { DATA_DIR: path.join(regularFile, 'sub') }, 'DATA_DIR', ['serve']],
        [
          'DATA_DIR cannot be created (operator command)',
          { DATA_DIR: path.join(regularFile, 'sub') },
          'DATA_DIR',
          ['keys', 'list', '--email', 'a@example.com'],
        ],
        ['PORT not a number', { PORT: 'notaport' }, 'PORT', ['serve']],
        ['PORT already in use', { PORT: heldPort, HOST: '127.0.0.1' }, 'PORT', ['serve']],
        // Every problem is reported at once (the second is checked below).
        ['two problems', { PORT: 'notaport', DATABASE_URL: 'mysql://x' }, 'PORT', ['serve']],
      ];
      const results = await Promise.all(cases.map(([, env, , args]) => cli(args, { ...base, PORT: '0', HOST: '127.0.0.1', ...env })));
      cases.forEach(([what, , name], i) => assertCleanFailure(results[i]!, name, what));
      assert.match(results[cases.length - 1]!.stderr, /DATABASE_URL/, 'both problems are reported');
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });
});
