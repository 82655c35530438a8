// The whole corpus through upload and every batch kind (test/conformance/corpus.test.ts with
// IMGAPI_CONFORMANCE=full): `npm test` runs a sample of it, this the rest. Reports the time and
// the test's pass/fail counts; its table of outcomes per kind is in the output it prints.
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { Scenario } from '../lib/types.js';

export const conformanceScenario: Scenario = {
  name: 'conformance',
  title: 'Every corpus image through upload and every batch kind (the full matrix of test/conformance/corpus.test.ts)',
  async run(ctx) {
    const started = Date.now();
    const child = spawn(process.execPath, [path.join(ctx.repoRoot, 'scripts', 'run-tests.mjs'), 'test/conformance/corpus.test.ts'], {
      cwd: ctx.repoRoot,
      env: { ...process.env, IMGAPI_CONFORMANCE: 'full', IMGAPI_TEST_TIMEOUT_MS: String(3_600_000) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    ctx.onCleanup(() => void child.kill('SIGTERM'));
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      process.stderr.write(chunk);
    });
    const code = await new Promise<number>((resolve) => child.once('exit', (c) => resolve(c ?? 1)));
    const seconds = (Date.now() - started) / 1000;
    const counts = /^(\d+) passed, (\d+) failed$/m.exec(output);
    const note = counts ? `${counts[1]} passed, ${counts[2]} failed` : `exit ${code}`;
    return {
      rows: [{ scenario: 'conformance', variant: 'full corpus', metric: 'time', value: Math.round(seconds), unit: 's', note }],
      report: [`${note} in ${seconds.toFixed(0)} s`],
    };
  },
};
