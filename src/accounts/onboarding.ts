// How accounts come to be from the dashboard: the first administrator through a one-time setup
// token printed when the server starts, then sign-ups as SIGNUP_MODE allows (open, by
// invitation, or closed). Sign-ups start on Free. Passwords are checked in constant time, known
// email or not.
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { SignupMode } from '../config.js';
import type { Database, Tx } from '../db/database.js';
import { isUniqueViolation } from '../db/database.js';
import { AppError } from '../errors.js';
import { newId, sha256Hex } from '../ids.js';
import { findAccountByEmail, findAccountById, hashPassword, normaliseEmail, verifyPassword, type Account } from './accounts.js';
import type { PlanName } from './plans.js';

const SETUP_TOKEN_TTL_MS = 24 * 3600_000;
const INVITE_TTL_MS = 14 * 24 * 3600_000;
const INVITE_PREFIX = 'inv_';

export async function adminExists(database: Database): Promise<boolean> {
  const row = await database.db.selectFrom('accounts').select('id').where('is_admin', '=', 1).limit(1).executeTakeFirst();
  return row !== undefined;
}

const hashSetupToken = (token: string) => sha256Hex(`setup:${token.trim()}`);

/**
 * While no administrator exists, issues a one-time setup token; returns it (undefined when an
 * administrator exists) for the serving process to print once in its plain start-up line
 * (setupInstructions). Every serving process issues its own, and any unexpired one works until
 * the first administrator is created. The structured log says that setup is pending, never the
 * token: logs are kept and shipped elsewhere, where a credential does not belong.
 */
export async function announceSetupToken(deps: { database: Database; clock: Clock; logger: Logger }): Promise<string | undefined> {
  const { database, clock, logger } = deps;
  if (await adminExists(database)) return undefined;
  const token = crypto.randomBytes(24).toString('base64url');
  const now = clock.now();
  await database.db.deleteFrom('setup_tokens').where('expires_at', '<=', now).execute();
  await database.db
    .insertInto('setup_tokens')
    .values({ token_hash: hashSetupToken(token), created_at: now, expires_at: now + SETUP_TOKEN_TTL_MS })
    .execute();
  logger.warn(
    'No administrator account exists yet: the one-time setup link is in the line starting "imgapi" this process printed on standard error ' +
      `(or create one from the command line: ${CREATE_ADMIN_COMMAND})`,
  );
  return token;
}

const CREATE_ADMIN_COMMAND = 'imgapi users create --email you@example.com --plan max --admin --password …';

/**
 * How to make the first administrator, for the start-up line. The token rides in the link's
 * fragment (#token=…), which browsers never send: it stays out of request logs, proxies and
 * Referer headers; the setup page reads it from there and fills it in.
 */
export function setupInstructions(publicUrl: string, token: string): string {
  return `no administrator yet: create one at ${publicUrl}/setup#token=${token} (one-time link, valid 24 hours) or run: ${CREATE_ADMIN_COMMAND}`;
}

interface NewAccount {
  email: string;
  password: string;
}

/** Validates an email address as createAccount does, and normalises it. */
function checkedEmail(email: string): string {
  const normalised = normaliseEmail(email);
  if (!/^[^\s@]+@[^\s@]+$/.test(normalised)) {
    throw new AppError('VALIDATION_ERROR', `"${email}" is not an email address`, {
      fields: [{ field: 'email', message: 'is not an email address' }],
    });
  }
  return normalised;
}

async function insertAccount(tx: Tx, clock: Clock, email: string, passwordHash: string, plan: PlanName, admin: boolean): Promise<string> {
  const id = newId('acct');
  try {
    await tx
      .insertInto('accounts')
      .values({ id, email, plan, is_admin: admin ? 1 : 0, password_hash: passwordHash, created_at: clock.now() })
      .execute();
  } catch (err) {
    if (isUniqueViolation(err)) throw new AppError('EMAIL_TAKEN', `An account for ${email} already exists; log in instead`);
    throw err;
  }
  return id;
}

/** Creates the first administrator with a setup token; the token (and every other) is spent. */
export async function completeSetup(database: Database, clock: Clock, input: NewAccount & { token: string }): Promise<Account> {
  const email = checkedEmail(input.email);
  if (await adminExists(database)) throw new AppError('SETUP_COMPLETED', 'This installation already has an administrator; log in instead');
  const passwordHash = await hashPassword(input.password);
  const id = await database.transaction(async (tx) => {
    if (await tx.selectFrom('accounts').select('id').where('is_admin', '=', 1).executeTakeFirst()) {
      throw new AppError('SETUP_COMPLETED', 'This installation already has an administrator; log in instead');
    }
    const spent = await tx
      .deleteFrom('setup_tokens')
      .where('token_hash', '=', hashSetupToken(input.token))
      .where('expires_at', '>', clock.now())
      .executeTakeFirst();
    if (Number(spent.numDeletedRows) !== 1) {
      throw new AppError('SETUP_TOKEN_INVALID', 'The setup token is wrong or has expired; the server prints a new setup link each time it starts');
    }
    const created = await insertAccount(tx, clock, email, passwordHash, 'max', true);
    await tx.deleteFrom('setup_tokens').execute();
    return created;
  });
  return (await findAccountById(database, id))!;
}

/** Creates a Free account as SIGNUP_MODE allows; an invite code is spent by the sign-up it admits. */
export async function signUp(database: Database, clock: Clock, mode: SignupMode, input: NewAccount & { inviteCode?: string }): Promise<Account> {
  if (mode === 'closed') throw new AppError('SIGNUP_CLOSED', 'Sign-up is closed on this installation; ask its operator for an account');
  const email = checkedEmail(input.email);
  if (mode === 'invite' && !input.inviteCode) {
    throw new AppError('INVITE_INVALID', 'Sign-up on this installation needs an invitation code from its operator', {
      fields: [{ field: 'inviteCode', message: 'is required' }],
    });
  }
  const passwordHash = await hashPassword(input.password);
  const id = await database.transaction(async (tx) => {
    let inviteId: string | undefined;
    if (mode === 'invite') {
      const now = clock.now();
      const invite = await tx
        .selectFrom('invites')
        .selectAll()
        .where('code_hash', '=', hashInvite(input.inviteCode!))
        .where('used_at', 'is', null)
        .where('expires_at', '>', now)
        .executeTakeFirst();
      if (!invite || (invite.email !== null && invite.email !== email)) {
        throw new AppError('INVITE_INVALID', 'The invitation code is unknown, used, expired or meant for another email address');
      }
      // Conditional: of two sign-ups racing on one code, one spends it.
      const spent = await tx.updateTable('invites').set({ used_at: now }).where('id', '=', invite.id).where('used_at', 'is', null).executeTakeFirst();
      if (Number(spent.numUpdatedRows) !== 1) throw new AppError('INVITE_INVALID', 'The invitation code has just been used');
      inviteId = invite.id;
    }
    const created = await insertAccount(tx, clock, email, passwordHash, 'free', false);
    if (inviteId) await tx.updateTable('invites').set({ used_by: created }).where('id', '=', inviteId).execute();
    return created;
  });
  return (await findAccountById(database, id))!;
}

let dummyHash: Promise<string> | undefined;

/**
 * The account whose email and password match, or undefined. An unknown email costs the same
 * scrypt as a known one, so timing does not tell which emails have accounts.
 */
export async function checkCredentials(database: Database, email: string, password: string): Promise<Account | undefined> {
  const account = await findAccountByEmail(database, email);
  if (!account?.password_hash) {
    await verifyPassword(password, await (dummyHash ??= hashPassword(crypto.randomBytes(16).toString('hex'))));
    return undefined;
  }
  return (await verifyPassword(password, account.password_hash)) ? account : undefined;
}

// Invites ----------------------------------------------------------------------------------

const hashInvite = (code: string) => sha256Hex(`invite:${code.trim()}`);

export async function createInvite(database: Database, clock: Clock, createdBy: string, email?: string) {
  const code = INVITE_PREFIX + crypto.randomBytes(18).toString('base64url');
  const now = clock.now();
  const row = {
    id: newId('inv'),
    code_hash: hashInvite(code),
    prefix: code.slice(0, INVITE_PREFIX.length + 6),
    email: email ? checkedEmail(email) : null,
    created_by: createdBy,
    created_at: now,
    expires_at: now + INVITE_TTL_MS,
    used_at: null,
    used_by: null,
  };
  await database.db.insertInto('invites').values(row).execute();
  return { row, code };
}

export async function listInvites(database: Database, limit = 50) {
  return database.db
    .selectFrom('invites')
    .leftJoin('accounts', 'accounts.id', 'invites.used_by')
    .select([
      'invites.id',
      'invites.prefix',
      'invites.email',
      'invites.created_at',
      'invites.expires_at',
      'invites.used_at',
      'accounts.email as used_by_email',
    ])
    .orderBy('invites.created_at', 'desc')
    .limit(limit)
    .execute();
}

export async function revokeInvite(database: Database, clock: Clock, inviteId: string): Promise<boolean> {
  const result = await database.db
    .updateTable('invites')
    .set({ expires_at: clock.now() })
    .where('id', '=', inviteId)
    .where('used_at', 'is', null)
    .where('expires_at', '>', clock.now())
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}
