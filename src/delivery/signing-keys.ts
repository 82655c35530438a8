// Signing keys of delivery URLs: `/r/{keyId}/{signature}/…` where the signature is base64url
// (no padding) of HMAC-SHA256(secret, "{transform}/{source}"), the key being the secret's text
// as issued (UTF-8), as for webhooks. Several keys per account, for rotation.
//
// The secret must be at hand to compute HMACs, so it is kept as issued (a hash would not do),
// as a webhook's secret is: the database is already what every credential of this service
// trusts. It is shown once, at creation, and never returned or logged after.
//
// Keys are looked up on every /r/ request, so they are served from memory for at most
// KEY_CACHE_MS (the same cache as API keys': accounts/key-cache.ts): a key deleted through this process stops
// working at once here (the cache is cleared); other processes are told at once where the
// database carries messages (PostgreSQL NOTIFY, `changed:signing-keys`: delivery.ts), and in
// any case stop within KEY_CACHE_MS.
import crypto from 'node:crypto';
import { keyCachePerDatabase } from '../accounts/key-cache.js';
import type { Database, Tx } from '../db/database.js';
import { notFound } from '../errors.js';
import { iso } from '../clock.js';
import { newId } from '../ids.js';

/** A signing key as the /r/ route needs it: its secret and its account's plan and state. */
export interface SigningKey {
  keyId: string;
  accountId: string;
  secret: string;
  plan: string;
  disabled: boolean;
}

/** Keys by id (key-cache.ts: at most KEY_CACHE_MS old, re-read in the background). */
const signingKeys = keyCachePerDatabase<SigningKey>();

/** Forgets every cached key of this process (a key was deleted, or an account changed). */
export function forgetSigningKeys(database: Database): void {
  signingKeys.clear(database);
  matched.clear();
}

const toApi = (row: { id: string; created_at: number }) => ({ keyId: row.id, createdAt: iso(row.created_at) });

/** Creates a key (in the caller's transaction: an idempotent POST); its secret is answered this once. */
export async function createSigningKey(tx: Tx, accountId: string, now: number) {
  const row = { id: newId('sk'), account_id: accountId, secret: crypto.randomBytes(32).toString('base64url'), created_at: now };
  await tx.insertInto('signing_keys').values(row).execute();
  return { ...toApi(row), secret: row.secret };
}

export async function listSigningKeys(database: Database, accountId: string) {
  const rows = await database.db
    .selectFrom('signing_keys')
    .select(['id', 'created_at'])
    .where('account_id', '=', accountId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
  return rows.map(toApi);
}

/** Deletes the key: its URLs answer 403 at once in this process, within KEY_CACHE_MS elsewhere. */
export async function deleteSigningKey(database: Database, accountId: string, keyId: string): Promise<void> {
  const result = await database.db.deleteFrom('signing_keys').where('id', '=', keyId).where('account_id', '=', accountId).executeTakeFirst();
  forgetSigningKeys(database);
  if (Number(result.numDeletedRows) === 0) throw notFound('Signing key');
}

async function readKey(database: Database, keyId: string): Promise<SigningKey | undefined> {
  const row = await database.db
    .selectFrom('signing_keys')
    .innerJoin('accounts', 'accounts.id', 'signing_keys.account_id')
    .select(['signing_keys.id', 'signing_keys.account_id', 'signing_keys.secret', 'accounts.plan', 'accounts.disabled_at'])
    .where('signing_keys.id', '=', keyId)
    .executeTakeFirst();
  if (!row) return undefined;
  return { keyId: row.id, accountId: row.account_id, secret: row.secret, plan: row.plan, disabled: row.disabled_at !== null };
}

/** The key named by a URL, or undefined (unknown or deleted); from memory for at most KEY_CACHE_MS. */
export function findSigningKey(database: Database, keyId: string): Promise<SigningKey | undefined> {
  return signingKeys.of(database).get(keyId, () => readKey(database, keyId));
}

/** The key named by a URL if memory holds it (a hit answered without the database), else undefined. */
export function knownSigningKey(database: Database, keyId: string): SigningKey | undefined {
  return signingKeys.of(database).peek(keyId, () => readKey(database, keyId));
}

/** base64url (no padding) of HMAC-SHA256(secret, signed). */
const signDeliveryPath = (secret: string, signed: string): string => crypto.createHmac('sha256', secret).update(signed).digest('base64url');

/**
 * The signatures of paths that matched already, by secret and path: a URL seen before is
 * compared with its stored signature (in constant time, as a new one is) instead of computing
 * the HMAC again, whose setup in OpenSSL is a tenth of a cached hit's CPU. Only signatures that
 * matched enter, so wrong ones cannot fill it, and the oldest go past MATCHED_ENTRIES. What it
 * tells by its timing is whether a path was requested with a valid signature lately, which only
 * someone who knows the path (a file's random id, or an origin's name and object path) can ask.
 */
const matched = new Map<string, Buffer>();
const MATCHED_ENTRIES = 10_000;
/** Longer paths are not kept: the memo stays under ~6 MB however long the URLs an account signs. */
const MATCHED_PATH_CHARS = 512;

/** Whether `signature` is the HMAC of `signed` under `secret`, compared in constant time. */
export function signatureMatches(secret: string, signed: string, signature: string): boolean {
  const memo = signed.length <= MATCHED_PATH_CHARS ? `${secret}\n${signed}` : undefined;
  const kept = memo === undefined ? undefined : matched.get(memo);
  const expected = kept ?? Buffer.from(signDeliveryPath(secret, signed));
  const given = Buffer.from(signature);
  // timingSafeEqual needs equal lengths; the length of a valid signature (43) is public.
  const matches = given.length === expected.length && crypto.timingSafeEqual(given, expected);
  if (matches && memo !== undefined && kept === undefined) {
    if (matched.size >= MATCHED_ENTRIES) matched.delete(matched.keys().next().value!);
    matched.set(memo, expected);
  }
  return matches;
}
