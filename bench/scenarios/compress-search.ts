// compress's bounded quality search on the photo of the report (#27): `quality: "auto"` on a 12 MP
// camera JPEG to AVIF ran past the 120 s task limit with progress 0. Runs that test of
// test/operations/compress.test.ts (IMGAPI_HEAVY_TESTS=1; `npm test` runs the same search on a
// 6 MP photo to WebP) and reports its wall time and the CPU it took, beside the limit.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { reapedChildrenCpuSeconds } from '../lib/proc.js';
import type { Scenario } from '../lib/types.js';

const SCENARIO = 'compress-search';
const TASK_LIMIT_SECONDS = 120;

export const compressSearchScenario: Scenario = {
  name: SCENARIO,
  title: 'compress quality "auto", 12 MP photo to AVIF: the bounded search against the 120 s task limit',
  async run(ctx) {
    const started = Date.now();
    const cpuBefore = reapedChildrenCpuSeconds();
    const child = spawn(
      process.execPath,
      [path.join(ctx.repoRoot, 'scripts', 'run-tests.mjs'), 'test/operations/compress.test.ts', '--test-name-pattern=12 MP photo to AVIF'],
      { cwd: ctx.repoRoot, env: { ...process.env, IMGAPI_HEAVY_TESTS: '1' }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    ctx.onCleanup(() => void child.kill('SIGTERM'));
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const code = await new Promise<number>((resolve) => child.once('exit', (c) => resolve(c ?? 1)));
    const seconds = (Date.now() - started) / 1000;
    const cpu = reapedChildrenCpuSeconds() - cpuBefore;
    const counts = /^(\d+) passed, (\d+) failed$/m.exec(output);
    const note = `${counts ? `${counts[1]} passed, ${counts[2]} failed` : `exit ${code}`}; ${cpu.toFixed(1)} s of CPU (the test process and the runner)`;
    return {
      rows: [
        {
          scenario: SCENARIO,
          variant: '12 MP JPEG → AVIF, quality "auto"',
          metric: 'wall time',
          value: Math.round(seconds),
          unit: 's',
          target: { on: 'value', op: '<=', threshold: TASK_LIMIT_SECONDS },
          note,
        },
      ],
      report: [`${note}; ${seconds.toFixed(0)} s wall (the task limit is ${TASK_LIMIT_SECONDS} s)`],
    };
  },
};
