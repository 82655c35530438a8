// The storage invariant of API.md, read in one statement (one snapshot, on either dialect): an
// account's storage_used equals the sizes of its live files plus its open reservations
// (presigned uploads not yet confirmed).
import { sql, type Kysely } from 'kysely';
import type { DB } from '../../src/db/schema.js';

export interface StorageLedger {
  accountId: string;
  used: number;
  live: number;
  reserved: number;
}

export async function storageLedger(db: Kysely<DB>): Promise<StorageLedger[]> {
  const rows = await db
    .selectFrom('accounts as a')
    .select([
      'a.id',
      'a.storage_used',
      sql<string>`COALESCE((SELECT SUM(f.size) FROM files f WHERE f.account_id = a.id AND f.deleted_at IS NULL), 0)`.as('live'),
      sql<string>`COALESCE((SELECT SUM(u.size) FROM uploads u WHERE u.account_id = a.id AND u.status = 'pending'), 0)`.as('reserved'),
    ])
    .orderBy('a.id')
    .execute();
  return rows.map((r) => ({ accountId: r.id, used: Number(r.storage_used), live: Number(r.live), reserved: Number(r.reserved) }));
}

/** The accounts whose counter is off, with the figures (empty when the invariant holds). */
export async function ledgerMismatches(db: Kysely<DB>): Promise<StorageLedger[]> {
  return (await storageLedger(db)).filter((a) => a.used !== a.live + a.reserved);
}

/** A small seeded generator (mulberry32), so a failing random run can be replayed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
