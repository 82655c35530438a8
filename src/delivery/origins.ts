// Origins: where an account's delivery URLs may fetch sources from (`o/{name}/{path}` →
// `baseUrl + path`), and the objects fetched from them, kept in storage under `origins/` (never
// counted in the account's storageBytes) and revalidated after ORIGIN_CACHE_SECONDS.
import { sql, type RawBuilder } from 'kysely';
import type { Database, Tx } from '../db/database.js';
import { isUniqueViolation } from '../db/database.js';
import { AppError, notFound } from '../errors.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';
import { lockAccount } from '../accounts/quota.js';

export interface Origin {
  id: string;
  name: string;
  baseUrl: string;
}

type Row = { id: string; name: string; base_url: string; created_at: number };

const originToApi = (row: Row) => ({ name: row.name, baseUrl: row.base_url, createdAt: iso(row.created_at) });

/** Creates an origin, at most `limit` per account (counted under the account's lock): else 403 ORIGIN_LIMIT_EXCEEDED. */
export async function createOrigin(
  database: Database,
  tx: Tx,
  accountId: string,
  input: { name: string; baseUrl: string },
  limit: number,
  now: number,
) {
  {
    await lockAccount(database, tx, accountId);
    const { n } = await tx
      .selectFrom('origins')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('account_id', '=', accountId)
      .executeTakeFirstOrThrow();
    if (Number(n) >= limit) {
      throw new AppError('ORIGIN_LIMIT_EXCEEDED', `The plan allows ${limit} origin(s); delete one first`, { limit, used: Number(n) });
    }
    const row = { id: newId('org'), account_id: accountId, name: input.name, base_url: input.baseUrl, created_at: now };
    try {
      await tx.insertInto('origins').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new AppError('VALIDATION_ERROR', `name: an origin named "${input.name}" exists already`, {
          fields: [{ field: 'name', message: 'an origin of this name exists already' }],
        });
      }
      throw err;
    }
    return originToApi(row);
  }
}

export async function listOrigins(database: Database, accountId: string) {
  const rows = await database.db.selectFrom('origins').selectAll().where('account_id', '=', accountId).orderBy('name').execute();
  return rows.map(originToApi);
}

/** Deletes the origin and forgets its fetched objects; answers their storage keys, for the caller to delete. */
export async function deleteOrigin(database: Database, accountId: string, name: string): Promise<{ id: string; objectKeys: string[] }> {
  return database.transaction(async (tx) => {
    const row = await tx.selectFrom('origins').select('id').where('account_id', '=', accountId).where('name', '=', name).executeTakeFirst();
    if (!row) throw notFound('Origin');
    const objects = await tx.selectFrom('origin_objects').select('storage_key').where('origin_id', '=', row.id).execute();
    await tx.deleteFrom('origin_objects').where('origin_id', '=', row.id).execute();
    await tx.deleteFrom('origins').where('id', '=', row.id).execute();
    return { id: row.id, objectKeys: objects.map((o) => o.storage_key) };
  });
}

export async function findOrigin(database: Database, accountId: string, name: string): Promise<Origin | undefined> {
  const row = await database.db
    .selectFrom('origins')
    .select(['id', 'name', 'base_url'])
    .where('account_id', '=', accountId)
    .where('name', '=', name)
    .executeTakeFirst();
  return row ? { id: row.id, name: row.name, baseUrl: row.base_url } : undefined;
}

export interface OriginObject {
  storageKey: string;
  format: string;
  bytes: number;
  contentHash: string;
  etag: string | null;
  lastModified: string | null;
  checkedAt: number;
}

export async function findOriginObject(database: Database, originId: string, path: string): Promise<OriginObject | undefined> {
  const row = await database.db
    .selectFrom('origin_objects')
    .selectAll()
    .where('origin_id', '=', originId)
    .where('path', '=', path)
    .executeTakeFirst();
  return row
    ? {
        storageKey: row.storage_key,
        format: row.format,
        bytes: Number(row.bytes),
        contentHash: row.content_hash,
        etag: row.etag,
        lastModified: row.last_modified,
        checkedAt: Number(row.checked_at),
      }
    : undefined;
}

/** Records what was fetched (or confirmed by a 304), replacing what was kept. */
export async function saveOriginObject(database: Database, originId: string, path: string, object: OriginObject): Promise<void> {
  const values = {
    storage_key: object.storageKey,
    format: object.format,
    bytes: object.bytes,
    content_hash: object.contentHash,
    etag: object.etag,
    last_modified: object.lastModified,
    checked_at: object.checkedAt,
  };
  await database.db
    .insertInto('origin_objects')
    .values({ origin_id: originId, path, ...values })
    .onConflict((oc) => oc.columns(['origin_id', 'path']).doUpdateSet(values))
    .execute();
}

/** Forgets a kept object the origin no longer has (it answered 404). */
export async function forgetOriginObject(database: Database, originId: string, path: string): Promise<void> {
  await database.db.deleteFrom('origin_objects').where('origin_id', '=', originId).where('path', '=', path).execute();
}

/**
 * "The origin still exists" as a condition for another module's statement (the render cache's
 * store), as fileIsLive is for files: share-locked on PostgreSQL.
 */
export function originExists(database: Database, accountId: string, originId: string): RawBuilder<boolean> {
  const lock = database.rowLocks ? sql` for share` : sql``;
  return sql<boolean>`exists (select 1 from origins where id = ${originId} and account_id = ${accountId}${lock})`;
}
