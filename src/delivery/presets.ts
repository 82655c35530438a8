// Presets: named transforms of an account, used in delivery URLs as `p:name`. A public one may
// be used unsigned (`_`) when it is the URL's whole transform. Its stored transform is
// normalised (transform.ts); a change or deletion makes its old renders unreachable at once,
// because the expanded transform is part of every render's cache key, and purges them.
import type { Database, Tx } from '../db/database.js';
import { isUniqueViolation } from '../db/database.js';
import { AppError, notFound } from '../errors.js';
import { iso } from '../clock.js';
import { parsePairs, type Pairs } from './transform.js';

export interface Preset {
  name: string;
  transform: string;
  public: boolean;
  pairs: Pairs;
}

type Row = { name: string; transform: string; public: number; created_at: number; updated_at: number };

export const presetToApi = (row: Row) => ({
  name: row.name,
  transform: row.transform,
  public: row.public === 1,
  createdAt: iso(row.created_at),
  updatedAt: iso(row.updated_at),
});

/** Creates a preset (in the caller's transaction: an idempotent POST); `transform` is normalised already. */
export async function createPreset(tx: Tx, accountId: string, input: { name: string; transform: string; public: boolean }, now: number) {
  const row = { account_id: accountId, name: input.name, transform: input.transform, public: input.public ? 1 : 0, created_at: now, updated_at: now };
  const taken = () =>
    new AppError('VALIDATION_ERROR', `name: a preset named "${input.name}" exists already; PUT /api/presets/${input.name} changes it`, {
      fields: [{ field: 'name', message: 'a preset of this name exists already' }],
    });
  const exists = await tx.selectFrom('presets').select('name').where('account_id', '=', accountId).where('name', '=', input.name).executeTakeFirst();
  if (exists) throw taken();
  try {
    await tx.insertInto('presets').values(row).execute();
  } catch (err) {
    throw isUniqueViolation(err) ? taken() : err;
  }
  return presetToApi(row);
}

export async function listPresets(database: Database, accountId: string) {
  const rows = await database.db.selectFrom('presets').selectAll().where('account_id', '=', accountId).orderBy('name').execute();
  return rows.map(presetToApi);
}

export async function updatePreset(database: Database, accountId: string, name: string, input: { transform: string; public?: boolean }, now: number) {
  const result = await database.db
    .updateTable('presets')
    .set({ transform: input.transform, ...(input.public === undefined ? {} : { public: input.public ? 1 : 0 }), updated_at: now })
    .where('account_id', '=', accountId)
    .where('name', '=', name)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) === 0) throw notFound('Preset');
  const row = await database.db
    .selectFrom('presets')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('name', '=', name)
    .executeTakeFirstOrThrow();
  return presetToApi(row);
}

export async function deletePreset(database: Database, accountId: string, name: string): Promise<void> {
  const result = await database.db.deleteFrom('presets').where('account_id', '=', accountId).where('name', '=', name).executeTakeFirst();
  if (Number(result.numDeletedRows) === 0) throw notFound('Preset');
}

/** The account's preset, or undefined. */
export async function findPreset(database: Database, accountId: string, name: string): Promise<Preset | undefined> {
  const row = await database.db
    .selectFrom('presets')
    .select(['name', 'transform', 'public'])
    .where('account_id', '=', accountId)
    .where('name', '=', name)
    .executeTakeFirst();
  return row ? { name: row.name, transform: row.transform, public: row.public === 1, pairs: parsePairs(row.transform) } : undefined;
}
