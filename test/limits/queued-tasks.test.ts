// The plan's limit on tasks queued or running at once, exact under concurrency on every dialect:
// queuing counts them under the account's lock, and on PostgreSQL a count read by the statement
// that waited for that lock would miss what its holder had just committed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client, DIALECTS, corpusFile, startServer, type TestServer } from '../helpers.js';

const SMALL = corpusFile('images/sharp/320x240.jpg');
const LIMIT = 3;

for (const dialect of DIALECTS) {
  describe(`queued tasks limit (${dialect})`, () => {
    let server: TestServer;

    before(async () => {
      server = await startServer({ dialect, workers: 0, plans: { pro: { maxQueuedTasks: LIMIT, monthlyTasks: 1000 } } });
    });
    after(() => server.close());

    it(`with room for ${LIMIT} tasks, 30 parallel job requests admit exactly ${LIMIT}`, async () => {
      const client = new Client(server.url, await server.newKey('pro'));
      const fileId = await client.uploadOk(SMALL);
      const responses = await Promise.all(Array.from({ length: 30 }, () => client.post('/api/process/compress', { fileId })));
      const statuses = responses.map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 202).length, LIMIT, JSON.stringify(statuses));
      for (const refused of responses.filter((r) => r.status !== 202)) {
        assert.equal(refused.status, 429);
        assert.equal(refused.body.error.code, 'TOO_MANY_QUEUED_TASKS');
      }
    });
  });
}
