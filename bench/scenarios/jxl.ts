// JPEG XL encode of a 12 MP photo: the service's encoder (libjxl as WebAssembly, @jsquash/jxl, on
// a worker thread: src/imaging/jxl-encode.ts) timed against libjxl's own cjxl (native, Debian's
// libjxl-tools) at the same distance and effort, one thread each. The source is the corpus photo
// scaled to 4000×3000. Distance: quality 75 is 2.35 (cjxl's mapping, which the WebAssembly
// build shares); effort 3, the service's default. Ours is checked to decode with djxl.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { encodeJxl, JXL_QUALITY } from '../../src/imaging/jxl-encode.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';

const SCENARIO = 'jxl';
const PHOTO = '../shared/corpus/images/sharp/2569067123_aca715a2ee_o.jpg';
const DISTANCE = 0.1 + (100 - JXL_QUALITY) * 0.09;
const EFFORT = 3;

export const jxlScenario: Scenario = {
  name: SCENARIO,
  title: 'JPEG XL encode of a 12 MP photo: ours (libjxl WebAssembly) against cjxl (native) at the same distance, one thread each',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const source = sharp(path.join(ctx.repoRoot, PHOTO)).resize(4000, 3000, { fit: 'fill' });
    const png = path.join(ctx.tmpDir, 'jxl-source.png');
    await source.clone().png({ compressionLevel: 1 }).toFile(png);
    const { data, info } = await source.clone().ensureAlpha().raw().toBuffer({ resolveWithObject: true });

    let started = performance.now();
    const ours = await encodeJxl({ data, width: info.width, height: info.height }, { quality: JXL_QUALITY });
    const oursSeconds = (performance.now() - started) / 1000;
    const oursFile = path.join(ctx.tmpDir, 'ours.jxl');
    fs.writeFileSync(oursFile, ours);
    const decodes = spawnSync('djxl', [oursFile, path.join(ctx.tmpDir, 'ours.png')], { stdio: 'ignore' }).status === 0;

    const theirsFile = path.join(ctx.tmpDir, 'cjxl.jxl');
    started = performance.now();
    const cjxl = spawnSync('cjxl', [png, theirsFile, '-d', DISTANCE.toFixed(2), '-e', String(EFFORT), '--num_threads=0', '--quiet'], {
      stdio: 'ignore',
    });
    const theirsSeconds = (performance.now() - started) / 1000;
    const theirs = cjxl.status === 0 ? fs.statSync(theirsFile).size : undefined;
    ctx.log(`jxl: ours ${oursSeconds.toFixed(2)} s (${ours.length} B), cjxl ${theirsSeconds.toFixed(2)} s (${theirs ?? 'failed'} B)`);

    const rows: Row[] = [
      {
        scenario: SCENARIO,
        variant: `cjxl -d ${DISTANCE.toFixed(2)} -e ${EFFORT}`,
        metric: 'encode time',
        value: theirs === undefined ? null : theirsSeconds,
        unit: 's',
        note: theirs === undefined ? 'cjxl missing or failed (node scripts/setup.mjs --bench)' : `${theirs} bytes`,
      },
      {
        scenario: SCENARIO,
        variant: `ours quality ${JXL_QUALITY} (effort ${EFFORT})`,
        metric: 'encode time',
        value: oursSeconds,
        unit: 's',
        ratio: theirs === undefined ? null : oursSeconds / theirsSeconds,
        baseline: `cjxl -d ${DISTANCE.toFixed(2)} -e ${EFFORT}`,
        note: `${ours.length} bytes; djxl ${decodes ? 'decodes it' : 'FAILED to decode it'}`,
      },
    ];
    return { rows, report: rows.map((row) => `${row.variant}: ${row.value?.toFixed(2) ?? '—'} s, ${row.note}`) };
  },
};
