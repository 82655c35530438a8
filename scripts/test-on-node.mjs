#!/usr/bin/env node
// Runs `npm test` under another major version of Node.js, taken from the npm registry's `node`
// package (it ships the official binary and C headers), without touching this checkout's own
// node_modules, which stay built for the Node that runs everything else.
//
//   node scripts/test-on-node.mjs 26                        the whole suite under Node 26
//   node scripts/test-on-node.mjs 26 test/queue test/e2e    only these files or directories
//
// What it does, all under IMGAPI_NODE_CACHE (default ~/.cache/imgapi):
//   node-26/            `npm install node@26`: the binary and include/node
//   checkout-node-26/   a copy of this checkout's files (tracked and new, as git lists them)
//                       with its own node_modules, beside a link `shared` to ../shared
// Native modules are compiled against that Node's headers (npm_config_nodedir), because
// better-sqlite3's prebuilt binaries come from a host this machine cannot reach. node_modules
// of the copy are kept between runs and reinstalled by setup when the lockfile changes.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { installNode, runtimeEnv } from './node-runtime.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CACHE = process.env.IMGAPI_NODE_CACHE || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'imgapi');

function note(message) {
  process.stderr.write(`test-on-node: ${message}\n`);
}

function die(message) {
  note(`ERROR: ${message}`);
  process.exit(1);
}

function run(cmd, args, options) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', ...options });
  if (r.error) die(`could not run ${cmd}: ${r.error.message}`);
  return r.status ?? 128 + (os.constants.signals[r.signal] ?? 1);
}

/** Copies the checkout's files (not its node_modules or build output) to a fresh copy, keeping the copy's node_modules. */
function syncCopy(major) {
  const parent = path.join(CACHE, `checkout-node-${major}`);
  const copy = path.join(parent, path.basename(ROOT));
  fs.mkdirSync(copy, { recursive: true });

  // Everything but installed packages goes, so files deleted here and stale builds go too.
  const keep = new Set(['node_modules', 'web/node_modules']);
  const clear = (dir, rel) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const relPath = rel ? `${rel}/${entry.name}` : entry.name;
      // Kept when the copy's own; a link (left by an older version of this script) goes.
      if (keep.has(relPath) && !entry.isSymbolicLink()) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory() && [...keep].some((k) => k.startsWith(`${relPath}/`))) clear(full, relPath);
      else fs.rmSync(full, { recursive: true, force: true });
    }
  };
  clear(copy, '');

  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (listed.status !== 0) die(`git ls-files failed: ${listed.stderr}`);
  for (const rel of listed.stdout.split('\0').filter(Boolean)) {
    // A worktree's node_modules may be a link to another checkout's: git lists a link as a file,
    // and copying it would have the copy install into (and build for another Node) that one.
    if (rel.split('/').includes('node_modules')) continue;
    const from = path.join(ROOT, rel);
    if (!fs.existsSync(from)) continue; // deleted but not yet committed
    // Timestamps kept: setup compares them to decide what to reinstall and rebuild.
    const to = path.join(copy, rel);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.cpSync(from, to, { preserveTimestamps: true, dereference: false });
  }

  // The tests read the corpus from ../shared beside the checkout.
  const shared = path.resolve(ROOT, '..', 'shared');
  const link = path.join(parent, 'shared');
  fs.rmSync(link, { force: true, recursive: false });
  if (fs.existsSync(shared)) fs.symlinkSync(shared, link);
  return copy;
}

const [major, ...testArgs] = process.argv.slice(2);
if (!/^\d+$/.test(major ?? '')) die('usage: node scripts/test-on-node.mjs <major> [test files or directories…]');

let node;
try {
  node = installNode(major, path.join(CACHE, `node-${major}`), note);
} catch (err) {
  die(err.message);
}
const copy = syncCopy(major);
const options = {
  cwd: copy,
  env: runtimeEnv(node),
};
if (!testArgs.length) {
  note(`running npm test under Node ${node.version} in ${copy}`);
  process.exit(run('npm', ['test'], options));
}
// A subset: its setup and its tests. Lint and the dependency check read the same files whichever
// Node runs them, and `npm test` under the main Node has run them already.
note(`running ${testArgs.join(' ')} under Node ${node.version} in ${copy}`);
const setup = run(node.bin, ['scripts/setup.mjs', '--test'], options);
process.exit(setup !== 0 ? setup : run(node.bin, ['scripts/run-tests.mjs', ...testArgs], options));
