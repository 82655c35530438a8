// Every code block in the docs (README.md, docs/**/*.md, sdk/README.md) is run, so the docs
// cannot drift from the service: what a newcomer copies is what the service answers today.
//
//   ```sh     run with bash (-euo pipefail) against one live server for the whole file, in a
//             scratch directory holding photo.jpg, photos/*.jpg and deck.pptx; the blocks use
//             $IMGAPI_URL and $IMGAPI_KEY (and the CLI reads DATA_DIR, DATABASE_URL, PLANS_FILE;
//             `npx imgapi` is this checkout's CLI)
//   ```ts     type-checked (tsc, strict) against the SDK's own types ('@imgapi/sdk', '@imgapi/sdk/node')
//   ```json   parsed
//
// Everything else is shown, not run, and must say so with one of SHOWN's info strings: a block
// without one fails. `console` is for commands run on your own machine (they install, start a
// server, need root, Docker or a real bucket); its `npm run` scripts must exist.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAIN_ENTRY, REPO_ROOT, corpusFile, tempDir, type TestServer } from './helpers.js';
import { startPublicServer } from './sdk/support.js';

const RUN = ['sh', 'ts', 'json'] as const;
const SHOWN: Record<string, string> = {
  text: 'output, URLs and other text',
  console: 'commands for your own machine (install, start a server, root, Docker, a real bucket)',
  ini: 'systemd units',
  nginx: 'nginx configuration',
  caddyfile: 'Caddy configuration',
  html: 'markup',
  yaml: 'configuration files',
  http: "a request as sent (docs/kinds.md: each kind's example, which test/openapi.test.ts holds to its schema and test/operations/kinds.test.ts runs)",
};
/** One page's shell blocks; the test's own timeout is a little longer, so the page is stopped first. */
const PAGE_TIMEOUT_MS = 150_000;

interface Block {
  file: string; // relative to the repository
  line: number; // of the opening fence
  info: string;
  body: string;
}

function docFiles(): string[] {
  const found = ['README.md', 'sdk/README.md'];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true })) {
      const relative = path.posix.join(dir, entry.name);
      if (entry.isDirectory()) walk(relative);
      else if (entry.name.endsWith('.md')) found.push(relative);
    }
  };
  walk('docs');
  return found.sort();
}

export function codeBlocks(file: string, text: string): Block[] {
  const blocks: Block[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(```+)\s*([^\s`]*)/.exec(lines[i] ?? '');
    if (!open) continue;
    const [, indent = '', fence = '```', info = ''] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !(lines[j] ?? '').trim().startsWith(fence); j++) body.push((lines[j] ?? '').slice(indent.length));
    blocks.push({ file, line: i + 1, info, body: body.join('\n') + '\n' });
    i = j;
  }
  return blocks;
}

const FILES = docFiles();
const BLOCKS = FILES.flatMap((file) => codeBlocks(file, fs.readFileSync(path.join(REPO_ROOT, file), 'utf8')));
const where = (b: Block) => `${b.file}:${b.line}`;

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchors(text: string): Set<string> {
  const set = new Set<string>();
  let inFence = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) inFence = !inFence;
    const heading = inFence ? null : /^#{1,6} (.*)$/.exec(line);
    if (heading?.[1])
      set.add(
        heading[1]
          .toLowerCase()
          .replace(/[^\p{L}\p{N}\s_-]/gu, '')
          .replace(/ /g, '-'),
      );
  }
  return set;
}

describe('docs', () => {
  it('every code block is run or says why not', () => {
    const unmarked = BLOCKS.filter((b) => !(RUN as readonly string[]).includes(b.info) && !(b.info in SHOWN));
    assert.deepEqual(
      unmarked.map((b) => `${where(b)} \`\`\`${b.info}`),
      [],
      `mark each block with a run info string (${RUN.join(', ')}) or a shown one (${Object.keys(SHOWN).join(', ')})`,
    );
    assert.ok(BLOCKS.filter((b) => b.info === 'sh').length >= 10, 'the docs have shell examples');
  });

  it('README.md stays short', () => {
    const lines = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8').split('\n').length;
    assert.ok(lines <= 160, `README.md has ${lines} lines; move detail into docs/`);
  });

  it('links stay inside the repository and reach a file (and a heading) that exists', () => {
    const broken: string[] = [];
    for (const file of FILES) {
      const text = fs.readFileSync(path.join(REPO_ROOT, file), 'utf8').replace(/```[\s\S]*?```/g, '');
      for (const [, target = ''] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target)) continue; // http(s), mailto
        const [linkPath = '', anchor] = target.split('#');
        const resolved = linkPath ? path.posix.normalize(path.posix.join(path.posix.dirname(file), linkPath)) : file;
        if (resolved.startsWith('..')) broken.push(`${file}: ${target} points outside the repository`);
        else if (!fs.existsSync(path.join(REPO_ROOT, resolved))) broken.push(`${file}: ${target} does not exist`);
        else if (anchor && resolved.endsWith('.md') && !anchors(fs.readFileSync(path.join(REPO_ROOT, resolved), 'utf8')).has(anchor))
          broken.push(`${file}: ${target} has no such heading`);
      }
    }
    assert.deepEqual(broken, []);
  });

  it('json blocks parse', () => {
    for (const block of BLOCKS.filter((b) => b.info === 'json')) assert.doesNotThrow(() => JSON.parse(block.body), where(block));
  });

  it('console blocks name npm scripts that exist', () => {
    const scripts = (JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    for (const block of BLOCKS.filter((b) => b.info === 'console')) {
      for (const [, name = ''] of block.body.matchAll(/\bnpm (?:run(?:-script)? )?(start|test|[\w:-]+)(?=[\s;&|]|$)/gm)) {
        if (['install', 'ci', 'pack', 'pkg', 'run', 'exec', '--prefix'].includes(name)) continue;
        assert.ok(name in scripts, `${where(block)}: npm ${name} is not a script of package.json`);
      }
    }
  });

  it('ts blocks type-check against the SDK', () => {
    const blocks = BLOCKS.filter((b) => b.info === 'ts');
    assert.ok(blocks.length >= 3);
    const dir = tempDir('imgapi-docs-ts-');
    try {
      const names = blocks.map((b, i) => {
        const name = `block${i}.mts`;
        // `export {}` makes each block a module of its own (top-level await, no shared names).
        fs.writeFileSync(path.join(dir, name), `${b.body}\nexport {};\n`);
        return name;
      });
      fs.writeFileSync(
        path.join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'ES2022',
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            lib: ['ES2022', 'DOM', 'DOM.Iterable'],
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            types: ['node'],
            typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types')],
            baseUrl: '.',
            paths: {
              '@imgapi/sdk': [path.join(REPO_ROOT, 'sdk', 'index.ts')],
              '@imgapi/sdk/node': [path.join(REPO_ROOT, 'sdk', 'node.ts')],
            },
            allowImportingTsExtensions: true,
          },
          files: names,
        }),
      );
      const tsc = spawnSync(process.execPath, [path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], {
        encoding: 'utf8',
      });
      const output = tsc.stdout.replace(/\S*block(\d+)\.mts\((\d+),(\d+)\)/g, (_, i: string, line: string) => {
        const block = blocks[Number(i)]!;
        return `${block.file}:${block.line + Number(line)}`;
      });
      assert.equal(tsc.status, 0, output);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('sh blocks against a live server', () => {
    let server: TestServer;
    let receiver: http.Server;
    let receiverUrl = '';
    const received: string[] = [];
    before(async () => {
      // Webhook examples deliver to a receiver on this machine.
      server = await startPublicServer('sqlite', { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' } });
      receiver = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req
          .on('data', (c: Buffer) => chunks.push(c))
          .on('end', () => {
            received.push(Buffer.concat(chunks).toString());
            res.writeHead(204).end();
          });
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      const address = receiver.address();
      receiverUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hooks`;
    });
    after(async () => {
      receiver.close();
      await server.close();
    });

    const shFiles = [...new Set(BLOCKS.filter((b) => b.info === 'sh').map((b) => b.file))];
    for (const file of shFiles) {
      it(file, { timeout: PAGE_TIMEOUT_MS + 30_000 }, async () => {
        const blocks = BLOCKS.filter((b) => b.file === file && b.info === 'sh');
        const work = scratchDirectory();
        try {
          // One shell per page: a block may use what an earlier block of the page set, as a reader would.
          const script = blocks.map((b) => `echo '@@ ${where(b)}' >&2\n${b.body}`).join('\n');
          const { status, stdout, stderr } = await run(script, work, {
            IMGAPI_URL: server.url,
            IMGAPI_KEY: await server.newKey('pro'),
            RECEIVER_URL: receiverUrl,
            DATA_DIR: server.dataDir,
            DATABASE_URL: server.databaseUrl,
            PLANS_FILE: server.config.plansFile ?? path.join(server.dataDir, 'plans.json'),
          });
          const failed = [...stderr.matchAll(/^@@ (.*)$/gm)].at(-1)?.[1];
          assert.equal(
            status,
            0,
            `the block at ${failed} failed (exit ${status})\n--- stdout\n${stdout.slice(-3000)}\n--- stderr\n${stderr.slice(-3000)}`,
          );
        } finally {
          fs.rmSync(work, { recursive: true, force: true });
        }
      });
    }

    it("the webhook examples' events reach the receiver they name", { timeout: 60_000 }, async () => {
      if (!shFiles.includes('docs/guides/webhooks.md')) return;
      // Deliveries are asynchronous (a worker sends them): wait for the condition, not a time.
      while (!received.some((body) => (JSON.parse(body) as { type?: string }).type === 'webhook.test')) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    });
  });
});

/** A directory holding the files the examples name, and `npx imgapi` resolving to this checkout. */
function scratchDirectory(): string {
  const dir = tempDir('imgapi-docs-sh-');
  fs.copyFileSync(corpusFile('images/sharp/Landscape_1.jpg'), path.join(dir, 'photo.jpg'));
  fs.mkdirSync(path.join(dir, 'photos'));
  for (const name of ['Landscape_2.jpg', 'Portrait_3.jpg', 'concert.jpg'])
    fs.copyFileSync(corpusFile(`images/sharp/${name}`), path.join(dir, 'photos', name));
  fs.copyFileSync(corpusFile('presentations/poi/SampleShow.pptx'), path.join(dir, 'deck.pptx'));
  // `npx imgapi` finds the project's own bin, as in an install: this checkout's CLI, compiled when
  // dist/ is current (seconds faster a call than tsx), else its sources through tsx.
  // (bin/imgapi.mjs would run setup first, and wait for any other setup on the machine.)
  const bin = path.join(dir, 'node_modules', '.bin', 'imgapi');
  fs.mkdirSync(path.dirname(bin), { recursive: true });
  fs.writeFileSync(bin, `#!/bin/sh\nexec '${process.execPath}' ${MAIN_ENTRY.map((a) => `'${a}'`).join(' ')} "$@"\n`, { mode: 0o755 });
  return dir;
}

function run(script: string, cwd: string, env: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // Its own process group, so that a page that runs too long is stopped whole, CLI children included.
    const child = spawn('bash', ['-euo', 'pipefail', '-c', script], {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? cwd, LANG: 'C.UTF-8', NO_COLOR: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => {
      stderr += `\n(stopped after ${PAGE_TIMEOUT_MS / 1000} s)`;
      process.kill(-child.pid!, 'SIGKILL');
    }, PAGE_TIMEOUT_MS);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}
