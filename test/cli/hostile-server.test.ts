// The client commands against a server that lies (test/hostile-api.ts): a file name, a task's
// `result.format` or an id from the server never becomes a path outside -o (or the current
// directory), an existing file is never replaced without --overwrite, and nothing it sends reaches
// the terminal with its escape sequences or control characters. Most commands run in this process
// (clientCommand, as main.ts calls it); the current directory's case runs the compiled binary.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { clientCommand } from '../../src/cli/client.js';
import { HOSTILE_DISPOSITIONS, UNPRINTABLE, startHostileApi, type HostileApi } from '../hostile-api.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = path.join(REPO_ROOT, 'dist', 'src', 'main.js');

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}
const show = (r: Result) => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

/** Every file under `dir`, relative to it, hidden ones included. */
const filesUnder = (dir: string): string[] => (fs.readdirSync(dir, { recursive: true }) as string[]).sort();

/** What was printed holds no control byte (but \n and \t), no bidi or other format character. */
function assertPrintable(result: Result): void {
  assert.doesNotMatch(result.stdout, UNPRINTABLE, show(result));
  assert.doesNotMatch(result.stderr, UNPRINTABLE, show(result));
}

describe('imgapi client commands against a hostile server', () => {
  let api: HostileApi;
  let sandbox: string;
  before(async () => {
    api = await startHostileApi();
    sandbox = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-hostile-cli-'));
  });
  after(async () => {
    await api.close();
    fs.rmSync(sandbox, { recursive: true, force: true });
  });

  /** `imgapi <args>` in this process; `tty`: stderr is a terminal (the progress bars are drawn). */
  async function imgapi(args: string[], options: { tty?: boolean } = {}): Promise<Result> {
    const result = { code: null as number | null, stdout: '', stderr: '' };
    const stream = (key: 'stdout' | 'stderr') => ({
      write: (text: string) => ((result[key] += text), true),
      isTTY: key === 'stderr' && options.tty === true,
      columns: 100,
      rows: 30,
    });
    result.code = await clientCommand(args[0]!, args.slice(1), {
      stdout: stream('stdout'),
      stderr: stream('stderr'),
      env: { IMGAPI_URL: api.url, IMGAPI_KEY: 'key' },
    });
    return result;
  }

  /** The compiled binary, in `cwd`. */
  function binary(args: string[], cwd: string): Promise<Result> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [MAIN, ...args], {
        cwd,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', IMGAPI_URL: api.url, IMGAPI_KEY: 'key' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      child.once('error', reject);
      child.once('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  it('download -o: every hostile Content-Disposition ends as one safe file inside the folder, and is printed so', async () => {
    for (const [index, { header, name }] of HOSTILE_DISPOSITIONS.entries()) {
      const fileId = `file_cli${index}`;
      api.downloads.set(fileId, { disposition: header });
      const root = path.join(sandbox, 'download', String(index));
      const out = path.join(root, 'out');
      fs.mkdirSync(out, { recursive: true });
      const result = await imgapi(['download', fileId, '-o', out, ...(index % 2 ? ['--json'] : [])]);
      assert.equal(result.code, 0, `${header}\n${show(result)}`);
      assertPrintable(result);
      const expected = path.join(out, name ?? fileId);
      if (index % 2) assert.equal(JSON.parse(result.stdout).path, expected, header);
      else assert.equal(result.stdout, `${expected}\n`, header);
      assert.deepEqual(filesUnder(root), ['out', path.join('out', name ?? fileId)], header);
    }
    assert.ok(!fs.existsSync('/tmp/absolute.png'), 'an absolute name is not followed');
  });

  it('the current directory (no -o): a safe name, an existing file kept without --overwrite and replaced with it', async () => {
    // The compiled binary, so that its current directory is the one written to.
    const setup = spawnSync(process.execPath, [path.join(REPO_ROOT, 'scripts', 'setup.mjs'), '--build-only'], { cwd: REPO_ROOT, encoding: 'utf8' });
    assert.equal(setup.status, 0, setup.stderr);
    const root = path.join(sandbox, 'cwd');
    const cwd = path.join(root, 'here');
    fs.mkdirSync(cwd, { recursive: true });
    fs.writeFileSync(path.join(cwd, 'existing.txt'), 'mine');
    fs.writeFileSync(path.join(cwd, '.bashrc'), 'mine');
    api.downloads.set('file_existing', { disposition: 'attachment; filename="existing.txt"' });
    api.downloads.set('file_dotfile', { disposition: 'attachment; filename=".bashrc"' });

    const [kept, dotfile] = await Promise.all([binary(['download', 'file_existing'], cwd), binary(['download', 'file_dotfile'], cwd)]);
    assert.equal(kept.code, 1, show(kept));
    assert.match(
      kept.stderr,
      /^file_existing: failed: FILE_EXISTS: .*existing\.txt exists and was not replaced \(--overwrite replaces it\)$/m,
      show(kept),
    );
    assert.equal(fs.readFileSync(path.join(cwd, 'existing.txt'), 'utf8'), 'mine');
    assert.equal(dotfile.code, 0, show(dotfile));
    assert.equal(dotfile.stdout, `${path.join(cwd, 'bashrc')}\n`);
    assert.equal(fs.readFileSync(path.join(cwd, '.bashrc'), 'utf8'), 'mine');
    assert.deepEqual(filesUnder(cwd), ['.bashrc', 'bashrc', 'existing.txt'], 'no partial file left');

    const replaced = await binary(['download', 'file_existing', '--overwrite'], cwd);
    assert.equal(replaced.code, 0, show(replaced));
    assert.equal(fs.readFileSync(path.join(cwd, 'existing.txt'), 'utf8'), 'bytes of file_existing');
    assert.deepEqual(filesUnder(root), ['here', ...['.bashrc', 'bashrc', 'existing.txt'].map((name) => path.join('here', name))], 'nothing beside');
  });

  it('run: result.format is checked against the formats table (unknown → .bin); several outputs are named by the client; --overwrite', async () => {
    const root = path.join(sandbox, 'run');
    const out = path.join(root, 'out');
    fs.mkdirSync(root);
    const formats: Array<[string, string]> = [
      ['png/../../../pwned', 'bin'],
      ['../../.bashrc', 'bin'],
      ['/etc/passwd', 'bin'],
      ['constructor', 'bin'],
      ['__proto__', 'bin'],
      ['\x1b]0;pwn\x07png', 'bin'],
      ['', 'bin'],
      ['jpeg', 'jpg'],
      ['tiff', 'tiff'],
    ];
    const inputs = formats.map((_, i) => `in${i}.jpg`);
    formats.forEach(([format], i) => api.tasks.set(inputs[i]!, { result: { format } }));
    // A deck's slides: several outputs; names the server gives that are not `<input stem>.<tag>.<ext>`
    // are not followed: the client names them from the input and the slide numbers, `.slide-<n>`.
    inputs.push('deck.jpg', 'deck2.jpg');
    api.tasks.set('deck.jpg', {
      outputFileIds: ['file_slide1', 'file_slide2'],
      result: { format: 'zip', imageFormat: 'webp', slides: [3, '../../x'] },
    });
    api.tasks.set('deck2.jpg', { outputFileIds: ['file_slide1', 'file_slide2'], result: { format: 'zip', imageFormat: '../x', slides: [1, 2] } });
    api.downloads.set('file_slide1', { disposition: "attachment; filename*=UTF-8''..%2F..%2Fslide-1.png" });
    api.downloads.set('file_slide2', { disposition: "attachment; filename*=UTF-8''%1B%5B2J.slide-2.png" });
    for (const input of inputs) fs.writeFileSync(path.join(root, input), 'jpeg');
    const expected = [
      ...formats.map(([, extension], i) => `in${i}.${extension}`),
      ...['deck.slide-3.webp', 'deck.slide-2.webp', 'deck2.slide-1.bin', 'deck2.slide-2.bin'],
    ].sort();

    const args = ['run', 'convert', ...inputs.map((input) => path.join(root, input)), '-o', out];
    const first = await imgapi(args);
    assert.equal(first.code, 0, show(first));
    assertPrintable(first);
    assert.deepEqual(fs.readdirSync(out).sort(), expected);
    assert.deepEqual(filesUnder(root), [...inputs, 'out', ...expected.map((name) => path.join('out', name))].sort());

    // Again: every output exists, so none is replaced: an input whose `<name>[.<kind>…].<ext>` exists
    // for a format the service writes is skipped before upload; the others (.bin, slides, whose tag is
    // not convert's) fail when written.
    fs.writeFileSync(path.join(out, 'in0.bin'), 'mine');
    const again = await imgapi([...args, '--json']);
    assert.equal(again.code, 1, show(again));
    const report = JSON.parse(again.stdout);
    assert.deepEqual(
      report.files.map((file: { status: string; error?: { code: string } }) => file.error?.code ?? file.status),
      inputs.map((input) => (['in7.jpg', 'in8.jpg'].includes(input) ? 'skipped' : 'FILE_EXISTS')),
    );
    assert.equal(fs.readFileSync(path.join(out, 'in0.bin'), 'utf8'), 'mine');
    assert.deepEqual(fs.readdirSync(out).sort(), expected, 'no partial file left');

    const replaced = await imgapi([...args, '--overwrite']);
    assert.equal(replaced.code, 0, show(replaced));
    assert.notEqual(fs.readFileSync(path.join(out, 'in0.bin'), 'utf8'), 'mine');
    assert.deepEqual(fs.readdirSync(out).sort(), expected);
  });

  it('nothing the server sends reaches the terminal raw: failures, retries, progress bars, ids, JSON, tables', async () => {
    const root = path.join(sandbox, 'terminal');
    fs.mkdirSync(root);
    const failing = path.join(root, 'bad.jpg');
    fs.writeFileSync(failing, 'jpeg');
    api.tasks.set('bad.jpg', {
      status: 'failed',
      outputFileId: undefined,
      error: { code: 'INVALID_IMAGE\x1b[2J', message: '\x1b]0;pwned\x07bad\nfake: done\u202e' },
    });
    for (const tty of [false, true]) {
      const result = await imgapi(['run', 'convert', failing, '-o', path.join(root, 'out')], { tty });
      assert.equal(result.code, 1, show(result));
      assert.match(result.stderr, /bad\.jpg: failed: INVALID_IMAGE: bad fake: done\n/, show(result));
      // On a terminal the bars move the cursor (our own sequences); nothing else may.
      const drawn = tty ? { ...result, stderr: result.stderr.replace(/\r\x1b\[\d+A\x1b\[J/g, '') } : result;
      if (tty) assert.notEqual(drawn.stderr, result.stderr, 'the bars were drawn');
      assertPrintable(drawn);
    }

    // A retry names the code the server gave; the task's JSON keeps every character, escaped.
    const hostileTask = {
      type: 'convert\u202e',
      outputFileId: 'file_\x1b[2J\u0085',
      result: { format: 'png\x1b]0;x\x07', size: 3, note: '\u2028\u009b31m\u{e0001}' },
    };
    api.tasks.set('task_hostile', hostileTask);
    api.unavailableOnce.set('task_hostile', { code: 'UNAVAILABLE\x1b[2J', message: 'down' });
    const task = await imgapi(['task', 'task_hostile', '--json']);
    assert.equal(task.code, 0, show(task));
    assertPrintable(task);
    assert.match(task.stderr, /^retrying GET \/api\/tasks\/task_hostile in 0\.0 s \(UNAVAILABLE\)$/m);
    const printed = JSON.parse(task.stdout);
    assert.deepEqual([printed.type, printed.outputFileId, printed.result], [hostileTask.type, hostileTask.outputFileId, { ...hostileTask.result }]);

    // An id printed for a script stays on its line.
    const upload = path.join(root, 'up.jpg');
    fs.writeFileSync(upload, 'jpeg');
    api.uploadIds.set('up.jpg', 'file_1\n\x1b[2Jfile_2\t');
    const uploaded = await imgapi(['upload', upload]);
    assert.equal(uploaded.code, 0, show(uploaded));
    assertPrintable(uploaded);
    assert.equal(uploaded.stdout, `file_1 file_2 \t${upload}\n`);

    api.webhooks = {
      webhooks: [
        {
          webhookId: 'wh_1\x1b[2J',
          url: 'https://example.com/\x1b]8;;https://evil.example\x07click\x1b]8;;\x07',
          events: ['task.completed'],
          createdAt: '2026-01-01T00:00:00Z\u202e',
        },
      ],
      limit: 10,
    };
    api.deliveries = {
      deliveries: [
        {
          deliveryId: 'dlv_1',
          event: 'task.completed',
          status: 'failed',
          attempts: 1,
          statusCode: 500,
          error: '\x1b[31mred\x1b[0m\nfake line',
          createdAt: 'now',
        },
      ],
    };
    const listed = await imgapi(['webhooks', 'list']);
    assert.equal(listed.code, 0, show(listed));
    assertPrintable(listed);
    assert.match(listed.stdout, /^wh_1\s+https:\/\/example\.com\/click\s+task\.completed\s+2026-01-01T00:00:00Z$/m, show(listed));
    const deliveries = await imgapi(['webhooks', 'deliveries', 'wh_1']);
    assert.equal(deliveries.code, 0, show(deliveries));
    assertPrintable(deliveries);
    assert.match(deliveries.stdout, /\sred fake line\s/);
  });

  it('info: fields of the wrong type or full of escapes print as text or are left out, never a crash', async () => {
    api.info = {
      format: 'jpeg\x1b[2J',
      width: '\u202e1',
      height: null,
      pages: 'many',
      exif: { Make: '\x1b]0;pwned\x07Canon', Model: 5, DateTimeOriginal: { nested: true } },
      gps: { latitude: '\x1b[31m', longitude: null },
      palette: '#ffffff',
      faces: [null, { left: 'x', score: '\x9b2J' }, 7],
      phash: ['\x00'],
    };
    for (const args of [
      ['info', 'file_1', '--faces'],
      ['info', 'file_1'],
    ]) {
      const result = await imgapi(args);
      assert.equal(result.code, 0, show(result));
      assertPrintable(result);
      assert.match(result.stdout, /^camera: {4}Canon 5$/m, show(result));
      assert.match(result.stdout, /^faces: {5}undefined×undefined at undefined,undefined \(undefined\); /m, show(result));
      assert.doesNotMatch(result.stdout, /^palette:/m, 'a palette that is not a list is left out');
    }
    api.info = 'not an object';
    const odd = await imgapi(['info', 'file_1']);
    assertPrintable(odd);
    assert.ok(odd.code === 0 || odd.code === 1, show(odd));
  });
});
