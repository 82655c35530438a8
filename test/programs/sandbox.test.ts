// The converter sandbox (issue 10): LibreOffice and poppler run in bubblewrap and see only their
// own work directory and the read-only system, so a deck cannot draw another account's stored
// file into its slides — not through an SVG part (named .svg or not, gzipped or not), not
// through an ODP picture linked by file:// URL, absolute or relative path. Unconfined,
// LibreOffice draws all of these (the premise, checked last). SVG parts are also re-written
// without outside references before conversion: defence in depth, and the only guard (for SVG
// alone) when no sandbox can be set up, which /readyz then reports.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import sharp from 'sharp';
import { LibreOffice } from '../../src/programs/libreoffice.js';
import { Poppler } from '../../src/programs/poppler.js';
import { findExecutable } from '../../src/programs/processes.js';
import { Sandbox, SandboxUnavailable } from '../../src/programs/sandbox.js';
import { TaskError } from '../../src/errors.js';
import { uploadKey } from '../../src/storage/storage.js';
import { Client, DIALECTS, sleep, startServer, tempDir, type TestServer } from '../helpers.js';
import { BLUE, odpLinkingTo, pixelsNear, pptxWithPictures, referencesTo, SLIDE_EMU, svgNaming, type Colour } from '../documents/attack-decks.js';

/** The victim's colour: nothing the attack decks draw comes near it. */
const VICTIM: Colour = { r: 224, g: 0, b: 224 };
const victimPng = () =>
  sharp({ create: { width: 64, height: 64, channels: 3, background: VICTIM } })
    .png()
    .toBuffer();

/** Three bands across slide 1, each an SVG part naming `file`: as .svg, as .png (told by its bytes), gzipped as .emf. */
function svgDeck(file: string): Promise<Buffer> {
  const band = (i: number) => ({ x: 0, y: i * 2_286_000, cx: SLIDE_EMU.cx, cy: 2_000_000 });
  const svg = svgNaming(file);
  return pptxWithPictures([
    { name: 'attack.svg', bytes: svg, box: band(0) },
    { name: 'attack.png', bytes: svg, box: band(1) },
    { name: 'attack.emf', bytes: zlib.gzipSync(svg), box: band(2) },
  ]);
}
/** The share of slide 1 the three bands cover. */
const BANDS_SHARE = (3 * 2_000_000) / SLIDE_EMU.cy;

const bash = findExecutable('bash')!;
const quiet = pino({ level: 'silent' });

/** An executable shell script. */
function script(dir: string, name: string, body: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

/** Processes whose command line includes `marker`. */
function processesWith(marker: string): string[] {
  return spawnSync('ps', ['-eo', 'stat=,args='], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((line) => line.includes(marker) && !line.trim().startsWith('Z') && !line.includes('ps -eo'));
}

describe('the converter sandbox: what a program inside reaches', () => {
  let scratch: string;
  before(() => {
    scratch = tempDir('imgapi-sandbox-');
  });
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  it('reads its inputs and writes its work directory; no stored file, other file, process, network or credential', async () => {
    // DATA_DIR is masked even under a system directory: /usr/share stands in for such a DATA_DIR.
    const dataDir = path.join(scratch, 'data');
    const secret = path.join(dataDir, 'objects', 'uploads', 'file_secret');
    fs.mkdirSync(path.dirname(secret), { recursive: true });
    fs.writeFileSync(secret, 'SECRET');
    const neighbour = path.join(scratch, 'neighbour.txt');
    fs.writeFileSync(neighbour, 'NEIGHBOUR');
    const input = path.join(scratch, 'input.txt');
    fs.writeFileSync(input, 'INPUT');
    const work = path.join(scratch, 'work');
    fs.mkdirSync(work);
    const listener = net.createServer((socket) => socket.end('LISTENER'));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const port = (listener.address() as net.AddressInfo).port;
    process.env.IMGAPI_SANDBOX_CANARY = 'credential';
    try {
      const sandbox = new Sandbox({ mode: 'required', command: 'bwrap', hidden: [dataDir, '/usr/share'], logger: quiet });
      assert.deepEqual(await sandbox.status(), { confined: true }, 'bwrap sets a sandbox up on this machine');
      const probe = [
        `cat '${input}'; echo`,
        `echo written > '${work}/out.txt'`,
        `echo more >> '${input}' 2>/dev/null && echo LEAK-input-writable`,
        `cat '${secret}' 2>/dev/null && echo LEAK-stored-file`,
        `ls -A '${dataDir}' 2>/dev/null | grep -q . && echo LEAK-data-dir`,
        `cat '${neighbour}' 2>/dev/null && echo LEAK-neighbour`,
        `cat /etc/passwd 2>/dev/null && echo LEAK-etc`,
        `ls -A /usr/share | grep -q . && echo LEAK-hidden-under-usr`,
        `ls /usr/bin/ls >/dev/null || echo MISSING-system`,
        `(exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null && echo LEAK-network`,
        `env | grep -q IMGAPI_SANDBOX_CANARY && echo LEAK-environment`,
        `echo "processes $(ls /proc | grep -c '^[0-9]')"`,
      ].join('\n');
      const run = await sandbox.run(bash, ['-c', probe], { readOnly: [input], writable: [work] }, { timeoutMs: 20_000, cwd: work });
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /^INPUT$/m, 'its input is readable');
      assert.equal(fs.readFileSync(path.join(work, 'out.txt'), 'utf8'), 'written\n', 'its work directory is writable');
      assert.doesNotMatch(run.stdout, /(LEAK|MISSING)-\S+/);
      const processes = Number(/processes (\d+)/.exec(run.stdout)?.[1]);
      // bwrap's init, bash, and the pipeline counting them; the host runs many more.
      assert.ok(processes >= 2 && processes <= 8, `only the sandbox's own processes are in sight (${processes})`);
      assert.equal(fs.readFileSync(input, 'utf8'), 'INPUT');
    } finally {
      delete process.env.IMGAPI_SANDBOX_CANARY;
      listener.close();
    }
  });

  it('a hanging soffice is killed at the timeout with everything it started inside; a crash is told from a failure', async () => {
    const sandbox = new Sandbox({ mode: 'required', command: 'bwrap', hidden: [], logger: quiet });
    const marker = `${6000 + Math.floor(Math.random() * 1000)}.5`;
    const hang = new LibreOffice({
      command: script(scratch, 'hanging-soffice', `sleep ${marker} &\nsleep ${marker}`),
      timeoutMs: 1500,
      concurrency: 1,
      sandbox,
    });
    const input = path.join(scratch, 'deck.pptx');
    fs.writeFileSync(input, 'not really a deck');
    await assert.rejects(hang.toPdf(input, 'pptx', scratch), (err: unknown) => err instanceof TaskError && err.code === 'CONVERSION_TIMEOUT');
    const deadline = Date.now() + 5_000;
    while (processesWith(`sleep ${marker}`).length && Date.now() < deadline) await sleep(50);
    assert.deepEqual(processesWith(`sleep ${marker}`), [], 'nothing the sandboxed program started is left');

    const crash = new LibreOffice({ command: script(scratch, 'crashing-soffice', 'kill -SEGV $$'), timeoutMs: 10_000, concurrency: 1, sandbox });
    await assert.rejects(crash.toPdf(input, 'pptx', scratch), (err: unknown) => {
      assert.ok(err instanceof TaskError);
      assert.equal(err.code, 'CONVERSION_FAILED');
      assert.match(err.message, /SIGSEGV/);
      assert.equal(err.transient, true);
      return true;
    });
  });

  it('when bwrap cannot set a sandbox up: auto runs unconfined, required refuses, both say why; no credential reaches the program either way', async () => {
    const refusing = script(
      scratch,
      'refusing-bwrap',
      'echo "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1',
    );
    const reason = /bwrap cannot set up a sandbox here: .*No permissions to creating new namespace/;
    process.env.IMGAPI_SANDBOX_CANARY = 'credential';
    try {
      const auto = new Sandbox({ mode: 'auto', command: refusing, hidden: [], logger: quiet });
      const status = await auto.status();
      assert.equal(status.confined, false);
      assert.match(!status.confined ? status.reason : '', reason);
      const run = await auto.run(bash, ['-c', 'echo unconfined; env | grep -c IMGAPI_SANDBOX_CANARY'], {}, { timeoutMs: 10_000 });
      assert.equal(run.stdout, 'unconfined\n0\n');

      const required = new Sandbox({ mode: 'required', command: refusing, hidden: [], logger: quiet });
      await assert.rejects(required.run(bash, ['-c', 'true'], {}, { timeoutMs: 10_000 }), SandboxUnavailable);
      const lo = new LibreOffice({ command: 'soffice', timeoutMs: 10_000, concurrency: 1, sandbox: required });
      const input = path.join(scratch, 'deck.pptx');
      fs.writeFileSync(input, 'not really a deck');
      await assert.rejects(lo.toPdf(input, 'pptx', scratch), (err: unknown) => {
        assert.ok(err instanceof TaskError);
        assert.equal(err.code, 'CONVERSION_FAILED');
        assert.match(err.message, /CONVERTER_SANDBOX=required/);
        assert.match(err.message, /No permissions to creating new namespace/);
        return true;
      });
      assert.deepEqual(await new Sandbox({ mode: 'off', command: 'bwrap', hidden: [] }).status(), {
        confined: false,
        reason: 'CONVERTER_SANDBOX=off',
      });
      const missing = await new Sandbox({ mode: 'auto', command: path.join(scratch, 'no-such-bwrap'), hidden: [] }).status();
      assert.match(!missing.confined ? missing.reason : '', /no-such-bwrap \(bubblewrap\) is not installed/);
    } finally {
      delete process.env.IMGAPI_SANDBOX_CANARY;
    }
  });
});

/** Slide 1 of a presentation-to-images task on `deck`, as PNG, and how many slides it has. */
async function firstSlide(client: Client, deck: Buffer, filename: string): Promise<{ png: Buffer; slides: number }> {
  const fileId = await client.uploadOk(deck, filename);
  const job = await client.post('/api/process/presentation-to-images', { fileId, format: 'png', width: 800 });
  assert.equal(job.status, 202, JSON.stringify(job.body));
  const task = await client.waitForTask(job.body.data.taskId, 150_000);
  assert.equal(task.status, 'completed', JSON.stringify(task.error));
  return { png: await client.download(task.outputFileIds[0]), slides: task.outputFileIds.length };
}

/** A server, an attacker's client and the stored path of a victim's magenta PNG. */
async function arena(env: Record<string, string>, dialect: (typeof DIALECTS)[number]) {
  const server = await startServer({ dialect, workers: 2, env });
  const victimId = await new Client(server.url, await server.newKey('pro')).uploadOk(await victimPng(), 'victim.png');
  const victimPath = path.join(server.dataDir, 'objects', uploadKey(victimId));
  assert.ok(fs.existsSync(victimPath), 'the victim file is where the attack decks name it');
  return { server, attacker: new Client(server.url, await server.newKey('pro')), victimPath };
}

for (const dialect of DIALECTS) {
  describe(`presentation-to-images draws no other account's file (${dialect})`, () => {
    let server: TestServer;
    let attacker: Client;
    let victimPath: string;
    before(async () => {
      ({ server, attacker, victimPath } = await arena({}, dialect));
    });
    after(async () => {
      await server?.close();
    });

    it('/readyz reports the converters sandboxed', async () => {
      const ready = await attacker.get('/readyz');
      assert.equal(ready.status, 200);
      assert.deepEqual(ready.body.checks.sandbox, { ok: true, required: false });
    });

    it('SVG pictures naming the stored file (file:// URL, path, relative path; as .svg, as .png, gzipped) draw none of it; the SVGs are drawn', async () => {
      const { png, slides } = await firstSlide(attacker, await svgDeck(victimPath), 'svg-attack.pptx');
      assert.equal(slides, 2);
      assert.equal((await pixelsNear(png, VICTIM)).count, 0, "slide 1 holds the victim's pixels");
      const blue = await pixelsNear(png, BLUE);
      assert.ok(blue.count / blue.total > BANDS_SHARE * 0.9, `the SVGs were drawn (${blue.count} of ${blue.total} pixels blue)`);
    });

    it('ODP pictures linked to the stored file (file:// URL, path, relative path) draw none of it; the rest of the slide is drawn', async () => {
      const { png, slides } = await firstSlide(attacker, await odpLinkingTo(referencesTo(victimPath)), 'link-attack.odp');
      assert.equal(slides, 2);
      assert.equal((await pixelsNear(png, VICTIM)).count, 0, "slide 1 holds the victim's pixels");
      assert.ok((await pixelsNear(png, BLUE)).count > 1000, "the slide's own blue square is drawn");
    });
  });

  // A single-tenant install that opted into `auto`: converting unconfined, reported.
  describe(`without a sandbox: bwrap cannot set one up here, CONVERTER_SANDBOX=auto (${dialect})`, () => {
    let server: TestServer;
    let attacker: Client;
    let victimPath: string;
    let scratch: string;
    before(async () => {
      scratch = tempDir('imgapi-nosandbox-');
      const refusing = script(scratch, 'refusing-bwrap', 'echo "bwrap: setting up uid map: Permission denied" >&2\nexit 1');
      ({ server, attacker, victimPath } = await arena({ BWRAP_COMMAND: refusing, CONVERTER_SANDBOX: 'auto' }, dialect));
    });
    after(async () => {
      await server?.close();
      fs.rmSync(scratch, { recursive: true, force: true });
    });

    it('/readyz says the converters run unconfined, and why, without failing readiness', async () => {
      const ready = await attacker.get('/readyz');
      assert.equal(ready.status, 200);
      assert.equal(ready.body.checks.sandbox.ok, false);
      assert.equal(ready.body.checks.sandbox.required, false);
      assert.match(ready.body.checks.sandbox.detail, /setting up uid map: Permission denied.*run unconfined and can read any file this process can/);
    });

    it('SVG parts are still re-written first: none of the stored file is drawn, the SVGs are', async () => {
      const { png } = await firstSlide(attacker, await svgDeck(victimPath), 'svg-attack.pptx');
      assert.equal((await pixelsNear(png, VICTIM)).count, 0, "slide 1 holds the victim's pixels");
      const blue = await pixelsNear(png, BLUE);
      assert.ok(blue.count / blue.total > BANDS_SHARE * 0.9, `the SVGs were drawn (${blue.count} of ${blue.total} pixels blue)`);
    });
  });
}

describe('the premise: LibreOffice unconfined, given the decks as they are, draws the files they name', () => {
  it('through an SVG part and through an ODP picture link', async () => {
    const scratch = tempDir('imgapi-premise-');
    try {
      const victim = path.join(scratch, 'victim.png');
      fs.writeFileSync(victim, await victimPng());
      const unconfined = new Sandbox({ mode: 'off', command: 'bwrap', hidden: [] });
      const lo = new LibreOffice({ command: 'soffice', timeoutMs: 120_000, concurrency: 2, sandbox: unconfined });
      const poppler = new Poppler({ pdftoppm: 'pdftoppm', pdfinfo: 'pdfinfo', timeoutMs: 60_000, sandbox: unconfined });
      const decks = { svg: [await svgDeck(victim), 'pptx'], odp: [await odpLinkingTo(referencesTo(victim)), 'odp'] } as const;
      await Promise.all(
        Object.entries(decks).map(async ([name, [bytes, format]]) => {
          const dir = fs.mkdtempSync(path.join(scratch, `${name}-`));
          fs.writeFileSync(path.join(dir, 'deck'), bytes);
          const { pdfPath } = await lo.toPdf(path.join(dir, 'deck'), format, dir);
          const page = await poppler.firstPage(pdfPath, { width: 800 }, dir);
          assert.ok((await pixelsNear(fs.readFileSync(page), VICTIM)).count > 1000, `${name}: the named file is drawn`);
        }),
      );
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
    }
  });
});
