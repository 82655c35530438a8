// Dashboard traffic is not API traffic, over plain HTTP on every dialect: a session's reads
// (lists, thumbnails) have their own budget, so a page of thumbnails on Free (5 requests/s)
// never meets a 429, while a session's state-changing requests stay within the plan's rate as a
// key's do. Also: the Files page's search (GET /api/files?q=), the dashboard's 404 page for a
// browser's unknown path, the operator's failures split into input errors and system faults, and
// outputs named after their operation (photo.resize-800.webp).
// The clock is frozen inside one second, so the rate-limit window never moves under the test.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SESSION_READS_PER_SECOND } from '../../src/http/auth.js';
import type { Clock } from '../../src/clock.js';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { resetToken } from '../../src/accounts/password-reset.js';
import { Client, DIALECTS, SessionClient, corpusFile, startServer, type TestServer } from '../helpers.js';

const JPEG = corpusFile('images/sharp/320x240.jpg');
const FREE_RPS = 5;

for (const dialect of DIALECTS) {
  describe(`dashboard traffic (${dialect})`, () => {
    let server: TestServer;
    let frozen: number;
    let session: SessionClient;
    let key: string;
    let fileIds: string[];
    let accountId: string;

    before(async () => {
      // Frozen half-way through a second: every request below falls in the same window.
      frozen = Math.floor(Date.now() / 1000) * 1000 + 500;
      const clock: Clock = { now: () => frozen };
      server = await startServer({ dialect, clock, workers: 0, env: { SIGNUP_MODE: 'open' }, plans: { free: { requestsPerSecond: FREE_RPS } } });
      // A Free account with files to list: seeded with a key while on Pro (uploads are writes).
      const account = await createAccount(server.services.database, server.services.clock, {
        email: `traffic-${dialect}@example.com`,
        plan: 'pro',
        password: 'a-good-password',
      });
      accountId = account.id;
      key = (await createApiKey(server.services.database, server.services.clock, account.id, 'seed')).key;
      const seeder = new Client(server.url, key);
      fileIds = [];
      for (const name of ['Holiday-Photo.jpg', 'holiday 100%_done.jpg', 'receipt.jpg', 'photo.resize-800.webp'])
        fileIds.push(await seeder.uploadOk(JPEG, name));
      await server.services.database.db.updateTable('accounts').set({ plan: 'free' }).where('id', '=', account.id).execute();
      session = new SessionClient(server.url);
      const login = await session.post('/auth/login', { email: `traffic-${dialect}@example.com`, password: 'a-good-password' });
      assert.equal(login.status, 200, JSON.stringify(login.body));
    });
    after(async () => {
      await server?.close();
    });

    it('a page of thumbnails and lists on Free (5/s) meets no 429; reads stay bounded', async () => {
      // One page of the Files page: the list and 20 thumbnails, plus the account, all at once.
      const reads = [
        session.get('/api/files?limit=20'),
        session.get('/api/account'),
        ...Array.from({ length: 20 }, (_, i) => session.get(`/api/preview/${fileIds[i % fileIds.length]}?width=128&height=128`)),
        ...Array.from({ length: 18 }, () => session.get('/api/tasks?limit=20')),
      ];
      const answered = await Promise.all(reads);
      assert.deepEqual(
        answered.filter((r) => r.status === 429).map((r) => r.body),
        [],
        `${reads.length} reads in one second on a 5/s plan`,
      );
      assert.ok(answered.every((r) => r.status === 200));
      // The session's reads have a budget, not a blank cheque.
      const more = await Promise.all(Array.from({ length: SESSION_READS_PER_SECOND }, () => session.get('/api/files?limit=1')));
      const limited = more.filter((r) => r.status === 429);
      assert.equal(limited.length, reads.length, `past ${SESSION_READS_PER_SECOND} reads in the second the rest are refused`);
      assert.equal(limited[0]!.body.error.code, 'RATE_LIMITED');
    });

    it("a session's state-changing requests keep to the plan's rate, as a key's do", async () => {
      const writes = await Promise.all(
        Array.from({ length: FREE_RPS + 7 }, () => session.request('DELETE', '/api/files/file_doesnotexist0000000000')),
      );
      const refused = writes.filter((r) => r.status === 429);
      assert.equal(refused.length, 7, writes.map((r) => r.status).join(','));
      assert.equal(refused[0]!.body.error.code, 'RATE_LIMITED');
      assert.ok(Number(refused[0]!.headers.get('retry-after')) >= 1);
      assert.ok(writes.filter((r) => r.status !== 429).every((r) => r.status === 404));
      frozen += 1000; // the next second
    });

    it('GET /api/files?q= finds files by name, ignoring case; % and _ match themselves', async () => {
      frozen += 1000;
      const names = async (q: string) => {
        const response = await session.get(`/api/files?q=${encodeURIComponent(q)}`);
        assert.equal(response.status, 200, JSON.stringify(response.body));
        return (response.body.data.files as { filename: string }[]).map((f) => f.filename).sort();
      };
      assert.deepEqual(await names('HOLIDAY'), ['Holiday-Photo.jpg', 'holiday 100%_done.jpg']);
      assert.deepEqual(await names('photo'), ['Holiday-Photo.jpg', 'photo.resize-800.webp']);
      assert.deepEqual(await names('100%_'), ['holiday 100%_done.jpg']);
      assert.deepEqual(await names('%'), ['holiday 100%_done.jpg']);
      assert.deepEqual(await names('nothing-like-this'), []);
      const empty = await session.get('/api/files?q=');
      assert.equal(empty.status, 400);
      assert.equal(empty.body.error.code, 'VALIDATION_ERROR');
    });

    it("a browser's unknown path gets the dashboard with 404; API clients keep the JSON 404", async () => {
      frozen += 1000;
      const page = await fetch(`${server.url}/no/such/page`, { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
      assert.equal(page.status, 404);
      assert.match(page.headers.get('content-type') ?? '', /text\/html/);
      assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'none'/);
      assert.match(await page.text(), /<div id="root">/);
      const json = await fetch(`${server.url}/no/such/page`, { headers: { accept: 'application/json' } });
      assert.equal(json.status, 404);
      assert.equal(((await json.json()) as { error: { code: string } }).error.code, 'NOT_FOUND');
      const api = await fetch(`${server.url}/api/no-such-route`, { headers: { accept: 'text/html', 'x-api-key': key } });
      assert.match(api.headers.get('content-type') ?? '', /application\/json/, '/api keeps its JSON errors');
    });

    it("the operator's reset link sets a new password once, ends the old sessions, and expires in a day", async () => {
      frozen += 1000;
      const email = `traffic-${dialect}@example.com`;
      await createAccount(server.services.database, server.services.clock, {
        email: `op-${dialect}@example.com`,
        plan: 'max',
        admin: true,
        password: 'operator-password',
      });
      const operator = new SessionClient(server.url);
      assert.equal((await operator.post('/auth/login', { email: `op-${dialect}@example.com`, password: 'operator-password' })).status, 200);
      const refused = await session.post(`/dashboard-api/admin/accounts/${accountId}/reset-link`, undefined);
      assert.equal(refused.status, 403, 'only the operator makes reset links');
      assert.equal(refused.body.error.code, 'FORBIDDEN');

      const made = await operator.post(`/dashboard-api/admin/accounts/${accountId}/reset-link`, undefined);
      assert.equal(made.status, 201, JSON.stringify(made.body));
      assert.equal(made.body.data.email, email);
      const url = new URL(made.body.data.url);
      assert.equal(url.pathname, '/reset-password');
      const token = url.searchParams.get('token')!;
      assert.equal(Date.parse(made.body.data.expiresAt), frozen + 24 * 3600_000);

      const tampered = await new SessionClient(server.url).post('/auth/reset-password', {
        token: `${token.slice(0, -2)}xx`,
        password: 'a-new-password',
      });
      assert.equal(tampered.status, 403);
      assert.equal(tampered.body.error.code, 'RESET_LINK_INVALID');

      const visitor = new SessionClient(server.url);
      const reset = await visitor.post('/auth/reset-password', { token, password: 'a-new-password' });
      assert.equal(reset.status, 200, JSON.stringify(reset.body));
      assert.equal(reset.body.data.account.email, email, 'signed in as the account');
      assert.equal((await visitor.get('/api/account')).status, 200);
      assert.equal((await session.get('/api/account')).status, 401, 'the sessions from before the reset ended');
      assert.equal((await new SessionClient(server.url).post('/auth/login', { email, password: 'a-good-password' })).status, 401);
      session = new SessionClient(server.url);
      assert.equal((await session.post('/auth/login', { email, password: 'a-new-password' })).status, 200);

      const again = await new SessionClient(server.url).post('/auth/reset-password', { token, password: 'another-password' });
      assert.equal(again.status, 403, 'a link works once');
      assert.equal(again.body.error.code, 'RESET_LINK_INVALID');

      const later = (await operator.post(`/dashboard-api/admin/accounts/${accountId}/reset-link`, undefined)).body.data.url as string;
      frozen += 24 * 3600_000 + 1000;
      const expired = await new SessionClient(server.url).post('/auth/reset-password', {
        token: new URL(later).searchParams.get('token'),
        password: 'another-password',
      });
      assert.equal(expired.status, 403, 'a link works for a day');
      assert.equal(expired.body.error.code, 'RESET_LINK_INVALID');
    });

    it('a reset link sent ten times in parallel, each with its own password, is spent by exactly one', async () => {
      frozen += 1000;
      const email = `race-${dialect}@example.com`;
      const account = await createAccount(server.services.database, server.services.clock, { email, plan: 'free', password: 'the-old-password' });
      const { token } = resetToken(account, server.services.clock);
      const passwords = Array.from({ length: 10 }, (_, i) => `parallel-password-${i}`);
      const answers = await Promise.all(passwords.map((password) => new SessionClient(server.url).post('/auth/reset-password', { token, password })));
      const winners = answers.flatMap((answer, i) => (answer.status === 200 ? [passwords[i]!] : []));
      assert.equal(winners.length, 1, JSON.stringify(answers.map((a) => a.status)));
      for (const answer of answers.filter((a) => a.status !== 200)) {
        assert.equal(answer.status, 403);
        assert.equal(answer.body.error.code, 'RESET_LINK_INVALID');
      }
      for (const password of [...passwords, 'the-old-password']) {
        const login = await new SessionClient(server.url).post('/auth/login', { email, password });
        assert.equal(login.status, password === winners[0] ? 200 : 401, password);
      }
    });
  });
}

describe('dashboard: failures by whose fault they are, outputs by the operation that made them', () => {
  it('labels a failure by whose fault it is', async () => {
    const server = await startServer({ dialect: 'sqlite', workers: 1, env: { SIGNUP_MODE: 'open' } });
    try {
      const client = new Client(server.url, await server.newKey('pro'));
      const failing = await client.post('/api/process/compress', { fileId: await client.uploadOk(JPEG), targetSize: 100 });
      assert.equal((await client.waitForTask(failing.body.data.taskId)).error?.code, 'TARGET_SIZE_UNREACHABLE');
      await createAccount(server.services.database, server.services.clock, {
        email: 'op@example.com',
        plan: 'max',
        admin: true,
        password: 'operator-password',
      });
      const operator = new SessionClient(server.url);
      assert.equal((await operator.post('/auth/login', { email: 'op@example.com', password: 'operator-password' })).status, 200);
      const queue = await operator.get('/dashboard-api/admin/queue');
      assert.equal(queue.status, 200);
      const failure = (queue.body.data.recentFailures as { taskId: string; fault: string }[]).find((f) => f.taskId === failing.body.data.taskId);
      assert.equal(failure?.fault, 'input');

      // Outputs are named after the operation that made them.
      const fileId = await client.uploadOk(JPEG, 'photo.jpg');
      const named = async (kind: string, options: Record<string, unknown>) => {
        const queued = await client.post(`/api/process/${kind}`, { fileId, ...options });
        assert.equal(queued.status, 202, JSON.stringify(queued.body));
        const task = await client.waitForTask(queued.body.data.taskId);
        return (await client.get(`/api/files/${task.outputFileId}`)).body.data.filename as string;
      };
      assert.equal(await named('resize', { width: 120, format: 'webp' }), 'photo.resize-120.webp');
      assert.equal(await named('rotate', { angle: -90 }), 'photo.rotate-ccw90.jpg');
      assert.equal(await named('convert', { format: 'png' }), 'photo.png');
    } finally {
      await server.close();
    }
  });
});
