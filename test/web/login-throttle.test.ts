// Password guessing never locks the owner out. Failed logins are counted in the database per
// client address, per email and per (email, address): an address past its budget is refused
// for every email; an email past its budget is refused only to the addresses that failed for
// it, and a new address gets one attempt at a time, after a short delay.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { buildApp } from '../../src/http/app.js';
import { ATTEMPTS_PER_ADDRESS, FAILURES_PER_EMAIL, GUARDED_LOGIN_DELAY_MS } from '../../src/accounts/sessions.js';
import { ManualClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config.js';
import { createServices } from '../../src/services.js';
import { Client, DIALECTS, startServer, type ApiResponse, type TestServer } from '../helpers.js';

const code = (response: ApiResponse) => (response.body as { error?: { code?: string } })?.error?.code;

/** A login from `address` (the server trusts X-Forwarded-For), with how long it took. */
async function login(url: string, address: string, email: string, password: string): Promise<ApiResponse & { ms: number }> {
  const started = Date.now();
  const response = await new Client(url).post('/auth/login', { email, password }, { 'x-forwarded-for': address });
  return { ...response, ms: Date.now() - started };
}

for (const dialect of DIALECTS) {
  describe(`login throttle (${dialect})`, () => {
    let server: TestServer;
    const clock = new ManualClock();
    let accounts = 0;

    /** A fresh account with a password, signed up from its own address. */
    async function owner(): Promise<string> {
      const email = `owner${++accounts}@example.com`;
      const response = await new Client(server.url).post(
        '/auth/signup',
        { email, password: 'the-right-password' },
        { 'x-forwarded-for': `192.0.2.${accounts}` },
      );
      assert.equal(response.status, 201, JSON.stringify(response.body));
      return email;
    }

    before(async () => {
      server = await startServer({ dialect, workers: 0, clock, env: { SIGNUP_MODE: 'open', TRUST_PROXY: 'true' } });
    });
    after(() => server.close());

    it('ten wrong passwords from one address do not lock the owner out: a new address gets in, after a delay', async () => {
      const email = await owner();
      const attacker = '203.0.113.9';
      for (let i = 0; i < FAILURES_PER_EMAIL; i++) {
        const wrong = await login(server.url, attacker, email, `guess-${i}`);
        assert.equal(wrong.status, 401, `attempt ${i + 1}`);
        assert.ok(wrong.ms < GUARDED_LOGIN_DELAY_MS, 'no delay while the email is within its budget');
      }
      // The guessing address is refused now, even with the right password.
      const refused = await login(server.url, attacker, email.toUpperCase(), 'the-right-password');
      assert.equal(refused.status, 429);
      assert.equal(code(refused), 'RATE_LIMITED');
      assert.ok(Number(refused.headers.get('retry-after')) > 0);
      // The owner, from another address, gets in after the delay.
      const ownerIn = await login(server.url, '198.51.100.7', email, 'the-right-password');
      assert.equal(ownerIn.status, 200, JSON.stringify(ownerIn.body));
      assert.ok(ownerIn.ms >= GUARDED_LOGIN_DELAY_MS - 50, `${ownerIn.ms} ms`);
      assert.match(ownerIn.headers.get('set-cookie') ?? '', /^imgapi_session=/);
      // A wrong password from a new address waits as long (timing tells nothing) and then
      // that address is refused for this email too.
      const otherWrong = await login(server.url, '198.51.100.8', email, 'guess-x');
      assert.equal(otherWrong.status, 401);
      assert.ok(otherWrong.ms >= GUARDED_LOGIN_DELAY_MS - 50, `${otherWrong.ms} ms`);
      assert.equal((await login(server.url, '198.51.100.8', email, 'the-right-password')).status, 429);
      // The guessing address is refused only for this email.
      const other = await owner();
      assert.equal((await login(server.url, attacker, other, 'the-right-password')).status, 200);
      // After the window, the guessing address may try again.
      clock.advance(15 * 60_000);
      assert.equal((await login(server.url, attacker, email, 'the-right-password')).status, 200);
    });

    it('the window opens at the first failure: guesses either side of a quarter-hour edge count together', async () => {
      const email = await owner();
      const address = '203.0.113.60';
      const quarterHour = 15 * 60_000;
      clock.advance(quarterHour - (clock.now() % quarterHour) - 1000); // a second before a wall-clock edge
      for (let i = 0; i < FAILURES_PER_EMAIL; i++) {
        if (i === FAILURES_PER_EMAIL / 2) clock.advance(2000); // past the edge
        assert.equal((await login(server.url, address, email, `guess-${i}`)).status, 401);
      }
      assert.equal((await login(server.url, address, email, 'the-right-password')).status, 429);
      clock.advance(quarterHour);
      assert.equal((await login(server.url, address, email, 'the-right-password')).status, 200);
    });

    it('a new address on a guarded email gets one attempt at a time: parallel guesses are refused', async () => {
      const email = await owner();
      for (let i = 0; i < FAILURES_PER_EMAIL; i++) assert.equal((await login(server.url, '203.0.113.20', email, `guess-${i}`)).status, 401);
      const parallel = await Promise.all(Array.from({ length: 12 }, (_, i) => login(server.url, '203.0.113.21', email, `parallel-${i}`)));
      const statuses = parallel.map((r) => r.status).sort();
      assert.deepEqual(statuses, [401, ...Array(11).fill(429)], JSON.stringify(statuses));
    });

    it('an address past its budget is refused for every email; other addresses are not', async () => {
      const email = await owner();
      const spray = '203.0.113.30';
      // Few guesses per email (no email is guarded), many emails: the address's own budget binds.
      for (let sent = 0; sent < ATTEMPTS_PER_ADDRESS; sent += 20) {
        const batch = await Promise.all(
          Array.from({ length: 20 }, (_, i) => login(server.url, spray, `nobody${(sent + i) % 50}@example.com`, 'guess')),
        );
        assert.ok(
          batch.every((r) => r.status === 401),
          JSON.stringify(batch.map((r) => r.status)),
        );
      }
      const refused = await login(server.url, spray, email, 'the-right-password');
      assert.equal(refused.status, 429);
      assert.equal(code(refused), 'RATE_LIMITED');
      const elsewhere = await login(server.url, '198.51.100.30', email, 'the-right-password');
      assert.equal(elsewhere.status, 200);
      assert.ok(elsewhere.ms < GUARDED_LOGIN_DELAY_MS, 'no email was guarded');
    });

    it('a right password is no failure: repeated logins use up no budget', async () => {
      const email = await owner();
      for (let i = 0; i < FAILURES_PER_EMAIL + 5; i++) {
        const ok = await login(server.url, '198.51.100.40', email, 'the-right-password');
        assert.equal(ok.status, 200, `login ${i + 1}`);
        assert.ok(ok.ms < GUARDED_LOGIN_DELAY_MS);
      }
    });

    it('the counts live in the database: another API process sharing it refuses the same address', async () => {
      const email = await owner();
      for (let i = 0; i < FAILURES_PER_EMAIL; i++) assert.equal((await login(server.url, '203.0.113.50', email, `guess-${i}`)).status, 401);
      const config = loadConfig({
        DATA_DIR: server.dataDir,
        DATABASE_URL: server.databaseUrl,
        PLANS_FILE: path.join(server.dataDir, 'plans.json'),
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'silent',
        SIGNUP_MODE: 'open',
        TRUST_PROXY: 'true',
      });
      const services = await createServices(config, { clock, logger: pino({ level: 'silent' }) });
      const app = await buildApp(services);
      try {
        await app.listen({ port: 0, host: '127.0.0.1' });
        const address = app.server.address();
        const second = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
        assert.equal((await login(second, '203.0.113.50', email, 'the-right-password')).status, 429);
        const ownerIn = await login(second, '198.51.100.50', email, 'the-right-password');
        assert.equal(ownerIn.status, 200);
        assert.ok(ownerIn.ms >= GUARDED_LOGIN_DELAY_MS - 50, 'the second process knows the email is guarded');
      } finally {
        await app.close();
        await services.close();
      }
    });
  });
}
