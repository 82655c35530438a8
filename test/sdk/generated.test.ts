// The SDK's types are the server's OpenAPI document, generated (sdk/openapi.ts), and they are
// enough on their own: a program written only against them and openapi-fetch type-checks without
// a cast and runs the typical flow. The browser entry type-checks without Node's types.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { SDK_TYPES, generatedTypes } from '../../scripts/sdk-generate.js';
import { REPO_ROOT, corpusFile, tempDir, type TestServer } from '../helpers.js';
import { convertToWebp } from './openapi-fetch-flow.js';
import { startPublicServer } from './support.js';

const FLOW_PROGRAM = path.join(REPO_ROOT, 'test', 'sdk', 'openapi-fetch-flow.ts');

/** tsc --noEmit on `files` alone, strict, with only the libraries named: its output, '' when clean. */
function typeCheck(files: string[], compilerOptions: Record<string, unknown>): string {
  const dir = tempDir('imgapi-tsc-');
  try {
    const config = path.join(dir, 'tsconfig.json');
    fs.writeFileSync(
      config,
      JSON.stringify({ compilerOptions: { target: 'ES2022', strict: true, noEmit: true, skipLibCheck: true, ...compilerOptions }, files }),
    );
    const tsc = spawnSync(process.execPath, [path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', config], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    return `${tsc.stdout}${tsc.stderr}`.trim() || (tsc.status === 0 ? '' : `tsc exited ${tsc.status}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('generated SDK types', () => {
  it("the SDK's package carries the service's version (package.json's, which the server and `imgapi --version` report)", () => {
    const version = (file: string) => (JSON.parse(fs.readFileSync(path.join(REPO_ROOT, file), 'utf8')) as { version: string }).version;
    assert.equal(version('sdk/package.json'), version('package.json'));
  });

  it('sdk/openapi.ts is what `npm run sdk:generate` writes from the current document', async () => {
    const expected = await generatedTypes();
    assert.ok(expected === fs.readFileSync(SDK_TYPES, 'utf8'), 'sdk/openapi.ts is stale: run `npm run sdk:generate` and commit it');
  });

  it('a program using only openapi-fetch and the generated paths type-checks, with no cast or suppressed error', () => {
    const source = fs.readFileSync(FLOW_PROGRAM, 'utf8');
    const code = source.replace(/^\s*\/\/.*$/gm, '');
    assert.doesNotMatch(
      code,
      /\bas\s+[A-Za-z{[(]|@ts-(expect-error|ignore|nocheck)|\bany\b|!\./,
      'the program stays free of casts, suppressions, any and non-null assertions',
    );
    assert.equal(typeCheck([FLOW_PROGRAM], { module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM'], types: [] }), '');
  });

  it('the browser entry (sdk/index.ts) type-checks with the DOM library and without Node types', () => {
    const browser = { module: 'ESNext', moduleResolution: 'Bundler', lib: ['ES2022', 'DOM', 'DOM.Iterable'], types: [] };
    assert.equal(typeCheck([path.join(REPO_ROOT, 'sdk', 'index.ts')], browser), '');
    // The check has teeth: the Node entry does not pass it.
    assert.match(typeCheck([path.join(REPO_ROOT, 'sdk', 'node.ts')], browser), /Cannot find module 'node:/);
  });

  it("sdk/README.md's typical flow type-checks against the SDK", () => {
    const readme = fs.readFileSync(path.join(REPO_ROOT, 'sdk', 'README.md'), 'utf8');
    const flow = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(flow, 'the README has a ts block');
    const dir = tempDir('imgapi-readme-');
    try {
      const program = path.join(dir, 'flow.mts');
      fs.writeFileSync(program, flow.replace("'@imgapi/sdk/node'", JSON.stringify(path.join(REPO_ROOT, 'sdk', 'node.js'))));
      assert.equal(
        typeCheck([program], {
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          types: ['node'],
          typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types')],
        }),
        '',
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('the openapi-fetch program against a real server', () => {
    let server: TestServer;
    before(async () => {
      server = await startPublicServer('sqlite');
    });
    after(() => server.close());

    it('uploads, converts, waits and downloads a WebP', async () => {
      const image = new Blob([fs.readFileSync(corpusFile('images/sharp/concert.jpg'))], { type: 'image/jpeg' });
      const webp = await convertToWebp(server.url, await server.newKey(), image, 'concert.jpg');
      const meta = await sharp(Buffer.from(await webp.arrayBuffer())).metadata();
      assert.equal(meta.format, 'webp');
      assert.ok(meta.width && meta.width > 0);
    });
  });
});
