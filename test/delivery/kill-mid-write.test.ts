// "A renderer killed mid-write leaves no partial cache entry" (render-cache.ts), on both storages
// and both databases: the real service, in a child process, is SIGKILLed while it writes a render
// of about 2.4 MB to storage, then started again on the same database and storage. No row names
// the render, nothing new is under renders/, the URL renders again (a miss, never a partial
// object served) and is then a hit with the same bytes, and a killed local write's temp file is
// swept when the service starts.
//
// The kill, with no hook in the service:
// - S3: the test's S3 server holds the render's PUT once part of its body has arrived
//   (holdFirstPutUnder); the kill follows. Always mid-write.
// - Local disk: a write goes to a temp file under objects/.tmp, renamed into renders/ once whole;
//   the kill follows the temp file's creation (fs.watch). The rename may win that race, so the
//   kill is tried again on a new source until one lands before the rename (its temp file is left
//   behind, usually still empty, sometimes part-written: the case this proves); what an attempt
//   the rename won left must still be whole.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import sharp from 'sharp';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { loadConfig } from '../../src/config.js';
import { createServices, type Services } from '../../src/services.js';
import { freePort, startProc, stopProc, waitFor, waitServing, type Proc } from '../e2e/processes.js';
import { DIALECTS, freshDatabase, tempDir } from '../helpers.js';
import { startS3rver, type S3Server } from '../s3rver.js';
import { fetchDelivery, signer, sizeOf } from './helpers.js';

const STORAGES = ['local', 's3'] as const;
/** Random pixels do not compress: a 3 MB PNG source, renders of about 2.4 MB. */
const SIDE = 1000;
const WIDTH = 900;
const TRANSFORM = `w:${WIDTH},f:png`;
/** Kills tried on local disk before the test gives up on landing one before the rename. */
const LOCAL_ATTEMPTS = 5;

const noise = () =>
  sharp(crypto.randomBytes(SIDE * SIDE * 3), { raw: { width: SIDE, height: SIDE, channels: 3 } })
    .png()
    .toBuffer();

/** The pid in a LocalStorage temp name (`<host hash>-<pid>-<instance>-…`, temp-files.ts). */
const writerOf = (name: string): number | undefined => {
  const pid = /^[0-9a-f]{8}-(\d+)-/.exec(name)?.[1];
  return pid === undefined ? undefined : Number(pid);
};

for (const storage of STORAGES) {
  for (const dialect of DIALECTS) {
    describe(`a render's store killed mid-write (${storage} storage, ${dialect})`, () => {
      let root: string;
      let dropDatabase: (() => Promise<void>) | undefined;
      let s3: S3Server | undefined;
      let env: Record<string, string>;
      let url: string;
      /** The test's own handle on the service's database and storage (the service is a child process). */
      let inspect: Services | undefined;
      let proc: Proc | undefined;

      before(async () => {
        root = tempDir('imgapi-kill-');
        const database = await freshDatabase(dialect, root);
        dropDatabase = database.drop;
        s3 = storage === 's3' ? await startS3rver('imgapi-kill', { holdFirstPutUnder: 'renders/' }) : undefined;
        const port = await freePort();
        url = `http://127.0.0.1:${port}`;
        env = { DATA_DIR: path.join(root, 'data'), DATABASE_URL: database.url, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...s3?.env };
        inspect = await createServices(loadConfig(env), { logger: pino({ level: 'silent' }) });
      });
      after(async () => {
        if (proc) await stopProc(proc);
        await inspect?.close();
        await s3?.stop();
        await dropDatabase?.();
        fs.rmSync(root, { recursive: true, force: true });
      });

      const start = async (): Promise<Proc> => {
        proc = startProc(`imgapi-${storage}-${dialect}`, ['serve'], env);
        await waitServing(proc, url);
        return proc;
      };
      const newKey = async () => {
        const { database, clock } = inspect!;
        const account = await createAccount(database, clock, { email: `kill-${crypto.randomBytes(3).toString('hex')}@example.com`, plan: 'pro' });
        return (await createApiKey(database, clock, account.id, 'kill')).key;
      };
      const rowsOf = (fileId: string) => inspect!.database.db.selectFrom('render_cache').selectAll().where('source', '=', `file:${fileId}`).execute();
      const renderKeys = async () => (await inspect!.storage.list!('renders')).sort();
      /** Fails unless the object under `key` is a whole render (of `bytes` bytes, when given). */
      const assertWhole = async (key: string, bytes?: number) => {
        const data = Buffer.concat(await (await inspect!.storage.get(key)).toArray());
        if (bytes !== undefined) assert.equal(data.length, bytes, `${key}: as many bytes as its row says`);
        assert.equal((await sizeOf(data)).width, WIDTH, `${key} decodes`);
      };

      /** Asks for `renderUrl` (a miss) and SIGKILLs the service while it stores the render; true when the kill landed mid-write. */
      const killWhileStoring = async (server: Proc, renderUrl: string): Promise<boolean> => {
        if (s3) {
          const answered = fetchDelivery(renderUrl).catch(() => undefined);
          const held = await s3.heldPut;
          assert.ok(held.key.startsWith('renders/') && held.received < held.length, `the PUT was held part-way: ${JSON.stringify(held)}`);
          await stopProc(server, 'SIGKILL');
          await answered;
          return true;
        }
        const tmpDir = path.join(env.DATA_DIR!, 'objects', '.tmp');
        const watcher = fs.watch(tmpDir);
        try {
          const created = new Promise<string>((resolve) =>
            watcher.on('change', (_event, name) => {
              if (writerOf(String(name)) === server.child.pid) resolve(String(name));
            }),
          );
          const answered = fetchDelivery(renderUrl).catch(() => undefined);
          const temp = await created;
          await stopProc(server, 'SIGKILL');
          await answered;
          // Left behind: the kill came before the rename.
          return fs.existsSync(path.join(tmpDir, temp));
        } finally {
          watcher.close();
        }
      };

      it('leaves no cache entry; started again, the URL renders again, then hits', { timeout: 120_000 }, async () => {
        let server = await start();
        const a = await signer({ url, newKey });
        const killedPids = new Set<number>();
        let renderUrl = '';
        let fileId = '';
        for (let attempt = 1, midWrite = false; !midWrite; attempt++) {
          assert.ok(attempt <= LOCAL_ATTEMPTS, `no kill landed before the rename in ${LOCAL_ATTEMPTS} attempts`);
          if (attempt > 1) server = await start();
          fileId = await a.client.uploadOk(await noise(), 'noise.png');
          renderUrl = a.url(TRANSFORM, fileId);
          const keysBefore = await renderKeys();
          killedPids.add(server.child.pid!);
          midWrite = await killWhileStoring(server, renderUrl);
          const rows = await rowsOf(fileId);
          const added = (await renderKeys()).filter((key) => !keysBefore.includes(key));
          if (midWrite) {
            assert.deepEqual(rows, [], 'no row for a render whose object was not written whole');
            assert.deepEqual(added, [], 'nothing new under renders/ (a temp file is no cache entry)');
          } else {
            // The rename won (local disk): the object is whole, and a row written before the kill names it whole.
            for (const key of added) await assertWhole(key);
            for (const row of rows) await assertWhole(row.storage_key, Number(row.bytes));
          }
        }

        await start();
        if (!s3) {
          const tmpDir = path.join(env.DATA_DIR!, 'objects', '.tmp');
          const leftBehind = () => fs.readdirSync(tmpDir).filter((name) => killedPids.has(writerOf(name)!));
          await waitFor('the killed writes’ temp files to be swept', 10_000, () => (leftBehind().length === 0 ? true : undefined));
        }
        const miss = await fetchDelivery(renderUrl);
        assert.equal(miss.status, 200);
        assert.equal(miss.headers.get('imgapi-cache'), 'miss', 'rendered again');
        assert.equal((await sizeOf(miss.body)).width, WIDTH);
        // Answered before it is stored: asked again once its row is written.
        const [row] = await waitFor('the render to be stored', 10_000, async () => {
          const rows = await rowsOf(fileId);
          return rows.length > 0 ? rows : undefined;
        });
        await assertWhole(row!.storage_key, miss.body.length);
        const hit = await fetchDelivery(renderUrl);
        assert.equal(hit.headers.get('imgapi-cache'), 'hit');
        assert.deepEqual(hit.body, miss.body);
      });
    });
  }
}
