// Long-polls wait for their task's finish without reading it again and again. A finish in the
// same process wakes them at once; one that happens elsewhere without a notification (another
// process on SQLite) is found by one statement for all the tasks waited on, whatever the number
// of requests waiting.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import type { Database } from '../../src/db/database.js';
import { QueueEvents } from '../../src/queue/events.js';
import { createServices, type Services } from '../../src/services.js';
import { LongPolls } from '../../src/tasks/long-poll.js';
import { Client, DIALECTS, completeTask, corpusFile, startServer, type TestServer } from '../helpers.js';

const JPEG = corpusFile('images/sharp/2569067123_aca715a2ee_o.jpg');

for (const dialect of DIALECTS) {
  describe(`long-polls (${dialect})`, () => {
    let server: TestServer;
    let other: Services;
    let client: Client;
    let fileId: string;
    before(async () => {
      // No workers here: the tasks are run "elsewhere", by a second instance of the services.
      server = await startServer({ dialect, workers: 0 });
      other = await createServices(server.config, { logger: pino({ level: 'silent' }) });
      client = new Client(server.url, await server.newKey('pro'));
      fileId = await client.uploadOk(JPEG);
    });
    after(async () => {
      await other?.close();
      await server?.close();
    });

    const submit = async () => {
      const response = await client.post('/api/process/convert', { fileId, format: 'png' });
      assert.equal(response.status, 202);
      return response.body.data.taskId as string;
    };
    /** Claims and completes `taskIds` in the other instance, as another process's worker would. */
    const completeElsewhere = async (taskIds: string[]) => {
      const claimed = await other.queue.claim('wrk_elsewhere', 100, 30_000);
      for (const task of claimed) {
        if (taskIds.includes(task.id))
          assert.equal(await completeTask(other.queue, task, 'wrk_elsewhere', [], { result: { format: 'png', size: 1 } }), true);
        else await other.queue.release(task, 'wrk_elsewhere');
      }
    };

    it('answers a ?wait= request when another process completes the task', async () => {
      const taskId = await submit();
      const started = Date.now();
      const answer = client.get(`/api/tasks/${taskId}?wait=25`);
      await completeElsewhere([taskId]);
      const response = await answer;
      assert.equal(response.status, 200);
      assert.equal(response.body.data.status, 'completed');
      // Found by the shared recheck (about a second), long before the wait would have ended.
      assert.ok(Date.now() - started < 20_000, `answered after ${Date.now() - started} ms`);
    });

    it('looks up every task waited on in one statement, and wakes only the waiters of finished tasks', async () => {
      const taskIds = [await submit(), await submit(), await submit()];
      let statements = 0;
      const counting = new Proxy(server.services.database, {
        get(target, property, receiver) {
          if (property === 'db') statements++;
          return Reflect.get(target, property, receiver) as Database[keyof Database];
        },
      });
      // Its own events: nothing from this process wakes it; a recheck only when asked.
      const polls = new LongPolls(counting, new QueueEvents(), (err) => assert.fail(err as Error), 3_600_000);
      const woken = new Set<string>();
      const waits = [...taskIds, taskIds[0]!, taskIds[0]!].map((id, i) => polls.wait(id, 60_000).then(() => woken.add(`${id}#${i}`)));
      assert.equal(polls.size, 3);

      await polls.recheck();
      assert.equal(statements, 1);
      assert.equal(woken.size, 0);

      await completeElsewhere([taskIds[0]!, taskIds[1]!]);
      await polls.recheck();
      assert.equal(statements, 2);
      await Promise.all(waits.filter((_, i) => i !== 2));
      assert.deepEqual([...woken].sort(), [`${taskIds[0]}#0`, `${taskIds[0]}#3`, `${taskIds[0]}#4`, `${taskIds[1]}#1`].sort());
      assert.equal(polls.size, 1);

      await completeElsewhere([taskIds[2]!]);
      await polls.recheck();
      await waits[2];
      assert.equal(polls.size, 0);
    });
  });
}
