// Preview load: 16 parallel GET /api/preview of a 256 MP PNG (16000×16000, the Max plan allows
// 268 MP per frame) against the service as a child process (`node dist/src/main.js serve`, no
// workers, so only the API process decodes). Each on a fresh process:
//   - one file asked 16 times at once;
//   - 16 distinct files (16 uploads of the same bytes: nothing shared), then the same 16 again
//     (served from the preview cache).
// Measured from outside: the API process's peak RSS (VmRSS sampled every 20 ms) above its idle
// RSS, the wall time until the last answer, and the answers' statuses (200, or 503 beyond the
// preview queue).
//
//   import { previewScenario } from './preview.js';   // from bench/run.ts
//
// Standalone, after `npm run build`: node --import tsx bench/preview.ts
// BENCH_REPO_ROOT=/path/to/another/checkout measures that checkout's build (before/after);
// BENCH_SERVICE_ENV='{"MALLOC_MMAP_THRESHOLD_":"131072"}' adds to the service's environment.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { ApiClient } from './lib/client.js';
import { MiB, rssOf } from './lib/proc.js';
import { distIsStale, startService } from './lib/service.js';

const THIS_REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SIDE = 16_000;
const PARALLEL = 16;

interface Round {
  seconds: number;
  peakGrowthMiB: number;
  statuses: Record<string, number>;
}

async function parallelPreviews(client: ApiClient, pid: number, fileIds: string[]): Promise<Round> {
  const idle = rssOf(pid) ?? 0;
  let peak = idle;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid) ?? 0)), 20);
  const started = process.hrtime.bigint();
  const statuses: Record<string, number> = {};
  try {
    await Promise.all(
      fileIds.map(async (id) => {
        const response = await client.request('GET', `/api/preview/${id}`);
        statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      }),
    );
  } finally {
    clearInterval(sampler);
  }
  peak = Math.max(peak, rssOf(pid) ?? 0);
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9, peakGrowthMiB: (peak - idle) / MiB, statuses };
}

const describe = (round: Round): string =>
  `${round.seconds.toFixed(2)} s, API RSS +${round.peakGrowthMiB.toFixed(0)} MiB, answers ${Object.entries(round.statuses)
    .map(([status, count]) => `${count}× ${status}`)
    .join(', ')}`;

/** A fresh service with `files` uploads of `png`; `measure` runs against it, then it stops. */
async function withService<T>(
  repoRoot: string,
  png: Buffer,
  files: number,
  measure: (client: ApiClient, pid: number, fileIds: string[]) => Promise<T>,
): Promise<T> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-bench-preview-'));
  const service = await startService({
    repoRoot,
    dir,
    plan: 'max',
    plans: { max: { requestsPerSecond: 100_000 } },
    env: { STORAGE: 'local', WORKER_CONCURRENCY: '0', ...(JSON.parse(process.env.BENCH_SERVICE_ENV ?? '{}') as Record<string, string>) },
  });
  try {
    const client = new ApiClient(service.url, service.key);
    const blob = new Blob([new Uint8Array(png)]);
    const fileIds: string[] = [];
    for (let i = 0; i < files; i++) fileIds.push(await client.upload(blob, `big-${i}.png`));
    await new Promise((r) => setTimeout(r, 500));
    return await measure(client, service.pid, fileIds);
  } finally {
    await service.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export async function previewScenario(repoRoot = process.env.BENCH_REPO_ROOT ?? THIS_REPO): Promise<{ name: string; value: string }[]> {
  const stale = distIsStale(repoRoot);
  if (stale) throw new Error(stale);
  const png = await sharp({ create: { width: SIDE, height: SIDE, channels: 3, background: '#3a7bd5' }, limitInputPixels: false })
    .png()
    .toBuffer();
  const same = await withService(repoRoot, png, 1, (client, pid, [fileId]) => parallelPreviews(client, pid, Array(PARALLEL).fill(fileId)));
  const [distinct, again] = await withService(repoRoot, png, PARALLEL, async (client, pid, fileIds) => [
    await parallelPreviews(client, pid, fileIds),
    await parallelPreviews(client, pid, fileIds),
  ]);
  const label = `${PARALLEL} parallel previews of a ${(SIDE * SIDE) / 1e6} MP PNG`;
  return [
    { name: `${label}, one file ${PARALLEL} times`, value: describe(same) },
    { name: `${label}, ${PARALLEL} distinct files`, value: describe(distinct!) },
    { name: `${label}, the same ${PARALLEL} files again`, value: describe(again!) },
  ];
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  previewScenario().then(
    (rows) => {
      for (const row of rows) console.log(`${row.name}: ${row.value}`);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
