// scripts/setup.mjs builds native modules only for the Node that runs it, and never over ones
// built for another Node. Each case runs setup in a small checkout of its own (the three scripts,
// a package.json, no network): `npm` is a stand-in that records what it would build with, and the
// first `node` on PATH is another one, as when a caller's PATH is not the suite's. A CI clone
// once had better-sqlite3 built for Node 20's headers (a machine-wide npm config's nodedir=/usr)
// while Node 26 ran setup; every SQLite test then failed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { PROJECT_NODE_MAJOR, enginesOf, projectNode } from '../scripts/node-runtime.mjs';
import { REPO_ROOT, tempDir } from './helpers.js';

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

function writeFile(file: string, text: string, mode = 0o644): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text, { mode });
}

/** The version node_version.h under `nodedir` declares, e.g. v26.10.0. */
function headersVersion(nodedir: string): string {
  const header = fs.readFileSync(path.join(nodedir, 'include', 'node', 'node_version.h'), 'utf8');
  const part = (name: string) => new RegExp(`^#define NODE_${name}_VERSION (\\d+)$`, 'm').exec(header)?.[1];
  return `v${part('MAJOR')}.${part('MINOR')}.${part('PATCH')}`;
}

interface Checkout {
  root: string;
  /** What the stand-in npm was run with: its arguments, the `node` it found, npm_config_nodedir. */
  npmCalls: () => { args: string; node: string; nodedir: string }[];
  setup: (...args: string[]) => { status: number | null; stderr: string };
}

/**
 * A checkout with one dependency (`dep`) and a build that is current. First on PATH: a stand-in
 * npm (it installs `dep`, then runs the shell lines `also`) and another `node`; npm's config
 * (npm_config_nodedir) names another Node's headers.
 */
function checkout(engines = enginesOf(REPO_ROOT), also = ''): Checkout {
  const root = tempDir('imgapi-setup-');
  dirs.push(root);
  fs.mkdirSync(path.join(root, 'scripts'));
  for (const script of ['setup.mjs', 'node-runtime.mjs', 'start.mjs'])
    fs.copyFileSync(path.join(REPO_ROOT, 'scripts', script), path.join(root, 'scripts', script));
  writeFile(
    path.join(root, 'package.json'),
    JSON.stringify({ name: 'x', private: true, type: 'module', engines: { node: engines }, dependencies: { dep: '1.0.0' } }),
  );
  writeFile(path.join(root, 'package-lock.json'), '{}');
  writeFile(path.join(root, 'dist', 'src', 'main.js'), '');
  const bin = path.join(root, 'bin');
  const log = path.join(root, 'npm.log');
  writeFile(path.join(bin, 'node'), '#!/bin/sh\necho v0.0.0-another-node\n', 0o755);
  writeFile(
    path.join(bin, 'npm'),
    `#!/bin/sh
printf '%s\\t%s\\t%s\\n' "$*" "$(node -p process.version)" "$npm_config_nodedir" >> '${log}'
mkdir -p node_modules/dep && echo '{"name":"dep","version":"1.0.0"}' > node_modules/dep/package.json && echo '{}' > node_modules/.package-lock.json
${also}
`,
    0o755,
  );
  const otherHeaders = path.join(root, 'other-headers');
  writeFile(
    path.join(otherHeaders, 'include', 'node', 'node_version.h'),
    '#define NODE_MAJOR_VERSION 20\n#define NODE_MINOR_VERSION 0\n#define NODE_PATCH_VERSION 0\n',
  );
  const env = {
    PATH: `${bin}${path.delimiter}/usr/bin${path.delimiter}/bin`,
    HOME: root,
    npm_config_nodedir: otherHeaders,
    IMGAPI_SKIP_SYSTEM_PACKAGES: '1',
  };
  return {
    root,
    npmCalls: () =>
      fs.existsSync(log)
        ? fs
            .readFileSync(log, 'utf8')
            .trim()
            .split('\n')
            .map((line) => {
              const [args = '', node = '', nodedir = ''] = line.split('\t');
              return { args, node, nodedir };
            })
        : [],
    setup: (...args) => {
      const r = spawnSync(process.execPath, [path.join(root, 'scripts', 'setup.mjs'), ...args], { cwd: root, env, encoding: 'utf8' });
      return { status: r.status, stderr: r.stderr };
    },
  };
}

/**
 * A native module in `root`/node_modules as node-gyp leaves it, whose addon is built for
 * NODE_MODULE_VERSION `abi`: a stand-in compiled with cc that registers itself as such.
 */
function nativeModule(root: string, abi: number): string {
  const dir = path.join(root, 'node_modules', 'native');
  writeFile(path.join(dir, 'package.json'), '{"name":"native","version":"1.0.0"}');
  writeFile(path.join(dir, 'binding.gyp'), '{}');
  const source = path.join(root, 'native.c');
  writeFile(
    source,
    `struct node_module { int version; unsigned flags; void *dso; const char *file; void *init; void *context_init; const char *name; void *priv; struct node_module *link; };
extern void node_module_register(void *);
static struct node_module m = { ${abi}, 0, 0, "native.c", 0, 0, "native", 0, 0 };
__attribute__((constructor)) static void registered(void) { node_module_register(&m); }
`,
  );
  const addon = path.join(dir, 'build', 'Release', 'native.node');
  fs.mkdirSync(path.dirname(addon), { recursive: true });
  const cc = spawnSync('cc', ['-shared', '-fPIC', '-o', addon, source], { encoding: 'utf8' });
  assert.equal(cc.status, 0, `cc builds the stand-in addon (setup needs a compiler for better-sqlite3 too): ${cc.error?.message ?? cc.stderr}`);
  return addon;
}

const ANOTHER_ABI = Number(process.versions.modules) - 1;

describe('setup and the Node native modules are built for', () => {
  it("runs npm on the Node that runs setup, against that Node's headers, whatever PATH and npm's config say", () => {
    const { setup, npmCalls } = checkout();
    const r = setup('--build-only');
    assert.equal(r.status, 0, r.stderr);
    const [call, ...more] = npmCalls();
    assert.deepEqual(more, []);
    assert.match(call!.args, /^ci /);
    assert.equal(call!.node, process.version, "npm and its install scripts run on setup's Node, not the first on the caller's PATH");
    assert.ok(!call!.nodedir.endsWith('other-headers'), `node-gyp is not pointed at another Node's headers: ${call!.nodedir}`);
    if (call!.nodedir) assert.equal(headersVersion(call!.nodedir), process.version);
  });

  it('does not install into node_modules whose native modules another Node built', () => {
    const { root, setup, npmCalls } = checkout();
    const addon = nativeModule(root, ANOTHER_ABI);
    writeFile(path.join(root, 'node_modules', 'dep', 'package.json'), '{"name":"dep","version":"1.0.0"}');
    writeFile(path.join(root, 'node_modules', '.package-lock.json'), '{}');
    const built = fs.readFileSync(addon);
    // package.json newer than the install: an install is due.
    fs.utimesSync(path.join(root, 'node_modules', '.package-lock.json'), new Date(0), new Date(0));
    let r = setup('--build-only');
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      new RegExp(
        `not running npm install in \\.: native in node_modules built for NODE_MODULE_VERSION ${ANOTHER_ABI}, not ${process.versions.modules}`,
      ),
    );
    // Nothing due: still not rebuilt, and said before a test fails to open SQLite.
    fs.utimesSync(path.join(root, 'node_modules', '.package-lock.json'), new Date(), new Date());
    r = setup('--build-only');
    assert.equal(r.status, 1);
    assert.match(r.stderr, /Not rebuilding them in place/);
    assert.deepEqual(npmCalls(), [], 'npm never ran');
    assert.deepEqual(fs.readFileSync(addon), built, 'the addon is as it was');
  });

  it('fails when npm built native modules this Node cannot load', () => {
    // What npm ci does under a nodedir that names another Node's headers.
    const scratch = tempDir('imgapi-setup-');
    dirs.push(scratch);
    nativeModule(scratch, ANOTHER_ABI);
    const { setup } = checkout(enginesOf(REPO_ROOT), `cp -r '${path.join(scratch, 'node_modules', 'native')}' node_modules/`);
    const r = setup('--build-only');
    assert.equal(r.status, 1);
    assert.match(
      r.stderr,
      new RegExp(`after npm ci in \\.: native in node_modules built for NODE_MODULE_VERSION ${ANOTHER_ABI}, not ${process.versions.modules}`),
    );
  });

  it('under a Node the engines do not accept, hands over to the project Node before anything else', () => {
    // An engines range no Node meets, so the one running this test is "too old"; .node/ holds a
    // stand-in project Node that records how it was started.
    const { root, setup, npmCalls } = checkout('>=999.0.0');
    const addon = nativeModule(root, ANOTHER_ABI);
    const built = fs.readFileSync(addon);
    const runtime = path.join(root, '.node', 'runtime', 'node_modules');
    const platformPackage = path.join(runtime, `node-${process.platform}-${process.arch}`);
    const handedOver = path.join(root, 'handed-over.log');
    writeFile(path.join(runtime, '.bin', 'node'), `#!/bin/sh\necho v${PROJECT_NODE_MAJOR}.0.0 ${process.platform} ${process.arch}\n`, 0o755);
    writeFile(path.join(runtime, 'node', 'package.json'), '{"name":"node"}');
    writeFile(path.join(platformPackage, 'package.json'), `{"name":"node-${process.platform}-${process.arch}"}`);
    writeFile(path.join(platformPackage, 'include', 'node', 'node.h'), '');
    writeFile(path.join(platformPackage, 'bin', 'node'), `#!/bin/sh\necho "$*" > '${handedOver}'\n`, 0o755);
    const r = setup('--build-only');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(fs.readFileSync(handedOver, 'utf8').trim(), `${path.join(root, 'scripts', 'setup.mjs')} --build-only`);
    assert.deepEqual(npmCalls(), [], 'the unsupported Node ran no npm');
    assert.deepEqual(fs.readFileSync(addon), built, 'node_modules are as they were');
  });

  it("gives the suite's children this Node first on PATH, not the caller's", () => {
    const { root } = checkout();
    const { env } = projectNode(REPO_ROOT, { PATH: `${path.join(root, 'bin')}${path.delimiter}/usr/bin` });
    const found = spawnSync('node', ['-p', 'process.version'], { env, encoding: 'utf8' });
    assert.equal(found.stdout.trim(), process.version);
  });
});
