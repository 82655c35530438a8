// Idempotency-Key on POSTs: the first response to a key is stored in the same transaction as
// the work it describes, so a repeat returns it and does nothing again. Only successes are
// stored: a refused request may be retried with the same key once the cause is fixed.
import type { Database, Tx } from '../db/database.js';
import { isUniqueViolation } from '../db/database.js';
import { AppError } from '../errors.js';
import { sha256Hex } from '../ids.js';

export const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000;

export interface StoredResponse {
  statusCode: number;
  body: unknown;
  replayed: boolean;
}

export function readIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const key = Array.isArray(header) ? header[0]! : header;
  if (key.length === 0 || key.length > 255) {
    throw new AppError('VALIDATION_ERROR', 'Idempotency-Key must be 1 to 255 characters', {
      fields: [{ field: 'Idempotency-Key', message: 'must be 1 to 255 characters' }],
    });
  }
  return key;
}

/** A stable hash of what the request asks for: route and body with keys in sorted order. */
export function fingerprint(route: string, body: unknown): string {
  return sha256Hex(`${route}\n${canonicalJson(body)}`);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * Runs `work` in a transaction unless `key` already answered this request. With no key it is a
 * plain transaction. Concurrent first requests race on the key's primary key: the loser's
 * transaction (and its work) rolls back and it replays the winner's response.
 */
export async function withIdempotency(
  database: Database,
  scope: { accountId: string; key: string | undefined; fingerprint: string; now: number },
  work: (tx: Tx) => Promise<{ statusCode: number; body: unknown }>,
): Promise<StoredResponse> {
  const { accountId, key, now } = scope;
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
              throw new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used with a different request');
            }
            return { statusCode: existing.status_code, body: JSON.parse(existing.response), replayed: true };
          }
          if (existing) await tx.deleteFrom('idempotency_keys').where('account_id', '=', accountId).where('key', '=', key).execute();
        }
        const response = await work(tx);
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

async function keyExists(database: Database, accountId: string, key: string): Promise<boolean> {
  const row = await database.db
    .selectFrom('idempotency_keys')
    .select('key')
    .where('account_id', '=', accountId)
    .where('key', '=', key)
    .executeTakeFirst();
  return row !== undefined;
}
