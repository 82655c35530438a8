// Disabling an account from the operator page, over plain HTTP on every dialect: a disabled
// account's keys answer 403 ACCOUNT_DISABLED, its dashboard sessions end and its login is refused;
// enabling it again restores all three. Only an administrator may do it, and not to themselves.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { Client, DIALECTS, SessionClient, startServer, type TestServer } from '../helpers.js';

const PASSWORD = 'a-good-password';

for (const dialect of DIALECTS) {
  describe(`disabling an account (${dialect})`, () => {
    let server: TestServer;
    let operator: SessionClient;
    let operatorId: string;
    let customerId: string;
    let customerEmail: string;
    let key: string;

    before(async () => {
      server = await startServer({ dialect, workers: 0 });
      const { database, clock } = server.services;
      const admin = await createAccount(database, clock, { email: `op-${dialect}@example.com`, plan: 'max', admin: true, password: PASSWORD });
      operatorId = admin.id;
      customerEmail = `customer-${dialect}@example.com`;
      const customer = await createAccount(database, clock, { email: customerEmail, plan: 'pro', password: PASSWORD });
      customerId = customer.id;
      key = (await createApiKey(database, clock, customer.id, 'ci')).key;
      operator = new SessionClient(server.url);
      assert.equal((await operator.login(admin.email, PASSWORD)).status, 200);
    });
    after(async () => {
      await server?.close();
    });

    const setDisabled = (session: SessionClient, accountId: string, disabled: boolean) =>
      session.patch(`/dashboard-api/admin/accounts/${accountId}`, { disabled });

    it('refuses the key, ends the sessions and refuses the login; enabling restores all three', async () => {
      const api = new Client(server.url, key);
      assert.equal((await api.get('/api/account')).status, 200);
      const customer = new SessionClient(server.url);
      assert.equal((await customer.login(customerEmail, PASSWORD)).status, 200);
      assert.equal((await customer.get('/api/account')).status, 200);

      const disabled = await setDisabled(operator, customerId, true);
      assert.equal(disabled.status, 200, JSON.stringify(disabled.body));
      assert.equal(disabled.body.data.accountId, customerId);
      assert.equal(typeof disabled.body.data.disabledAt, 'string');

      const refused = await api.get('/api/account');
      assert.equal(refused.status, 403);
      assert.equal(refused.body.error.code, 'ACCOUNT_DISABLED');
      assert.match(refused.body.error.message, /disabled by the operator/);
      // The session is gone: the dashboard's calls are unauthenticated and /auth/session says so.
      assert.equal((await customer.get('/api/account')).status, 401);
      assert.equal((await customer.get('/dashboard-api/keys')).status, 401);
      assert.equal((await customer.get('/auth/session')).body.data.authenticated, false);
      // The right password opens nothing, with a message that says why; a wrong one says only that.
      const login = await new SessionClient(server.url).login(customerEmail, PASSWORD);
      assert.equal(login.status, 403);
      assert.equal(login.body.error.code, 'ACCOUNT_DISABLED');
      const wrong = await new SessionClient(server.url).post('/auth/login', { email: customerEmail, password: 'not-the-password' });
      assert.equal(wrong.status, 401);
      assert.equal(wrong.body.error.code, 'INVALID_CREDENTIALS');

      const list = await operator.get(`/dashboard-api/admin/accounts?q=${encodeURIComponent(customerEmail)}`);
      assert.equal(list.status, 200);
      assert.equal(typeof list.body.data.accounts[0].disabledAt, 'string');

      const enabled = await setDisabled(operator, customerId, false);
      assert.equal(enabled.status, 200, JSON.stringify(enabled.body));
      assert.equal(enabled.body.data.disabledAt, null);
      assert.equal((await api.get('/api/account')).status, 200);
      const again = new SessionClient(server.url);
      assert.equal((await again.login(customerEmail, PASSWORD)).status, 200);
      assert.equal((await again.get('/api/account')).status, 200);
      const relisted = await operator.get(`/dashboard-api/admin/accounts?q=${encodeURIComponent(customerEmail)}`);
      assert.equal(relisted.body.data.accounts[0].disabledAt, null);
    });

    it('only an administrator may disable, and never their own account', async () => {
      const customer = new SessionClient(server.url);
      assert.equal((await customer.login(customerEmail, PASSWORD)).status, 200);
      const forbidden = await setDisabled(customer, operatorId, true);
      assert.equal(forbidden.status, 403);
      assert.equal(forbidden.body.error.code, 'FORBIDDEN');

      const self = await setDisabled(operator, operatorId, true);
      assert.equal(self.status, 403);
      assert.equal(self.body.error.code, 'FORBIDDEN');
      assert.match(self.body.error.message, /cannot disable their own account/);
      // Nothing changed: the operator is still signed in, the customer too.
      assert.equal((await operator.get('/dashboard-api/admin/queue')).status, 200);
      assert.equal((await customer.get('/api/account')).status, 200);

      const empty = await operator.patch(`/dashboard-api/admin/accounts/${customerId}`, {});
      assert.equal(empty.status, 400);
      assert.equal(empty.body.error.code, 'VALIDATION_ERROR');
    });
  });
}
