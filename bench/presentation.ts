// Bench scenario: a 10-slide PPTX (the corpus's themes.pptx: 10 slides, several masters, pictures)
// to PNG images at the default 1920 px, through the real service in this process (SQLite, a temp
// DATA_DIR, two workers): the first conversion after start, then the following ones. Each time is
// queue → completed, with LibreOffice's own run time (and its wait for a pool slot) beside it.
//
//   import { presentationScenario } from './presentation.js';
//   const rows = await presentationScenario();   // [{ name, value }, …]
//
// Run alone: node --import tsx bench/presentation.ts
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { createAccount, createApiKey } from '../src/accounts/accounts.js';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createServices } from '../src/services.js';
import { WorkerPool } from '../src/worker/worker.js';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DECK = path.resolve(REPO_ROOT, '../shared/corpus/presentations/poi/themes.pptx');
const SLIDES = 10;
const FOLLOWING = 3;

interface ConversionLog {
  outcome: string;
  waitMs: number;
  runMs: number;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

export async function presentationScenario(): Promise<{ name: string; value: string }[]> {
  if (!fs.existsSync(DECK)) return [{ name: 'presentation → images (10-slide PPTX)', value: `skipped: ${DECK} not found` }];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-bench-pptx-'));
  // The worker logs each LibreOffice run (wait and run time) at info: keep those lines.
  const conversions: ConversionLog[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.includes('"converter":"libreoffice"')) continue;
        const entry = JSON.parse(line) as ConversionLog;
        conversions.push({ outcome: entry.outcome, waitMs: entry.waitMs, runMs: entry.runMs });
      }
      callback();
    },
  });
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir, DATABASE_URL: `sqlite:${path.join(dataDir, 'bench.db')}`, PORT: '0', HOST: '127.0.0.1', QUEUE_POLL_MS: '200', WORKER_CONCURRENCY: '2' });
  const services = await createServices(config, { logger: pino({ level: 'info' }, sink) });
  const app = await buildApp(services);
  const workers = new WorkerPool(services, 2);
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    workers.start();
    const account = await createAccount(services.database, services.clock, { email: `bench-${crypto.randomBytes(3).toString('hex')}@example.com`, plan: 'pro' });
    const key = (await createApiKey(services.database, services.clock, account.id, 'bench')).key;
    const headers = { 'x-api-key': key };

    const form = new FormData();
    form.append('file', new Blob([fs.readFileSync(DECK)]), 'themes.pptx');
    const upload = (await (await fetch(`${base}/api/upload`, { method: 'POST', headers, body: form })).json()) as { data: { fileId: string } };
    const fileId = upload.data.fileId;

    /** One conversion, queue → completed, in ms. */
    const convert = async (): Promise<number> => {
      const started = performance.now();
      const queued = await fetch(`${base}/api/process/presentation-to-images`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ fileId, format: 'png', width: 1920 }),
      });
      const { data } = (await queued.json()) as { data: { taskId: string } };
      for (;;) {
        const task = (await (await fetch(`${base}/api/tasks/${data.taskId}?wait=30`, { headers })).json()) as { data: { status: string; outputFileIds?: string[]; error?: unknown } };
        if (task.data.status === 'completed') {
          if (task.data.outputFileIds?.length !== SLIDES) throw new Error(`expected ${SLIDES} images, got ${task.data.outputFileIds?.length}`);
          return performance.now() - started;
        }
        if (task.data.status === 'failed' || task.data.status === 'canceled') throw new Error(`conversion ${task.data.status}: ${JSON.stringify(task.data.error)}`);
      }
    };

    const first = await convert();
    const following: number[] = [];
    for (let i = 0; i < FOLLOWING; i++) following.push(await convert());
    const soffice = conversions.filter((c) => c.outcome === 'converted');
    return [
      { name: 'presentation → images, 10-slide PPTX → 1920 px PNG: first conversion after start', value: seconds(first) },
      { name: `presentation → images, 10-slide PPTX → 1920 px PNG: following conversions (median of ${FOLLOWING})`, value: `${seconds(median(following))} (${following.map(seconds).join(', ')})` },
      {
        name: 'presentation → images: of which LibreOffice ran (first; median of the following)',
        value: soffice.length ? `${seconds(soffice[0]!.runMs)}; ${seconds(median(soffice.slice(1).map((c) => c.runMs)))}` : 'n/a',
      },
    ];
  } finally {
    await workers.stop(5000);
    await app.close();
    await services.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const row of await presentationScenario()) console.log(`${row.name}: ${row.value}`);
}
