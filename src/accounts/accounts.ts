// Accounts and their plans; API keys stored only as hashes.
import crypto from 'node:crypto';
import { promisify } from 'node:util';
import { sql, type Selectable } from 'kysely';
import type { Clock } from '../clock.js';
import type { Database, Tx } from '../db/database.js';
import { isUniqueViolation } from '../db/database.js';
import { olderThan, pageOf } from '../db/pagination.js';
import type { AccountsTable } from '../db/schema.js';
import { AppError } from '../errors.js';
import { newId, sha256Hex } from '../ids.js';
import { isPlanName, PLAN_NAMES, type PlanName } from './plans.js';
import { periods } from './quota.js';
import { keyCachePerDatabase } from './key-cache.js';

export type Account = Selectable<AccountsTable>;

const scrypt = promisify(crypto.scrypt) as (password: string, salt: Buffer, keylen: number, options: crypto.ScryptOptions) => Promise<Buffer>;
const SCRYPT = { N: 16384, r: 8, p: 1, keylen: 32 };

export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(16);
  const hash = await scrypt(password, salt, SCRYPT.keylen, { N: SCRYPT.N, r: SCRYPT.r, p: SCRYPT.p });
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const parts = stored?.split('$');
  if (!parts || parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [, N, r, p, salt, hash] = parts as [string, string, string, string, string, string];
  const expected = Buffer.from(hash, 'base64url');
  const actual = await scrypt(password, Buffer.from(salt, 'base64url'), expected.length, { N: Number(N), r: Number(r), p: Number(p) });
  return crypto.timingSafeEqual(actual, expected);
}

export const normaliseEmail = (email: string): string => email.trim().toLowerCase();

export function checkPlan(plan: string): PlanName {
  if (!isPlanName(plan)) throw new AppError('VALIDATION_ERROR', `Unknown plan "${plan}"; plans are ${PLAN_NAMES.join(', ')}`);
  return plan;
}

export async function createAccount(
  database: Database,
  clock: Clock,
  input: { email: string; plan: PlanName; admin?: boolean; password?: string },
): Promise<Account> {
  const email = normaliseEmail(input.email);
  if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw new AppError('VALIDATION_ERROR', `"${input.email}" is not an email address`);
  const row = {
    id: newId('acct'),
    email,
    plan: input.plan,
    is_admin: input.admin ? 1 : 0,
    password_hash: input.password ? await hashPassword(input.password) : null,
    created_at: clock.now(),
  };
  try {
    await database.db.insertInto('accounts').values(row).execute();
  } catch (err) {
    if (isUniqueViolation(err)) throw new AppError('VALIDATION_ERROR', `An account for ${email} already exists`);
    throw err;
  }
  return (await findAccountById(database, row.id))!;
}

export async function findAccountByEmail(database: Database, email: string): Promise<Account | undefined> {
  return database.db.selectFrom('accounts').selectAll().where('email', '=', normaliseEmail(email)).executeTakeFirst();
}

export async function findAccountById(database: Database, id: string): Promise<Account | undefined> {
  return database.db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function setPlan(database: Database, accountId: string, plan: PlanName): Promise<void> {
  await database.db.updateTable('accounts').set({ plan }).where('id', '=', accountId).execute();
  forgetApiKeys(database);
}

/**
 * Disables the account (`disabled` true) or enables it again. While disabled its API keys answer
 * 403 ACCOUNT_DISABLED, its sessions are ended and its logins refused; its files, keys and tasks
 * are kept (queued tasks still run), and enabling it restores everything as it was. Through this
 * database handle the change applies to the next request; other processes serve a key from memory
 * for at most KEY_CACHE_MS (0.9 s) before they see it. The caller ends the account's sessions.
 */
/**
 * Bumps the account's `webhooks_version`, in the transaction that changes its webhook endpoints
 * (taking the account's row lock, first in quota.ts's lock order): every process's copy of the
 * endpoints (src/webhooks/store.ts, subscriptionsOf) is stale from its commit on.
 */
export async function markWebhooksChanged(tx: Tx, accountId: string): Promise<void> {
  await tx
    .updateTable('accounts')
    .set({ webhooks_version: sql<number>`webhooks_version + 1` })
    .where('id', '=', accountId)
    .execute();
}

export async function setDisabled(database: Database, clock: Clock, accountId: string, disabled: boolean): Promise<void> {
  await database.db
    .updateTable('accounts')
    .set({ disabled_at: disabled ? clock.now() : null })
    .where('id', '=', accountId)
    .execute();
  forgetApiKeys(database);
}

/** Sets the dashboard password (the caller ends the account's sessions). */
export async function setPassword(database: Database, accountId: string, password: string): Promise<void> {
  await database.db
    .updateTable('accounts')
    .set({ password_hash: await hashPassword(password) })
    .where('id', '=', accountId)
    .execute();
}

/**
 * The operator's list of accounts, newest first, with this month's tasks and the number of
 * active keys; `emailContains` narrows it to addresses holding that text.
 */
export async function listAccountsWithUsage(database: Database, page: { limit: number; cursor?: string; emailContains?: string; now: number }) {
  const { limit, cursor, emailContains, now } = page;
  let query = database.db
    .selectFrom('accounts')
    .leftJoin('usage_counters as u', (join) => join.onRef('u.account_id', '=', 'accounts.id').on('u.period', '=', periods.monthlyTasks(now)))
    .select([
      'accounts.id',
      'accounts.email',
      'accounts.plan',
      'accounts.is_admin',
      'accounts.created_at',
      'accounts.storage_used',
      'accounts.disabled_at',
      'u.used as monthly_tasks',
    ])
    .select((eb) =>
      eb
        .selectFrom('api_keys')
        .select((k) => k.fn.countAll<number>().as('n'))
        .whereRef('api_keys.account_id', '=', 'accounts.id')
        .where('api_keys.revoked_at', 'is', null)
        .as('active_keys'),
    )
    .orderBy('accounts.created_at', 'desc')
    .orderBy('accounts.id', 'desc')
    .limit(limit + 1);
  if (emailContains) query = query.where('accounts.email', 'like', `%${emailContains.toLowerCase().replace(/[\\%_]/g, '')}%`);
  const after = olderThan(cursor, 'accounts.created_at', 'accounts.id');
  if (after) query = query.where(after);
  const { page: accounts, nextCursor } = pageOf(await query.execute(), limit);
  return { accounts, nextCursor };
}

// API keys ---------------------------------------------------------------------------------

const KEY_PREFIX = 'ik_';
/** The visible part of a key: enough to recognise it in a list, far too little to guess it. */
const VISIBLE_CHARS = 8;

/** A new key: the only time the key itself is at hand, since only its hash is stored. */
export async function createApiKey(database: Database, clock: Clock, accountId: string, name: string) {
  const key = KEY_PREFIX + crypto.randomBytes(32).toString('base64url');
  const row = {
    id: newId('key'),
    account_id: accountId,
    name: name.slice(0, 100),
    prefix: key.slice(0, KEY_PREFIX.length + VISIBLE_CHARS),
    key_hash: hashApiKey(key),
    created_at: clock.now(),
    last_used_at: null,
    revoked_at: null,
  };
  await database.db.insertInto('api_keys').values(row).execute();
  return { id: row.id, name: row.name, prefix: row.prefix, key, createdAt: row.created_at };
}

// Keys carry 256 random bits, so a fast hash is enough: nothing to brute-force.
const hashApiKey = (key: string): string => sha256Hex(key);

export async function revokeApiKey(database: Database, clock: Clock, accountId: string, keyId: string): Promise<boolean> {
  const result = await database.db
    .updateTable('api_keys')
    .set({ revoked_at: clock.now() })
    .where('id', '=', keyId)
    .where('account_id', '=', accountId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  forgetApiKeys(database);
  return Number(result.numUpdatedRows) > 0;
}

export async function listApiKeys(database: Database, accountId: string) {
  return database.db
    .selectFrom('api_keys')
    .select(['id', 'name', 'prefix', 'created_at', 'last_used_at', 'revoked_at'])
    .where('account_id', '=', accountId)
    .orderBy('created_at', 'desc')
    .execute();
}

export type KeyAccount = Account & { keyId: string };

export { KEY_CACHE_MS } from './key-cache.js';

/** Known keys by hash (key-cache.ts: at most KEY_CACHE_MS old, re-read in the background). */
const apiKeys = keyCachePerDatabase<KeyAccount>();

/**
 * Changes to keys or plans made through `database` apply to its next request (other processes
 * are told by `events.changed('accounts')`, which lands here).
 */
export function forgetApiKeys(database: Database): void {
  apiKeys.clear(database);
}

async function readApiKey(database: Database, clock: Clock, keyHash: string): Promise<KeyAccount | undefined> {
  const row = await database.db
    .selectFrom('api_keys')
    .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
    .selectAll('accounts')
    .select(['api_keys.id as key_id', 'api_keys.last_used_at', 'api_keys.revoked_at'])
    .where('api_keys.key_hash', '=', keyHash)
    .executeTakeFirst();
  if (!row || row.revoked_at !== null) return undefined;
  const now = clock.now();
  // Record use at most once a minute: no write on every request.
  if (row.last_used_at === null || now - row.last_used_at > 60_000) {
    await database.db.updateTable('api_keys').set({ last_used_at: now }).where('id', '=', row.key_id).execute();
  }
  const { key_id: keyId, last_used_at: _l, revoked_at: _r, ...account } = row;
  return { ...account, keyId };
}

/**
 * The account a key belongs to (with the key's id), or undefined for an unknown or revoked key.
 * Served from memory for at most KEY_CACHE_MS after the database said so.
 */
export async function authenticateApiKey(database: Database, clock: Clock, key: string): Promise<KeyAccount | undefined> {
  const keyHash = hashApiKey(key);
  return apiKeys.of(database).get(keyHash, () => readApiKey(database, clock, keyHash));
}
