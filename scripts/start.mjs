#!/usr/bin/env node
// Runs the server (`node dist/src/main.js serve`, or the arguments given) with jemalloc as its
// allocator when the system has it (Debian's libjemalloc2). sharp's documentation advises it on
// glibc: libvips allocates and frees large buffers from many threads, and glibc's per-thread arenas
// keep much of that memory, so a long-running server's RSS grows where with jemalloc it stays flat.
//
//   node scripts/start.mjs [main.js arguments …]   (what `npm start` runs after setup)
//
// LD_PRELOAD only takes effect when a process starts, so this launcher starts the server as its
// child with LD_PRELOAD set, passes on SIGINT, SIGTERM and SIGHUP, and exits as the server did.
// The server runs in a session of its own: a terminal's Ctrl-C, which reaches the whole foreground
// process group, then reaches it once (through this launcher), not twice — a second SIGINT would
// cut its graceful shutdown short.
// Nothing changes when LD_PRELOAD is set already (the operator chose), when IMGAPI_JEMALLOC=0, or
// when no libjemalloc is installed: the server then runs on glibc's allocator, as `node` would.
//
// Plain Node, no npm dependencies.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { projectNode } from './node-runtime.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Where Debian and Ubuntu's libjemalloc2 puts the library, for each architecture, and the usual alternatives. */
const CANDIDATES = [
  '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2',
  '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2',
  '/usr/lib/arm-linux-gnueabihf/libjemalloc.so.2',
  '/usr/lib64/libjemalloc.so.2',
  '/usr/lib/libjemalloc.so.2',
  '/usr/local/lib/libjemalloc.so.2',
];

/**
 * The jemalloc shared library to preload, or undefined.
 * @param {string[]} [candidates]
 * @returns {string | undefined}
 */
export function findJemalloc(candidates = CANDIDATES) {
  return candidates.find((file) => {
    try {
      return fs.statSync(file).isFile();
    } catch {
      return false;
    }
  });
}

/**
 * The environment for the server: `env` with LD_PRELOAD set to `library` (jemalloc's, or undefined) when that applies.
 * @param {NodeJS.ProcessEnv} env
 * @param {string | undefined} library
 * @returns {NodeJS.ProcessEnv}
 */
export function serverEnvironment(env, library) {
  if (env.IMGAPI_JEMALLOC === '0' || env.LD_PRELOAD || !library) return env;
  return { ...env, LD_PRELOAD: library };
}

function main() {
  const args = process.argv.slice(2);
  // The Node setup brought when the system's is too old (scripts/node-runtime.mjs).
  const node = projectNode(ROOT);
  const env = serverEnvironment(node.env, findJemalloc());
  const child = spawn(node.bin, [...process.execArgv, path.join(ROOT, 'dist', 'src', 'main.js'), ...(args.length ? args : ['serve'])], {
    env,
    stdio: 'inherit',
    detached: true,
  });
  for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM', 'SIGHUP'])) {
    process.on(signal, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  child.once('error', (err) => {
    process.stderr.write(`start: cannot run the server: ${err.message}\n`);
    process.exit(1);
  });
  child.once('exit', (code, signal) => {
    process.exitCode = code ?? 128 + (signal ? os.constants.signals[signal] : 1);
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
