// The idempotency store: the first response to a key is stored in the same transaction as the
// work it describes, so a repeat returns it and does nothing again. Only successes are stored:
// a refused request may be retried with the same key once the cause is fixed. Reading the
// Idempotency-Key header and fingerprinting a request are in src/http/idempotency.ts.
import type { Database, Tx } from './database.js';
import { isUniqueViolation } from './database.js';
import { AppError } from '../errors.js';

const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000;

export interface StoredResponse {
  statusCode: number;
  body: unknown;
  replayed: boolean;
}

/**
 * Runs `work` in a transaction unless `key` already answered this request. With no key it is a
 * plain transaction. Concurrent first requests race on the key's primary key: the loser's
 * transaction (and its work) rolls back and it replays the winner's response.
 */
export async function withIdempotency(
  database: Database,
  scope: {
    accountId: string;
    key: string | undefined;
    fingerprint: string;
    now: number;
    /**
     * `work` may run outside a transaction (no BEGIN, no COMMIT): with no key it gets the
     * database's handle, and `alone` true (it then sends one statement, or opens a transaction
     * of its own).
     */
    alone?: boolean;
  },
  work: (tx: Tx, alone: boolean) => Promise<{ statusCode: number; body: unknown }>,
): Promise<StoredResponse> {
  const { accountId, key, now } = scope;
  // A single statement is atomic by itself. `work` is typed for a transaction; it gets the
  // database's handle, which answers the same queries (Transaction adds nothing it uses).
  if (key === undefined && scope.alone) return { ...(await work(database.db as Tx, true)), replayed: false };
  for (let attempt = 0; ; attempt++) {
    try {
      return await database.transaction(async (tx) => {
        if (key !== undefined) {
          const existing = await tx
            .selectFrom('idempotency_keys')
            .selectAll()
            .where('account_id', '=', accountId)
            .where('key', '=', key)
            .executeTakeFirst();
          if (existing && existing.created_at > now - IDEMPOTENCY_WINDOW_MS) {
            if (existing.fingerprint !== scope.fingerprint) {
              // The contract's order of errors puts validation and not found / expired before this
              // conflict: what the new request would fail with first wins. Whatever it did is undone.
              await work(tx, false).catch((err: unknown) => {
                if (precedesConflict(err)) throw err;
              });
              throw new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with a different request');
            }
            return { statusCode: existing.status_code, body: JSON.parse(existing.response), replayed: true };
          }
          if (existing) await tx.deleteFrom('idempotency_keys').where('account_id', '=', accountId).where('key', '=', key).execute();
        }
        const response = await work(tx, false);
        if (key !== undefined) {
          await tx
            .insertInto('idempotency_keys')
            .values({
              account_id: accountId,
              key,
              fingerprint: scope.fingerprint,
              status_code: response.statusCode,
              response: JSON.stringify(response.body),
              created_at: now,
            })
            .execute();
        }
        return { ...response, replayed: false };
      });
    } catch (err) {
      if (key !== undefined && attempt < 3 && isUniqueViolation(err) && (await keyExists(database, accountId, key))) continue;
      throw err;
    }
  }
}

/** Validation (400), not found (404) and expired (410) come before a conflict in API.md's order. */
function precedesConflict(err: unknown): boolean {
  return err instanceof AppError && (err.status === 400 || err.status === 404 || err.status === 410);
}

async function keyExists(database: Database, accountId: string, key: string): Promise<boolean> {
  const row = await database.db
    .selectFrom('idempotency_keys')
    .select('key')
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .executeTakeFirst();
  return row !== undefined;
}

/** Forgets the responses older than the window: a key may then be used again. */
export async function pruneIdempotencyKeys(database: Database, now: number): Promise<void> {
  await database.db
    .deleteFrom('idempotency_keys')
    .where('created_at', '<', now - IDEMPOTENCY_WINDOW_MS)
    .execute();
}
