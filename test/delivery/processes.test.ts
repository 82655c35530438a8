// Two API processes' worth of services on one database (and one storage): a signing key deleted
// (or an account's plan changed) through one applies in the other within the bound (told by
// NOTIFY on PostgreSQL, at the end of the 0.9 s key cache otherwise), and a render made by one
// is a hit in the other; a render one keeps in memory stops within the same bound when its file
// is deleted through the other.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { KEY_CACHE_MS, findAccountByEmail, setPlan } from '../../src/accounts/accounts.js';
import { buildApp } from '../../src/http/app.js';
import { createServices, type Services } from '../../src/services.js';
import { loadConfig } from '../../src/config.js';
import { Client, DIALECTS, startServer, type TestServer } from '../helpers.js';
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
      await stopsServing(second.url + path, deleted, 403);
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
      await stopsServing(second.url + path, deleted, 404);
    });

    it("an account's plan changed through one process is the plan of its keys in the other at once (PostgreSQL) or within the key cache's bound", async () => {
      const a = await signer(first);
      const there = new Client(second.url, a.client.key);
      const plan = async () => (await there.request('GET', '/api/account')).body.data.plan as string;
      assert.equal(await plan(), 'pro');
      const email = (await there.request('GET', '/api/account')).body.data.email as string;
      const account = (await findAccountByEmail(first.services.database, email))!.id;
      const told = once(second.services.events, 'changed:accounts');
      // What `imgapi users set-plan` and the operator's dashboard do.
      await setPlan(first.services.database, account, 'max');
      first.services.events.changed('accounts');
      const changed = Date.now();
      if (dialect === 'postgres') {
        await told;
        assert.equal(await plan(), 'max', 'told through NOTIFY, the other process read the account again');
      }
      let served = await plan();
      for (let started = Date.now(); served === 'pro'; started = Date.now()) {
        assert.ok(started - changed < KEY_CACHE_MS, `the old plan was still served ${started - changed} ms after the change`);
        served = await plan();
      }
      assert.equal(served, 'max');
    });
  });
}

/**
 * Asks `url` until it answers `refused`: every 200 must come from a request sent within
 * KEY_CACHE_MS of `changed` (what the other process keeps in memory is at most that old).
 */
async function stopsServing(url: string, changed: number, refused: number): Promise<void> {
  for (;;) {
    const started = Date.now();
    const { status } = await fetchDelivery(url);
    if (status === refused) return;
    assert.equal(status, 200);
    assert.ok(started - changed < KEY_CACHE_MS, `still served ${started - changed} ms after the change`);
  }
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
