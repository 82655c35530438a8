// `npm start`'s launcher (scripts/start.mjs): the server runs with jemalloc preloaded when the
// system has libjemalloc and with libuv's pool sized for the image slots, is reached by the
// launcher's signals, and the launcher exits as it did.
// Runs the compiled server (dist/src/main.js); `npm test`'s setup builds it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { findJemalloc, serverEnvironment } from '../scripts/start.mjs';
import { REPO_ROOT, nodeOptions, sleep, tempDir } from './helpers.js';
import { freePort } from './e2e/processes.js';

const LAUNCHER = path.join(REPO_ROOT, 'scripts', 'start.mjs');

/** The pids of `pid`'s children (Linux: /proc/<pid>/task/<tid>/children). */
function childrenOf(pid: number): number[] {
  const tasks = fs.readdirSync(`/proc/${pid}/task`);
  return tasks.flatMap((tid) => fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
}

describe('npm start launcher', () => {
  const dirs: string[] = [];
  after(() => {
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('preloads jemalloc unless LD_PRELOAD is set, IMGAPI_JEMALLOC=0, or the library is missing', () => {
    const lib = '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2';
    assert.equal(serverEnvironment({ PATH: '/bin' }, lib).LD_PRELOAD, lib);
    assert.equal(serverEnvironment({ PATH: '/bin', LD_PRELOAD: '/x.so' }, lib).LD_PRELOAD, '/x.so');
    assert.equal(serverEnvironment({ PATH: '/bin', IMGAPI_JEMALLOC: '0' }, lib).LD_PRELOAD, undefined);
    assert.equal(serverEnvironment({ PATH: '/bin' }, undefined).LD_PRELOAD, undefined);
    const scratch = tempDir('imgapi-start-');
    dirs.push(scratch);
    const fake = path.join(scratch, 'libjemalloc.so.2');
    fs.writeFileSync(fake, '');
    assert.equal(findJemalloc([path.join(scratch, 'missing.so'), fake]), fake);
    assert.equal(findJemalloc([path.join(scratch, 'missing.so'), scratch]), undefined, 'a directory is not the library');
  });

  it('runs the server with jemalloc mapped when it is installed, passes SIGTERM on and exits as the server did', async () => {
    const dataDir = tempDir('imgapi-start-');
    dirs.push(dataDir);
    const port = await freePort();
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? dataDir,
      ...nodeOptions(),
      DATA_DIR: dataDir,
      DATABASE_URL: `sqlite:${path.join(dataDir, 'imgapi.db')}`,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      WORKER_CONCURRENCY: '1',
    };
    const launcher = spawn(process.execPath, [LAUNCHER, 'serve'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    launcher.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => launcher.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 30_000;
      for (;;) {
        assert.equal(launcher.exitCode, null, `the launcher exited early: ${stderr}`);
        const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) break;
        assert.ok(Date.now() < deadline, `the server did not answer within 30 s: ${stderr}`);
        await sleep(100);
      }
      const [server] = childrenOf(launcher.pid!);
      assert.ok(server, 'the server is the launcher’s child');
      const maps = fs.readFileSync(`/proc/${server}/maps`, 'utf8');
      const environ = fs.readFileSync(`/proc/${server}/environ`, 'utf8').split('\0');
      const library = findJemalloc();
      if (library) {
        assert.ok(environ.includes(`LD_PRELOAD=${library}`), 'LD_PRELOAD names jemalloc');
        assert.match(maps, /libjemalloc\.so/, 'jemalloc is mapped into the server');
      } else {
        assert.ok(!environ.some((v) => v.startsWith('LD_PRELOAD=')), 'no LD_PRELOAD without the library');
        assert.doesNotMatch(maps, /libjemalloc\.so/);
      }
      // libuv's pool, which runs sharp's work, is sized for the image slots, not left at Node's 4 (src/main.ts).
      const poolThreads = fs
        .readdirSync(`/proc/${server}/task`)
        .filter((tid) => fs.readFileSync(`/proc/${server}/task/${tid}/comm`, 'utf8').trim() === 'libuv-worker');
      assert.equal(poolThreads.length, Math.max(4, 2 * os.availableParallelism() + 2));
      launcher.kill('SIGTERM');
      assert.equal(await exited, 0, `the server shut down cleanly: ${stderr}`);
      assert.equal(fs.existsSync(`/proc/${server}`), false, 'the server is gone with it');
    } finally {
      launcher.kill('SIGKILL');
    }
  });
});
