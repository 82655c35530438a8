// The rate limiter without HTTP: two RateLimiter instances on one database stand for two API
// processes. Time is a clock the test sets, so every window is exact and nothing depends on
// the wall clock. (test/e2e/rate-limit-processes.test.ts runs the same against real processes.)
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Clock } from '../../src/clock.js';
import { RateLimiter } from '../../src/accounts/rate-limit.js';
import { DIALECTS, startServer, type TestServer } from '../helpers.js';

/** A clock that stands still until the test moves it. */
class StillClock implements Clock {
  constructor(public ms: number) {}
  now(): number {
    return this.ms;
  }
}

const SECOND = 1000;

for (const dialect of DIALECTS) {
  describe(`rate limiter across processes (${dialect})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startServer({ dialect, workers: 0 });
    });
    after(() => server.close());

    /** `n` requests of `subject`, spread over the limiters by `pick`, `inFlight` at a time. */
    async function hammer(
      limiters: RateLimiter[],
      subject: string,
      limit: number,
      n: number,
      pick = (i: number) => i % limiters.length,
      inFlight = 25,
      beforeEach = () => {},
    ) {
      const admitted = limiters.map(() => 0);
      let next = 0;
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (next < n) {
            const i = next++;
            const which = pick(i);
            beforeEach();
            const state = await limiters[which]!.take(subject, limit);
            if (!state.exceeded) admitted[which]!++;
            assert.equal(state.limit, limit);
            assert.ok(state.remaining >= 0 && state.remaining <= limit);
          }
        }),
      );
      return admitted;
    }

    it('two processes hammering one key admit the limit per window, within 10 %, and never more', async () => {
      const clock = new StillClock(1_800_000_000_000);
      const limiters = [new RateLimiter(server.services.database, clock), new RateLimiter(server.services.database, clock)];
      const limit = 1000;
      for (let window = 0; window < 5; window++) {
        const admitted = await hammer(limiters, 'key:hammered', limit, 3000);
        const total = admitted[0]! + admitted[1]!;
        assert.ok(total <= limit, `window ${window}: ${total} admitted, limit ${limit}`);
        assert.ok(total >= limit * 0.9, `window ${window}: only ${total} admitted of ${limit}`);
        assert.ok(
          admitted.every((a) => a > 0),
          `both processes admit: ${admitted.join(', ')}`,
        );
        clock.ms += SECOND;
      }
      // 15,000 requests cost the database a few dozen writes, not one each.
      const writes = limiters[0]!.reservations + limiters[1]!.reservations;
      assert.ok(writes < 15_000 / 20, `${writes} reservations for 15,000 requests`);
    });

    it('an uneven split (one process gets a tenth of the load) still admits within 10 % of the limit', async () => {
      const clock = new StillClock(1_800_000_100_000);
      const limiters = [new RateLimiter(server.services.database, clock), new RateLimiter(server.services.database, clock)];
      const limit = 400;
      for (let window = 0; window < 4; window++) {
        const admitted = await hammer(limiters, 'key:uneven', limit, 1200, (i) => (i % 10 === 0 ? 0 : 1));
        const total = admitted[0]! + admitted[1]!;
        assert.ok(total <= limit && total >= limit * 0.9, `window ${window}: ${total} admitted of ${limit} (${admitted.join(' + ')})`);
        clock.ms += SECOND;
      }
    });

    it('a small limit is exact across processes, and the window resets with the clock', async () => {
      const clock = new StillClock(1_800_000_200_000);
      const limiters = [new RateLimiter(server.services.database, clock), new RateLimiter(server.services.database, clock)];
      const admitted = await hammer(limiters, 'key:small', 3, 20);
      assert.equal(admitted[0]! + admitted[1]!, 3);
      const refused = await limiters[0]!.take('key:small', 3);
      assert.equal(refused.exceeded, true);
      assert.equal(refused.remaining, 0);
      assert.equal(refused.resetsAt, Math.floor(clock.ms / SECOND + 1) * SECOND);
      assert.ok(refused.reset >= 1);
      clock.ms += SECOND;
      assert.equal((await limiters[1]!.take('key:small', 3)).exceeded, false);
      // Another subject has its own budget.
      assert.equal((await limiters[0]!.take('key:other', 3)).exceeded, false);
    });

    it('hosts whose clocks differ by more than a window share the later one: neither starves, the limit holds', async () => {
      // The clocks run (a millisecond per request) so that a host told the window is spent asks
      // again after SPENT_RECHECK_MS, as it would in real time. Each round spans 600 ms of both
      // clocks, inside one second of each: the host ahead is 1.2 s ahead.
      const behindStart = 1_800_000_400_000;
      const aheadStart = behindStart + 1200;
      const ahead = new StillClock(aheadStart);
      const behind = new StillClock(behindStart);
      const limiters = [new RateLimiter(server.services.database, ahead), new RateLimiter(server.services.database, behind)];
      const limit = 200;
      const tick = () => {
        ahead.ms++;
        behind.ms++;
      };
      for (let window = 0; window < 4; window++) {
        ahead.ms = aheadStart + window * SECOND;
        behind.ms = behindStart + window * SECOND;
        const admitted = await hammer(limiters, 'key:skewed', limit, 600, undefined, 25, tick);
        const total = admitted[0]! + admitted[1]!;
        // What the lagging host admitted from its own, older window before it learnt of the
        // later one is one small batch at most.
        assert.ok(total <= limit * 1.1, `window ${window}: ${total} admitted, limit ${limit}`);
        assert.ok(
          admitted.every((a) => a > 0),
          `window ${window}: both hosts admit (${admitted.join(', ')})`,
        );
      }
    });

    it('a process alone on a key reserves ahead for the window (a few writes a second); one that joins shares from the next window on', async () => {
      const clock = new StillClock(1_800_000_500_000);
      const [alone, joining] = [new RateLimiter(server.services.database, clock), new RateLimiter(server.services.database, clock)];
      const limit = 100;
      // 60 requests a second, one at a time, through one process: all admitted. The first window
      // tells it it is alone; from the next on it reserves ahead.
      assert.deepEqual(await hammer([alone], 'key:alone', limit, 60, undefined, 1), [60]);
      clock.ms += SECOND;
      const before = alone.reservations;
      for (let window = 0; window < 3; window++) {
        assert.deepEqual(await hammer([alone], 'key:alone', limit, 60, undefined, 1), [60]);
        clock.ms += SECOND;
      }
      const writes = alone.reservations - before;
      assert.ok(writes <= 6, `${writes} reservations for 180 requests in 3 windows`);
      // Another process starts on the key: never more than the limit in a window; from the next
      // window on, both admit, and together the limit within 10 %.
      for (let window = 0; window < 3; window++) {
        const admitted = await hammer([alone, joining], 'key:alone', limit, 300);
        const total = admitted[0]! + admitted[1]!;
        assert.ok(total <= limit, `window ${window}: ${total} admitted, limit ${limit}`);
        if (window > 0) {
          assert.ok(total >= limit * 0.9, `window ${window}: only ${total} admitted of ${limit}`);
          assert.ok(
            admitted.every((a) => a > 0),
            `window ${window}: both processes admit (${admitted.join(', ')})`,
          );
        }
        clock.ms += SECOND;
      }
    });

    it('sporadic requests are never refused below the limit', async () => {
      const clock = new StillClock(1_800_000_300_000);
      const limiters = [new RateLimiter(server.services.database, clock), new RateLimiter(server.services.database, clock)];
      for (let window = 0; window < 3; window++) {
        // 50 requests a second against a limit of 100, alternating between the processes.
        const admitted = await hammer(limiters, 'key:sporadic', 100, 50, undefined, 1);
        assert.equal(admitted[0]! + admitted[1]!, 50);
        clock.ms += SECOND;
      }
    });
  });
}
