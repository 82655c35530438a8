// Scenario: SQL statements per job (issue #28), on SQLite and PostgreSQL. One job at a time —
// upload → queue → run and complete → poll → download — through the real HTTP API, with the
// service in this process (as the tests start it: test/helpers.ts startServer) so that its
// database handle can be asked how many statements it sent (Database.statementCount: every
// statement, a transaction's BEGIN and COMMIT included). The count does not depend on the
// machine's load, unlike the CPU figures of the other scenarios.
//
// Phases are cut at the client's answers: upload (POST /api/upload → 201), queue (POST
// /api/process/resize → 202; a worker woken before the 202 leaves may count its claim here), run
// (202 → the task's `finished` event: claim, processing, complete, its webhook events), poll (one
// GET /api/tasks/{id}), download (GET /api/download/{outputFileId}). Background work is kept out:
// idle workers poll every 60 s (QUEUE_POLL_MS), and what the service sends while idle is
// measured first and printed. API keys are re-read in the background (accounts/key-cache.ts), so
// a job now and then carries one key read: the figures are means over BENCH_STATEMENT_JOBS.
//
// Under each dialect's line the report lists every phase's statements (Database.watchStatements),
// each with how many times a job sent it on average, cut to its first characters.
//
// Environment: BENCH_STATEMENT_JOBS=20 (after 3 unmeasured), BENCH_POSTGRES_URL.
import sharp from 'sharp';
import { envInt, sleep } from '../lib/pool.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';
import { startServer, type Dialect } from '../../test/helpers.js';

const SCENARIO = 'SQL statements per job';
const TARGET = 12;
const WARMUP_JOBS = 3;
const PHASES = ['upload', 'queue', 'run', 'poll', 'download'] as const;
type Phase = (typeof PHASES)[number];
/** How much of a statement the listing shows. */
const LISTED_CHARS = 150;

interface Measured {
  perPhase: Record<Phase, number>;
  /** Per phase: each statement's text (cut) and how many times it was sent, over all measured jobs. */
  listing: Record<Phase, Map<string, number>>;
  idlePerSecond: number;
}

async function measure(dialect: Dialect, jobs: number, image: Buffer): Promise<Measured> {
  const server = await startServer({
    dialect,
    workers: 1,
    env: { QUEUE_POLL_MS: '60000', SWEEP_INTERVAL_SECONDS: '86400' },
    plans: { pro: { monthlyTasks: 1_000_000, maxQueuedTasks: 1_000_000 } },
  });
  try {
    const { database, events } = server.services;
    const key = await server.newKey('pro');
    const headers = { 'x-api-key': key };
    const finished = new Map<string, () => void>();
    const done = new Set<string>();
    events.on('finished', (taskId: string) => {
      done.add(taskId);
      finished.get(taskId)?.();
    });
    const until = (taskId: string) => new Promise<void>((resolve) => (done.has(taskId) ? resolve() : finished.set(taskId, resolve)));
    const call = async (method: string, route: string, body?: BodyInit, type?: string) => {
      const response = await fetch(server.url + route, { method, headers: { ...headers, ...(type ? { 'content-type': type } : {}) }, body });
      const text = Buffer.from(await response.arrayBuffer());
      if (response.status >= 300) throw new Error(`${method} ${route}: ${response.status} ${text.toString('utf8').slice(0, 300)}`);
      return (response.headers.get('content-type') ?? '').includes('json') ? (JSON.parse(text.toString('utf8')) as { data: any }) : undefined;
    };

    // What the service sends with nothing to do (workers waiting, timers running).
    await sleep(500);
    const idle0 = database.statementCount();
    await sleep(1000);
    const idlePerSecond = database.statementCount() - idle0;

    const totals = Object.fromEntries(PHASES.map((p) => [p, 0])) as Record<Phase, number>;
    const listing = Object.fromEntries(PHASES.map((p) => [p, new Map<string, number>()])) as Record<Phase, Map<string, number>>;
    let sent: string[] = [];
    const unwatch = database.watchStatements((text) => sent.push(text.replace(/\s+/g, ' ').slice(0, LISTED_CHARS)));
    for (let i = 0; i < WARMUP_JOBS + jobs; i++) {
      const counts: Partial<Record<Phase, number>> = {};
      const texts: Partial<Record<Phase, string[]>> = {};
      let mark = database.statementCount();
      sent = [];
      const phase = (name: Phase) => {
        const now = database.statementCount();
        counts[name] = now - mark;
        texts[name] = sent;
        mark = now;
        sent = [];
      };
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(image)]), 'photo.png');
      const fileId = (await call('POST', '/api/upload', form))!.data.fileId as string;
      phase('upload');
      const taskId = (await call('POST', '/api/process/resize', JSON.stringify({ fileId, width: 64, format: 'jpeg' }), 'application/json'))!.data
        .taskId as string;
      phase('queue');
      await until(taskId);
      phase('run');
      const task = (await call('GET', `/api/tasks/${taskId}`))!.data;
      phase('poll');
      if (task.status !== 'completed') throw new Error(`resize ${task.status}: ${JSON.stringify(task.error)}`);
      await call('GET', `/api/download/${task.outputFileId}`);
      phase('download');
      if (i < WARMUP_JOBS) continue;
      for (const p of PHASES) {
        totals[p] += counts[p]!;
        for (const text of texts[p]!) listing[p].set(text, (listing[p].get(text) ?? 0) + 1);
      }
    }
    unwatch();
    const perPhase = Object.fromEntries(PHASES.map((p) => [p, totals[p] / jobs])) as Record<Phase, number>;
    return { perPhase, listing, idlePerSecond };
  } finally {
    await server.close();
  }
}

async function run(ctx: BenchContext): Promise<ScenarioResult> {
  const jobs = envInt('BENCH_STATEMENT_JOBS', 20);
  const image = await sharp({ create: { width: 320, height: 240, channels: 3, background: { r: 40, g: 120, b: 200 } } })
    .png()
    .toBuffer();
  const rows: Row[] = [];
  const report: string[] = [`${jobs} jobs, one at a time (after ${WARMUP_JOBS} unmeasured); mean statements per phase:`];
  const details: Record<string, unknown> = {};
  const statementLines = ['statements per phase, in the order first sent (mean times per job):'];
  for (const dialect of ['sqlite', 'postgres'] as const) {
    ctx.log(`${dialect}: ${jobs} jobs`);
    const { perPhase, listing, idlePerSecond } = await measure(dialect, jobs, image);
    const total = PHASES.reduce((sum, p) => sum + perPhase[p], 0);
    const phases = PHASES.map((p) => `${p} ${perPhase[p].toFixed(1)}`).join(' · ');
    report.push(`  ${dialect.padEnd(8)} ${phases} · total ${total.toFixed(1)} (idle: ${idlePerSecond} a second)`);
    statementLines.push(`  ${dialect}:`);
    for (const p of PHASES) {
      statementLines.push(`    ${p}:`);
      for (const [text, n] of listing[p]) statementLines.push(`      ${(n / jobs).toFixed(1).padStart(4)} × ${text}`);
    }
    details[dialect] = { perPhase, total, idlePerSecond };
    rows.push({
      scenario: SCENARIO,
      variant: dialect,
      metric: 'statements per job',
      value: total,
      unit: 'statements',
      target: { on: 'value', op: '<=', threshold: TARGET },
      note: phases,
    });
  }
  return { rows, report: [...report, ...statementLines], details };
}

export const jobStatements: Scenario = {
  name: 'job-statements',
  title: 'SQL statements per job (upload → queue → run → poll → download), SQLite and PostgreSQL',
  run,
};
