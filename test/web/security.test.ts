// The dashboard's security over plain HTTP, on every dialect: session cookies (HttpOnly,
// SameSite, Secure behind https), CSRF on every state-changing request of a session (token,
// Origin, Sec-Fetch-Site), one account never seeing another's files, tasks or keys, admin-only
// routes, login throttling, first-run setup with a one-time token, sign-up modes, and the
// static pages' headers. The browser-level checks are in dashboard.test.ts.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { createAccount } from '../../src/accounts/accounts.js';
import { announceSetupToken, setupInstructions } from '../../src/accounts/onboarding.js';
import { ManualClock } from '../../src/clock.js';
import { Client, DIALECTS, REPO_ROOT, SessionClient, apiFetch, corpusFile, startServer, type ApiResponse, type TestServer } from '../helpers.js';

const JPEG = corpusFile('images/sharp/320x240.jpg');
const EVIL = 'https://evil.example';
const silent = pino({ level: 'silent' });

async function signUp(server: TestServer, email: string, password = 'a-good-password'): Promise<SessionClient> {
  const client = new SessionClient(server.url);
  const response = await client.post('/auth/signup', { email, password });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return client;
}

async function logIn(server: TestServer, email: string, password: string): Promise<SessionClient> {
  const client = new SessionClient(server.url);
  const response = await client.post('/auth/login', { email, password });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return client;
}

const code = (response: ApiResponse) => (response.body as { error?: { code?: string } })?.error?.code;

for (const dialect of DIALECTS) {
  describe(`dashboard security (${dialect})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ dialect, env: { SIGNUP_MODE: 'open' } });
    });
    after(async () => {
      await server?.close();
    });

    it('session cookies are HttpOnly, SameSite=Strict, path /, and not readable as a token elsewhere', async () => {
      const client = new SessionClient(server.url);
      const response = await client.post('/auth/signup', { email: `cookie-${dialect}@example.com`, password: 'a-good-password' });
      assert.equal(response.status, 201);
      const cookie = response.headers.get('set-cookie') ?? '';
      assert.match(cookie, /^imgapi_session=[A-Za-z0-9_-]{40,};/);
      assert.match(cookie, /; HttpOnly/);
      assert.match(cookie, /; SameSite=Strict/);
      assert.match(cookie, /; Path=\//);
      assert.match(cookie, /; Max-Age=\d+/);
      assert.doesNotMatch(cookie, /; Secure/, 'plain http: no Secure (the browser would drop it)');
      assert.equal(response.headers.get('cache-control'), 'no-store');
      assert.ok(!JSON.stringify(response.body).includes(client.cookie.split('=')[1]!), 'the session token is never in a body');
      const session = await client.get('/auth/session');
      assert.equal(session.body.data.authenticated, true);
      assert.equal(session.body.data.account.plan, 'free');
    });

    it('a cross-site POST without the CSRF proof is refused and does nothing', async () => {
      const client = await signUp(server, `csrf-${dialect}@example.com`);
      const fileId = await client.uploadOk(JPEG); // with the token: accepted
      const csrf = client.csrf;

      client.sendCsrf = false;
      const noToken = await client.post('/api/process/compress', { fileId });
      assert.equal(noToken.status, 403);
      assert.equal(code(noToken), 'CSRF_TOKEN_INVALID');
      const wrongToken = await client.post('/api/process/compress', { fileId }, { 'x-csrf-token': 'x'.repeat(43) });
      assert.equal(code(wrongToken), 'CSRF_TOKEN_INVALID');
      const upload = await client.upload(JPEG);
      assert.equal(code(upload), 'CSRF_TOKEN_INVALID');
      const key = await client.post('/dashboard-api/keys', { name: 'stolen' });
      assert.equal(code(key), 'CSRF_TOKEN_INVALID');
      const logout = await client.post('/auth/logout', undefined);
      assert.equal(code(logout), 'CSRF_TOKEN_INVALID');
      client.sendCsrf = true;

      // The token is not enough from another origin, as browsers label cross-site requests.
      const fromEvil = await client.post('/api/process/compress', { fileId }, { origin: EVIL });
      assert.equal(code(fromEvil), 'CSRF_TOKEN_INVALID');
      const crossSite = await client.post('/api/process/compress', { fileId }, { 'sec-fetch-site': 'cross-site' });
      assert.equal(code(crossSite), 'CSRF_TOKEN_INVALID');
      const nullOrigin = await client.post('/api/process/compress', { fileId }, { origin: 'null' });
      assert.equal(code(nullOrigin), 'CSRF_TOKEN_INVALID');

      // Nothing happened: one file, no task, no key, still logged in.
      assert.equal((await client.get('/api/files')).body.data.files.length, 1);
      assert.equal((await client.get('/api/tasks')).body.data.tasks.length, 0);
      assert.equal((await client.get('/dashboard-api/keys')).body.data.keys.length, 0);
      assert.equal((await client.get('/auth/session')).body.data.authenticated, true);

      // Another session's token does not fit this one.
      const other = await signUp(server, `csrf-other-${dialect}@example.com`);
      const swapped = await client.post('/api/process/compress', { fileId }, { 'x-csrf-token': other.csrf });
      assert.equal(code(swapped), 'CSRF_TOKEN_INVALID');

      // From the dashboard itself: accepted.
      const sameOrigin = await client.post(
        '/api/process/compress',
        { fileId },
        { origin: server.url, 'sec-fetch-site': 'same-origin', 'x-csrf-token': csrf },
      );
      assert.equal(sameOrigin.status, 202, JSON.stringify(sameOrigin.body));
      // Reads need no token.
      client.sendCsrf = false;
      assert.equal((await client.get(`/api/tasks/${sameOrigin.body.data.taskId}`)).status, 200);
    });

    it('logging in, signing up and setup are refused from another origin and take JSON only', async () => {
      const email = `form-${dialect}@example.com`;
      await signUp(server, email);
      const evil = await new Client(server.url).post('/auth/login', { email, password: 'a-good-password' }, { origin: EVIL });
      assert.equal(evil.status, 403);
      assert.equal(code(evil), 'CSRF_TOKEN_INVALID');
      assert.equal(evil.headers.get('set-cookie'), null);
      // What a cross-site HTML form can send: not JSON, so not even parsed.
      const form = await new Client(server.url).request('POST', '/auth/login', {
        body: `email=${encodeURIComponent(email)}&password=a-good-password`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      assert.equal(form.status, 415);
      assert.equal(form.headers.get('set-cookie'), null);
      // A form can also send text/plain, shaped as JSON: not read either.
      const plain = await new Client(server.url).request('POST', '/auth/login', {
        body: JSON.stringify({ email, password: 'a-good-password' }),
        headers: { 'content-type': 'text/plain' },
      });
      assert.equal(plain.status, 415);
      assert.equal(code(plain), 'UNSUPPORTED_MEDIA_TYPE');
      assert.equal(plain.headers.get('set-cookie'), null);
      const signup = await new Client(server.url).post(
        '/auth/signup',
        { email: `x-${email}`, password: 'a-good-password' },
        { 'sec-fetch-site': 'cross-site' },
      );
      assert.equal(code(signup), 'CSRF_TOKEN_INVALID');
      const unknownField = await new Client(server.url).post('/auth/login', { email, password: 'a-good-password', remember: true });
      assert.equal(unknownField.status, 400);
      assert.equal(code(unknownField), 'VALIDATION_ERROR');
    });

    it("one account cannot see another's files, tasks or keys through the dashboard", async () => {
      const password = 'owner-password-1';
      const ownerAccount = await createAccount(server.services.database, server.services.clock, {
        email: `owner-${dialect}@example.com`,
        plan: 'pro',
        password,
      });
      const owner = await logIn(server, ownerAccount.email, password);
      const fileId = await owner.uploadOk(JPEG);
      const queued = await owner.post('/api/process/resize', { fileId, width: 64 });
      assert.equal(queued.status, 202);
      const task = await owner.waitForTask(queued.body.data.taskId);
      assert.equal(task.status, 'completed');
      const key = await owner.post('/dashboard-api/keys', { name: 'owner key' });
      assert.equal(key.status, 201);

      const intruder = await signUp(server, `intruder-${dialect}@example.com`);
      for (const route of [
        `/api/files/${fileId}`,
        `/api/download/${fileId}`,
        `/api/preview/${fileId}`,
        `/api/download/${task.outputFileId}`,
        `/api/tasks/${task.taskId}`,
      ]) {
        const response = await intruder.get(route);
        assert.equal(response.status, 404, `${route}: ${response.status}`);
        assert.equal(code(response), 'NOT_FOUND');
      }
      assert.equal((await intruder.get('/api/files')).body.data.files.length, 0);
      assert.equal((await intruder.get('/api/tasks')).body.data.tasks.length, 0);
      assert.equal((await intruder.delete(`/api/files/${fileId}`)).status, 404);
      assert.equal((await intruder.delete(`/api/tasks/${task.taskId}`)).status, 404);
      assert.deepEqual((await intruder.get('/dashboard-api/keys')).body.data.keys, []);
      const revoke = await intruder.delete(`/dashboard-api/keys/${key.body.data.keyId}`);
      assert.equal(revoke.status, 404);
      // The owner's key still works, the owner's file is still there.
      assert.equal((await new Client(server.url, key.body.data.key).get('/api/account')).status, 200);
      assert.equal((await owner.get(`/api/files/${fileId}`)).status, 200);
      // A job on another account's file is refused as if the file did not exist.
      const borrowed = await intruder.post('/api/process/compress', { fileId });
      assert.equal(borrowed.status, 404);
    });

    it('operator routes need an administrator; dashboard routes need a session', async () => {
      const user = await signUp(server, `plain-${dialect}@example.com`);
      for (const [method, route] of [
        ['GET', '/dashboard-api/admin/accounts'],
        ['GET', '/dashboard-api/admin/queue'],
        ['GET', '/dashboard-api/admin/invites'],
      ] as const) {
        const response = await user.request(method, route);
        assert.equal(response.status, 403, route);
        assert.equal(code(response), 'FORBIDDEN');
      }
      const promote = await user.request('PATCH', `/dashboard-api/admin/accounts/${(await user.get('/auth/session')).body.data.account.accountId}`, {
        json: { plan: 'max' },
      });
      assert.equal(code(promote), 'FORBIDDEN');
      const anonymous = new Client(server.url);
      assert.equal(code(await anonymous.get('/dashboard-api/keys')), 'NOT_AUTHENTICATED');
      assert.equal(code(await anonymous.get('/dashboard-api/operations')), 'NOT_AUTHENTICATED');
      assert.equal(code(await anonymous.get('/api/account')), 'API_KEY_MISSING');
      // An API key does not open dashboard routes: keys never manage keys.
      const key = await server.newKey('pro');
      assert.equal(code(await new Client(server.url, key).get('/dashboard-api/keys')), 'NOT_AUTHENTICATED');
      // A forged or stale cookie is no session.
      const forged = await new Client(server.url).get('/api/account', { cookie: 'imgapi_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' });
      assert.equal(code(forged), 'API_KEY_MISSING');
    });

    it('Free accounts use /api through the session, and their keys are still refused', async () => {
      const user = await signUp(server, `free-${dialect}@example.com`);
      const account = await user.get('/api/account');
      assert.equal(account.status, 200);
      assert.equal(account.body.data.plan, 'free');
      assert.equal(account.headers.get('ratelimit-limit'), '100000');
      const fileId = await user.uploadOk(JPEG);
      const queued = await user.post('/api/process/compress', { fileId, quality: 40 });
      assert.equal(queued.status, 202);
      assert.equal((await user.waitForTask(queued.body.data.taskId)).status, 'completed');
      const batch = await user.post('/api/process/batch/compress', { fileIds: [fileId] });
      assert.equal(batch.status, 400, 'no batches on Free');
      assert.equal(code(batch), 'BATCH_TOO_LARGE');
      const key = await user.post('/dashboard-api/keys', { name: 'free key' });
      assert.equal(key.body.data.apiAccess, false);
      const refused = await new Client(server.url, key.body.data.key).get('/api/account');
      assert.equal(refused.status, 403);
      assert.equal(code(refused), 'PLAN_NO_API_ACCESS');
    });

    it('logout ends the session on the server', async () => {
      const user = await signUp(server, `logout-${dialect}@example.com`);
      const cookie = user.cookie;
      const out = await user.post('/auth/logout', undefined);
      assert.equal(out.status, 204);
      assert.match(out.headers.get('set-cookie') ?? '', /^imgapi_session=; Path=\/; Max-Age=0/);
      const stale = await new Client(server.url).get('/api/account', { cookie });
      assert.equal(stale.status, 401);
      assert.equal((await new Client(server.url).get('/auth/session', { cookie })).body.data.authenticated, false);
      // A cookie that is not valid percent-encoding opens nothing, and is dropped: no 500.
      for (const bad of ['imgapi_session=%%%', 'imgapi_session=%E0%A4%A; other=1']) {
        const session = await new Client(server.url).get('/auth/session', { cookie: bad });
        assert.equal(session.status, 200, bad);
        assert.equal(session.body.data.authenticated, false, bad);
        assert.match(session.headers.get('set-cookie') ?? '', /^imgapi_session=; Path=\/; Max-Age=0/, bad);
        assert.equal((await new Client(server.url).get('/api/account', { cookie: bad })).status, 401, bad);
      }
    });

    it('first-run setup takes the one-time token from the start-up line, once; the log never holds it', async () => {
      const fresh = await startServer({ dialect, workers: 0 });
      try {
        const lines: string[] = [];
        const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
        const token = await announceSetupToken({ database: fresh.services.database, clock: fresh.services.clock, logger });
        assert.ok(token);
        assert.ok(
          lines.some((l) => l.includes('No administrator account exists yet') && l.includes('imgapi users create')),
          'the log says setup is pending and how to proceed',
        );
        assert.ok(!lines.some((l) => l.includes(token)), 'the structured log never holds the token');
        const instructions = setupInstructions(fresh.url, token);
        assert.ok(instructions.includes(`${fresh.url}/setup#token=${token} `) && instructions.includes('imgapi users create'), instructions);
        const client = new SessionClient(fresh.url);
        assert.equal((await client.get('/auth/session')).body.data.setupRequired, true);
        // "Whoever signs up first" does not become the operator.
        const first = await new Client(fresh.url).post('/auth/signup', { email: 'first@example.com', password: 'a-good-password' });
        assert.equal(code(first), 'INVITE_INVALID', 'the default SIGNUP_MODE is invite');
        const wrong = await client.post('/auth/setup', { token: 'guess', email: 'op@example.com', password: 'operator-pw-1' });
        assert.equal(wrong.status, 403);
        assert.equal(code(wrong), 'SETUP_TOKEN_INVALID');
        const ok = await client.post('/auth/setup', { token, email: 'op@example.com', password: 'operator-pw-1' });
        assert.equal(ok.status, 201, JSON.stringify(ok.body));
        assert.equal(ok.body.data.account.isAdmin, true);
        assert.equal(ok.body.data.setupRequired, false);
        const again = await new Client(fresh.url).post('/auth/setup', { token, email: 'op2@example.com', password: 'operator-pw-1' });
        assert.equal(code(again), 'SETUP_COMPLETED');
        assert.equal(await announceSetupToken({ database: fresh.services.database, clock: fresh.services.clock, logger }), undefined);
        assert.equal((await client.get('/dashboard-api/admin/queue')).status, 200, 'the operator reaches the operator routes');
      } finally {
        await fresh.close();
      }
    });

    it('an administrator made by the CLI closes setup', async () => {
      const fresh = await startServer({ dialect, workers: 0 });
      try {
        const token = await announceSetupToken({ database: fresh.services.database, clock: fresh.services.clock, logger: silent });
        await createAccount(fresh.services.database, fresh.services.clock, {
          email: 'cli-admin@example.com',
          plan: 'max',
          admin: true,
          password: 'cli-password-1',
        });
        assert.equal((await new Client(fresh.url).get('/auth/session')).body.data.setupRequired, false);
        const late = await new Client(fresh.url).post('/auth/setup', { token, email: 'late@example.com', password: 'operator-pw-1' });
        assert.equal(code(late), 'SETUP_COMPLETED');
      } finally {
        await fresh.close();
      }
    });

    it('sign-up by invitation: codes from the operator, used once, bound to an email when asked', async () => {
      const fresh = await startServer({ dialect, workers: 0, env: { SIGNUP_MODE: 'invite' } });
      try {
        await createAccount(fresh.services.database, fresh.services.clock, {
          email: 'op@example.com',
          plan: 'max',
          admin: true,
          password: 'operator-pw-1',
        });
        const operator = await logIn(fresh, 'op@example.com', 'operator-pw-1');
        const none = await new Client(fresh.url).post('/auth/signup', { email: 'a@example.com', password: 'a-good-password' });
        assert.equal(code(none), 'INVITE_INVALID');
        const invite = await operator.post('/dashboard-api/admin/invites', {});
        assert.equal(invite.status, 201);
        assert.match(invite.body.data.signupUrl, /\/signup\?invite=inv_/);
        const bogus = await new Client(fresh.url).post('/auth/signup', {
          email: 'a@example.com',
          password: 'a-good-password',
          inviteCode: 'inv_nope',
        });
        assert.equal(code(bogus), 'INVITE_INVALID');
        const used = await new SessionClient(fresh.url).post('/auth/signup', {
          email: 'a@example.com',
          password: 'a-good-password',
          inviteCode: invite.body.data.code,
        });
        assert.equal(used.status, 201);
        assert.equal(used.body.data.account.plan, 'free');
        const twice = await new Client(fresh.url).post('/auth/signup', {
          email: 'b@example.com',
          password: 'a-good-password',
          inviteCode: invite.body.data.code,
        });
        assert.equal(code(twice), 'INVITE_INVALID');
        const bound = await operator.post('/dashboard-api/admin/invites', { email: 'c@example.com' });
        const otherEmail = await new Client(fresh.url).post('/auth/signup', {
          email: 'd@example.com',
          password: 'a-good-password',
          inviteCode: bound.body.data.code,
        });
        assert.equal(code(otherEmail), 'INVITE_INVALID');
        const rightEmail = await new Client(fresh.url).post('/auth/signup', {
          email: 'C@example.com',
          password: 'a-good-password',
          inviteCode: bound.body.data.code,
        });
        assert.equal(rightEmail.status, 201);
        const listed = await operator.get('/dashboard-api/admin/invites');
        assert.deepEqual(listed.body.data.invites.map((i: { usedBy: string }) => i.usedBy).sort(), ['a@example.com', 'c@example.com']);
        assert.ok(!JSON.stringify(listed.body).includes(invite.body.data.code), 'codes are shown only when created');
      } finally {
        await fresh.close();
      }
      const closed = await startServer({ dialect, workers: 0, env: { SIGNUP_MODE: 'closed' } });
      try {
        const refused = await new Client(closed.url).post('/auth/signup', { email: 'a@example.com', password: 'a-good-password' });
        assert.equal(refused.status, 403);
        assert.equal(code(refused), 'SIGNUP_CLOSED');
      } finally {
        await closed.close();
      }
    });

    it('the operator lists accounts and changes plans; the change applies at the next request', async () => {
      const adminAccount = await createAccount(server.services.database, server.services.clock, {
        email: `admin-${dialect}@example.com`,
        plan: 'max',
        admin: true,
        password: 'admin-password-1',
      });
      const admin = await logIn(server, adminAccount.email, 'admin-password-1');
      const user = await signUp(server, `upgrade-${dialect}@example.com`);
      const key = (await user.post('/dashboard-api/keys', { name: 'k' })).body.data.key;
      assert.equal(code(await new Client(server.url, key).get('/api/account')), 'PLAN_NO_API_ACCESS');
      const found = await admin.get(`/dashboard-api/admin/accounts?q=upgrade-${dialect}`);
      assert.equal(found.body.data.accounts.length, 1);
      const target = found.body.data.accounts[0];
      assert.equal(target.plan, 'free');
      assert.equal(target.activeKeys, 1);
      const bad = await admin.request('PATCH', `/dashboard-api/admin/accounts/${target.accountId}`, { json: { plan: 'platinum' } });
      assert.equal(code(bad), 'VALIDATION_ERROR');
      const changed = await admin.request('PATCH', `/dashboard-api/admin/accounts/${target.accountId}`, { json: { plan: 'pro' } });
      assert.equal(changed.status, 200);
      assert.equal(changed.body.data.plan, 'pro');
      assert.equal((await new Client(server.url, key).get('/api/account')).body.data.plan, 'pro');
      const queue = await admin.get('/dashboard-api/admin/queue');
      assert.equal(typeof queue.body.data.queued, 'number');
      assert.ok(Array.isArray(queue.body.data.recentFailures));
    });

    it('the playground reads every job kind and its schema from the registry', async () => {
      const user = await signUp(server, `ops-${dialect}@example.com`);
      const { OPERATIONS } = await import('../../src/operations/registry.js');
      const { singleBodySchema, batchBodySchema } = await import('../../src/http/schemas.js');
      const response = await user.get('/dashboard-api/operations');
      assert.equal(response.status, 200);
      const operations = response.body.data.operations as { kind: string; body: unknown; batchBody: unknown; reencodes: boolean }[];
      assert.deepEqual(
        operations.map((o) => o.kind),
        OPERATIONS.map((o) => o.kind),
      );
      for (const op of OPERATIONS) {
        const served = operations.find((o) => o.kind === op.kind)!;
        assert.deepEqual(served.body, JSON.parse(JSON.stringify(singleBodySchema(op))));
        assert.deepEqual(served.batchBody, op.batch ? JSON.parse(JSON.stringify(batchBodySchema(op))) : null);
      }
      // Savings are shown for the kinds that only re-encode: derived from the modules, not listed.
      const reencoding = operations.filter((o) => o.reencodes).map((o) => o.kind);
      assert.deepEqual(reencoding, ['compress', 'convert']);
    });
  });
}

describe('dashboard security (no database dependence)', () => {
  it('throttles password guessing per email, and lets the owner in after the window', async () => {
    const clock = new ManualClock();
    const server = await startServer({ dialect: 'sqlite', workers: 0, clock, env: { SIGNUP_MODE: 'open' } });
    try {
      await signUp(server, 'victim@example.com', 'the-right-password');
      for (let i = 0; i < 10; i++) {
        const wrong = await new Client(server.url).post('/auth/login', { email: 'victim@example.com', password: `guess-${i}` });
        assert.equal(wrong.status, 401, `attempt ${i + 1}`);
        assert.equal(code(wrong), 'INVALID_CREDENTIALS');
      }
      const blocked = await new Client(server.url).post('/auth/login', { email: 'Victim@Example.com', password: 'the-right-password' });
      assert.equal(blocked.status, 429);
      assert.equal(code(blocked), 'RATE_LIMITED');
      assert.ok(Number(blocked.headers.get('retry-after')) > 0);
      // Unknown emails answer exactly like wrong passwords.
      const unknown = await new Client(server.url).post('/auth/login', { email: 'nobody@example.com', password: 'whatever' });
      assert.equal(code(unknown), 'INVALID_CREDENTIALS');
      clock.advance(15 * 60_000);
      await logIn(server, 'victim@example.com', 'the-right-password');
    } finally {
      await server.close();
    }
  });

  it('sessions share the plan’s rate limit, per session, for what changes something', async () => {
    const server = await startServer({ dialect: 'sqlite', workers: 0, env: { SIGNUP_MODE: 'open' }, plans: { free: { requestsPerSecond: 3 } } });
    try {
      const user = await signUp(server, 'busy@example.com');
      // Reads have the dashboard's own budget (dashboard-traffic.test.ts); writes have the plan's.
      const responses = await Promise.all(Array.from({ length: 10 }, () => user.delete('/api/files/file_doesnotexist0000000000')));
      const limited = responses.filter((r) => r.status === 429);
      assert.ok(limited.length >= 4, `${limited.length} of 10 refused`);
      assert.equal(code(limited[0]!), 'RATE_LIMITED');
      assert.ok(limited[0]!.headers.get('retry-after'));
    } finally {
      await server.close();
    }
  });

  it('behind https the session cookie is Secure', async () => {
    const server = await startServer({ dialect: 'sqlite', workers: 0, env: { SIGNUP_MODE: 'open', PUBLIC_URL: 'https://images.example.com' } });
    try {
      const response = await new Client(server.url).post('/auth/signup', { email: 'tls@example.com', password: 'a-good-password' });
      assert.match(response.headers.get('set-cookie') ?? '', /; Secure/);
    } finally {
      await server.close();
    }
  });

  it(
    'serves the dashboard with a strict CSP, and only its own pages fall back to index.html',
    { skip: !fs.existsSync(path.join(REPO_ROOT, 'web', 'dist', 'index.html')) && 'web/dist is not built' },
    async () => {
      const server = await startServer({ dialect: 'sqlite', workers: 0 });
      try {
        for (const page of ['/', '/login', '/files', '/tasks/task_anything', '/playground', '/admin']) {
          const response = await fetch(server.url + page);
          assert.equal(response.status, 200, page);
          assert.match(response.headers.get('content-type') ?? '', /^text\/html/);
          const csp = response.headers.get('content-security-policy') ?? '';
          for (const directive of [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
            "base-uri 'none'",
          ]) {
            assert.ok(csp.includes(directive), `${page}: ${directive} in ${csp}`);
          }
          assert.doesNotMatch(csp, /unsafe|https?:|\*/);
          assert.equal(response.headers.get('x-frame-options'), 'DENY');
          assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
          const html = await response.text();
          assert.doesNotMatch(html, /<script(?![^>]*\bsrc="\/assets\/)[^>]*>/, 'no inline or external script');
          assert.doesNotMatch(html, /https?:\/\//, 'nothing from another origin');
        }
        const html = await (await fetch(server.url + '/')).text();
        const script = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1]!;
        const asset = await fetch(server.url + script);
        assert.equal(asset.status, 200);
        assert.match(asset.headers.get('cache-control') ?? '', /immutable/);
        assert.ok(asset.headers.get('content-security-policy'));
        // Everything else keeps its meaning.
        for (const route of [
          '/api/files',
          '/api/nope',
          '/nope',
          '/openapi.json/x',
          '/uploads/upl_x',
          '/healthzz',
          '/assets/../package.json',
          '/assets/nope.js',
        ]) {
          const { response } = await apiFetch(server.url + route);
          assert.notEqual(response.status, 200, route);
          assert.match(response.headers.get('content-type') ?? '', /application\/json/, `${route} answers JSON, not the app`);
        }
        assert.equal((await fetch(server.url + '/healthz')).status, 200);
        assert.equal((await fetch(server.url + '/openapi.json')).status, 200);
        const openapi = await (await fetch(server.url + '/openapi.json')).json();
        assert.ok(
          !Object.keys(openapi.paths).some((p: string) => p.startsWith('/auth') || p.startsWith('/dashboard-api')),
          'dashboard routes are not part of the public API document',
        );
      } finally {
        await server.close();
      }
    },
  );
});
