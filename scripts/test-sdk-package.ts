// `npm run test:sdk-package`: proves sdk/ is a package someone else can install and use, the way
// they would — not through this repository's paths. It builds the SDK (`npm run sdk:build`),
// packs it (`npm pack`), installs the tarball into a fresh project outside the repository
// (offline, from npm's cache; the registry only if the cache lacks openapi-fetch), then against
// a live server:
//   1. Node: plain `node` runs the typical flow (upload → resize → wait → download) from
//      '@imgapi/sdk/node', and tsc type-checks a consumer against the installed declarations;
//   2. a browser: esbuild (this repository's) bundles a flow from '@imgapi/sdk' for the browser
//      platform — it must resolve no Node built-in — and the bundle runs the same flow on Blobs.
// Not part of `npm test` (it takes about a minute: a build, a pack, an install).
import assert from 'node:assert/strict';
import { spawn, spawnSync, type SpawnSyncOptions } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { corpusFile } from '../test/helpers.js';
import { startPublicServer } from '../test/sdk/support.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SDK = path.join(ROOT, 'sdk');
const started = Date.now();
const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;

function step(what: string): () => void {
  const since = Date.now();
  process.stdout.write(`${what} … `);
  return () => console.log(`ok (${seconds(since)})`);
}

function run(command: string, args: string[], options: SpawnSyncOptions = {}): string {
  const result = spawnSync(command, args, { encoding: 'utf8', ...options });
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited ${result.status}\n${String(result.stdout ?? '')}\n${String(result.stderr ?? '')}`);
  }
  return String(result.stdout ?? '');
}

/** A program that talks to the server: asynchronous, since the server runs in this process. */
function runAgainstServer(args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (status) =>
      status === 0 ? resolve(stdout) : reject(new Error(`node ${args.join(' ')} exited ${status}\n${stdout}\n${stderr}`)),
    );
  });
}

const readJson = (file: string) => JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-sdk-package-'));
const server = await startPublicServer('sqlite');
try {
  // The package ---------------------------------------------------------------------------
  const rootVersion = readJson(path.join(ROOT, 'package.json')).version;
  const sdkManifest = readJson(path.join(SDK, 'package.json'));
  assert.equal(sdkManifest.version, rootVersion, "sdk/package.json's version is the service's (package.json)");

  let done = step('npm run sdk:build');
  run('npm', ['run', '-s', 'sdk:build'], { cwd: ROOT });
  done();

  done = step('npm pack ./sdk');
  const packed = JSON.parse(run('npm', ['pack', SDK, '--json', '--pack-destination', work], { cwd: ROOT })) as {
    filename: string;
    size: number;
    unpackedSize: number;
    files: { path: string }[];
  }[];
  const pack = packed[0]!;
  const files = pack.files.map((f) => f.path).sort();
  done();
  console.log(
    `  ${pack.filename}: ${files.length} files, ${(pack.size / 1024).toFixed(1)} KiB packed, ${(pack.unpackedSize / 1024).toFixed(1)} KiB unpacked`,
  );
  for (const needed of ['package.json', 'README.md', 'CHANGELOG.md', 'dist/index.js', 'dist/index.d.ts', 'dist/node.js', 'dist/node.d.ts'])
    assert.ok(files.includes(needed), `the package holds ${needed}`);
  const strays = files.filter((f) => f.endsWith('.map') || (f.endsWith('.ts') && !f.endsWith('.d.ts')));
  assert.deepEqual(strays, [], 'no sources or source maps whose sources are not shipped');

  // A fresh project -----------------------------------------------------------------------
  const project = path.join(work, 'project');
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }, null, 2));
  done = step('npm install --offline <tarball> in a fresh project');
  const install = ['install', '--no-audit', '--no-fund', '--ignore-scripts', path.join(work, pack.filename)];
  const offline = spawnSync('npm', [...install, '--offline'], { cwd: project, encoding: 'utf8' });
  if (offline.status === 0) done();
  else {
    console.log('not in the cache; from the npm registry');
    done = step('npm install --prefer-offline <tarball>');
    run('npm', [...install, '--prefer-offline'], { cwd: project });
    done();
  }
  const installed = readJson(path.join(project, 'node_modules', '@imgapi', 'sdk', 'package.json'));
  assert.equal(installed.version, rootVersion);

  const key = await server.newKey('pro');
  const env = { ...process.env, IMGAPI_URL: server.url, IMGAPI_KEY: key };
  fs.copyFileSync(corpusFile('images/sharp/Landscape_1.jpg'), path.join(project, 'photo.jpg'));

  // 1. Node -------------------------------------------------------------------------------
  fs.writeFileSync(
    path.join(project, 'flow.mjs'),
    `import { Imgapi } from '@imgapi/sdk/node';
import fs from 'node:fs';
const imgapi = new Imgapi({ baseUrl: process.env.IMGAPI_URL, apiKey: process.env.IMGAPI_KEY });
const file = await imgapi.upload('photo.jpg');
const queued = await imgapi.process('resize', { fileId: file.fileId, width: 320, format: 'webp' });
const task = await imgapi.wait(queued.taskId);
if (task.status !== 'completed') throw new Error('task ' + task.status);
const output = await imgapi.download(task.outputFileId, 'out/');
const head = fs.readFileSync(output.path).subarray(0, 12).toString('latin1');
console.log(JSON.stringify({ fileId: file.fileId, taskId: task.taskId, width: task.result.width, path: output.path, size: output.size, webp: head.startsWith('RIFF') && head.endsWith('WEBP') }));
`,
  );
  done = step(`node ${process.version} flow.mjs (upload → resize → wait → download)`);
  const nodeFlow = JSON.parse((await runAgainstServer(['flow.mjs'], project, env)).trim()) as Record<string, unknown>;
  done();
  console.log(`  ${JSON.stringify(nodeFlow)}`);
  assert.equal(nodeFlow.webp, true, 'the download is a WebP');
  assert.equal(nodeFlow.width, 320);

  fs.writeFileSync(
    path.join(project, 'consumer.ts'),
    `import { Imgapi, ImgapiError, type Task } from '@imgapi/sdk/node';
import { deliveryUrl } from '@imgapi/sdk';
const imgapi = new Imgapi({ baseUrl: 'http://localhost:3000', apiKey: 'key' });
export async function thumbnail(path: string): Promise<Task> {
  const { task } = await imgapi.run('resize', path, { width: 320, fit: 'cover', format: 'webp' });
  return task;
}
export const url: Promise<string> = deliveryUrl('file_x', { w: 320 }, { baseUrl: 'http://localhost:3000', signingKey: { keyId: 'sk_x', secret: 's' } });
export const isError = (e: unknown) => e instanceof ImgapiError && e.code === 'VALIDATION_ERROR';
// @ts-expect-error: not an option of resize, so the compiler refuses it
export const wrong = () => imgapi.process('resize', { fileId: 'file_x', widht: 3 });
`,
  );
  done = step('tsc --noEmit on a consumer (NodeNext) against the installed declarations');
  run(
    process.execPath,
    [
      path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
      '--noEmit',
      '--strict',
      '--module',
      'NodeNext',
      '--moduleResolution',
      'NodeNext',
      '--target',
      'ES2022',
      '--lib',
      'ES2022,DOM,DOM.Iterable',
      '--types',
      'node',
      '--typeRoots',
      path.join(ROOT, 'node_modules', '@types'),
      'consumer.ts',
    ],
    { cwd: project },
  );
  done();

  // 2. A browser bundle -------------------------------------------------------------------
  fs.writeFileSync(
    path.join(project, 'browser.js'),
    `import { Imgapi } from '@imgapi/sdk';
export async function flow(baseUrl, apiKey, bytes) {
  const imgapi = new Imgapi({ baseUrl, apiKey });
  const file = await imgapi.upload(new File([bytes], 'photo.jpg', { type: 'image/jpeg' }));
  const queued = await imgapi.process('resize', { fileId: file.fileId, width: 200, format: 'avif' });
  const task = await imgapi.wait(queued.taskId);
  const output = await imgapi.download(task.outputFileId);
  return { status: task.status, width: task.result.width, type: output.blob.type, size: output.blob.size };
}
`,
  );
  done = step('esbuild --bundle --platform=browser');
  const esbuild = path.join(ROOT, 'node_modules', '.bin', 'esbuild');
  const bundleLog = spawnSync(esbuild, ['browser.js', '--bundle', '--platform=browser', '--format=esm', '--minify', '--outfile=bundle.js'], {
    cwd: project,
    encoding: 'utf8',
  });
  assert.equal(bundleLog.status, 0, bundleLog.stderr);
  done();
  const bundle = fs.readFileSync(path.join(project, 'bundle.js'), 'utf8');
  console.log(
    `  bundle.js: ${(bundle.length / 1024).toFixed(1)} KiB minified, ${(Number(run('gzip', ['-c', 'bundle.js'], { cwd: project, encoding: 'buffer' } as SpawnSyncOptions).length) / 1024).toFixed(1)} KiB gzipped`,
  );
  assert.doesNotMatch(bundle, /["']node:/, 'the browser bundle imports no Node built-in');

  done = step('the bundle runs the flow on a File (fetch and web streams only)');
  fs.writeFileSync(
    path.join(project, 'run-bundle.mjs'),
    `import fs from 'node:fs';
import { flow } from './bundle.js';
console.log(JSON.stringify(await flow(process.env.IMGAPI_URL, process.env.IMGAPI_KEY, fs.readFileSync('photo.jpg'))));
`,
  );
  const browserFlow = JSON.parse((await runAgainstServer(['run-bundle.mjs'], project, env)).trim()) as Record<string, unknown>;
  done();
  console.log(`  ${JSON.stringify(browserFlow)}`);
  assert.equal(browserFlow.status, 'completed');
  assert.equal(browserFlow.type, 'image/avif');

  console.log(`\n@imgapi/sdk ${String(installed.version)}: packed, installed, ran in Node and in a browser bundle (${seconds(started)})`);
} finally {
  await server.close();
  fs.rmSync(work, { recursive: true, force: true });
}
