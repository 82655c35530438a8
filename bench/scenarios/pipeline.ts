// A pipeline against the same steps as single jobs: resize to 1600 px wide, rotate 90°, a text
// watermark, WebP quality 80, on the corpus's camera photos. The pipeline decodes once and
// encodes once; the three jobs decode and encode three times (each job's output is the next
// one's input, as a client chaining tasks gets). Both run the service's own image pipeline
// in-process (src/imaging/pipeline.ts through the operations' steps), so the difference is the
// work, not HTTP or the queue. Measured per photo: wall time, bytes, and the mean error of each
// output against the same steps encoded losslessly.
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import type { FileRecord } from '../../src/files/files.js';
import { getOperation } from '../../src/operations/registry.js';
import type { OperationContext, OperationResult } from '../../src/operations/types.js';
import { median } from '../lib/pool.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';

const SCENARIO = 'pipeline';
const PHOTOS = ['images/sharp/2569067123_aca715a2ee_o.jpg', 'images/wikimedia/Cerkiew.jpg', 'images/wikimedia/Carrie.jpg'];
const STEPS = [
  { kind: 'resize', width: 1600 },
  { kind: 'rotate', angle: 90 },
  { kind: 'watermark', text: '© 2026 Example', opacity: 0.5 },
];
const OUTPUT = { format: 'webp', quality: 80 };

/** One task of `kind` on the file at `file`, as a worker runs it (no queue, no storage). */
async function runTask(ctx: BenchContext, kind: string, file: string, options: Record<string, unknown>): Promise<Buffer> {
  const op = getOperation(kind)!;
  const meta = await sharp(file).metadata();
  const record = {
    id: 'file_bench',
    format: meta.format === 'jpeg' ? 'jpeg' : meta.format!,
    filename: path.basename(file),
    size: fs.statSync(file).size,
    width: meta.width ?? null,
    height: meta.height ?? null,
    pages: null,
  } as unknown as FileRecord;
  const context: OperationContext<Record<string, unknown>> = {
    taskId: 'task_bench',
    options,
    inputs: [{ file: record, path: file }],
    limits: DEFAULT_PLANS.max,
    deadline: Date.now() + 600_000,
    signal: new AbortController().signal,
    scratchDir: async () => ctx.tmpDir,
    progress: () => {},
    // No LibreOffice, poppler or ffmpeg: an image job reads `ffmpeg` only for AVIF image sequences.
    documents: { ffmpeg: undefined } as never,
  };
  const result: OperationResult = await op.run(context);
  return result.outputs[0]!.data!;
}

async function meanError(a: Buffer, b: Buffer): Promise<number> {
  const [x, y] = await Promise.all([a, b].map((image) => sharp(image).removeAlpha().raw().toBuffer()));
  let sum = 0;
  for (let i = 0; i < x!.length; i++) sum += Math.abs(x![i]! - y![i]!);
  return sum / x!.length;
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const corpus = path.resolve(ctx.repoRoot, '..', 'shared', 'corpus');
  const photos = PHOTOS.map((p) => path.join(corpus, p)).filter((p) => fs.existsSync(p));
  const piped: { ms: number; bytes: number; error: number }[] = [];
  const chained: { ms: number; bytes: number; error: number }[] = [];
  const report: string[] = [];
  for (const photo of photos) {
    ctx.log(`${SCENARIO}: ${path.basename(photo)}`);
    const reference = await runTask(ctx, 'pipeline', photo, { steps: STEPS, format: 'webp', lossless: true });
    let started = performance.now();
    const one = await runTask(ctx, 'pipeline', photo, { steps: STEPS, ...OUTPUT });
    const pipeMs = performance.now() - started;
    started = performance.now();
    let input = photo;
    let output: Buffer = Buffer.alloc(0);
    for (const [index, { kind, ...options }] of STEPS.entries()) {
      output = await runTask(ctx, kind, input, { ...options, ...OUTPUT });
      input = path.join(ctx.tmpDir, `${SCENARIO}-${index}.webp`);
      fs.writeFileSync(input, output);
    }
    const chainMs = performance.now() - started;
    piped.push({ ms: pipeMs, bytes: one.length, error: await meanError(one, reference) });
    chained.push({ ms: chainMs, bytes: output.length, error: await meanError(output, reference) });
    const p = piped.at(-1)!;
    const c = chained.at(-1)!;
    report.push(
      `${path.basename(photo)}: pipeline ${p.ms.toFixed(0)} ms, ${p.bytes} B, error ${p.error.toFixed(2)} · three jobs ${c.ms.toFixed(0)} ms, ` +
        `${c.bytes} B, error ${c.error.toFixed(2)}`,
    );
  }
  const rows: Row[] = [
    { scenario: SCENARIO, variant: 'three jobs', metric: 'median time', value: median(chained.map((c) => c.ms)), unit: 'ms' },
    {
      scenario: SCENARIO,
      variant: 'pipeline',
      metric: 'median time',
      value: median(piped.map((p) => p.ms)),
      unit: 'ms',
      ratio: median(piped.map((p, i) => p.ms / chained[i]!.ms)),
      baseline: 'three jobs',
      target: { on: 'ratio', op: '<=', threshold: 1 },
      note: `error ${median(piped.map((p) => p.error)).toFixed(2)} vs ${median(chained.map((c) => c.error)).toFixed(2)}`,
    },
  ];
  return { rows, report };
}

export const pipelineScenario: Scenario = {
  name: SCENARIO,
  title: 'resize → rotate → watermark → WebP: one pipeline against three chained jobs (time, bytes, error)',
  run,
};
