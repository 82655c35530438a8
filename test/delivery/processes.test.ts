// Two API processes' worth of services on one database (and one storage): a signing key deleted
// through one stops working in the other within the bound (told by NOTIFY on PostgreSQL, at the
// end of the 0.9 s key cache otherwise), and a render made by one is a hit in the other; a render
// one keeps in memory stops within the same bound when its file is deleted through the other.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { buildApp } from '../../src/http/app.js';
import { createServices, type Services } from '../../src/services.js';
import { loadConfig } from '../../src/config.js';
import { DIALECTS, startServer, type TestServer } from '../helpers.js';
import { fetchDelivery, png, sign, signer } from './helpers.js';

for (const dialect of DIALECTS) {
  describe(`delivery URLs across processes (${dialect})`, () => {
    let first: TestServer;
    let second: { url: string; services: Services; close(): Promise<void> };

    before(async () => {
      first = await startServer({ dialect, workers: 0 });
      const services = await createServices(loadConfig({ ...process.env, ...envOf(first) }), { logger: pino({ level: 'silent' }) });
      const app = await buildApp(services);
      await app.listen({ port: 0, host: '127.0.0.1' });
      const address = app.server.address() as { port: number };
      second = {
        url: `http://127.0.0.1:${address.port}`,
        services,
        async close() {
          const closing = app.close();
          app.server.closeAllConnections();
          await closing;
          await services.close();
        },
      };
    });
    after(async () => {
      await second?.close();
      await first?.close();
    });

    it('a render made in one process is a hit in the other; a key deleted in one stops in the other within a second', async () => {
      const a = await signer(first);
      const fileId = await a.client.uploadOk(await png(40, 40), 'p.png');
      const rest = `w:20/${fileId}`;
      const path = `/r/${a.keyId}/${sign(a.secret, rest)}/${rest}`;
      assert.equal((await fetchDelivery(first.url + path)).headers.get('imgapi-cache'), 'miss');
      // Answered before it was stored: the other process finds it once stored.
      await first.services.delivery.stored();
      const there = await fetchDelivery(second.url + path);
      assert.equal(there.status, 200);
      assert.equal(there.headers.get('imgapi-cache'), 'hit');

      assert.equal((await a.client.request('DELETE', `/api/signing-keys/${a.keyId}`)).status, 204);
      const deleted = Date.now();
      assert.equal((await fetchDelivery(first.url + path)).status, 403);
      let status = 200;
      while (status === 200 && Date.now() - deleted < 2000) status = (await fetchDelivery(second.url + path)).status;
      assert.equal(status, 403);
      assert.ok(Date.now() - deleted <= 1000, `the other process stopped serving after ${Date.now() - deleted} ms`);
    });

    it('a render the other process keeps in memory stops within a second of its file being deleted', async () => {
      const a = await signer(first);
      const fileId = await a.client.uploadOk(await png(40, 40), 'p.png');
      const rest = `w:24/${fileId}`;
      const path = `/r/${a.keyId}/${sign(a.secret, rest)}/${rest}`;
      assert.equal((await fetchDelivery(first.url + path)).headers.get('imgapi-cache'), 'miss');
      // Answered before it was stored: the other process finds it once stored.
      await first.services.delivery.stored();
      // Read once in the second process (now in its memory), then served from there.
      assert.equal((await fetchDelivery(second.url + path)).headers.get('imgapi-cache'), 'hit');
      for (const key of await fs.promises.readdir(first.services.storage.localPath!('renders')))
        await first.services.storage.delete(`renders/${key}`);
      assert.equal((await fetchDelivery(second.url + path)).status, 200, 'served from memory, not from storage');

      assert.equal((await a.client.request('DELETE', `/api/files/${fileId}`)).status, 204);
      const deleted = Date.now();
      assert.equal((await fetchDelivery(first.url + path)).status, 404);
      let status = 200;
      while (status === 200 && Date.now() - deleted < 2000) status = (await fetchDelivery(second.url + path)).status;
      assert.equal(status, 404);
      assert.ok(Date.now() - deleted <= 1000, `the other process stopped serving after ${Date.now() - deleted} ms`);
    });
  });
}

/** The environment `server` was started with: the same database, storage and data directory. */
function envOf(server: TestServer): Record<string, string> {
  return {
    DATA_DIR: server.dataDir,
    DATABASE_URL: server.databaseUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    PLANS_FILE: server.config.plansFile!,
  };
}
