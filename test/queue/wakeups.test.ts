// Wake-ups across processes and graceful release. On PostgreSQL, two service instances (as two
// processes would hold them, each with its own pool and LISTEN connection) wake each other
// through NOTIFY — once per message, and again after the listener's connection is cut. On every
// dialect, a worker stopping past its deadline puts its running task back in the queue at once.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Readable } from 'node:stream';
import pg from 'pg';
import pino from 'pino';
import { createServices, type Services } from '../../src/services.js';
import type { ObjectStorage } from '../../src/storage/storage.js';
import { WorkerPool } from '../../src/worker/worker.js';
import { Client, DIALECTS, corpusFile, sleep, startServer, type TestServer } from '../helpers.js';

const quiet = pino({ level: 'silent' });

/** Resolves with how many times `event` fired on `services` within `ms`. */
function countEvents(services: Services, event: string, ms: number): Promise<number> {
  return new Promise((resolve) => {
    let count = 0;
    const listener = () => count++;
    services.events.on(event, listener);
    setTimeout(() => {
      services.events.off(event, listener);
      resolve(count);
    }, ms);
  });
}

/** Resolves when `event` fires on `services`; fails after `ms`. */
function nextEvent(services: Services, event: string, what: string, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const heard = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      services.events.off(event, heard);
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
    services.events.once(event, heard);
  });
}

async function waitUntil(what: string, ms: number, check: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

if (DIALECTS.includes('postgres')) {
  describe('wake-ups across processes (postgres)', () => {
    let server: TestServer;
    let other: Services;
    before(async () => {
      server = await startServer({ dialect: 'postgres', workers: 0 });
      other = await createServices(server.config, { logger: quiet });
    });
    after(async () => {
      await other?.close();
      await server?.close();
    });

    /** The listener connected: a message from one instance reaches the other. */
    async function connected(from: Services, to: Services): Promise<void> {
      await waitUntil('the listener to connect', 10_000, async () => {
        const seen = countEvents(to, 'queued', 300);
        from.events.queued();
        return (await seen) > 0;
      });
    }

    it('delivers queued and finished to the other process, once, and not back to the sender', async () => {
      await connected(server.services, other);
      const [there, here] = [countEvents(other, 'queued', 800), countEvents(server.services, 'queued', 800)];
      server.services.events.queued();
      assert.equal(await there, 1, 'the other process is woken once');
      assert.equal(await here, 1, 'the sender only by its own in-process event');

      const started = Date.now();
      const waited = other.events.waitForFinish('task_x', 5000);
      server.services.events.finished('task_x');
      await waited;
      assert.ok(Date.now() - started < 2000, `a long-poll elsewhere is answered at once (${Date.now() - started} ms)`);
    });

    it('reconnects its listener when the connection is cut', async () => {
      await connected(other, server.services);
      const admin = new pg.Client({ connectionString: server.databaseUrl });
      await admin.connect();
      try {
        const cut = await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'imgapi-listen' AND datname = current_database()",
        );
        assert.equal(cut.rowCount, 2, 'both listeners were cut');
      } finally {
        await admin.end();
      }
      await connected(other, server.services);
      await connected(server.services, other);
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`graceful release (${dialect})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ dialect, workers: 0 });
    });
    after(async () => server?.close());

    it('a worker stopping past its deadline puts its running task back in the queue at once', async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(corpusFile('images/sharp/320x240.jpg'));
      const queued = await client.post('/api/process/compress', { fileId });
      assert.equal(queued.status, 202);
      const taskId: string = queued.body.data.taskId;

      // Storage whose reads never finish: the task stays running until the worker gives up.
      const stuck: ObjectStorage = {
        name: 'stuck',
        put: (...args) => server.services.storage.put(...args),
        head: (key) => server.services.storage.head(key),
        delete: (key) => server.services.storage.delete(key),
        move: (from, to) => server.services.storage.move(from, to),
        list: (prefix) => server.services.storage.list(prefix),
        check: () => server.services.storage.check(),
        get: () => new Promise<Readable>(() => {}),
      };
      const pool = new WorkerPool({ ...server.services, storage: stuck, logger: quiet }, 1);
      pool.start();
      const db = server.services.database.db;
      const row = () => db.selectFrom('tasks').selectAll().where('id', '=', taskId).executeTakeFirstOrThrow();
      await waitUntil('the task to start', 10_000, async () => (await row()).status === 'processing');
      assert.equal((await row()).attempts, 1);

      const woken = nextEvent(server.services, 'queued', 'the release to wake other workers', 10_000);
      await pool.stop(200);
      const released = await row();
      assert.equal(released.status, 'queued');
      assert.equal(released.lease_owner, null);
      assert.equal(released.attempts, 0, 'the interrupted attempt does not count');
      await woken; // other workers are woken

      // Another worker runs it to the end.
      const healthy = new WorkerPool({ ...server.services, logger: quiet }, 1);
      healthy.start();
      try {
        const task = await client.waitForTask(taskId);
        assert.equal(task.status, 'completed');
        assert.equal(task.attempts, 1);
      } finally {
        await healthy.stop(2000);
      }
    });
  });
}
