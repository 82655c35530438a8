// `npm run test:container`: builds the container image and runs it here, with podman, as an
// operator would (not part of `npm test`: a build takes minutes). It checks that
//   - the image builds (timed; its size reported) and holds no dev packages, sources or tests;
//   - it starts on a named volume and /readyz answers, the converter sandbox included;
//   - the start-up line says the version, the dashboard and the one-time setup link, which works;
//   - an account and a key made with `imgapi` inside the container drive the typical flow from
//     here through the SDK: an upload, every job kind once, each output downloaded and decoded;
//   - SIGTERM stops it cleanly (exit 0) and the files are still there after a restart;
//   - it runs as a non-root user, and says its version (labels, `imgapi --version`, /healthz);
//   - compose.yaml's `scaled` profile (PostgreSQL, an API service, a worker service) runs a job.
// Everything it creates is removed at the end, whatever happened.
//
// On this kind of machine, where no image registry is reachable, ../shared/tools/container-base.sh
// (run first when present) installs podman and builds the base images, and prints the flags
// builds need here; podman-compose comes from Debian (installed when missing, as root).
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PDFDocument } from 'pdf-lib';
import sharp from 'sharp';
import { Imgapi, type Kind, type JobOptions } from '../sdk/node.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const VERSION = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const BASE_SCRIPT = path.resolve(ROOT, '../shared/tools/container-base.sh');
const CORPUS = path.resolve(ROOT, '../shared/corpus');
const IMAGE = `localhost/imgapi:${VERSION}`;
/** The stand-in for Docker Hub's image that compose.yaml names (ops/postgres/Dockerfile). */
const POSTGRES_IMAGE = 'docker.io/library/postgres:15-bookworm';
const NAME = 'imgapi-container-test';
const VOLUME = `${NAME}-data`;
const PROJECT = 'imgapi-compose-test';
/** What the converter sandbox needs from podman (Dockerfile, docs/container.md). */
const SANDBOX_FLAGS = ['--security-opt', 'systempaths=unconfined'];

const run = promisify(execFile);
const summary: string[] = [];
const cleanups: Array<() => Promise<unknown>> = [];

function say(line: string): void {
  process.stderr.write(`test:container: ${line}\n`);
}

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

/** A command's stdout (trimmed); its stderr in the error when it fails. */
async function sh(command: string, args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<string> {
  try {
    const { stdout } = await run(command, args, {
      cwd: ROOT,
      env: options.env ?? process.env,
      maxBuffer: 64 * 1024 * 1024,
      timeout: options.timeoutMs ?? 120_000,
    });
    return stdout.trim();
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`\`${command} ${args.join(' ')}\` failed: ${e.message}\n${(e.stderr ?? '').slice(-4000)}`, { cause: err });
  }
}

/** A long command with its output streamed to ours (a build), checked for exit 0. */
function stream(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'inherit', 'inherit'] });
    child.once('error', reject);
    child.once('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`\`${command} ${args.join(' ')}\` exited with ${code ?? signal}`)),
    );
  });
}

const podman = (...args: string[]) => sh('podman', args);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls `probe` every 250 ms until it answers a value; fails after `timeoutMs` with what `explain` says. */
async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, explain: () => Promise<string>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s\n${await explain()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function logsOf(container: string): Promise<string> {
  const { stdout, stderr } = await run('podman', ['logs', container]).catch((err: { stdout?: string; stderr?: string }) => ({
    stdout: err.stdout ?? '',
    stderr: err.stderr ?? '',
  }));
  return `--- podman logs ${container} (stdout)\n${stdout.slice(-6000)}\n--- (stderr)\n${stderr.slice(-6000)}`;
}

/** /readyz's body once it answers 200, while the container runs. */
async function ready(container: string, url: string): Promise<{ checks: Record<string, { ok: boolean; detail?: string }> }> {
  return waitFor(
    `${container} ready at ${url}/readyz`,
    180_000,
    async () => {
      const state = await podman('inspect', '--format', '{{.State.Status}}', container);
      if (state !== 'running') throw new Error(`${container} is ${state}`);
      const response = await fetch(`${url}/readyz`);
      return response.ok ? ((await response.json()) as { checks: Record<string, { ok: boolean; detail?: string }> }) : undefined;
    },
    () => logsOf(container),
  );
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const megabytes = (bytes: number) => `${(bytes / 1e6).toFixed(0)} MB`;

// ---------------------------------------------------------------------------------------------

async function prepareMachine(): Promise<string[]> {
  if (fs.existsSync(BASE_SCRIPT)) {
    say(`preparing podman and the base images (${path.relative(ROOT, BASE_SCRIPT)})`);
    await stream('bash', [BASE_SCRIPT, '26']);
    return (await sh('bash', [BASE_SCRIPT, '--flags'])).split(/\s+/).filter(Boolean);
  }
  await sh('podman', ['--version']).catch(() => {
    throw new Error('podman is not installed: install it (Debian: apt-get install podman) and run this again');
  });
  return [];
}

/** Builds the image (and the PostgreSQL stand-in when no postgres image is here); answers the build's duration. */
async function build(flags: string[]): Promise<number> {
  say(`building ${IMAGE}`);
  const started = Date.now();
  // --format docker: the OCI format has no HEALTHCHECK, and podman would drop it.
  await stream('podman', ['build', '--format', 'docker', ...flags, '--build-arg', `IMGAPI_VERSION=${VERSION}`, '-t', IMAGE, '.']);
  const took = Date.now() - started;
  const exists = await run('podman', ['image', 'exists', POSTGRES_IMAGE]).then(
    () => true,
    () => false,
  );
  if (!exists) {
    say(`building ${POSTGRES_IMAGE} from ops/postgres (Debian's PostgreSQL 15; no registry here)`);
    await stream('podman', ['build', ...flags, '-t', POSTGRES_IMAGE, 'ops/postgres']);
  }
  return took;
}

async function inspectImage(): Promise<void> {
  const [image] = JSON.parse(await podman('image', 'inspect', IMAGE)) as Array<{
    Size: number;
    Labels: Record<string, string> | null;
    Healthcheck?: { Test?: string[] };
    User?: string;
  }>;
  summary.push(`image ${IMAGE}: ${megabytes(image!.Size)}`);
  const label = image!.Labels?.['org.opencontainers.image.version'];
  check(label === VERSION, `the image's version label is "${label}", not ${VERSION}`);
  check(image!.Healthcheck?.Test?.join(' ').includes('/readyz'), `the image has no HEALTHCHECK on /readyz: ${JSON.stringify(image!.Healthcheck)}`);
  // No dev packages, sources, tests, bench or corpus in it.
  const absent = [
    'node_modules/typescript',
    'node_modules/tsx',
    'node_modules/eslint',
    'node_modules/vite',
    'src',
    'test',
    'bench',
    'web/src',
    'web/node_modules',
  ];
  const present = await podman(
    'run',
    '--rm',
    '--entrypoint',
    'sh',
    IMAGE,
    '-c',
    `cd /app && for f in ${absent.join(' ')}; do [ -e "$f" ] && echo "$f"; done; true`,
  );
  check(present === '', `the image holds what a server never needs: ${present.split('\n').join(', ')}`);
  const version = await podman('run', '--rm', IMAGE, '--version');
  check(version === `imgapi ${VERSION}`, `imgapi --version says "${version}"`);
  summary.push(`labels and \`imgapi --version\`: ${VERSION}; no dev packages, sources or tests inside`);
}

/** The single container on a named volume: start, flow, stop, restart, non-root. */
async function single(): Promise<void> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  await run('podman', ['rm', '--force', '--volumes', NAME]).catch(() => {});
  await run('podman', ['volume', 'rm', '--force', VOLUME]).catch(() => {});
  cleanups.push(() => run('podman', ['rm', '--force', '--time', '0', NAME]).then(() => run('podman', ['volume', 'rm', '--force', VOLUME])));
  say(`starting ${NAME} on ${url} with the volume ${VOLUME}`);
  const started = Date.now();
  await podman(
    'run',
    '--detach',
    '--name',
    NAME,
    '--publish',
    `127.0.0.1:${port}:3000`,
    '--volume',
    `${VOLUME}:/data`,
    '--stop-timeout',
    '45',
    ...SANDBOX_FLAGS,
    '--env',
    `PUBLIC_URL=${url}`,
    '--env',
    'WORKER_CONCURRENCY=2',
    IMAGE,
  );
  const readiness = await ready(NAME, url);
  summary.push(`started and ready in ${seconds(Date.now() - started)}`);
  const failing = Object.entries(readiness.checks).filter(([, c]) => !c.ok);
  check(failing.length === 0, `/readyz reports ${failing.map(([name, c]) => `${name}: ${c.detail ?? 'not ok'}`).join('; ')}`);
  summary.push(`/readyz: ${Object.keys(readiness.checks).join(', ')} all ok (converters run in the bwrap sandbox)`);
  // The image's HEALTHCHECK, run as the engine runs it.
  await podman('healthcheck', 'run', NAME);

  const health = (await (await fetch(`${url}/healthz`)).json()) as { version?: string };
  check(health.version === VERSION, `/healthz says version ${health.version}`);
  const document = (await (await fetch(`${url}/openapi.json`)).json()) as { info: { version: string } };
  check(document.info.version === VERSION, `/openapi.json says version ${document.info.version}`);

  // The start-up line, as an operator reads it in `podman logs`.
  const line = await waitFor(
    'the start-up line',
    10_000,
    async () => (await logsOf(NAME)).split('\n').find((l) => l.startsWith(`imgapi ${VERSION} listening on`)),
    () => logsOf(NAME),
  );
  const setupLink = new RegExp(`dashboard: ${url}/; no administrator yet: create one at ${url}/setup#token=([A-Za-z0-9_-]+) `).exec(line);
  check(setupLink, `the start-up line lacks the dashboard or the setup link: ${line}`);
  const logs = await logsOf(NAME);
  check(logs.split(setupLink[1]!).length === 2, 'the setup token appears once in the logs, in the start-up line');
  const setup = await fetch(`${url}/auth/setup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: url },
    body: JSON.stringify({ token: setupLink[1], email: 'operator@example.com', password: 'operator-password-1' }),
  });
  check(setup.status === 201, `the setup link's token did not create the administrator: ${setup.status} ${await setup.text()}`);
  summary.push('start-up line: version, dashboard and a setup link whose token created the administrator');

  // An account and a key with the CLI inside the container, as the operator would.
  await podman('exec', NAME, 'imgapi', 'users', 'create', '--email', 'ci@example.com', '--plan', 'max');
  const key = await podman('exec', NAME, 'imgapi', 'keys', 'create', '--email', 'ci@example.com', '--name', 'container-test');
  check(/^\S{20,}$/.test(key), `keys create printed "${key}"`);
  const imgapi = new Imgapi({ baseUrl: url, apiKey: key });
  const kept = await typicalFlow(imgapi);

  // SIGTERM drains and exits 0; the volume keeps the files.
  const stopping = Date.now();
  await sh('podman', ['stop', '--time', '45', NAME], { timeoutMs: 60_000 });
  const exitCode = await podman('inspect', '--format', '{{.State.ExitCode}}', NAME);
  check(exitCode === '0', `the server exited ${exitCode} on SIGTERM\n${await logsOf(NAME)}`);
  summary.push(`SIGTERM: drained and exited 0 in ${seconds(Date.now() - stopping)}`);
  await podman('start', NAME);
  await ready(NAME, url);
  const again = await imgapi.download(kept.fileId);
  const digest = createHash('sha256')
    .update(Buffer.from(await again.blob!.arrayBuffer()))
    .digest('hex');
  check(digest === kept.sha256, 'a file downloaded after the restart differs from the one before');
  check((await imgapi.account()).email === 'ci@example.com', 'the account is gone after the restart');
  summary.push('restart: the account, the key and the files are still there (named volume)');

  // Non-root: the exec'd commands and every process of the container, PID 1 included.
  const uid = await podman('exec', NAME, 'id', '-u');
  const status = await podman('exec', NAME, 'cat', '/proc/1/status');
  const pid1 = /^Uid:\s+(\d+)\s+(\d+)/m.exec(status);
  const users = await podman('top', NAME, 'user', 'args');
  const rootProcesses = users
    .split('\n')
    .slice(1)
    .filter((l) => /^root\s/.test(l));
  check(uid !== '0' && pid1 && pid1[1] !== '0' && pid1[2] !== '0', `runs as root: id -u ${uid}, /proc/1/status ${pid1?.[0]}`);
  check(rootProcesses.length === 0, `processes run as root: ${rootProcesses.join('; ')}`);
  summary.push(`non-root: uid ${uid} for PID 1 (tini), the server and exec'd commands`);
}

/** Every job kind once on a real photo (and a deck), each output downloaded and decoded; answers one output to check after the restart. */
async function typicalFlow(imgapi: Imgapi): Promise<{ fileId: string; sha256: string }> {
  const photo = path.join(CORPUS, 'images/sharp/Landscape_6.jpg');
  const deck = path.join(CORPUS, 'presentations/poi/SampleShow.pptx');
  check(fs.existsSync(photo), `no ${photo}: the flow needs the corpus beside the checkout`);
  const started = Date.now();
  const upload = await imgapi.upload(photo);
  check(upload.format === 'jpeg' && upload.width === 600 && upload.height === 450, `the upload says ${JSON.stringify(upload)}`);
  const ref = { fileId: upload.fileId };

  const jobs: Array<[Kind, JobOptions<Kind>, string]> = [
    ['resize', { width: 300, format: 'webp' }, 'webp'],
    ['compress', { quality: 70 }, 'jpeg'],
    ['crop', { left: 10, top: 10, width: 200, height: 150 }, 'jpeg'],
    ['convert', { format: 'avif' }, 'heif'],
    ['rotate', { angle: 90 }, 'jpeg'],
    ['flip', { direction: 'horizontal' }, 'jpeg'],
    ['watermark', { text: 'imgapi © 2026', opacity: 0.6 }, 'jpeg'],
    ['upscale', { factor: 2, model: 'lanczos' }, 'jpeg'],
    ['adjust', { brightness: 1.1, saturation: 1.2, contrast: 0.1 }, 'jpeg'],
    ['trim', { threshold: 10 }, 'jpeg'],
    ['extend', { all: 12, background: '#ffffff' }, 'jpeg'],
    ['resize', { width: 200, height: 200, fit: 'cover', position: 'face' }, 'jpeg'],
    [
      'pipeline',
      {
        steps: [
          { kind: 'resize', width: 400 },
          { kind: 'rotate', angle: 90 },
          { kind: 'watermark', text: 'pipeline' },
        ],
        format: 'png',
      },
      'png',
    ],
  ] as never;
  let kept: { fileId: string; sha256: string } | undefined;
  for (const [kind, options, format] of jobs) {
    const { task, output } = await imgapi.run(kind, ref, options as never, { timeoutMs: 120_000 });
    const bytes = Buffer.from(await output.blob!.arrayBuffer());
    const meta = await sharp(bytes).metadata();
    check(meta.format === format, `${kind}: the output decodes as ${meta.format}, not ${format}`);
    const result = task.result as { width?: number; height?: number } | undefined;
    check(
      meta.width === result?.width && meta.height === result?.height,
      `${kind}: ${meta.width}×${meta.height} decoded, ${result?.width}×${result?.height} reported`,
    );
    kept ??= { fileId: output.fileId, sha256: createHash('sha256').update(bytes).digest('hex') };
  }

  const pdf = await imgapi.run('image-to-pdf', [ref], { pageSize: 'A4' }, { timeoutMs: 120_000 });
  const document = await PDFDocument.load(Buffer.from(await pdf.output.blob!.arrayBuffer()));
  check(document.getPageCount() === 1, `image-to-pdf: ${document.getPageCount()} pages`);
  const kinds = [...new Set(jobs.map(([kind]) => kind)), 'image-to-pdf'];

  // PDF input: the PDF just made, its page rendered by poppler in the sandbox.
  const pages = await imgapi.run('pdf-to-images', { fileId: pdf.output.fileId }, { width: 400, format: 'png' }, { timeoutMs: 120_000 });
  const [page] = pages.task.outputFileIds ?? [];
  check(page !== undefined, 'pdf-to-images made no image');
  const pageMeta = await sharp(Buffer.from(await (await imgapi.download(page!)).blob!.arrayBuffer())).metadata();
  check(pageMeta.format === 'png' && pageMeta.width === 400, `the PDF's page decodes as ${pageMeta.format} ${pageMeta.width} px wide`);
  kinds.push('pdf-to-images');

  // JPEG XL out (libjxl in WebAssembly), read back by the service itself (sharp's libvips has no JPEG XL).
  const jxl = await imgapi.run('convert', ref, { format: 'jxl' }, { timeoutMs: 120_000 });
  const jxlInfo = await imgapi.info(jxl.output.fileId);
  check(
    jxlInfo.format === 'jxl' && jxlInfo.width === 600 && jxlInfo.height === 450,
    `convert to jxl: the service reads back ${JSON.stringify(jxlInfo)}`,
  );
  kinds.push('convert to jxl');

  // The face detector (TensorFlow.js WebAssembly, its model shipped in the package): the three faces
  // of face-api's own sample photo, found by info and covered by redact.
  const group = await imgapi.upload(path.join(ROOT, 'node_modules/@vladmandic/face-api/demo/sample1.jpg'));
  const found = (await imgapi.info(group.fileId, { faces: true })).faces ?? [];
  check(found.length === 3, `info --faces found ${found.length} faces, not 3`);
  const redacted = await imgapi.run('redact', { fileId: group.fileId }, { faces: true }, { timeoutMs: 120_000 });
  const covered = (redacted.task.result as { regions?: unknown[] } | undefined)?.regions ?? [];
  check(covered.length >= 3, `redact covered ${covered.length} regions, not the 3 faces`);
  kinds.push('info with faces', `redact (${covered.length} regions)`);

  if (fs.existsSync(deck)) {
    const slides = await imgapi.run('presentation-to-images', deck, { format: 'png', width: 640 }, { timeoutMs: 180_000 });
    const ids = slides.task.outputFileIds ?? [];
    check(ids.length > 0, 'presentation-to-images made no images');
    for (const id of ids) {
      const meta = await sharp(Buffer.from(await (await imgapi.download(id)).blob!.arrayBuffer())).metadata();
      check(meta.format === 'png' && meta.width === 640, `a slide decodes as ${meta.format} ${meta.width} px wide`);
    }
    kinds.push(`presentation-to-images (${ids.length} slides)`);
  } else {
    say(`no ${deck}: presentation-to-images skipped`);
  }
  summary.push(`typical flow in ${seconds(Date.now() - started)}: upload, ${kinds.join(', ')}; every output downloaded and decoded`);
  return kept!;
}

/** compose.yaml's scaled-out profile: PostgreSQL, `api` and `worker`, one job through them. */
async function compose(): Promise<void> {
  const tool = await run('podman-compose', ['--version']).then(
    () => 'podman-compose',
    () => undefined,
  );
  if (!tool) {
    check(process.getuid?.() === 0, 'podman-compose is not installed (Debian: apt-get install podman-compose)');
    say('installing podman-compose (Debian package)');
    await sh('apt-get', ['install', '-y', '-qq', 'podman-compose'], {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      timeoutMs: 600_000,
    });
  }
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = { ...process.env, IMGAPI_VERSION: VERSION, IMGAPI_PORT: String(port), PUBLIC_URL: url };
  const composeArgs = ['-p', PROJECT, '-f', 'compose.yaml'];
  // podman-compose 1.0 leaves the project's network behind.
  const down = () =>
    sh('podman-compose', [...composeArgs, 'down', '--volumes'], { env, timeoutMs: 180_000 }).then(() =>
      run('podman', ['network', 'rm', '--force', `${PROJECT}_default`]),
    );
  await down().catch(() => {});
  cleanups.push(down);
  say(`starting compose.yaml's scaled profile (${PROJECT}: postgres, api, worker) on ${url}`);
  const started = Date.now();
  // podman-compose 1.0 knows no profiles: the services are named instead (docker compose:
  // `--profile scaled up -d api worker`).
  await sh('podman-compose', [...composeArgs, 'up', '-d', '--no-build', 'postgres', 'api', 'worker'], { env, timeoutMs: 300_000 });
  const api = `${PROJECT}_api_1`;
  const worker = `${PROJECT}_worker_1`;
  // The API and the worker may start before PostgreSQL accepts connections: they exit, and
  // their restart policy starts them again.
  await ready(api, url);
  await waitFor(
    'the worker running',
    120_000,
    async () => ((await logsOf(worker)).includes(`imgapi ${VERSION} worker running`) ? true : undefined),
    () => logsOf(worker),
  );
  summary.push(`compose scaled profile up and ready in ${seconds(Date.now() - started)}`);
  await podman('exec', api, 'imgapi', 'users', 'create', '--email', 'scaled@example.com', '--plan', 'pro');
  const key = await podman('exec', api, 'imgapi', 'keys', 'create', '--email', 'scaled@example.com', '--name', 'compose-test');
  const imgapi = new Imgapi({ baseUrl: url, apiKey: key });
  const photo = path.join(CORPUS, 'images/sharp/Landscape_6.jpg');
  const { task, output } = await imgapi.run('resize', photo, { width: 200, format: 'webp' }, { timeoutMs: 120_000 });
  const meta = await sharp(Buffer.from(await output.blob!.arrayBuffer())).metadata();
  check(meta.format === 'webp' && meta.width === 200, `the scaled job's output decodes as ${meta.format} ${meta.width} px wide`);
  const readiness = (await (await fetch(`${url}/readyz`)).json()) as { checks: Record<string, { ok: boolean; detail?: string }> };
  const failing = Object.entries(readiness.checks).filter(([, c]) => !c.ok);
  check(failing.length === 0, `the API's /readyz reports ${failing.map(([name, c]) => `${name}: ${c.detail ?? 'not ok'}`).join('; ')}`);
  summary.push(`compose: a resize queued on \`api\` (no workers) ran on \`worker\` through PostgreSQL (${task.taskId}); api's /readyz all ok`);
}

async function main(): Promise<void> {
  const flags = await prepareMachine();
  const buildMs = await build(flags);
  summary.push(`build: ${seconds(buildMs)}`);
  await inspectImage();
  await single();
  await compose();
}

let failed = false;
const interrupt = () => {
  say('interrupted: cleaning up');
  failed = true;
};
process.once('SIGINT', interrupt);
try {
  await main();
} catch (err) {
  failed = true;
  process.stderr.write(`\ntest:container: FAILED: ${(err as Error).message}\n`);
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup().catch((err: Error) => say(`cleanup: ${err.message.split('\n')[0]}`));
}
process.stderr.write(`\n${summary.map((line) => `  ✓ ${line}`).join('\n')}\n\ntest:container: ${failed ? 'FAILED' : 'passed'}\n`);
process.exit(failed ? 1 : 0);
