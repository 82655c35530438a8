// Scenario: AI upscaling (`upscale` with `model: "esrgan"`) on the CPU. The service runs as a child
// process (`node dist/src/main.js serve`, default WORKER_CONCURRENCY) on the Max plan. A corpus
// photo, cropped to 512 × 512 (0.26 MP), is upscaled ×2 and ×4 with esrgan: the first task of each
// scale includes loading that scale's model in the inference thread, the later ones run warm; the
// figure is the task's own `completedAt − startedAt` (service clock: decode, every tile, encode,
// store) per input megapixel. Then, while a ×4 upscale of a 1024 × 768 crop runs, `GET /healthz`
// is timed one request after another (every 20 ms): the HTTP server's latency with the network
// busy on one core, beside the same with the service idle. Target: p99 < 50 ms.
//
// Environment: BENCH_AI_RUNS=2 (warm runs per scale).
import sharp from 'sharp';
import { ApiClient } from '../lib/client.js';
import { percentile, sleep } from '../lib/pool.js';
import { distIsStale, startService } from '../lib/service.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';

const SCENARIO = 'ai upscale';
const PHOTO = '../shared/corpus/images/sharp/2569067123_aca715a2ee_o.jpg';

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
};

async function crop(ctx: BenchContext, width: number, height: number): Promise<Blob> {
  const png = await sharp(`${ctx.repoRoot}/${PHOTO}`)
    .resize({ width: 1600, height: 1600, fit: 'inside' })
    .resize({ width, height, fit: 'cover' })
    .png()
    .toBuffer();
  return new Blob([new Uint8Array(png)]);
}

/** Seconds the service spent on the task (startedAt → completedAt). */
async function runTask(client: ApiClient, options: Record<string, unknown>): Promise<number> {
  const taskId = await client.submit('upscale', options);
  const task = await client.waitForTask(taskId, 30, 1_800_000);
  if (task.status !== 'completed') throw new Error(`upscale ${task.status}: ${JSON.stringify(task.error)}`);
  return (Date.parse(task.completedAt) - Date.parse(task.startedAt)) / 1000;
}

/** /healthz one request after another, `gapMs` apart, until `until` resolves; latencies in ms. */
async function pollHealth(url: string, until: Promise<unknown>, gapMs: number, minSamples = 0): Promise<number[]> {
  let done = false;
  void until.finally(() => (done = true));
  const samples: number[] = [];
  while (!done || samples.length < minSamples) {
    const started = performance.now();
    const response = await fetch(`${url}/healthz`);
    await response.arrayBuffer();
    samples.push(performance.now() - started);
    await sleep(gapMs);
  }
  return samples;
}

const summary = (samples: number[]) =>
  `p50 ${percentile(samples, 50).toFixed(1)} ms, p99 ${percentile(samples, 99).toFixed(1)} ms, max ${Math.max(...samples).toFixed(1)} ms (${samples.length} requests)`;

export const aiUpscale: Scenario = {
  name: 'ai-upscale',
  title: 'AI upscale (esrgan, CPU): seconds per input megapixel ×2 and ×4, and /healthz latency while one runs (target p99 < 50 ms)',
  async run(ctx): Promise<ScenarioResult> {
    const stale = distIsStale(ctx.repoRoot);
    if (stale) ctx.log(`warning: ${stale}`);
    const runs = envInt('BENCH_AI_RUNS', 2);
    const service = await startService({ repoRoot: ctx.repoRoot, dir: `${ctx.tmpDir}/ai-upscale`, plans: { max: { requestsPerSecond: 1_000_000 } } });
    ctx.onCleanup(() => service.stop());
    const client = new ApiClient(service.url, service.key);
    const rows: Row[] = [];
    const report: string[] = [];
    const details: Record<string, unknown> = {};
    try {
      const small = await client.upload(await crop(ctx, 512, 512), 'photo-512.png');
      const megapixels = (512 * 512) / 1e6;
      for (const factor of [2, 4]) {
        const cold = await runTask(client, { fileId: small, factor, model: 'esrgan' });
        const warm: number[] = [];
        for (let i = 0; i < runs; i++) warm.push(await runTask(client, { fileId: small, factor, model: 'esrgan' }));
        const lanczos = await runTask(client, { fileId: small, factor });
        const perMp = percentile(warm, 50) / megapixels;
        details[`x${factor}`] = { coldSeconds: cold, warmSeconds: warm, lanczosSeconds: lanczos };
        report.push(
          `×${factor}: 512×512 in ${warm.map((s) => s.toFixed(2)).join(', ')} s warm (${cold.toFixed(2)} s with the model's load): ` +
            `${perMp.toFixed(1)} s per input MP; Lanczos ${lanczos.toFixed(2)} s`,
        );
        rows.push({
          scenario: SCENARIO,
          variant: `esrgan ×${factor}`,
          metric: 'time per input MP',
          value: Number(perMp.toFixed(2)),
          unit: 's/MP',
          note: `512×512 → ${512 * factor}×${512 * factor}; first run ${cold.toFixed(1)} s (model load)`,
        });
      }

      const idle = await pollHealth(service.url, sleep(3000), 20);
      const large = await client.upload(await crop(ctx, 1024, 768), 'photo-1024.png');
      const upscaling = runTask(client, { fileId: large, factor: 4, model: 'esrgan' });
      await sleep(500); // past the decode: the network is running
      const busy = await pollHealth(service.url, upscaling, 20, 50);
      const seconds = await upscaling;
      details.healthz = { idle, busy, upscaleSeconds: seconds };
      report.push(`/healthz idle: ${summary(idle)}`);
      report.push(`/healthz during a ×4 esrgan upscale of 1024×768 (${seconds.toFixed(1)} s): ${summary(busy)}`);
      rows.push({
        scenario: SCENARIO,
        variant: '/healthz during esrgan',
        metric: 'p99 latency',
        value: Number(percentile(busy, 99).toFixed(1)),
        unit: 'ms',
        target: { on: 'value', op: '<=', threshold: 50 },
        note: `p50 ${percentile(busy, 50).toFixed(1)} ms; idle p99 ${percentile(idle, 99).toFixed(1)} ms`,
      });
    } catch (err) {
      report.push(`failed: ${(err as Error).message}; service stderr: ${service.stderr().slice(-500)}`);
      rows.push({ scenario: SCENARIO, variant: 'esrgan', metric: 'error', value: null, unit: '', note: (err as Error).message.slice(0, 120) });
    } finally {
      await service.stop();
    }
    return { rows, report, details };
  },
};
