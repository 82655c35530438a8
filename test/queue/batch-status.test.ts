// A batch's overall status from its tasks' counts: the rule the Batch schema documents.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { batchStatus } from '../../src/tasks/view.js';

const counts = (c: Partial<Record<'queued' | 'processing' | 'completed' | 'failed' | 'canceled', number>>) => ({
  queued: 0,
  processing: 0,
  completed: 0,
  failed: 0,
  canceled: 0,
  ...c,
});
const total = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0);

describe('batch status', () => {
  for (const [c, expected] of [
    [counts({ queued: 3 }), 'queued'],
    [counts({ queued: 2, processing: 1 }), 'processing'],
    [counts({ queued: 2, completed: 1 }), 'processing'],
    [counts({ processing: 1, failed: 2 }), 'processing'],
    [counts({ completed: 3 }), 'completed'],
    [counts({ failed: 3 }), 'failed'],
    [counts({ canceled: 3 }), 'canceled'],
    [counts({ completed: 2, failed: 1 }), 'partial'],
    [counts({ completed: 2, canceled: 1 }), 'partial'],
    [counts({ failed: 1, canceled: 1 }), 'partial'],
  ] as const) {
    it(`${JSON.stringify(c)} → ${expected}`, () => assert.equal(batchStatus(c, total(c)), expected));
  }
});
