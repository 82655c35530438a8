// What the operator's commands (backup, restore, copy-to) share: their error, the stores they
// open from a configuration, the objects a database refers to, and hashing copies.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { Transform, Writable, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { StorageConfig } from '../config.js';
import { readRows, type Row } from '../db/dump.js';
import type { DB } from '../db/schema.js';
import type { Kysely, Transaction } from 'kysely';
import { LocalStorage } from '../storage/local.js';
import { S3Storage } from '../storage/s3.js';
import { incomingKey, isObjectNotFound, type ObjectStorage } from '../storage/storage.js';

/** A refusal or failure of an operator's command, said in words; the command exits 1 with it. */
export class OpsError extends Error {
  override name = 'OpsError';
}

export const openStorage = (config: StorageConfig): ObjectStorage => (config.kind === 's3' ? new S3Storage(config) : new LocalStorage(config.root));

export interface ObjectEntry {
  key: string;
  size: number;
  sha256: string;
}

/** Counts and hashes the bytes passing through. */
class Digest extends Transform {
  readonly hash = crypto.createHash('sha256');
  size = 0;
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.hash.update(chunk);
    this.size += chunk.length;
    callback(null, chunk);
  }
}

const discard = () =>
  new Writable({
    write(_chunk, _encoding, callback) {
      callback();
    },
  });

/** The SHA-256 and size of a stored object; undefined when there is no such object. */
export async function hashObject(storage: ObjectStorage, key: string): Promise<ObjectEntry | undefined> {
  let body;
  try {
    body = await storage.get(key);
  } catch (err) {
    if (isObjectNotFound(err)) return undefined;
    throw err;
  }
  const digest = new Digest();
  await pipeline(body, digest, discard());
  return { key, size: digest.size, sha256: digest.hash.digest('hex') };
}

/** Copies one object between stores, hashing it on the way; undefined when the source has no such object. */
export async function copyObject(from: ObjectStorage, to: ObjectStorage, key: string): Promise<ObjectEntry | undefined> {
  let body;
  try {
    body = await from.get(key);
  } catch (err) {
    if (isObjectNotFound(err)) return undefined;
    throw err;
  }
  const digest = new Digest();
  body.on('error', (err) => digest.destroy(err));
  await to.put(key, body.pipe(digest));
  return { key, size: digest.size, sha256: digest.hash.digest('hex') };
}

export async function hashFile(file: string): Promise<{ size: number; sha256: string }> {
  return hashStream(fs.createReadStream(file));
}

/** The size and SHA-256 of a stream's bytes, written to `into` on the way when given. */
export async function hashStream(body: Readable, into: Writable = discard()): Promise<{ size: number; sha256: string }> {
  const digest = new Digest();
  await pipeline(body, digest, into);
  return { size: digest.size, sha256: digest.hash.digest('hex') };
}

export interface ReferencedObject {
  key: string;
  /** The size the database records; undefined for a direct upload's bytes, which may not have arrived. */
  size?: number;
  /** A pending direct upload's bytes: there only if the client has PUT them, and they may change until confirmed. */
  optional: boolean;
}

/**
 * The objects the rows refer to: every live file's bytes, and the bytes of direct uploads not
 * yet confirmed. Previews are left out: they are made again on demand.
 */
export async function referencedObjects(db: Kysely<DB> | Transaction<DB>): Promise<ReferencedObject[]> {
  const objects: ReferencedObject[] = [];
  for await (const rows of readRows(db, 'files', 2000))
    for (const row of rows as (Row & DB['files'])[])
      if (row.deleted_at === null) objects.push({ key: row.storage_key, size: Number(row.size), optional: false });
  for await (const rows of readRows(db, 'uploads', 2000))
    for (const row of rows as (Row & DB['uploads'])[])
      if (row.status === 'pending' && row.swept_at === null) objects.push({ key: incomingKey(row.id), optional: true });
  return objects;
}

/**
 * Runs `fn` over `items`, `concurrency` at a time, in order of start. The first failure stops
 * the start of more; the ones under way are waited for, then that failure is thrown (so nothing
 * goes on writing after the caller has been told).
 */
export async function eachLimited<T>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const lane = async () => {
    while (!failure && next < items.length) {
      const index = next++;
      try {
        await fn(items[index]!, index);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, lane));
  if (failure) throw failure.error;
}
