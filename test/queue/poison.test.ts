// A task whose worker process dies while running it, twice, is failed INTERNAL_ERROR by the
// next process's reaper instead of being handed to a third worker: real server processes,
// killed with SIGKILL in the middle of the task, on every dialect.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { loadConfig } from '../../src/config.js';
import { MAX_LOST_LEASES } from '../../src/queue/queue.js';
import { createServices } from '../../src/services.js';
import { freePort, startProc, stopProc, waitFor, waitServing, type Proc } from '../e2e/processes.js';
import { Client, DIALECTS, corpusFile, freshDatabase, tempDir } from '../helpers.js';

for (const dialect of DIALECTS) {
  describe(`poison tasks (${dialect})`, () => {
    const procs: Proc[] = [];
    const cleanups: (() => Promise<void>)[] = [];
    after(async () => {
      for (const proc of procs) await stopProc(proc);
      for (const cleanup of cleanups) await cleanup();
    });

    it(`a task whose worker dies ${MAX_LOST_LEASES} times fails INTERNAL_ERROR and is not claimed again`, async () => {
      const root = tempDir('imgapi-poison-');
      const database = await freshDatabase(dialect, root);
      cleanups.push(async () => {
        await database.drop();
        fs.rmSync(root, { recursive: true, force: true });
      });
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const env = {
        DATA_DIR: path.join(root, 'data'),
        DATABASE_URL: database.url,
        PORT: String(port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        WORKER_CONCURRENCY: '1',
        TASK_LEASE_SECONDS: '2',
        QUEUE_POLL_MS: '100',
      };
      const setup = await createServices(loadConfig(env), { logger: pino({ level: 'silent' }) });
      let key: string;
      try {
        const account = await createAccount(setup.database, setup.clock, { email: 'poison@example.com', plan: 'max' });
        key = (await createApiKey(setup.database, setup.clock, account.id, 'poison')).key;
      } finally {
        await setup.close();
      }
      const start = async (n: number) => {
        const proc = startProc(`server-${n}`, ['serve'], env);
        procs.push(proc);
        await waitServing(proc, url);
        return proc;
      };
      const client = new Client(url, key);
      const task = async (id: string) => {
        const response = await client.get(`/api/tasks/${id}`);
        assert.equal(response.status, 200, JSON.stringify(response.body));
        return response.body.data;
      };

      // A task that runs for seconds: a ×4 upscale of a 6-megapixel photo. Each server that
      // starts it is killed while it runs, standing in for an input that crashes its worker.
      let server = await start(1);
      const fileId = await client.uploadOk(corpusFile('images/sharp/2569067123_aca715a2ee_o.jpg'));
      const queued = await client.post('/api/process/upscale', { fileId, factor: 4 });
      assert.equal(queued.status, 202, JSON.stringify(queued.body));
      const taskId: string = queued.body.data.taskId;
      for (let death = 1; death <= MAX_LOST_LEASES; death++) {
        const running = await waitFor(`attempt ${death} to run`, 30_000, async () => {
          const current = await task(taskId);
          return current.status === 'processing' && current.attempts === death ? current : undefined;
        });
        assert.equal(running.attempts, death, 'each claim counts an attempt');
        await stopProc(server, 'SIGKILL');
        server = await start(death + 1);
      }

      // The last server's reaper finds the second lapsed lease and fails the task.
      const failed = await waitFor('the reaper to fail the task', 30_000, async () => {
        const current = await task(taskId);
        return current.status === 'processing' || current.status === 'queued' ? undefined : current;
      });
      assert.equal(failed.status, 'failed', JSON.stringify(failed));
      assert.equal(failed.error.code, 'INTERNAL_ERROR');
      assert.equal(failed.attempts, MAX_LOST_LEASES, 'not claimed a third time');
      // Not claimed again: a task queued after the failure runs to completion on the last
      // server, whose worker would have claimed the poison task first (same account and lane;
      // the oldest first) were it claimable still.
      const small = await client.uploadOk(corpusFile('images/sharp/320x240.jpg'));
      const next = await client.post('/api/process/upscale', { fileId: small, factor: 2 });
      assert.equal(next.status, 202, JSON.stringify(next.body));
      assert.equal((await client.waitForTask(next.body.data.taskId)).status, 'completed');
      const later = await task(taskId);
      assert.equal(later.status, 'failed');
      assert.equal(later.attempts, MAX_LOST_LEASES);
      assert.ok(server.alive(), 'the last server is still running');
    });
  });
}
