// Two real API processes (`serve --role api`, from the sources) sharing one database, on every
// dialect: one key hammered through both is admitted at its rate limit, within 10 %, counted
// over whole windows of the servers' own clock; a key revoked, an account's plan changed, or an
// account disabled and enabled again, by another process applies to both within a second.
//
// Nothing here depends on where the wall clock's second boundaries fall: the windows are taken
// from the servers' own answers (a 429's `resetsAt`), and the one-second bounds are checked on
// requests sent after the change plus the bound — every such request must see it, however slow
// the machine is.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  KEY_CACHE_MS,
  createAccount,
  createApiKey,
  findAccountByEmail,
  listApiKeys,
  revokeApiKey,
  setDisabled,
  setPlan,
} from '../../src/accounts/accounts.js';
import { loadConfig } from '../../src/config.js';
import { createServices, type Services } from '../../src/services.js';
import { DIALECTS, freshDatabase, tempDir } from '../helpers.js';
import { freePort, startProc, stopProc, waitServing, type Proc } from './processes.js';

const LIMIT = 50; // the Max plan's requests per second here
const WINDOWS = 4;
const LANES_PER_PROCESS = 12;
/** The bound the service promises for a revocation or plan change made elsewhere. */
const APPLIES_WITHIN_MS = 1000;

interface Sent {
  api: number;
  sentAt: number;
  receivedAt: number;
  status: number;
  body: any;
}

async function send(url: string, key: string, api: number, route = '/api/account'): Promise<Sent> {
  const sentAt = Date.now();
  const response = await fetch(url + route, { headers: { 'x-api-key': key } });
  const body = await response.json();
  return { api, sentAt, receivedAt: Date.now(), status: response.status, body };
}

/** Sends from `lanes` loops per API process until `until()` says stop; every answer, in order. */
async function load(urls: string[], key: string, lanes: number, until: (sent: Sent[]) => boolean, route?: string): Promise<Sent[]> {
  const sent: Sent[] = [];
  await Promise.all(
    urls.flatMap((url, api) =>
      Array.from({ length: lanes }, async () => {
        while (!until(sent)) sent.push(await send(url, key, api, route));
      }),
    ),
  );
  return sent;
}

for (const dialect of DIALECTS) {
  describe(`rate limits and key changes across two API processes (${dialect})`, () => {
    let root: string;
    let database: { url: string; drop: () => Promise<void> };
    let services: Services;
    const apis: Proc[] = [];
    const urls: string[] = [];

    before(async () => {
      root = tempDir('imgapi-ratelimit-');
      database = await freshDatabase(dialect, root);
      const plansFile = path.join(root, 'plans.json');
      fs.writeFileSync(plansFile, JSON.stringify({ max: { requestsPerSecond: LIMIT }, pro: { requestsPerSecond: 100_000 } }));
      const envFor = (name: string, extra: Record<string, string> = {}): Record<string, string> => {
        const dataDir = path.join(root, name);
        fs.mkdirSync(dataDir, { recursive: true });
        return { DATA_DIR: dataDir, DATABASE_URL: database.url, PLANS_FILE: plansFile, LOG_LEVEL: 'warn', ...extra };
      };
      // This process is a third one on the same database: it migrates and makes the accounts,
      // then revokes and changes plans as the operator's CLI would.
      services = await createServices(loadConfig(envFor('operator')));
      for (const i of [1, 2]) {
        const port = await freePort();
        urls.push(`http://127.0.0.1:${port}`);
        apis.push(startProc(`api${i}`, ['serve', '--role', 'api'], envFor(`api${i}`, { PORT: String(port), HOST: '127.0.0.1' })));
      }
      await Promise.all(apis.map((api, i) => waitServing(api, urls[i]!)));
    });

    after(async () => {
      await Promise.all(apis.map((api) => stopProc(api)));
      await services?.close();
      await database?.drop();
      fs.rmSync(root, { recursive: true, force: true });
    });

    async function newKey(email: string, plan: 'pro' | 'max'): Promise<string> {
      const account = await createAccount(services.database, services.clock, { email, plan });
      return (await createApiKey(services.database, services.clock, account.id, 'test')).key;
    }

    it(`one key hammered through both processes is admitted ${LIMIT}/s within 10 %, in each of ${WINDOWS} windows`, async (t) => {
      const key = await newKey('hammer@example.com', 'max');
      // The first refusal names the end of the servers' current window: count from there.
      let start: number | undefined;
      const sent = await load(urls, key, LANES_PER_PROCESS, (sent) => {
        const last = sent.at(-1);
        if (start === undefined && last?.status === 429) start = Date.parse(last.body.error.details.resetsAt);
        return start !== undefined && (last?.sentAt ?? 0) >= start + WINDOWS * 1000;
      });
      assert.ok(start !== undefined);
      const first = start;
      for (const s of sent) assert.ok(s.status === 200 || s.status === 429, `${s.status}: ${JSON.stringify(s.body)}`);
      const meanMs = sent.reduce((sum, s) => sum + s.receivedAt - s.sentAt, 0) / sent.length;
      t.diagnostic(`${sent.length} requests, ${meanMs.toFixed(0)} ms each on average`);
      const inside: Sent[] = [];
      for (let w = 0; w < WINDOWS; w++) {
        const [from, to] = [first + w * 1000, first + (w + 1) * 1000];
        // Sent at or after the window began and answered before it ended: counted in it. In
        // flight across one of its edges: maybe counted in it, maybe in the neighbour.
        const within = sent.filter((s) => s.sentAt >= from && s.receivedAt < to);
        const edges = sent.filter((s) => s.sentAt < to && s.receivedAt >= from && !(s.sentAt >= from && s.receivedAt < to));
        const admitted = within.filter((s) => s.status === 200).length;
        const maybe = edges.filter((s) => s.status === 200).length;
        const summary = `window ${w + 1}: ${admitted} admitted (+${maybe} at its edges) of ${within.length} sent within it (+${edges.length} across its edges), limit ${LIMIT}`;
        t.diagnostic(summary);
        assert.ok(admitted <= LIMIT * 1.1, `too many: ${summary}`);
        // Whatever the machine's speed allowed to be asked, up to the limit, was admitted.
        assert.ok(admitted + maybe >= Math.min(LIMIT, within.length) * 0.9, `too few: ${summary}`);
        inside.push(...within);
      }
      for (const api of [0, 1])
        assert.ok(
          inside.some((s) => s.api === api && s.status === 200),
          `process ${api + 1} admitted nothing`,
        );
      // More was asked than allowed, so the limit did the refusing (and said so).
      const refused = sent.find((s) => s.status === 429)!;
      assert.equal(refused.body.error.code, 'RATE_LIMITED');
      assert.equal(refused.body.error.details.limit, LIMIT);
    });

    /**
     * Loads both processes with `key` while `change` runs (after 300 ms of load), until requests
     * have been sent for a while past the bound; the answers and when the change had committed.
     */
    async function duringChange(key: string, change: () => Promise<unknown>): Promise<{ sent: Sent[]; changedAt: number }> {
      let changedAt = 0;
      const loading = load(urls, key, 2, (sent) => changedAt > 0 && (sent.at(-1)?.sentAt ?? 0) > changedAt + APPLIES_WITHIN_MS + 500);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await change();
      changedAt = Date.now();
      return { sent: await loading, changedAt };
    }

    it('a key revoked by another process is refused by both within a second', async () => {
      const key = await newKey('revoke@example.com', 'pro');
      const account = (await findAccountByEmail(services.database, 'revoke@example.com'))!;
      const [row] = await listApiKeys(services.database, account.id);
      // Both processes know the key (and keep it in memory) before it is revoked.
      for (const url of urls) assert.equal((await send(url, key, 0)).status, 200);
      const { sent, changedAt } = await duringChange(key, () => revokeApiKey(services.database, services.clock, account.id, row!.id));
      assert.ok(KEY_CACHE_MS <= APPLIES_WITHIN_MS);
      const before = sent.filter((s) => s.receivedAt < changedAt);
      const late = sent.filter((s) => s.sentAt >= changedAt + APPLIES_WITHIN_MS);
      assert.ok(before.length > 0 && before.every((s) => s.status === 200), 'the key worked until it was revoked');
      for (const api of [0, 1])
        assert.ok(
          late.some((s) => s.api === api),
          `nothing was sent to process ${api + 1} after the bound`,
        );
      for (const s of late) {
        assert.equal(s.status, 401, `process ${s.api + 1}, ${s.sentAt - changedAt} ms after the revocation: ${JSON.stringify(s.body)}`);
        assert.equal(s.body.error.code, 'API_KEY_INVALID');
      }
      // Once a process has refused the key it never takes it again.
      for (const api of [0, 1]) {
        const answers = sent.filter((s) => s.api === api).sort((a, b) => a.sentAt - b.sentAt);
        const first = answers.findIndex((s) => s.status === 401);
        assert.ok(first >= 0);
        const refusedAt = answers[first]!.receivedAt;
        assert.ok(
          answers.every((s) => s.sentAt < refusedAt || s.status === 401),
          `process ${api + 1} took the key again after refusing it`,
        );
      }
    });

    it("an account's plan changed by another process applies on both within a second", async () => {
      const key = await newKey('plan@example.com', 'pro');
      const account = (await findAccountByEmail(services.database, 'plan@example.com'))!;
      for (const url of urls) assert.equal((await send(url, key, 0)).body.data.plan, 'pro');
      const { sent, changedAt } = await duringChange(key, () => setPlan(services.database, account.id, 'free'));
      const late = sent.filter((s) => s.sentAt >= changedAt + APPLIES_WITHIN_MS);
      for (const api of [0, 1])
        assert.ok(
          late.some((s) => s.api === api),
          `nothing was sent to process ${api + 1} after the bound`,
        );
      for (const s of late) {
        assert.equal(s.status, 403, `process ${s.api + 1}, ${s.sentAt - changedAt} ms after the change: ${JSON.stringify(s.body)}`);
        assert.equal(s.body.error.code, 'PLAN_NO_API_ACCESS');
      }
      assert.ok(sent.filter((s) => s.receivedAt < changedAt).every((s) => s.status === 200 && s.body.data.plan === 'pro'));
    });

    it('an account disabled by another process is refused by both within a second, and enabled again the same way', async () => {
      const key = await newKey('disable@example.com', 'pro');
      const account = (await findAccountByEmail(services.database, 'disable@example.com'))!;
      for (const url of urls) assert.equal((await send(url, key, 0)).status, 200);
      const lateAfter = async (change: () => Promise<unknown>) => {
        const { sent, changedAt } = await duringChange(key, change);
        const late = sent.filter((s) => s.sentAt >= changedAt + APPLIES_WITHIN_MS);
        for (const api of [0, 1])
          assert.ok(
            late.some((s) => s.api === api),
            `nothing was sent to process ${api + 1} after the bound`,
          );
        return { late, changedAt };
      };
      const disabled = await lateAfter(() => setDisabled(services.database, services.clock, account.id, true));
      for (const s of disabled.late) {
        assert.equal(s.status, 403, `process ${s.api + 1}, ${s.sentAt - disabled.changedAt} ms after the disable: ${JSON.stringify(s.body)}`);
        assert.equal(s.body.error.code, 'ACCOUNT_DISABLED');
      }
      const enabled = await lateAfter(() => setDisabled(services.database, services.clock, account.id, false));
      for (const s of enabled.late) {
        assert.equal(s.status, 200, `process ${s.api + 1}, ${s.sentAt - enabled.changedAt} ms after enabling: ${JSON.stringify(s.body)}`);
      }
    });
  });
}
