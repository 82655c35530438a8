// The LibreOffice supervisor: conversions at once under the pool's cap, a hanging soffice killed
// at the timeout with its whole process group, a crash, a silent failure, a missing program.
// The stand-ins here write pid files outside any work directory, so they run unconfined
// (CONVERTER_SANDBOX=off); sandbox.test.ts kills and crashes them inside the sandbox.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TaskError } from '../../src/errors.js';
import { LibreOffice } from '../../src/programs/libreoffice.js';
import { Sandbox } from '../../src/programs/sandbox.js';
import { Client, corpusFile, sleep, startServer, tempDir, type TestServer } from '../helpers.js';

/** An executable shell script standing in for soffice. */
function standIn(dir: string, name: string, body: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

/** Whether `pid` is a live process (a zombie awaiting its reaper is not). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const state = spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' }).stdout.trim();
  return state !== '' && !state.startsWith('Z');
}

function groupMembers(pgid: number): number[] {
  const out = spawnSync('ps', ['-eo', 'pid=,pgid=,stat='], { encoding: 'utf8' }).stdout;
  return out
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter(([, group, stat]) => Number(group) === pgid && stat && !stat.startsWith('Z'))
    .map(([pid]) => Number(pid));
}

const UNCONFINED = new Sandbox({ mode: 'off', command: 'bwrap', hidden: [] });

describe('LibreOffice supervisor', () => {
  let scratch: string;
  const servers: TestServer[] = [];

  before(() => {
    scratch = tempDir('imgapi-soffice-');
  });
  after(async () => {
    for (const server of servers) await server.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('runs four conversions at once to completion, at most CONVERTER_CONCURRENCY soffice at a time', async () => {
    const server = await startServer({ dialect: 'sqlite', workers: 4, env: { CONVERTER_CONCURRENCY: '2' } });
    servers.push(server);
    const client = new Client(server.url, await server.newKey('pro'));
    const decks = [
      'presentations/poi/SampleShow.pptx',
      'presentations/poi/SampleShow.ppt',
      'presentations/tika/LibreOfficeImpress_odp_1.3.odp',
      'presentations/python-pptx/tbl-cell.pptx',
    ];
    const ids = await Promise.all(decks.map((deck) => client.uploadOk(corpusFile(deck))));
    const pool = server.workers.documents.libreoffice;
    let maxRunning = 0;
    let maxWaiting = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        maxRunning = Math.max(maxRunning, pool.stats.running);
        maxWaiting = Math.max(maxWaiting, pool.stats.waiting);
        await sleep(20);
      }
    })();
    const tasks = await Promise.all(
      ids.map(async (fileId) => {
        const job = await client.post('/api/process/presentation-to-images', { fileId, width: 320 });
        assert.equal(job.status, 202);
        return client.waitForTask(job.body.data.taskId, 150_000);
      }),
    );
    sampling = false;
    await sampler;
    for (const task of tasks) assert.equal(task.status, 'completed', JSON.stringify(task.error));
    assert.deepEqual(
      tasks.map((t) => t.outputFileIds.length),
      [2, 2, 2, 3],
    );
    assert.equal(maxRunning, 2, 'the pool ran two at once, no more');
    assert.ok(maxWaiting >= 1, 'the others waited for a slot');
    assert.deepEqual(pool.stats, { running: 0, waiting: 0, concurrency: 2 });
  });

  it('kills a hanging soffice and everything it started at the timeout; the task fails CONVERSION_TIMEOUT and the worker goes on', async () => {
    const pids = path.join(scratch, 'hang.pids');
    // The stand-in records its own pid and a child's, then hangs (as soffice does on some files).
    const hang = standIn(scratch, 'hanging-soffice', `echo $$ >> '${pids}'\nsleep 600 &\necho $! >> '${pids}'\nsleep 600`);
    const server = await startServer({
      dialect: 'sqlite',
      workers: 2,
      env: { SOFFICE_COMMAND: hang, CONVERSION_TIMEOUT_SECONDS: '2', CONVERTER_SANDBOX: 'off' },
    });
    servers.push(server);
    const client = new Client(server.url, await server.newKey('pro'));
    const fileId = await client.uploadOk(corpusFile('presentations/poi/SampleShow.pptx'));
    const started = Date.now();
    const job = await client.post('/api/process/presentation-to-images', { fileId });
    const task = await client.waitForTask(job.body.data.taskId, 30_000);
    const elapsed = Date.now() - started;
    assert.equal(task.status, 'failed');
    assert.equal(task.error.code, 'CONVERSION_TIMEOUT');
    assert.match(task.error.message, /within 2 s/);
    assert.ok(elapsed >= 2000 && elapsed < 15_000, `failed after ${elapsed} ms`);

    const recorded = fs.readFileSync(pids, 'utf8').trim().split('\n').map(Number);
    assert.equal(recorded.length, 2);
    for (const pid of recorded) assert.equal(alive(pid), false, `process ${pid} is gone`);
    assert.deepEqual(groupMembers(recorded[0]!), [], 'nothing is left in its process group');
    assert.deepEqual(server.workers.documents.libreoffice.stats.running, 0, 'its slot is free again');

    // The worker is not wedged: an image task right after completes.
    const image = await client.uploadOk(corpusFile('images/sharp/Landscape_1.jpg'));
    const next = await client.waitForTask((await client.post('/api/process/compress', { fileId: image })).body.data.taskId);
    assert.equal(next.status, 'completed');
  });

  it('cancelling a task stops its soffice at once', async () => {
    const pids = path.join(scratch, 'cancel.pids');
    const hang = standIn(scratch, 'slow-soffice', `echo $$ >> '${pids}'\nsleep 600`);
    const server = await startServer({
      dialect: 'sqlite',
      workers: 1,
      env: { SOFFICE_COMMAND: hang, TASK_LEASE_SECONDS: '2', CONVERTER_SANDBOX: 'off' },
    });
    servers.push(server);
    const client = new Client(server.url, await server.newKey('pro'));
    const fileId = await client.uploadOk(corpusFile('presentations/poi/SampleShow.pptx'));
    const job = await client.post('/api/process/presentation-to-images', { fileId });
    const deadline = Date.now() + 20_000;
    while (!fs.existsSync(pids) && Date.now() < deadline) await sleep(50);
    const pid = Number(fs.readFileSync(pids, 'utf8').trim());
    assert.equal(alive(pid), true);
    assert.equal((await client.request('DELETE', `/api/tasks/${job.body.data.taskId}`)).status, 200);
    // The worker learns of the cancel at its next heartbeat (a third of the lease).
    while (alive(pid) && Date.now() < deadline) await sleep(50);
    assert.equal(alive(pid), false, 'soffice was killed');
    assert.equal((await client.get(`/api/tasks/${job.body.data.taskId}`)).body.data.status, 'canceled');
  });

  it('a soffice that exits 0 without output, or crashes, fails the conversion with CONVERSION_FAILED', async () => {
    const input = corpusFile('presentations/poi/SampleShow.pptx');
    const quiet = new LibreOffice({
      command: standIn(scratch, 'quiet-soffice', 'echo "Error: source file could not be loaded" >&2\nexit 0'),
      timeoutMs: 10_000,
      concurrency: 1,
      sandbox: UNCONFINED,
    });
    await assert.rejects(quiet.toPdf(input, 'pptx', scratch), (err: unknown) => {
      assert.ok(err instanceof TaskError);
      assert.equal(err.code, 'CONVERSION_FAILED');
      assert.match(err.message, /could not load/);
      assert.equal(err.transient, false);
      return true;
    });
    const crash = new LibreOffice({
      command: standIn(scratch, 'crashing-soffice', 'kill -SEGV $$'),
      timeoutMs: 10_000,
      concurrency: 1,
      sandbox: UNCONFINED,
    });
    await assert.rejects(crash.toPdf(input, 'pptx', scratch), (err: unknown) => {
      assert.ok(err instanceof TaskError);
      assert.equal(err.code, 'CONVERSION_FAILED');
      assert.match(err.message, /SIGSEGV/);
      assert.equal(err.transient, true, 'a crash is worth another attempt');
      return true;
    });
    // Each conversion had its own profile directory, removed afterwards.
    const leftovers = fs
      .readdirSync(scratch)
      .filter((name) => name.startsWith('soffice-'))
      .flatMap((dir) => fs.readdirSync(path.join(scratch, dir)));
    assert.ok(!leftovers.includes('profile'), `profiles left: ${leftovers}`);
  });

  it('without LibreOffice or poppler, the task fails with a message naming the missing program, and /readyz says so', async () => {
    const server = await startServer({
      dialect: 'sqlite',
      workers: 1,
      env: { SOFFICE_COMMAND: path.join(scratch, 'no-such-soffice'), PDFTOPPM_COMMAND: path.join(scratch, 'no-such-pdftoppm') },
    });
    servers.push(server);
    const client = new Client(server.url, await server.newKey('pro'));
    const ready = await client.get('/readyz');
    assert.equal(ready.status, 200, 'a missing converter is reported, not fatal');
    assert.equal(ready.body.checks.libreoffice.ok, false);
    assert.match(ready.body.checks.libreoffice.detail, /no-such-soffice not found/);
    assert.equal(ready.body.checks.poppler.ok, false);
    assert.match(ready.body.checks.poppler.detail, /no-such-pdftoppm not found/);

    const fileId = await client.uploadOk(corpusFile('presentations/poi/SampleShow.pptx'));
    const task = await client.waitForTask((await client.post('/api/process/presentation-to-images', { fileId })).body.data.taskId);
    assert.equal(task.status, 'failed');
    assert.equal(task.error.code, 'CONVERSION_FAILED');
    assert.match(task.error.message, /pdftoppm \(poppler-utils\) is not installed/);

    // Previews of PDFs need pdftoppm too.
    const image = await client.uploadOk(corpusFile('images/sharp/Landscape_1.jpg'));
    const pdf = await client.waitForTask((await client.post('/api/process/image-to-pdf', { fileIds: [image] })).body.data.taskId);
    assert.equal(pdf.status, 'completed');
    const preview = await client.get(`/api/preview/${pdf.outputFileId}`);
    assert.equal(preview.status, 415);
    assert.equal(preview.body.error.code, 'PREVIEW_UNAVAILABLE');
    assert.match(preview.body.error.message, /pdftoppm/);

    const lo = new LibreOffice({ command: path.join(scratch, 'no-such-soffice'), timeoutMs: 1000, concurrency: 1, sandbox: UNCONFINED });
    await assert.rejects(
      lo.toPdf(corpusFile('presentations/poi/SampleShow.pptx'), 'pptx', scratch),
      /LibreOffice .*no-such-soffice.* is not installed/,
    );
  });
});
