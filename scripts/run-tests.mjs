#!/usr/bin/env node
// Runs the test suite with Node's built-in test runner on TypeScript files through tsx.
//
//   node scripts/run-tests.mjs                      every test/**/*.test.ts
//   node scripts/run-tests.mjs test/a.test.ts ...   only these files (a directory means its *.test.ts)
//   node scripts/run-tests.mjs --test-name-pattern=queue   only the tests whose name matches
//   node scripts/run-tests.mjs --test-concurrency=1        one file at a time (default: 2)
//   node scripts/run-tests.mjs --record-durations          also writes test/durations.json
//
// Files run two at a time, each in its own process (every test makes its own data directory,
// database and ports), the longest first by test/durations.json (seconds per file, from a
// recorded run; a file it does not list counts as a minute) so that no long file starts last.
// Makes sure the local PostgreSQL answers first (starting it when we are root), sets IMGAPI_TEST=1
// and TEST_POSTGRES_URL for the tests, prints the spec report, then one line "N passed, N failed",
// and exits non-zero when a test failed.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { projectNode } from './node-runtime.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
// A test (or a whole file) that runs longer fails; IMGAPI_TEST_TIMEOUT_MS raises it for a long run (bench/scenarios/conformance.ts).
const PER_TEST_TIMEOUT_MS = Number(process.env.IMGAPI_TEST_TIMEOUT_MS) || 600_000;

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
// Order: the longest files first

const DURATIONS = path.join(ROOT, 'test', 'durations.json');
const UNKNOWN_FILE_SECONDS = 60;

function readDurations() {
  try {
    return JSON.parse(fs.readFileSync(DURATIONS, 'utf8'));
  } catch {
    return {};
  }
}

function longestFirst(files) {
  const seconds = readDurations();
  const of = (file) => seconds[file] ?? UNKNOWN_FILE_SECONDS;
  return [...files].sort((a, b) => of(b) - of(a) || a.localeCompare(b));
}

// ---------------------------------------------------------------------------------------------
// The run itself happens in a child process started with `--import tsx/esm` (the sources and the
// tests are ES modules: tsx's CommonJS hook would only cost time), which the test files' processes
// inherit: node:test's run() keeps the order it is given (the CLI's `--test` sorts).

function option(args, name) {
  const arg = args.find((a) => a.startsWith(`${name}=`));
  return arg === undefined ? undefined : arg.slice(name.length + 1);
}

async function runInChild() {
  const { run } = await import('node:test');
  const { spec } = await import('node:test/reporters');
  const { files, concurrency, namePatterns, only, record } = JSON.parse(process.env.IMGAPI_RUN_TESTS);
  delete process.env.IMGAPI_RUN_TESTS; // the test files' processes get this environment
  const stream = run({
    files: files.map((f) => path.join(ROOT, f)),
    concurrency,
    timeout: PER_TEST_TIMEOUT_MS,
    ...(namePatterns.length ? { testNamePatterns: namePatterns } : {}),
    only,
  });
  const report = stream.compose(spec);
  report.pipe(process.stdout);
  const reported = new Promise((resolve) => report.once('end', resolve));
  const counts = { pass: 0, fail: 0, cancelled: 0 };
  const seconds = {};
  let failed = false;
  for await (const event of stream) {
    if (event.type === 'test:fail') failed = true;
    // Only a test file's own tests count (one defined in a helper module names that module).
    if (
      (event.type === 'test:pass' || event.type === 'test:fail') &&
      event.data.nesting === 0 &&
      files.includes(path.relative(ROOT, event.data.file ?? ''))
    ) {
      const file = path.relative(ROOT, event.data.file);
      seconds[file] = (seconds[file] ?? 0) + (event.data.details?.duration_ms ?? 0) / 1000;
    }
    if (event.type === 'test:diagnostic' && event.data.nesting === 0) {
      const m = /^(pass|fail|cancelled) (\d+)$/.exec(event.data.message);
      if (m) counts[m[1]] = Number(m[2]);
    }
  }
  await reported;
  if (record) {
    const merged = { ...readDurations() };
    for (const [file, s] of Object.entries(seconds)) merged[file] = Math.round(s * 10) / 10;
    const sorted = Object.fromEntries(Object.entries(merged).sort(([a], [b]) => a.localeCompare(b)));
    fs.writeFileSync(DURATIONS, `${JSON.stringify(sorted, null, 2)}\n`);
    note(`wrote ${path.relative(ROOT, DURATIONS)}`);
  }
  // A cancelled test (its file crashed, its parent failed or it timed out) did not pass either.
  process.stdout.write(`${counts.pass} passed, ${counts.fail + counts.cancelled} failed\n`);
  return failed || counts.fail + counts.cancelled > 0 ? 1 : 0;
}

async function main() {
  const args = process.argv.slice(2);
  const options = args.filter((a) => a.startsWith('-'));
  const known = ['--test-name-pattern', '--test-concurrency', '--test-only', '--record-durations'];
  const unknown = options.filter((a) => !known.includes(a.split('=')[0]));
  if (unknown.length) {
    note(`unknown option ${unknown.join(' ')}; known: ${known.join(' ')}`);
    return 2;
  }
  const files = longestFirst(collectFiles(args.filter((a) => !a.startsWith('-'))));
  if (files.length === 0) {
    note('no *.test.ts files found under test/');
    process.stdout.write('0 passed, 0 failed\n');
    return 0;
  }
  const concurrency = Number(option(options, '--test-concurrency') ?? 2);
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    note('--test-concurrency takes a whole number from 1');
    return 2;
  }

  // The Node setup brought when the system's is too old (scripts/node-runtime.mjs).
  const node = projectNode(ROOT);
  const env = { ...node.env, IMGAPI_TEST: '1' };
  env.TEST_POSTGRES_URL ||= DEFAULT_POSTGRES_URL;
  await ensurePostgres(env.TEST_POSTGRES_URL);

  env.IMGAPI_RUN_TESTS = JSON.stringify({
    files,
    concurrency: Math.min(concurrency, files.length),
    namePatterns: options.filter((a) => a.startsWith('--test-name-pattern=')).map((a) => a.slice('--test-name-pattern='.length)),
    only: options.includes('--test-only'),
    record: options.includes('--record-durations'),
  });
  const child = spawn(node.bin, ['--import', 'tsx/esm', fileURLToPath(import.meta.url)], { cwd: ROOT, env, stdio: 'inherit' });
  const forward = (signal) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const { code, signal } = await new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  process.off('SIGINT', forward);
  process.off('SIGTERM', forward);
  if (signal) {
    note(`the test runner was killed by ${signal}`);
    return 128 + (os.constants.signals[signal] ?? 1);
  }
  return code ?? 1;
}

(process.env.IMGAPI_RUN_TESTS ? runInChild() : main()).then(
  (code) => process.exit(code),
  (err) => {
    note(err?.stack ?? String(err));
    process.exit(1);
  },
);
