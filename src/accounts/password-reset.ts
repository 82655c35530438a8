// Password-reset links the operator hands to a customer who forgot their password. Stateless: the
// token is `<accountId>.<expiry>.<mac>`, the mac an HMAC-SHA256 of the account id and the expiry
// keyed by the account's current password hash (random salt and derived key: a secret that
// never leaves the database). So a link works on every process and host without a shared
// secret, stops working once it has been used (the new password changes the key), and is
// void when it expires or when the password changes any other way. Spending a link is one
// conditional UPDATE (the password hash the link was checked against must still be there), so of
// parallel requests with the same link exactly one sets its password.
import crypto from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Database } from '../db/database.js';
import { AppError } from '../errors.js';
import { findAccountById, hashPassword, type Account } from './accounts.js';

/** How long a reset link works. */
const RESET_LINK_TTL_MS = 24 * 3600_000;

function mac(account: Account, expiresAt: number): string {
  return crypto.createHmac('sha256', account.password_hash!).update(`imgapi password reset\n${account.id}\n${expiresAt}`).digest('base64url');
}

/** A reset token for the account, valid for RESET_LINK_TTL_MS; refused for an account without a password. */
export function resetToken(account: Account, clock: Clock): { token: string; expiresAt: number } {
  if (!account.password_hash) {
    throw new AppError('FORBIDDEN', `${account.email} has no dashboard password to reset; set one with \`imgapi users set-password\``);
  }
  const expiresAt = clock.now() + RESET_LINK_TTL_MS;
  return { token: `${account.id}.${expiresAt.toString(36)}.${mac(account, expiresAt)}`, expiresAt };
}

const invalidLink = () => new AppError('RESET_LINK_INVALID', 'This reset link is invalid, used or expired: ask the operator for a new one');

/** The account whose live reset token this is, or RESET_LINK_INVALID. */
async function accountOfToken(database: Database, clock: Clock, token: string): Promise<Account> {
  const invalid = invalidLink();
  const [accountId, expiry, given] = token.split('.');
  if (!accountId || !expiry || !given || !/^acct_[A-Za-z0-9_-]+$/.test(accountId)) throw invalid;
  const expiresAt = parseInt(expiry, 36);
  if (!Number.isSafeInteger(expiresAt) || expiresAt <= clock.now()) throw invalid;
  const account = await findAccountById(database, accountId);
  if (!account?.password_hash) throw invalid;
  const expected = Buffer.from(mac(account, expiresAt));
  const actual = Buffer.from(given);
  if (expected.length !== actual.length || !crypto.timingSafeEqual(expected, actual)) throw invalid;
  return account;
}

/** Sets the new password from a reset link and ends every session of the account. */
export async function resetPassword(database: Database, clock: Clock, token: string, password: string): Promise<Account> {
  const account = await accountOfToken(database, clock, token);
  const passwordHash = await hashPassword(password);
  await database.transaction(async (tx) => {
    // Compare-and-set on the hash that keyed the link: a parallel reset that spent it first changed it.
    const spent = await tx
      .updateTable('accounts')
      .set({ password_hash: passwordHash })
      .where('id', '=', account.id)
      .where('password_hash', '=', account.password_hash!)
      .executeTakeFirst();
    if (Number(spent.numUpdatedRows) !== 1) throw invalidLink();
    await tx.deleteFrom('sessions').where('account_id', '=', account.id).execute();
  });
  return { ...account, password_hash: passwordHash };
}
