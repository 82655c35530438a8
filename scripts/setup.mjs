#!/usr/bin/env node
// Makes a fresh clone runnable: npm dependencies, Debian packages for the converters, and the build.
//
//   node scripts/setup.mjs           before `npm start`
//   node scripts/setup.mjs --test    before `npm test`  (adds the browser used by browser tests)
//   node scripts/setup.mjs --bench   before `npm run bench` (adds ImageMagick to compare against)
//   node scripts/setup.mjs --packages   prints the Debian packages the service runs with, one
//                                       line, for images that install them (Dockerfile)
//
// Plain Node, no npm dependencies: it runs before `npm install`. Silent when there is nothing to
// do; one short line per action taken; exits non-zero with a readable message when a step fails.
//
// A system Node older than package.json's `engines` accept (Debian's 20, say): setup brings the
// current LTS from the npm registry's `node` package into .node/ (git-ignored) and runs itself,
// `npm start`, `npm test` and bin/imgapi.mjs under it (scripts/node-runtime.mjs), saying so in one
// line. node_modules are then built for that Node — or, when they are built for another and
// shared with other checkouts (a link), its native modules are built apart in .node/
// (scripts/node-apart.mjs) and node_modules are left as they are.
//
// Whatever Node runs setup, npm, its install scripts and node-gyp run on that Node and compile
// against its headers, not on the first `node` of the caller's PATH nor against a machine-wide
// npm config's nodedir (/root/.npmrc's nodedir=/usr: Debian's Node 20). Native modules that
// another Node built are never rebuilt or reinstalled in place, as that Node may be running them:
// setup stops and says so (under the Node it brought, it builds them apart, as above).
//
// Environment:
//   IMGAPI_SKIP_SYSTEM_PACKAGES=1   skip the Debian package step entirely.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findJemalloc } from './start.mjs';
import { enginesOf, installNode, ownNodeEnv, PROJECT_NODE_MAJOR, projectNodeDir, runtimeEnv, satisfies } from './node-runtime.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ALL = ['start', 'test', 'bench'];

// What the service and its tests need from the system. `probe` returns true when it is there.
// Add a row here rather than special-casing anything below.
const SYSTEM_PACKAGES = [
  {
    what: 'pdftoppm',
    probe: () => hasCommand('pdftoppm'),
    packages: ['poppler-utils'],
    modes: ALL,
    why: 'rasterises PDF pages',
  },
  {
    what: 'soffice',
    probe: () => hasCommand('soffice'),
    packages: ['libreoffice-impress-nogui'],
    modes: ALL,
    why: 'converts presentations',
  },
  {
    what: 'python3-uno',
    // The bridge the warm LibreOffice instances are driven through (src/programs/warm-office.ts);
    // without it every presentation starts a LibreOffice of its own, about a second slower.
    probe: () => spawnSync('/usr/bin/python3', ['-c', 'import uno'], { stdio: 'ignore', timeout: 30_000 }).status === 0,
    packages: ['python3-uno'],
    modes: ALL,
    why: 'keeps LibreOffice instances warm between presentations',
  },
  {
    what: 'ffmpeg',
    // libdav1d decodes AV1 image sequences (animated AVIF), libaom-av1 writes them (src/programs/ffmpeg.ts);
    // libvips reads only AVIF's still items.
    probe: () => hasCommand('ffmpeg'),
    packages: ['ffmpeg'],
    modes: ALL,
    why: 'decodes and encodes animated AVIF (AV1 image sequences)',
  },
  {
    what: 'bwrap',
    probe: () => hasCommand('bwrap'),
    packages: ['bubblewrap'],
    modes: ALL,
    why: 'runs LibreOffice and poppler in a sandbox that sees only their own work directory',
  },
  {
    what: 'fonts (Carlito, Caladea, Liberation, DejaVu, Noto, Noto CJK)',
    // fontconfig provides fc-list itself; without it this probe could never succeed. Every
    // family is checked, so a machine that has some of the set still gets the rest.
    probe: () => {
      const families = output('fc-list', [':', 'family']) ?? '';
      return ['Carlito', 'Caladea', 'Liberation Sans', 'DejaVu Sans', 'Noto Sans', 'Noto Sans CJK'].every((family) => families.includes(family));
    },
    packages: [
      'fontconfig',
      'fonts-crosextra-carlito',
      'fonts-crosextra-caladea',
      'fonts-liberation2',
      'fonts-dejavu-core',
      'fonts-noto-core',
      'fonts-noto-cjk',
    ],
    modes: ALL,
    why: 'metric-compatible fonts so documents render with their intended layout',
  },
  {
    what: 'libjemalloc',
    // Where `npm start`'s launcher looks for it.
    probe: () => findJemalloc() !== undefined,
    packages: ['libjemalloc2'],
    modes: ALL,
    why: "the allocator `npm start` preloads so the server's memory stays flat under libvips (scripts/start.mjs)",
  },
  {
    what: '/usr/bin/chromium',
    probe: () => isExecutable('/usr/bin/chromium'),
    packages: ['chromium'],
    modes: ['test'],
    why: 'browser tests',
  },
  {
    what: 'curl, jq and unzip',
    probe: () => ['curl', 'jq', 'unzip'].every((command) => hasCommand(command)),
    packages: ['curl', 'jq', 'unzip'],
    modes: ['test'],
    why: "the docs' shell examples, which test/docs.test.ts runs",
  },
  {
    what: 'ImageMagick',
    // `convert -version` of the real thing starts with "Version: ImageMagick"; a mere mention of
    // the word (a stand-in script, an error message) does not count.
    probe: () => hasCommand('magick') || /^Version: ImageMagick/m.test(output('convert', ['-version']) ?? ''),
    packages: ['imagemagick'],
    modes: ['bench'],
    why: 'baseline for benchmarks',
  },
  {
    what: 'pngquant, jpegoptim, cjpeg, cwebp',
    // The specialists the compression benchmark measures compress against (Debian has no mozjpeg:
    // cjpeg is libjpeg-turbo's).
    probe: () => ['pngquant', 'jpegoptim', 'cjpeg', 'cwebp'].every((command) => hasCommand(command)),
    packages: ['pngquant', 'jpegoptim', 'libjpeg-turbo-progs', 'webp'],
    modes: ['bench'],
    why: 'the specialist compressors of the compression benchmark',
  },
  {
    what: 'djxl, cjxl',
    // libjxl's reference tools: tests check that the JPEG XL this service writes decodes with
    // djxl, and the JPEG XL benchmark times cjxl beside the service's encoder (src/imaging/jxl.ts).
    probe: () => hasCommand('djxl') && hasCommand('cjxl'),
    packages: ['libjxl-tools'],
    modes: ['test', 'bench'],
    why: 'the reference JPEG XL decoder and encoder the JPEG XL output is checked and timed against',
  },
  {
    what: 'wrk',
    probe: () => hasCommand('wrk'),
    packages: ['wrk'],
    modes: ['bench'],
    why: 'HTTP load generator of the status-polls benchmark',
  },
];

const LOCK_STALE_MS = 30 * 60 * 1000;
const SYSTEM_LOCK = path.join(os.tmpdir(), 'imgapi-setup.lock');
// Serialises npm install / tsc for this checkout (e.g. `npm start` and `npm test` started together).
const REPO_LOCK = path.join(os.tmpdir(), `imgapi-setup-${createHash('sha1').update(ROOT).digest('hex').slice(0, 12)}.lock`);

class SetupError extends Error {}

function note(message) {
  process.stderr.write(`setup: ${message}\n`);
}

function fail(message) {
  throw new SetupError(message);
}

// ---------------------------------------------------------------------------------------------
// Small file-system and process helpers

function exists(p) {
  return fs.existsSync(p);
}

function mtime(p) {
  try {
    return fs.statSync(p).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Newest mtime of the files under `dir` whose name passes `filter`; -Infinity when none. */
function newestMtime(dir, filter = () => true) {
  let newest = -Infinity;
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return newest;
  }
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name === 'node_modules' || entry.name === '.git') continue;
      newest = Math.max(newest, newestMtime(full, filter));
    } else if (filter(entry.name)) {
      newest = Math.max(newest, mtime(full) ?? -Infinity);
    }
  }
  return newest;
}

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function hasCommand(name) {
  return (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter(Boolean)
    .some((dir) => isExecutable(path.join(dir, name)));
}

/** stdout of a command that exited 0, or undefined. */
function output(cmd, args) {
  if (!hasCommand(cmd)) return undefined;
  const r = spawnSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 30_000 });
  return r.status === 0 ? r.stdout : undefined;
}

// npm, its install scripts and node-gyp run on the Node that runs setup and build against its
// headers, whatever Node the caller's PATH or npm's config would pick.
const OWN_NODE_ENV = ownNodeEnv();

/** Runs a command with inherited stdio; fails the setup with `what` in the message. */
function run(cmd, args, { what, cwd = ROOT, env } = {}) {
  const r = spawnSync(cmd, args, { cwd, stdio: 'inherit', env: { ...OWN_NODE_ENV, ...env } });
  if (r.error) fail(`${what}: could not run ${cmd}: ${r.error.message}`);
  if (r.status !== 0) {
    const how = r.signal ? `was killed by ${r.signal}` : `exited with code ${r.status}`;
    fail(`${what} failed: \`${[cmd, ...args].join(' ')}\` ${how} (see its output above)`);
  }
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

// ---------------------------------------------------------------------------------------------
// Locks: a directory made with mkdir (atomic), holding the owner's pid; stale after 30 minutes or
// when its owner is gone.

const heldLocks = new Set();

function releaseLock(dir) {
  if (!heldLocks.delete(dir)) return;
  fs.rmSync(dir, { recursive: true, force: true });
}

process.on('exit', () => {
  for (const dir of [...heldLocks]) releaseLock(dir);
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    for (const dir of [...heldLocks]) releaseLock(dir);
    process.exit(128 + (os.constants.signals[signal] ?? 1));
  });
}

function lockIsStale(dir) {
  const age = Date.now() - (mtime(dir) ?? Date.now());
  if (age > LOCK_STALE_MS) return true;
  let pid;
  try {
    pid = Number(fs.readFileSync(path.join(dir, 'pid'), 'utf8'));
  } catch {
    return false; // being created right now, or written by someone we cannot read: trust the age
  }
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return err.code === 'ESRCH';
  }
}

function withLock(dir, purpose, fn) {
  let waited = false;
  for (;;) {
    try {
      fs.mkdirSync(dir);
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') fail(`cannot create lock ${dir}: ${err.message}`);
    }
    if (lockIsStale(dir)) {
      note(`removing stale lock ${dir}`);
      fs.rmSync(dir, { recursive: true, force: true });
      continue;
    }
    if (!waited) {
      note(`waiting for another setup to finish ${purpose} (lock ${dir})`);
      waited = true;
    }
    sleep(1000);
  }
  heldLocks.add(dir);
  try {
    fs.writeFileSync(path.join(dir, 'pid'), String(process.pid));
    return fn();
  } finally {
    releaseLock(dir);
  }
}

// ---------------------------------------------------------------------------------------------
// npm dependencies (for the repository and for any sub-project such as web/)

/** The names of the packages `dir`'s package.json needs installed (dev ones too: we build and test). */
function requiredPackages(dir) {
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  } catch (err) {
    fail(`cannot read ${path.join(dir, 'package.json')}: ${err.message}`);
  }
  return ['dependencies', 'devDependencies'].flatMap((key) => Object.keys(manifest[key] ?? {}));
}

function npmDepsState(dir) {
  const required = requiredPackages(dir);
  // npm creates no node_modules for a package without dependencies: nothing to install then.
  if (required.length === 0) return 'ok';
  const nodeModules = path.join(dir, 'node_modules');
  const lockfile = path.join(dir, 'package-lock.json');
  if (!exists(nodeModules)) return exists(lockfile) ? 'ci' : 'install';
  const installed = mtime(path.join(nodeModules, '.package-lock.json'));
  if (installed === undefined) return 'install';
  // An install made with NODE_ENV=production or --omit=dev lacks the build and test tools.
  if (required.some((name) => !exists(path.join(nodeModules, name, 'package.json')))) return 'install';
  const manifest = Math.max(mtime(path.join(dir, 'package.json')) ?? -Infinity, mtime(lockfile) ?? -Infinity);
  return manifest > installed ? 'install' : 'ok';
}

function ensureNpmDeps(dir) {
  const rel = path.relative(ROOT, dir) || '.';
  if (npmDepsState(dir) === 'ok') return;
  const nodeModules = path.join(dir, 'node_modules');
  if (fs.lstatSync(nodeModules, { throwIfNoEntry: false })?.isSymbolicLink()) {
    // Another checkout's install, shared: installing here would change it under that checkout.
    note(`${path.relative(ROOT, nodeModules)} is a link to ${fs.realpathSync(nodeModules)}: not installing into it (npm install there)`);
    return;
  }
  withLock(REPO_LOCK, 'installing npm packages', () => {
    const state = npmDepsState(dir); // another setup may have done it while we waited
    if (state === 'ok') return;
    // npm would build what changed for this Node, beside the rest built for a Node that may be running them.
    refuseForeignNativeModules(nodeModules, `not running npm ${state} in ${rel}`);
    // --include=dev: we compile and test from source, so the dev dependencies (TypeScript, Vite,
    // tsx) are needed even where NODE_ENV=production makes npm leave them out by default.
    const args = [state, '--include=dev', '--no-audit', '--no-fund'];
    note(
      `npm ${args[0]} in ${rel} (${state === 'ci' ? 'no node_modules yet' : 'package.json or package-lock.json changed, or a package is missing'})`,
    );
    run('npm', args, { cwd: dir, what: `npm ${args[0]} in ${rel}` });
    const built = foreignNativeModules(nodeModules);
    if (built) {
      const headers = OWN_NODE_ENV.npm_config_nodedir ?? 'none found for this Node, so `npm config get nodedir` applies';
      fail(`after npm ${args[0]} in ${rel}: ${describeForeign(built)}; node-gyp compiled against other headers (npm_config_nodedir: ${headers})`);
    }
    // npm leaves the hidden lockfile untouched when nothing changed; mark it current so an edited
    // but equivalent package.json does not trigger an install on every run.
    const hidden = path.join(dir, 'node_modules', '.package-lock.json');
    if (exists(hidden)) {
      const now = new Date();
      fs.utimesSync(hidden, now, now);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Debian packages

function missingSystemPackages(mode) {
  return SYSTEM_PACKAGES.filter((row) => row.modes.includes(mode) && !row.probe());
}

function describe(rows) {
  return rows.map((row) => `${row.what} (${row.why})`).join(', ');
}

function packagesOf(rows) {
  return [...new Set(rows.flatMap((row) => row.packages))];
}

function ensureSystemPackages(mode) {
  if (process.env.IMGAPI_SKIP_SYSTEM_PACKAGES === '1') return;
  let missing = missingSystemPackages(mode);
  if (missing.length === 0) return;

  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const hasApt = hasCommand('apt-get');
  if (!hasApt) {
    note(
      `missing ${describe(missing)}; no apt-get here: install the equivalents of ` +
        `${packagesOf(missing).join(' ')} by hand. Continuing: /readyz reports what is unavailable.`,
    );
    return;
  }
  if (!isRoot) {
    note(`missing ${describe(missing)}. Install with:`);
    process.stderr.write(`  sudo apt-get install -y --no-install-recommends ${packagesOf(missing).join(' ')}\n`);
    note('continuing without them: /readyz reports what is unavailable.');
    return;
  }

  withLock(SYSTEM_LOCK, 'installing system packages', () => {
    missing = missingSystemPackages(mode); // another setup may have installed them meanwhile
    if (missing.length === 0) return;
    const pkgs = packagesOf(missing);
    note(`installing ${pkgs.join(' ')} with apt-get for ${describe(missing)}`);
    const hint = ' (set IMGAPI_SKIP_SYSTEM_PACKAGES=1 to skip this step)';
    const env = { DEBIAN_FRONTEND: 'noninteractive' };
    try {
      run('apt-get', ['update', '-q'], { what: 'apt-get update', env });
      run('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...pkgs], { what: 'apt-get install', env });
    } catch (err) {
      if (err instanceof SetupError) fail(err.message + hint);
      throw err;
    }
    const still = missingSystemPackages(mode);
    if (still.length > 0) {
      note(`installed, but still missing ${describe(still)}: check the package table in scripts/setup.mjs`);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Build

function buildServer() {
  const mainJs = path.join(ROOT, 'dist', 'src', 'main.js');
  const inputsNewest = () =>
    Math.max(
      newestMtime(path.join(ROOT, 'src'), (name) => name.endsWith('.ts')),
      // The client commands are built on the SDK.
      newestMtime(path.join(ROOT, 'sdk'), (name) => name.endsWith('.ts') && !name.endsWith('.d.ts')),
      mtime(path.join(ROOT, 'tsconfig.json')) ?? -Infinity,
    );
  const stale = () => {
    const built = mtime(mainJs);
    return built === undefined || inputsNewest() > built;
  };
  if (!stale()) return;

  withLock(REPO_LOCK, 'building', () => {
    if (!stale()) return;
    const tsc = path.join(ROOT, 'node_modules', '.bin', 'tsc');
    if (!exists(tsc)) fail(`TypeScript compiler not found at ${path.relative(ROOT, tsc)}: run \`npm install\``);
    note('building the server (tsc -p tsconfig.json)');
    try {
      run(tsc, ['-p', 'tsconfig.json'], { what: 'TypeScript build' });
    } catch (err) {
      // tsc still emits on type errors; make sure the next run rebuilds instead of trusting it.
      if (exists(mainJs)) fs.utimesSync(mainJs, new Date(0), new Date(0));
      throw err;
    }
    if (!exists(mainJs)) {
      note(`tsc succeeded but did not produce ${path.relative(ROOT, mainJs)} (is there a src/main.ts?)`);
    }
  });
}

/**
 * Builds a sub-project with its own package.json (e.g. web/) when its dist is older than its
 * sources: its own files and `shared`, the repository's files it imports.
 */
function buildSubproject(name, shared = []) {
  const dir = path.join(ROOT, name);
  if (!exists(path.join(dir, 'package.json'))) return;
  ensureNpmDeps(dir);

  const dist = path.join(dir, 'dist');
  const stale = () => {
    const built = newestMtime(dist);
    if (built === -Infinity) return true;
    const topLevelFiles = fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isFile() && e.name !== 'package-lock.json')
      .map((e) => mtime(path.join(dir, e.name)) ?? -Infinity);
    const sources = Math.max(
      newestMtime(path.join(dir, 'src')),
      newestMtime(path.join(dir, 'public')),
      ...topLevelFiles,
      ...shared.map((file) => mtime(path.join(ROOT, file)) ?? -Infinity),
    );
    return sources > built;
  };
  if (!stale()) return;

  withLock(REPO_LOCK, `building ${name}/`, () => {
    if (!stale()) return;
    note(`building ${name}/ (npm --prefix ${name} run build)`);
    run('npm', ['--prefix', name, 'run', 'build'], { what: `build of ${name}/` });
  });
}

// ---------------------------------------------------------------------------------------------
// Native modules for the Node that runs setup

/** The compiled addons (build/Release/*.node) of the packages node-gyp builds, by package name. */
function nativeAddons(nodeModules) {
  const packages = [];
  for (const entry of fs.readdirSync(nodeModules, { withFileTypes: true })) {
    if (entry.name.startsWith('.')) continue;
    const names = entry.name.startsWith('@') ? fs.readdirSync(path.join(nodeModules, entry.name)).map((n) => `${entry.name}/${n}`) : [entry.name];
    for (const name of names) {
      const release = path.join(nodeModules, name, 'build', 'Release');
      if (!exists(path.join(nodeModules, name, 'binding.gyp')) || !exists(release)) continue;
      const addons = fs
        .readdirSync(release)
        .filter((f) => f.endsWith('.node'))
        .map((f) => path.join(release, f));
      packages.push({ name, version: JSON.parse(fs.readFileSync(path.join(nodeModules, name, 'package.json'), 'utf8')).version, addons });
    }
  }
  return packages;
}

/**
 * The NODE_MODULE_VERSION the addons were built for when it is not this Node's, else undefined:
 * one built for another Node fails to load naming it. (A build directory also holds files that
 * are no Node addon at all, such as better-sqlite3's test_extension.node, a SQLite extension:
 * those fail otherwise and do not count.)
 */
function foreignAbi(addons) {
  if (addons.length === 0) return undefined;
  const probe = `for (const f of ${JSON.stringify(addons)}) try { require(f) } catch (e) { const m = /NODE_MODULE_VERSION (\\d+)/.exec(e.message); if (m) { process.stdout.write(m[1]); break } }`;
  const r = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8' });
  if (r.status !== 0)
    fail(`probing the native modules with ${process.execPath} failed (exit ${r.status ?? r.signal}): ${r.stderr.trim().slice(-500)}`);
  return r.stdout || undefined;
}

/** `nodeModules`' native modules when they were built for another Node than this one: their names and that Node's ABI. */
function foreignNativeModules(nodeModules) {
  if (!exists(nodeModules)) return undefined;
  const natives = nativeAddons(nodeModules);
  const abi = foreignAbi(natives.flatMap((p) => p.addons));
  return abi && { dir: nodeModules, abi, names: natives.map((p) => p.name) };
}

function describeForeign({ dir, abi, names }) {
  return `${names.join(', ')} in ${path.relative(ROOT, dir)} built for NODE_MODULE_VERSION ${abi}, not ${process.versions.modules} (Node ${process.version})`;
}

/**
 * Under the Node setup brought: node_modules' native modules must load in it. When they were
 * built for another Node, they are built for this one in .node/node_modules, at the same
 * versions, and listed in .node/apart.json for scripts/node-apart.mjs; node_modules stay as
 * they are. When they load, nothing is apart.
 */
function ensureNativeModules() {
  const dir = projectNodeDir(ROOT);
  const listing = path.join(dir, 'apart.json');
  const nodeModules = path.join(ROOT, 'node_modules');
  if (!exists(nodeModules)) return;
  const natives = nativeAddons(nodeModules);
  if (!foreignAbi(natives.flatMap((p) => p.addons))) {
    if (exists(listing)) {
      note(`node_modules are built for Node ${process.version} now: the native modules in .node/ are no longer used`);
      fs.rmSync(listing);
    }
    return;
  }
  const wanted = { abi: process.versions.modules, packages: natives.map((p) => p.name), versions: natives.map((p) => `${p.name}@${p.version}`) };
  let current;
  try {
    current = JSON.parse(fs.readFileSync(listing, 'utf8'));
  } catch {
    current = undefined;
  }
  if (JSON.stringify(current) === JSON.stringify(wanted)) return;
  withLock(REPO_LOCK, 'building native modules', () => {
    note(
      `node_modules are built for another Node: building ${wanted.versions.join(' ')} for Node ${process.version} in .node/ (node_modules untouched)`,
    );
    fs.writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify(
        {
          private: true,
          dependencies: Object.fromEntries(natives.map((p) => [p.name, p.version])),
          allowScripts: Object.fromEntries(natives.map((p) => [p.name, true])),
        },
        null,
        2,
      ),
    );
    run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, what: 'the native modules for .node/' });
    const built = nativeAddons(path.join(dir, 'node_modules')).filter((p) => wanted.packages.includes(p.name));
    if (foreignAbi(built.flatMap((p) => p.addons))) fail(`the native modules built in ${dir} do not load in Node ${process.version}`);
    fs.writeFileSync(listing, `${JSON.stringify(wanted, null, 2)}\n`);
  });
}

/**
 * Stops setup when `nodeModules`' native modules were built for another Node than this one:
 * reinstalling or rebuilding them in place (`refused`: what setup was about to do) would break
 * them for the Node they were built for, which may be running them, and going on would fail
 * every test that opens SQLite.
 */
function refuseForeignNativeModules(nodeModules, refused) {
  const foreign = foreignNativeModules(nodeModules);
  if (!foreign) return;
  fail(
    `${refused}: ${describeForeign(foreign)}, and the Node they were built for may be using them. ` +
      'Run setup under that Node, or remove node_modules so that setup installs them for this one',
  );
}

/**
 * A system Node that `engines` do not accept: the LTS into .node/ (once), then setup again under
 * it. Returns its exit code; undefined when this Node is fine.
 */
function underProjectNode(argv) {
  const engines = enginesOf(ROOT);
  if (satisfies(process.version, engines)) return undefined;
  let runtime;
  try {
    runtime = installNode(PROJECT_NODE_MAJOR, path.join(projectNodeDir(ROOT), 'runtime'), note);
  } catch (err) {
    fail(`Node ${process.version} is older than this project supports (${engines}), and bringing Node ${PROJECT_NODE_MAJOR} failed: ${err.message}`);
  }
  note(
    `Node ${process.version} here is older than this project supports (${engines}): setup, npm start, npm test and bin/imgapi.mjs run on Node ${runtime.version} in .node/ (the npm registry's node package)`,
  );
  const r = spawnSync(runtime.bin, [fileURLToPath(import.meta.url), ...argv], { stdio: 'inherit', env: runtimeEnv(runtime) });
  return r.status ?? 1;
}

// ---------------------------------------------------------------------------------------------

function parseMode(argv) {
  const usage = 'usage: node scripts/setup.mjs [--test | --bench | --build-only | --packages]';
  if (argv.length > 1) fail(usage);
  if (argv.length === 0) return 'start';
  if (argv[0] === '--test') return 'test';
  if (argv[0] === '--bench') return 'bench';
  if (argv[0] === '--build-only') return 'build-only';
  if (argv[0] === '--packages') return 'packages';
  if (argv[0] === '--help' || argv[0] === '-h') {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  fail(`unknown argument ${argv[0]}; ${usage}`);
}

try {
  const mode = parseMode(process.argv.slice(2));
  if (mode === 'packages') {
    process.stdout.write(`${packagesOf(SYSTEM_PACKAGES.filter((row) => row.modes.includes('start'))).join(' ')}\n`);
    process.exit(0);
  }
  const code = underProjectNode(process.argv.slice(2));
  if (code !== undefined) process.exit(code);
  ensureNpmDeps(ROOT);
  // Setup runs under the Node it brought (underProjectNode): that Node's native modules.
  if (process.execPath.startsWith(projectNodeDir(ROOT) + path.sep)) ensureNativeModules();
  // Under any other Node (the system's, another checkout's) they must load as they are.
  else refuseForeignNativeModules(path.join(ROOT, 'node_modules'), 'Not rebuilding them in place');
  if (mode !== 'build-only') ensureSystemPackages(mode);
  buildServer();
  // The dashboard reads the task statuses from the server and the API's types from the SDK's.
  buildSubproject('web', ['src/db/schema.ts', 'sdk/openapi.ts']);
} catch (err) {
  if (!(err instanceof SetupError)) throw err;
  process.stderr.write(`setup: ERROR: ${err.message}\n`);
  process.exit(1);
}
