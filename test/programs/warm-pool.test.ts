// The warm LibreOffice pool (CONVERTER_RESTART_AFTER > 0): instances reused between documents,
// replaced after N conversions (the successor started ahead), after a failure and after a
// timeout (killed whole), and nothing of one document left where the next one runs. Real
// LibreOffice in the bwrap sandbox, as the service runs it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { TaskError } from '../../src/errors.js';
import { LibreOffice, type ConversionEvent } from '../../src/programs/libreoffice.js';
import { Sandbox } from '../../src/programs/sandbox.js';
import { corpusFile, sleep, tempDir } from '../helpers.js';

const DECK = corpusFile('presentations/poi/SampleShow.pptx');

/** This file's scratch directory: the pools' instances live under it. */
let scratch: string;

/** Command lines of live processes of this file's pools (under `scratch`) that contain `marker`. */
function processesWith(marker: string): string[] {
  return spawnSync('ps', ['-eo', 'stat=,args='], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((line) => line.includes(scratch) && line.includes(marker) && !line.trim().startsWith('Z') && !line.includes('ps -eo'));
}

async function gone(marker: string): Promise<string[]> {
  const deadline = Date.now() + 10_000;
  while (processesWith(marker).length && Date.now() < deadline) await sleep(50);
  return processesWith(marker);
}

describe('warm LibreOffice pool', () => {
  const pools: LibreOffice[] = [];
  const sandbox = new Sandbox({ mode: 'required', command: 'bwrap', hidden: [], logger: pino({ level: 'silent' }) });

  const pool = (options: { restartAfter: number; timeoutMs?: number; idleMs?: number }) => {
    const events: ConversionEvent[] = [];
    const lo = new LibreOffice({
      command: 'soffice',
      timeoutMs: options.timeoutMs ?? 60_000,
      concurrency: 1,
      sandbox,
      restartAfter: options.restartAfter,
      idleMs: options.idleMs,
      // Its own directory: the process markers below are then this test's alone.
      directory: scratch,
      onConversion: (event) => events.push(event),
    });
    pools.push(lo);
    return { lo, events };
  };

  before(() => {
    scratch = tempDir('imgapi-warm-');
  });
  after(async () => {
    for (const lo of pools) await lo.close();
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('reuses an instance, replaces it after CONVERTER_RESTART_AFTER conversions with one started ahead, and leaves no document behind', async () => {
    const { lo, events } = pool({ restartAfter: 2 });
    assert.equal(await lo.warm(), true, 'python3-uno is installed (scripts/setup.mjs installs it)');
    for (let i = 0; i < 3; i++) {
      const { pdfPath } = await lo.toPdf(DECK, 'pptx', scratch);
      assert.ok(fs.statSync(pdfPath).size > 0);
      assert.ok(pdfPath.startsWith(scratch), 'the PDF is handed over into the caller’s directory');
    }
    assert.deepEqual(
      events.map((e) => [e.outcome, e.instance, e.office, e.conversions]),
      [
        ['converted', 'started', 1, 1],
        ['converted', 'reused', 1, 2],
        ['converted', 'prestarted', 2, 1],
      ],
    );
    assert.deepEqual(await gone('office-1/profile'), [], 'the retired instance is gone, all of it');
    assert.equal(processesWith('office-2/profile').length > 0, true, 'its successor runs');

    // Between documents the instance's job directory is empty and its profile names no document.
    const office = /file:\/\/(\/\S+)\/profile/.exec(processesWith('office-2/profile')[0]!)![1]!;
    assert.deepEqual(fs.readdirSync(path.join(office, 'job')), []);
    const registry = fs.readFileSync(path.join(office, 'profile', 'user', 'registrymodifications.xcu'), 'utf8');
    assert.doesNotMatch(registry, /input\.pptx/, 'no recent-documents entry');
    assert.deepEqual(lo.stats, { running: 0, waiting: 0, concurrency: 1 });
    await lo.close();
    assert.deepEqual(await gone(office), [], 'close() stops every instance');
    assert.equal(fs.existsSync(office), false, 'and removes its directory');
  });

  it('replaces the instance after a document it cannot load, and after a timeout, killing it whole', async () => {
    const { lo, events } = pool({ restartAfter: 10 });
    const junk = path.join(scratch, 'junk.pptx');
    fs.writeFileSync(junk, 'not really a deck');

    await lo.toPdf(DECK, 'pptx', scratch);
    await assert.rejects(lo.toPdf(junk, 'pptx', scratch), (err: unknown) => {
      assert.ok(err instanceof TaskError);
      assert.equal(err.code, 'CONVERSION_FAILED');
      assert.match(err.message, /could not load/);
      return true;
    });
    assert.deepEqual(
      events.map((e) => [e.outcome, e.instance, e.office]),
      [
        ['converted', 'started', 1],
        ['failed', 'reused', 1],
      ],
    );
    assert.deepEqual(await gone('office-1/profile'), [], 'the instance that failed is gone');

    await lo.toPdf(DECK, 'pptx', scratch);
    assert.deepEqual([events[2]!.outcome, events[2]!.instance, events[2]!.office], ['converted', 'started', 2], 'a fresh instance');

    // A deadline too short for any conversion: CONVERSION_TIMEOUT, and the instance killed.
    await assert.rejects(lo.toPdf(DECK, 'pptx', scratch, { deadline: Date.now() + 5 }), (err: unknown) => {
      assert.ok(err instanceof TaskError);
      assert.equal(err.code, 'CONVERSION_TIMEOUT');
      return true;
    });
    assert.deepEqual([events[3]!.outcome, events[3]!.instance, events[3]!.office], ['timeout', 'reused', 2]);
    assert.deepEqual(await gone('office-2/profile'), [], 'the instance that timed out is gone, all of it');

    await lo.toPdf(DECK, 'pptx', scratch);
    assert.deepEqual([events[4]!.outcome, events[4]!.instance, events[4]!.office], ['converted', 'started', 3]);
    await lo.close();
  });

  it('a successor nobody asked for yet waits as an idle instance, and an idle instance is stopped after idleMs', async () => {
    const { lo, events } = pool({ restartAfter: 1, idleMs: 1500 });
    await lo.toPdf(DECK, 'pptx', scratch);
    assert.deepEqual([events[0]!.instance, events[0]!.office], ['started', 1]);
    // Its successor starts at once, then waits idle; unused for idleMs, it is stopped too.
    const deadline = Date.now() + 60_000;
    while (processesWith('office-2/profile').length === 0 && Date.now() < deadline) await sleep(50);
    assert.notDeepEqual(processesWith('office-2/profile'), [], 'the successor started');
    while (processesWith('office-2/profile').length > 0 && Date.now() < deadline) await sleep(100);
    assert.deepEqual(processesWith('office-2/profile'), [], 'and was stopped once idle');
    await lo.toPdf(DECK, 'pptx', scratch);
    assert.deepEqual([events[1]!.instance, events[1]!.office], ['started', 3], 'the next document starts a fresh one');
    await lo.close();
  });

  it('CONVERTER_RESTART_AFTER=0 runs one soffice per document', async () => {
    const { lo, events } = pool({ restartAfter: 0 });
    assert.equal(await lo.warm(), false);
    await lo.toPdf(DECK, 'pptx', scratch);
    assert.equal(events[0]!.outcome, 'converted');
    assert.equal(events[0]!.instance, undefined);
  });
});
