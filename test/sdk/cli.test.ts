// The client commands of the `imgapi` binary (run, upload, task, download) as a user runs them:
// the compiled CLI as a child process against a real server, with IMGAPI_URL and IMGAPI_KEY.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { PDFDocument } from 'pdf-lib';
import sharp from 'sharp';
import { deliveryUrlSync, Imgapi } from '../../sdk/node.js';
import { Client, DIALECTS, REPO_ROOT, buildWithSetup, corpusFile, nodeOptions, tempDir, type TestServer } from '../helpers.js';
import { startPublicServer } from './support.js';

const MAIN = path.join(REPO_ROOT, 'dist', 'src', 'main.js');
const BIN = path.join(REPO_ROOT, 'bin', 'imgapi.mjs');
const JPEG = corpusFile('images/sharp/concert.jpg');
const PNG = corpusFile('images/sharp/swiss.png');
const GIF = corpusFile('images/sharp/rotating-squares.gif');
const TRUNCATED = corpusFile('images/sharp/truncated.jpg');
const NOT_AN_IMAGE = corpusFile('README.md');
/** A failure line: the file, the error code and the message. */
const failureLine = (file: string, code: string) => new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: failed: ${code}: \\S`);

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

const show = (r: Result) => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

/** `imgapi …` to completion, in `cwd`, with only the environment given (plus PATH and HOME). */
function imgapi(args: string[], env: Record<string, string>, options: { cwd?: string; bin?: boolean } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [options.bin ? BIN : MAIN, ...args], {
      cwd: options.cwd ?? REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...nodeOptions(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

before(() => {
  // The tests run the compiled CLI: build it when src/ or sdk/ is newer (a no-op otherwise).
  buildWithSetup();
});

// The commands talk HTTP to the server; which database it runs on is the server's own tests'
// concern, so the first dialect only (these spawn a process per command and are among the slowest).
for (const dialect of DIALECTS.slice(0, 1)) {
  describe(`imgapi client commands (${dialect})`, () => {
    let server: TestServer;
    let env: Record<string, string>;
    let work: string;

    before(async () => {
      server = await startPublicServer(dialect);
      env = { IMGAPI_URL: server.url, IMGAPI_KEY: await server.newKey('pro') };
      work = tempDir('imgapi-cli-client-');
    });
    after(async () => {
      await server.close();
      fs.rmSync(work, { recursive: true, force: true });
    });

    it('run: a batch where the plan allows it, the outputs in -o, a summary table, exit 0', async () => {
      const key = await server.newKey('pro');
      const out = path.join(work, 'batch');
      const result = await imgapi(['run', 'resize', JPEG, PNG, GIF, '--width', '48', '--format', 'png', '-o', out], { ...env, IMGAPI_KEY: key });
      assert.equal(result.code, 0, show(result));
      // Named by the one rule, as the service names them: <input stem>.<tag>.<ext>.
      for (const name of ['concert.resize-48.png', 'swiss.resize-48.png', 'rotating-squares.resize-48.png']) {
        const meta = await sharp(path.join(out, name)).metadata();
        assert.deepEqual([meta.format, meta.width], ['png', 48], name);
      }
      // The table: a row per file and the total.
      assert.match(result.stdout, /^file\s+before\s+after\s+change\s+time\s+result$/m);
      assert.match(result.stdout, /^total \(3\)\s.*3 done$/m);
      assert.match(result.stderr, /concert\.jpg: done → .*concert\.resize-48\.png \(24 kB → /);
      // One batch, not three jobs.
      const tasks = (await new Client(server.url, key).get('/api/tasks')).body.data.tasks;
      assert.equal(tasks.length, 3);
      assert.equal(new Set(tasks.map((t: { batchId?: string }) => t.batchId)).size, 1);
      assert.ok(tasks[0].batchId);
    });

    it('run: a failure gives exit 1 and a line with the file, the code and the message; --json says the same', async () => {
      const out = path.join(work, 'failures');
      const plain = await imgapi(['run', 'compress', JPEG, TRUNCATED, NOT_AN_IMAGE, '-o', out], env);
      assert.equal(plain.code, 1, show(plain));
      assert.match(plain.stderr, failureLine(TRUNCATED, 'INVALID_IMAGE'), show(plain));
      assert.match(plain.stderr, failureLine(NOT_AN_IMAGE, 'UNSUPPORTED_MEDIA_TYPE'), show(plain));
      assert.match(plain.stdout, /^total \(3\)\s.*1 done, 2 failed$/m);
      assert.ok(fs.existsSync(path.join(out, 'concert.compress.jpg')));

      // Two inputs of one name, one of them in the output directory: neither input is
      // overwritten, and the outputs do not overwrite each other.
      for (const dir of ['a', 'b']) {
        fs.mkdirSync(path.join(work, dir), { recursive: true });
        fs.copyFileSync(JPEG, path.join(work, dir, 'photo.jpg'));
      }
      const a = path.join(work, 'a');
      const json = await imgapi(
        ['run', 'compress', path.join(a, 'photo.jpg'), TRUNCATED, path.join(work, 'b', 'photo.jpg'), '--no-batch', '--json', '-o', a],
        env,
      );
      assert.equal(json.code, 1, show(json));
      assert.equal(json.stderr, '', 'no progress with --json');
      const report = JSON.parse(json.stdout);
      assert.equal(report.ok, false);
      assert.deepEqual([report.totals.done, report.totals.failed], [2, 1]);
      const [good, bad, same] = report.files;
      assert.equal(good.status, 'done');
      assert.equal(good.bytesBefore, fs.statSync(JPEG).size);
      assert.equal(good.bytesAfter, fs.statSync(path.resolve(REPO_ROOT, good.outputs[0])).size);
      assert.deepEqual(
        [good.outputs[0], same.outputs[0]].map((p: string) => path.basename(p)),
        ['photo.compress.jpg', 'photo-2.compress.jpg'],
      );
      assert.deepEqual(fs.readFileSync(path.join(a, 'photo.jpg')), fs.readFileSync(JPEG), 'the input is untouched');
      assert.deepEqual([bad.status, bad.error.code], ['failed', 'INVALID_IMAGE']);
      assert.ok(bad.error.message.length > 0);
      // --no-batch: a job per file.
      const task = (await new Client(server.url, env.IMGAPI_KEY).get(`/api/tasks/${good.taskId}`)).body.data;
      assert.equal(task.batchId, undefined);
    });

    it('run: options take their types from the service (a boolean flag before a file, kebab-case); image-to-pdf is one job', async () => {
      const out = path.join(work, 'options');
      const flags = await imgapi(['run', 'resize', '--without-enlargement', PNG, '--width', '5000', '--format', 'webp', '-o', out], env);
      assert.equal(flags.code, 0, show(flags));
      const original = await sharp(PNG).metadata();
      assert.equal((await sharp(path.join(out, 'swiss.resize-5000.webp')).metadata()).width, original.width, 'not enlarged');
      // Nor by default: the service keeps the size of an image smaller than the box, and says so.
      // (Into a folder of its own: in `out` swiss's output exists, so a rerun there skips it.)
      const keptOut = path.join(work, 'options-kept');
      const kept = await imgapi(['run', 'resize', PNG, '--width', '4000', '--format', 'webp', '--json', '-o', keptOut], env);
      assert.equal(kept.code, 0, show(kept));
      assert.equal((await sharp(path.join(keptOut, 'swiss.resize-4000.webp')).metadata()).width, original.width, 'not enlarged by default');
      const keptTask = (await new Client(server.url, env.IMGAPI_KEY).get(`/api/tasks/${JSON.parse(kept.stdout).files[0].taskId}`)).body.data;
      assert.equal(keptTask.result.sizeKept, true);

      const pdf = await imgapi(['run', 'image-to-pdf', JPEG, PNG, '--page-size', 'A4', '--margin', '36', '--json', '-o', out], env);
      assert.equal(pdf.code, 0, show(pdf));
      const report = JSON.parse(pdf.stdout);
      assert.equal(report.files.length, 1);
      assert.match(report.files[0].outputs[0], /concert\.pdf$/);
      const document = await PDFDocument.load(fs.readFileSync(path.resolve(REPO_ROOT, report.files[0].outputs[0])));
      assert.equal(document.getPageCount(), 2);
    });

    it('run pipeline: --step kind:name=value,… in order (or --steps file.json) is one task per file', async () => {
      const out = path.join(work, 'pipeline');
      const stepped = await imgapi(
        [
          'run',
          'pipeline',
          JPEG,
          '-o',
          out,
          '--step',
          'resize:width=100',
          '--step',
          'rotate:angle=90',
          '--step',
          'watermark:text=© 2026, Me,opacity=0.5',
          '--format',
          'webp',
          '--json',
        ],
        env,
      );
      assert.equal(stepped.code, 0, show(stepped));
      const report = JSON.parse(stepped.stdout);
      assert.equal(report.kind, 'pipeline');
      const task = (await new Client(server.url, env.IMGAPI_KEY).get(`/api/tasks/${report.files[0].taskId}`)).body.data;
      assert.deepEqual(task.options.steps, [
        { kind: 'resize', width: 100 },
        { kind: 'rotate', angle: 90 },
        { kind: 'watermark', text: '© 2026, Me', opacity: 0.5 },
      ]);
      const original = await sharp(JPEG).metadata();
      const output = await sharp(path.join(out, 'concert.resize-100.rotate-90.watermark.webp')).metadata();
      assert.deepEqual([output.width, output.height], [Math.round((original.height! * 100) / original.width!), 100]);

      const file = path.join(work, 'steps.json');
      fs.writeFileSync(
        file,
        JSON.stringify([
          { kind: 'crop', aspectRatio: '1:1' },
          { kind: 'resize', width: 64 },
        ]),
      );
      const fromFile = await imgapi(['run', 'pipeline', PNG, '--steps', file, '--format', 'png', '-o', out], env);
      assert.equal(fromFile.code, 0, show(fromFile));
      assert.deepEqual(
        await sharp(path.join(out, 'swiss.crop.resize-64.png'))
          .metadata()
          .then((m) => [m.width, m.height]),
        [64, 64],
      );

      const refused: Array<[string[], RegExp]> = [
        [['--step', 'sharpen:sigma=2'], /unknown step kind "sharpen"; the steps are resize, crop/],
        [['--step', 'resize:colour=red'], /--step resize:colour=red: resize has no option "colour"/],
        [['--steps', path.join(work, 'missing.json')], /--steps: cannot read/],
      ];
      for (const [args, message] of refused) {
        const result = await imgapi(['run', 'pipeline', JPEG, '-o', out, ...args], env);
        assert.equal(result.code, 2, show(result));
        assert.match(result.stderr, message, show(result));
      }
      // The server's own validation names the step.
      // (Into a new folder: in `out` concert's output exists, so a rerun there skips it.)
      const invalid = await imgapi(['run', 'pipeline', JPEG, '-o', path.join(out, 'invalid'), '--step', 'rotate'], env);
      assert.equal(invalid.code, 1, show(invalid));
      assert.match(invalid.stdout + invalid.stderr, /steps\[0\]\.angle/, show(invalid));
    });

    it('upload, task --wait and download', async () => {
      const uploaded = await imgapi(['upload', JPEG, PNG], env, { cwd: work });
      assert.equal(uploaded.code, 0, show(uploaded));
      const lines = uploaded.stdout
        .trim()
        .split('\n')
        .map((line) => line.split('\t'));
      assert.deepEqual(
        lines.map(([, file]) => file),
        [JPEG, PNG],
      );
      const [fileId, pngId] = lines.map(([id]) => id);
      assert.ok(fileId && pngId, show(uploaded));
      assert.match(fileId, /^file_/);

      const sdk = new Imgapi({ baseUrl: server.url, apiKey: env.IMGAPI_KEY });
      const queued = await sdk.process('convert', { fileId, format: 'webp' });
      const task = await imgapi(['task', queued.taskId, '--wait', '--json'], env);
      assert.equal(task.code, 0, show(task));
      const finished = JSON.parse(task.stdout);
      assert.equal(finished.status, 'completed');
      // Without --json: text, a line per field.
      const text = await imgapi(['task', queued.taskId], env);
      assert.match(text.stdout, /^status: {3}completed$/m, show(text));
      assert.match(text.stdout, new RegExp(`^output: {3}${finished.outputFileId}$`, 'm'));

      const downloaded = await imgapi(['download', finished.outputFileId, '-o', work], env);
      assert.equal(downloaded.code, 0, show(downloaded));
      const written = downloaded.stdout.trim();
      assert.equal(path.dirname(written), work);
      // --json: the absolute path, wherever -o pointed from.
      const again = await imgapi(['download', finished.outputFileId, '-o', path.relative(REPO_ROOT, path.join(work, 'again.webp')), '--json'], env);
      assert.equal(again.code, 0, show(again));
      assert.equal(JSON.parse(again.stdout).path, path.join(work, 'again.webp'));
      assert.equal((await sharp(written).metadata()).format, 'webp');

      const unknown = await imgapi(['task', 'task_doesnotexist0000000000'], env);
      assert.equal(unknown.code, 1, show(unknown));
      assert.match(unknown.stderr, failureLine('task_doesnotexist0000000000', 'NOT_FOUND'));

      const failing = await sdk.process('compress', { fileId: pngId, targetSize: 10 });
      const failed = await imgapi(['task', failing.taskId, '--wait'], env);
      assert.equal(failed.code, 1, show(failed));
      assert.match(failed.stderr, failureLine(failing.taskId, 'TARGET_SIZE_UNREACHABLE'));
    });

    it('info: of a file id or a local file (uploaded first), text and --json, --faces; a document fails INFO_UNAVAILABLE', async () => {
      const sdk = new Imgapi({ baseUrl: server.url, apiKey: env.IMGAPI_KEY });
      const { fileId } = await sdk.upload(JPEG);
      const text = await imgapi(['info', fileId], env);
      assert.equal(text.code, 0, show(text));
      const meta = await sharp(JPEG).metadata();
      assert.match(text.stdout, new RegExp(`^size: {6}${meta.width}×${meta.height}$`, 'm'), show(text));
      assert.match(text.stdout, /^phash: {5}[0-9a-f]{16}$/m, show(text));
      assert.match(text.stdout, /^palette: {3}(#[0-9a-f]{6} ?){1,8}$/m, show(text));
      const local = await imgapi(['info', path.relative(REPO_ROOT, JPEG), '--json'], env);
      assert.equal(local.code, 0, show(local));
      const info = JSON.parse(local.stdout);
      assert.equal(info.file, JPEG);
      assert.match(info.fileId, /^file_/);
      assert.notEqual(info.fileId, fileId, 'the local file was uploaded');
      assert.equal(info.phash, (await sdk.info(fileId)).phash, 'the same pixels, the same hash');
      assert.doesNotMatch(text.stdout, /^faces:/m, 'faces only when asked');

      // --faces (the SDK's `faces: true`): the three faces of face-api's own sample photo.
      const group = path.join(REPO_ROOT, 'node_modules/@vladmandic/face-api/demo/sample1.jpg');
      const found = await imgapi(['info', path.relative(REPO_ROOT, group), '--faces', '--json'], env);
      assert.equal(found.code, 0, show(found));
      const withFaces = JSON.parse(found.stdout);
      assert.equal(withFaces.faces.length, 3, found.stdout);
      const faces = await imgapi(['info', withFaces.fileId, '--faces'], env);
      assert.match(faces.stdout, /^faces: {5}\d+×\d+ at \d+,\d+ \(\d\.\d\d\)(; \d+×\d+ at \d+,\d+ \(\d\.\d\d\)){2}$/m, show(faces));
      assert.deepEqual((await sdk.info(withFaces.fileId, { faces: true })).faces, withFaces.faces);
      assert.equal((await sdk.info(withFaces.fileId)).faces, undefined);

      const deck = (await sdk.upload(corpusFile('presentations/python-pptx/tbl-cell.pptx'))).fileId;
      const refused = await imgapi(['info', deck], env);
      assert.equal(refused.code, 1, show(refused));
      assert.match(refused.stderr, failureLine(deck, 'INFO_UNAVAILABLE'));
    });

    it('usage errors exit 2 and say what is wrong', async () => {
      const cases: Array<[string[], Record<string, string>, RegExp]> = [
        [['run', 'resize', JPEG, '-o', work], { IMGAPI_URL: server.url }, /no API key: set IMGAPI_KEY or pass --key/],
        [['run', 'sharpen', JPEG, '-o', work], env, /unknown kind "sharpen"; the service has compress, resize/],
        [['run', 'resize', JPEG, '--colour', 'red', '-o', work], env, /resize has no option "colour"; its options: .*width/],
        [['run', 'resize', JPEG, '--width', '10'], env, /-o <dir>/],
        [['run', 'resize', path.join(work, 'missing.jpg'), '-o', work], env, /no such file: .*missing\.jpg/],
        [['run', 'resize', path.join(work, 'nothing-*.jpg'), '-o', work], env, /no file matches/],
        [['upload', JPEG, '--concurrency', '0'], env, /--concurrency takes a whole number/],
        [['download'], env, /usage: imgapi download <fileId>/],
      ];
      const results = await Promise.all(cases.map(async ([args, caseEnv, expected]) => ({ args, expected, result: await imgapi(args, caseEnv) })));
      for (const { args, expected, result } of results) {
        assert.equal(result.code, 2, `${args.join(' ')}: ${show(result)}`);
        assert.match(result.stderr, expected, show(result));
        // That command's usage alone follows.
        assert.match(result.stderr, new RegExp(`\\nUsage:\\n {2}${args[0]} `), show(result));
        assert.doesNotMatch(result.stderr, /Client commands/, show(result));
      }
      // Through the installed binary too, and its help.
      const viaBin = await imgapi(['run', 'resize', JPEG], env, { bin: true });
      assert.equal(viaBin.code, 2, show(viaBin));
      const help = await imgapi(['run', '--help'], {}, { bin: true });
      assert.equal(help.code, 0, show(help));
      assert.match(help.stdout, /Exit status: 0 all done, 1 something failed, 2 usage error/);
    });

    it("url: prints the SDK's signed URL offline (pairs or --transform, the key from the environment), --json, usage errors exit 2", async () => {
      const key = { IMGAPI_URL: 'https://img.example.net', IMGAPI_SIGNING_KEY_ID: 'sk_cli', IMGAPI_SIGNING_SECRET: 'cli-secret' };
      const options = { baseUrl: key.IMGAPI_URL, signingKey: { keyId: key.IMGAPI_SIGNING_KEY_ID, secret: key.IMGAPI_SIGNING_SECRET } };
      // Few processes (each is a cold start): every option is in one of these four.
      const [pairs, written, origin, unsigned] = await Promise.all([
        imgapi(['url', 'file_abc', '--w', '720', '--f=auto', '--dpr', '2'], key),
        imgapi(
          ['url', 'file_abc', '--transform', 'w:720,f:auto', '--json', '--key-id', 'sk_other', '--secret', 'other', '--url', 'http://localhost:9'],
          {},
        ),
        imgapi(['url', 'o/shop/photos/été 1?.jpg'], key),
        imgapi(['url', 'file_abc', '--p', 'thumb', '--public'], { IMGAPI_SIGNING_KEY_ID: 'sk_cli' }),
      ]);
      for (const result of [pairs, written, origin, unsigned]) assert.equal(result.code, 0, show(result));
      assert.equal(pairs.stdout, `${deliveryUrlSync('file_abc', { w: 720, dpr: 2, f: 'auto' }, options)}\n`, show(pairs));
      const other = { baseUrl: 'http://localhost:9', signingKey: { keyId: 'sk_other', secret: 'other' } };
      assert.deepEqual(JSON.parse(written.stdout), { url: deliveryUrlSync('file_abc', 'w:720,f:auto', other) });
      assert.equal(origin.stdout, `${deliveryUrlSync({ origin: 'shop', path: 'photos/été 1?.jpg' }, '-', options)}\n`, show(origin));
      assert.match(origin.stdout, /\/-\/o\/shop\/photos\/%C3%A9t%C3%A9%201%3F\.jpg\n$/);
      assert.equal(unsigned.stdout, 'http://localhost:3000/r/sk_cli/_/p:thumb/file_abc\n', show(unsigned));

      const cases: Array<[string[], Record<string, string>, RegExp]> = [
        [['url', 'file_abc', '--w', '0'], key, /^imgapi: url: w:0 — w takes a whole number of px from 1 to 4096$/m],
        [['url', 'file_abc', '--width', '10'], key, /^imgapi: url: unknown option --width$/m],
        [['url', 'file_abc', '--w', '10'], { IMGAPI_SIGNING_KEY_ID: 'sk_cli' }, /needs the key's secret \(IMGAPI_SIGNING_SECRET or --secret\)/],
        [['url', 'o/shop/a/../b.jpg'], {}, /no signing key: set IMGAPI_SIGNING_KEY_ID or pass --key-id/],
      ];
      const results = await Promise.all(cases.map(([args, caseEnv]) => imgapi(args, caseEnv)));
      results.forEach((result, i) => {
        assert.equal(result.code, 2, `${cases[i]![0].join(' ')}: ${show(result)}`);
        assert.match(result.stderr, cases[i]![2], show(result));
        assert.match(result.stderr, /^Usage:\n {2}url <fileId/m, "the command's usage follows");
        assert.equal(result.stdout, '');
      });
    });

    it('on a terminal: a bar per file and one for all, redrawn in place', async () => {
      const out = path.join(work, 'tty');
      // script(1) gives the CLI a pseudo-terminal; its output is what the terminal received.
      const command = [process.execPath, MAIN, 'run', 'flip', JPEG, PNG, '--direction', 'both', '-o', out].map((arg) => `'${arg}'`).join(' ');
      const result = await new Promise<Result>((resolve, reject) => {
        const child = spawn('script', ['-q', '-e', '-c', command, '/dev/null'], {
          env: { ...process.env, ...env, COLUMNS: '100', LINES: '30' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
        child.once('error', reject);
        child.once('close', (code) => resolve({ code, stdout, stderr: '' }));
      });
      assert.equal(result.code, 0, show(result));
      assert.match(result.stdout, /\[#+-*\]/, 'a bar');
      assert.match(result.stdout, /all \d\/2 /, 'the overall bar');
      assert.match(result.stdout, /\x1b\[\d+A\x1b\[J/, 'redrawn in place');
      assert.match(result.stdout, /total \(2\).*2 done/);
    });
  });
}

describe('imgapi run against a rate limit', () => {
  let server: TestServer;
  before(async () => {
    // Two a second: the three uploads sent at once, before any answer has told the CLI the rate, exceed it.
    server = await startPublicServer('sqlite', { plans: { pro: { requestsPerSecond: 2 } } });
  });
  after(() => server.close());

  it('says what it retries, and every file gets done', async () => {
    const out = tempDir('imgapi-cli-rate-');
    try {
      const env = { IMGAPI_URL: server.url, IMGAPI_KEY: await server.newKey('pro') };
      const result = await imgapi(['run', 'rotate', JPEG, PNG, GIF, '--angle', '90', '--no-batch', '--concurrency', '3', '-o', out], env);
      assert.equal(result.code, 0, show(result));
      assert.match(result.stderr, /retrying (GET|POST) \/api\/\S+ in \d\.\d s \(RATE_LIMITED\)/, show(result));
      assert.equal(fs.readdirSync(out).length, 3);
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });
});

describe("imgapi run of 20 files under the Pro plan's request rate", () => {
  let server: TestServer;
  before(async () => {
    server = await startPublicServer('sqlite', { plans: { pro: { requestsPerSecond: 20 } } });
  });
  after(() => server.close());

  it('waits on the batch, not on each task: no request is refused with 429', async () => {
    const dir = tempDir('imgapi-cli-twenty-');
    try {
      const inputs = [];
      for (let i = 0; i < 20; i++) {
        const file = path.join(dir, `in-${i}.png`);
        await sharp({ create: { width: 24, height: 16, channels: 3, background: { r: i * 12, g: 80, b: 160 } } })
          .png()
          .toFile(file);
        inputs.push(file);
      }
      const out = path.join(dir, 'out');
      const env = { IMGAPI_URL: server.url, IMGAPI_KEY: await server.newKey('pro') };
      const result = await imgapi(['run', 'resize', ...inputs, '--width', '8', '-o', out], env);
      assert.equal(result.code, 0, show(result));
      assert.doesNotMatch(result.stderr, /RATE_LIMITED|retrying/, show(result));
      assert.equal(fs.readdirSync(out).length, 20);
      // The server refused nothing: no 429 among the requests it counted.
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.doesNotMatch(metrics, /imgapi_http_requests_total\{[^}]*status="429"/);
      assert.match(metrics, /imgapi_http_requests_total\{[^}]*route="\/api\/batches\/:batchId"[^}]*status="200"/);
      assert.doesNotMatch(metrics, /imgapi_http_requests_total\{[^}]*route="\/api\/tasks\/:taskId"/, 'no task was polled');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
