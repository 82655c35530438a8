#!/usr/bin/env node
// Runs the test suite with Node's built-in test runner on TypeScript files through tsx.
//
//   node scripts/run-tests.mjs                      every test/**/*.test.ts, sorted
//   node scripts/run-tests.mjs test/a.test.ts ...   only these files (a directory means its *.test.ts)
//   node scripts/run-tests.mjs --test-name-pattern=queue   options starting with "-" go to node
//
// Makes sure the local PostgreSQL answers first (starting it when we are root), sets IMGAPI_TEST=1
// and TEST_POSTGRES_URL for the tests, prints the spec report, then one line "N passed, N failed",
// and exits with the test runner's exit code.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const PER_TEST_TIMEOUT_MS = 600_000;

function note(message) {
  process.stderr.write(`run-tests: ${message}\n`);
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

function canConnect(host, port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function localClusterVersion() {
  try {
    return fs
      .readdirSync('/etc/postgresql')
      .filter((v) => fs.existsSync(path.join('/etc/postgresql', v, 'main')))
      .sort((a, b) => Number(b) - Number(a) || b.localeCompare(a))[0];
  } catch {
    return undefined;
  }
}

async function ensurePostgres(url) {
  let target;
  try {
    target = new URL(url);
  } catch {
    note(`TEST_POSTGRES_URL is not a URL (${url}); not checking PostgreSQL`);
    return;
  }
  const host = target.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const port = Number(target.port || 5432);
  if (await canConnect(host, port)) return;

  const local = ['127.0.0.1', 'localhost', '::1'].includes(host);
  const version = local ? localClusterVersion() : undefined;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!local || !version || !isRoot) {
    note(
      `PostgreSQL does not answer on ${host}:${port}; the PostgreSQL suites will fail` +
        (local && version && !isRoot ? ` (start it with: sudo pg_ctlcluster ${version} main start)` : ''),
    );
    return;
  }

  note(`starting PostgreSQL ${version} (nothing answered on ${host}:${port})`);
  const r = spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', 'start'], { stdio: 'inherit' });
  if (r.error) note(`could not run pg_ctlcluster: ${r.error.message}`);
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (await canConnect(host, port)) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  note(`PostgreSQL still does not answer on ${host}:${port} after 20 s; the PostgreSQL suites will fail`);
}

// ---------------------------------------------------------------------------------------------
// Test files

function findTestFiles(dir) {
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : findTestFiles(full);
    return entry.isFile() && entry.name.endsWith('.test.ts') ? [full] : [];
  });
}

function collectFiles(args) {
  const targets = args.length > 0 ? args : ['test'];
  const files = [];
  for (const target of targets) {
    const full = path.resolve(ROOT, target);
    let stat;
    try {
      stat = fs.statSync(full);
    } catch {
      note(`no such file or directory: ${target}`);
      process.exit(2);
    }
    if (stat.isDirectory()) files.push(...findTestFiles(full).sort());
    else files.push(full);
  }
  return [...new Set(files)].map((f) => path.relative(ROOT, f));
}

// ---------------------------------------------------------------------------------------------
// Counts from the TAP report: its closing "# pass N" / "# fail N" / "# cancelled N" lines.

function countsFromTap(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const last = (name) => {
    const matches = [...text.matchAll(new RegExp(`^# ${name} (\\d+)$`, 'gm'))];
    return matches.length ? Number(matches[matches.length - 1][1]) : undefined;
  };
  const pass = last('pass');
  const fail = last('fail');
  if (pass === undefined || fail === undefined) return undefined;
  // A cancelled test (its file crashed, its parent failed or it timed out) did not pass either.
  return { pass, fail: fail + (last('cancelled') ?? 0) };
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const args = process.argv.slice(2);
  const nodeOptions = args.filter((a) => a.startsWith('-'));
  const files = collectFiles(args.filter((a) => !a.startsWith('-')));
  if (files.length === 0) {
    note('no *.test.ts files found under test/');
    process.stdout.write('0 passed, 0 failed\n');
    return 0;
  }

  const env = { ...process.env, IMGAPI_TEST: '1' };
  env.TEST_POSTGRES_URL ||= DEFAULT_POSTGRES_URL;
  await ensurePostgres(env.TEST_POSTGRES_URL);

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-tests-'));
  const tapFile = path.join(tmp, 'report.tap');
  try {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--test',
        '--test-concurrency=1',
        `--test-timeout=${PER_TEST_TIMEOUT_MS}`,
        '--test-reporter=spec',
        '--test-reporter-destination=stdout',
        '--test-reporter=tap',
        `--test-reporter-destination=${tapFile}`,
        ...nodeOptions,
        ...files,
      ],
      { cwd: ROOT, env, stdio: 'inherit' },
    );
    const forward = (signal) => child.kill(signal);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    const { code, signal } = await new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
    process.off('SIGINT', forward);
    process.off('SIGTERM', forward);

    const counts = countsFromTap(tapFile);
    if (counts) process.stdout.write(`${counts.pass} passed, ${counts.fail} failed\n`);
    else note('the test runner left no summary: counts unknown');
    if (signal) {
      note(`the test runner was killed by ${signal}`);
      return 128 + (os.constants.signals[signal] ?? 1);
    }
    return code ?? 1;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    note(err?.stack ?? String(err));
    process.exit(1);
  },
);
