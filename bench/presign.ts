// Direct upload memory: the API process's resident memory while a presigned PUT of the largest
// file the Max plan allows (maxFileBytes, 500 MiB) streams into local storage. The body is
// generated as a stream here (never held whole), the service runs as a child process
// (`node dist/src/main.js serve`, STORAGE=local) and its RSS is sampled from /proc/<pid>/status
// every 20 ms. Target: growth under 64 MiB — the PUT is streamed, never buffered.
//
//   import { presignScenario } from './presign.js';   // from bench/run.ts
//   for (const row of await presignScenario()) console.log(`${row.name}: ${row.value}`);
//
// Standalone, after `npm run build`: node --import tsx bench/presign.ts
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PLANS } from '../src/accounts/plans.js';
import { MiB, rssOf } from './lib/proc.js';
import { distIsStale, startService } from './lib/service.js';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TARGET_GROWTH_MIB = 64;
const CHUNK = 256 * 1024;

/** `size` bytes: a real PNG first (so confirm sniffs and probes it), then filler, chunk by chunk. */
function generatedBody(size: number, progress: (sent: number) => void): Readable {
  const png = fs.readFileSync(path.resolve(REPO_ROOT, '../shared/corpus/images/sharp/2x2_fdcce6.png'));
  const filler = Buffer.alloc(CHUNK, 0x5a);
  return Readable.from(
    (function* () {
      let sent = 0;
      while (sent < size) {
        const length = Math.min(CHUNK, size - sent);
        yield sent === 0 ? Buffer.concat([png, filler]).subarray(0, length) : filler.subarray(0, length);
        sent += length;
        progress(sent);
      }
    })(),
    { objectMode: false },
  );
}

function putStream(url: string, headers: Record<string, string>, body: Readable): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'PUT', headers }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
    });
    request.on('error', reject);
    pipeline(body, request).catch(reject);
  });
}

export async function presignScenario(): Promise<{ name: string; value: string }[]> {
  const stale = distIsStale(REPO_ROOT);
  if (stale) throw new Error(stale);
  const size = DEFAULT_PLANS.max.maxFileBytes;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-bench-presign-'));
  const service = await startService({
    repoRoot: REPO_ROOT,
    dir,
    plan: 'max',
    // Only the upload is measured: no workers competing for the CPU.
    env: { STORAGE: 'local', WORKER_CONCURRENCY: '0' },
  });
  try {
    const api = async (route: string, body: unknown) => {
      const response = await fetch(`${service.url}${route}`, {
        method: 'POST',
        headers: { 'x-api-key': service.key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const json = (await response.json()) as { data?: any; error?: unknown };
      if (response.status !== 201) throw new Error(`${route}: ${response.status} ${JSON.stringify(json)}`);
      return json.data;
    };
    // Warm up the routes (and their code) before the baseline is taken.
    await api('/api/upload/presign', { filename: 'warm-up.png', size: 1 });
    const upload = await api('/api/upload/presign', { filename: 'largest.png', size, contentType: 'image/png' });
    await new Promise((r) => setTimeout(r, 500));
    const baseline = rssOf(service.pid) ?? 0;

    let peak = baseline;
    /** The peak once the first tenth was sent: growth after it would grow with the file. */
    let peakAtTenth: number | undefined;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssOf(service.pid) ?? 0);
    }, 20);
    const started = process.hrtime.bigint();
    let result;
    try {
      const body = generatedBody(size, (sent) => {
        if (peakAtTenth === undefined && sent >= size / 10) peakAtTenth = Math.max(peak, rssOf(service.pid) ?? 0);
      });
      result = await putStream(upload.url, upload.headers, body);
    } finally {
      clearInterval(sampler);
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    peak = Math.max(peak, rssOf(service.pid) ?? 0);
    if (result.status !== 200) throw new Error(`PUT: ${result.status} ${result.text}`);

    const confirmStarted = Date.now();
    const file = await api('/api/upload/confirm', { uploadId: upload.uploadId });
    const confirmMs = Date.now() - confirmStarted;
    if (file.size !== size) throw new Error(`confirm answered ${file.size} bytes, expected ${size}`);

    const growth = (peak - baseline) / MiB;
    const lateGrowth = (peak - (peakAtTenth ?? peak)) / MiB;
    return [
      {
        name: `presigned PUT of ${size / MiB} MiB (Max plan's largest file, local storage): API RSS growth`,
        value: `${growth.toFixed(1)} MiB (${(baseline / MiB).toFixed(0)} → ${(peak / MiB).toFixed(0)} MiB; target < ${TARGET_GROWTH_MIB} MiB: ${growth < TARGET_GROWTH_MIB ? 'met' : 'NOT met'}; ${lateGrowth.toFixed(1)} MiB of it after the first tenth)`,
      },
      { name: 'presigned PUT throughput', value: `${(size / MiB / seconds).toFixed(0)} MiB/s (${seconds.toFixed(1)} s)` },
      { name: 'confirm of that upload', value: `${confirmMs} ms` },
    ];
  } finally {
    await service.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  presignScenario().then(
    (rows) => {
      for (const row of rows) console.log(`${row.name}: ${row.value}`);
    },
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
