import crypto from 'node:crypto';

export type IdPrefix = 'file' | 'task' | 'batch' | 'upl' | 'acct' | 'key' | 'req' | 'inv';

/** Opaque, unguessable ids: a type prefix and 144 random bits. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${crypto.randomBytes(18).toString('base64url')}`;
}

export const sha256Hex = (data: string | Buffer): string =>
  crypto.createHash('sha256').update(data).digest('hex');
