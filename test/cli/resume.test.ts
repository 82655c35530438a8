// `imgapi run` as something you can stop and start again (issue #27), through a real terminal:
// the compiled CLI under `script` (a pty), against a real server. Ctrl-C, reruns that skip what
// is done, usage errors caught before any API request, the progress view's width, --json paths.
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client, DIALECTS, REPO_ROOT, corpusFile, nodeOptions, tempDir, type TestServer } from '../helpers.js';
import { startHostileApi } from '../hostile-api.js';
import { startPublicServer } from '../sdk/support.js';

const MAIN = path.join(REPO_ROOT, 'dist', 'src', 'main.js');
const JPEG = corpusFile('images/sharp/concert.jpg');
const PNG = corpusFile('images/sharp/swiss.png');

const quote = (arg: string) => `'${arg.replace(/'/g, `'\\''`)}'`;

interface Session {
  child: ChildProcessWithoutNullStreams;
  /** All the terminal showed so far (stdout and stderr, as a pty merges them). */
  screen: () => string;
  done: Promise<number | null>;
}

/** `imgapi <args>` on a pseudo-terminal of 80 columns, through util-linux's `script`. */
function onTerminal(args: string[], env: Record<string, string>, cwd = REPO_ROOT): Session {
  const command = `stty cols 80 rows 24 2>/dev/null; exec ${[process.execPath, MAIN, ...args].map(quote).join(' ')}`;
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...nodeOptions(), TERM: 'xterm', COLUMNS: '80', LINES: '24', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let screen = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (screen += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (screen += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const done = new Promise<number | null>((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    }),
  );
  return { child, screen: () => screen, done };
}

/** Polls `check` until it holds (a condition, not a delay), failing after `ms`. */
async function until(what: string, check: () => Promise<boolean> | boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The screen as lines, without the view's own cursor movements and erasures. */
const lines = (screen: string): string[] =>
  screen
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .split(/\r?\n|\r/)
    .filter((line) => line.length > 0);

type Task = { taskId: string; status: string };

for (const dialect of DIALECTS.slice(0, 1)) {
  describe(`imgapi run, stopped and started again (${dialect})`, () => {
    let server: TestServer;
    let idle: TestServer;
    let work: string;
    let apiRequests = 0;

    before(async () => {
      server = await startPublicServer(dialect);
      // No workers: its tasks stay queued, so a run is surely in flight when it is interrupted.
      idle = await startPublicServer(dialect, {
        workers: 0,
        beforeListen: (app) =>
          app.addHook('onRequest', async (request) => {
            if (request.url.startsWith('/api/')) apiRequests++;
          }),
      });
      work = tempDir('imgapi-cli-resume-');
    });
    after(async () => {
      await Promise.all([server.close(), idle.close()]);
      fs.rmSync(work, { recursive: true, force: true });
    });

    it('Ctrl-C: the summary so far, exit 130, no partial file, the tasks it started canceled; --keep-running leaves them', async () => {
      for (const keepRunning of [false, true]) {
        const key = await idle.newKey('pro');
        const out = path.join(work, `interrupted-${keepRunning}`);
        const client = new Client(idle.url, key);
        const tasks = async (): Promise<Task[]> => (await client.get('/api/tasks')).body.data.tasks;
        const session = onTerminal(
          ['run', 'resize', JPEG, PNG, '--width', '8', '--no-batch', '-o', out, ...(keepRunning ? ['--keep-running'] : [])],
          { IMGAPI_URL: idle.url, IMGAPI_KEY: key },
        );
        await until('both tasks queued', async () => (await tasks()).length === 2);
        session.child.stdin.write('\x03');
        const code = await session.done;
        const screen = lines(session.screen()).join('\n');
        assert.equal(code, 130, screen);
        assert.match(screen, /^total \(2\)\s.*0 done, 2 canceled$/m, screen);
        assert.deepEqual(fs.readdirSync(out), [], 'nothing written, no .part file left');
        const statuses = (await tasks()).map((task) => task.status);
        assert.deepEqual(statuses, keepRunning ? ['queued', 'queued'] : ['canceled', 'canceled']);
      }
    });

    it('Ctrl-C in the middle of a download leaves no partial file', async () => {
      const api = await startHostileApi();
      try {
        api.downloads.set('out_task_2', { disposition: 'attachment; filename="in.png"', body: Buffer.alloc(1 << 20, 7), stall: true });
        const out = path.join(work, 'mid-download');
        const input = path.join(work, 'in.jpg');
        fs.writeFileSync(input, 'jpeg');
        const session = onTerminal(['run', 'convert', input, '-o', out], { IMGAPI_URL: api.url, IMGAPI_KEY: 'key' });
        await until('the download being written', () => fs.existsSync(out) && fs.readdirSync(out).some((name) => name.endsWith('.part')));
        session.child.stdin.write('\x03');
        assert.equal(await session.done, 130, session.screen());
        assert.match(lines(session.screen()).join('\n'), /^total \(1\)\s.*0 done, 1 canceled$/m);
        assert.deepEqual(fs.readdirSync(out), []);
      } finally {
        await api.close();
      }
    });

    it('the progress view: a row per file in flight with its own time, in 80 columns, status words whole', async () => {
      const key = await idle.newKey('pro');
      const long = path.join(work, `${'a-very-long-holiday-photo-name-'.repeat(4)}end.jpg`);
      fs.copyFileSync(JPEG, long);
      const client = new Client(idle.url, key);
      const session = onTerminal(['run', 'resize', long, PNG, '--width', '8', '--no-batch', '-o', path.join(work, 'view')], {
        IMGAPI_URL: idle.url,
        IMGAPI_KEY: key,
      });
      const status = /(?:queued|uploading \d+%|uploaded \d+%|processing \d+%|downloading \d+%) \d+\.\d s$/;
      const rows = () => lines(session.screen()).filter((line) => line.includes(' [') && status.test(line));
      // Both files queued (the server has no workers), each drawn on its own row.
      await until('both files in flight on the view', async () => {
        const tasks = (await client.get('/api/tasks')).body.data.tasks.length;
        const shown = rows();
        return tasks === 2 && shown.some((line) => line.startsWith('/') && line.includes('…')) && shown.some((line) => line.includes('swiss.png'));
      });
      session.child.stdin.write('\x03');
      assert.equal(await session.done, 130);
      const view = lines(session.screen()).filter((line) => line.includes(' ['));
      assert.ok(view.length >= 2, session.screen());
      for (const line of view) {
        assert.ok(line.length <= 80, `${line.length} columns: ${line}`);
        assert.ok(status.test(line) || /\d+%$/.test(line), `a whole status at the end: ${line}`);
      }
      // The long name is shortened in the middle: its start and its end are both shown.
      assert.ok(
        view.some((line) => /^\/\S*…\S*-end\.jpg /.test(line)),
        view.join('\n'),
      );
    });

    it('usage errors are caught before any API request: one line, the usage of run alone, exit 2', async () => {
      const env = { IMGAPI_URL: idle.url, IMGAPI_KEY: await idle.newKey('pro') };
      const before = apiRequests;
      const cases: Array<[string[], RegExp]> = [
        [['--width', 'abc'], /^imgapi: --width takes a whole number, not "abc"$/m],
        [['--width', '0'], /^imgapi: --width takes from 1 to \d+, not 0$/m],
        [['--colour', 'red'], /^imgapi: resize has no option "colour"; its options: .*width/m],
        [['--fit', 'sideways'], /^imgapi: --fit takes one of .*cover.*, not "sideways"$/m],
        [['--width'], /^imgapi: --width needs a value$/m],
      ];
      for (const [args, message] of cases) {
        const session = onTerminal(['run', 'resize', JPEG, '-o', path.join(work, 'usage'), ...args], env);
        const code = await session.done;
        const screen = lines(session.screen());
        assert.equal(code, 2, screen.join('\n'));
        assert.match(screen.join('\n'), message);
        assert.equal(screen.filter((line) => line.startsWith('imgapi:')).length, 1, 'one line says what is wrong');
        assert.equal(screen[1], 'Usage:');
        assert.ok(screen.some((line) => line.startsWith('  run <kind>')));
        assert.ok(!screen.some((line) => /^ {2}(upload|task|download|webhooks|url) /.test(line)), `run's usage only:\n${screen.join('\n')}`);
      }
      assert.equal(apiRequests, before, 'no API request was made');
      assert.equal(fs.existsSync(path.join(work, 'usage')), false);
    });

    it('a rerun skips the inputs whose output exists, before uploading them; --overwrite redoes them', async () => {
      const key = await server.newKey('pro');
      const env = { IMGAPI_URL: server.url, IMGAPI_KEY: key };
      const client = new Client(server.url, key);
      const out = path.join(work, 'rerun');
      const first = onTerminal(['run', 'resize', JPEG, '--width', '8', '--format', 'png', '-o', out], env);
      assert.equal(await first.done, 0, first.screen());
      const files = async () => (await client.get('/api/tasks')).body.data.tasks.length;
      assert.equal(await files(), 1);

      // concert.resize-8.png exists: concert is skipped (no upload, no task); swiss is done.
      const second = onTerminal(['run', 'resize', JPEG, PNG, '--width', '8', '--format', 'png', '--json', '-o', out], env);
      assert.equal(await second.done, 0, second.screen());
      const report = JSON.parse(lines(second.screen()).join(''));
      assert.deepEqual(
        report.files.map((file: { status: string }) => file.status),
        ['skipped', 'done'],
      );
      assert.deepEqual(report.files[0].outputs, [path.join(out, 'concert.resize-8.png')]);
      assert.equal(report.files[0].input, JPEG);
      assert.equal(report.outputDir, out);
      assert.equal(await files(), 2, 'one new task, for swiss only');

      // Without --format any output of that name counts; --overwrite redoes both.
      const third = onTerminal(['run', 'resize', JPEG, PNG, '--width', '8', '-o', out], env);
      assert.equal(await third.done, 0, third.screen());
      assert.match(lines(third.screen()).join('\n'), /^total \(2\)\s.*0 done, 2 skipped$/m);
      assert.equal(await files(), 2);
      const fourth = onTerminal(['run', 'resize', JPEG, PNG, '--width', '8', '--format', 'png', '--overwrite', '-o', out], env);
      assert.equal(await fourth.done, 0, fourth.screen());
      assert.equal(await files(), 4);

      // upload --json names the file by its absolute path, however it was named.
      fs.copyFileSync(PNG, path.join(work, 'relative.png'));
      const upload = onTerminal(['upload', 'relative.png', '--json'], env, work);
      assert.equal(await upload.done, 0, upload.screen());
      assert.equal(JSON.parse(lines(upload.screen()).join('')).files[0].file, path.join(work, 'relative.png'));
    });
  });
}
