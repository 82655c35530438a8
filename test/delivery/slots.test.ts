// RenderSlots alone: a wait for a slot is bounded (RENDER_QUEUE_SECONDS), a released slot goes
// straight to the next in line, and a refusal says when to retry.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RenderSlots } from '../../src/delivery/admission.js';
import { AppError } from '../../src/errors.js';

describe('render slots', () => {
  it('a waiter gets the slot released within its wait; past the wait it is refused with RENDER_BUSY and Retry-After', async () => {
    const slots = new RenderSlots(1, 200);
    await slots.acquire();
    const waiting = slots.acquire();
    slots.release();
    await waiting; // handed over, not refused
    const refused = await slots.acquire().then(
      () => undefined,
      (err: unknown) => err,
    );
    assert.ok(refused instanceof AppError);
    assert.equal(refused.code, 'RENDER_BUSY');
    assert.equal(refused.status, 503);
    assert.equal(refused.headers?.['retry-after'], '1');
    slots.release();
    await slots.acquire(); // free again
  });

  it('with no wait allowed, a full house is refused at once', async () => {
    const slots = new RenderSlots(2, 0);
    await slots.acquire();
    await slots.acquire();
    await assert.rejects(slots.acquire(), (err: unknown) => err instanceof AppError && err.code === 'RENDER_BUSY');
  });
});
