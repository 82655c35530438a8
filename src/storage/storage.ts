// The storage port: every byte the service keeps goes through it. Keys are generated ids,
// never client file names. Adapters: local directory (default) and S3.
import type { Readable } from 'node:stream';

export interface ByteRange {
  start: number;
  /** Inclusive. */
  end: number;
}

export interface PresignedPut {
  url: string;
  headers: Record<string, string>;
}

export interface ObjectStorage {
  readonly name: string;
  /**
   * Stores the stream or bytes under `key`, atomically: a failed write leaves nothing behind.
   * Bytes already in memory (a render, a preview) are written in one go, without a stream.
   */
  put(key: string, body: Readable | Buffer): Promise<{ size: number }>;
  /** The object's bytes (or a range); an error with code ENOENT when it does not exist. */
  get(key: string, range?: ByteRange): Promise<Readable>;
  /** The object's size and when it was last written (ms since the epoch, the store's clock), or null when it does not exist. */
  head(key: string): Promise<{ size: number; modifiedAt: number } | null>;
  delete(key: string): Promise<void>;
  /**
   * Renames an object (replacing `to`); throws when `from` does not exist. Confirming a direct
   * upload moves the object out of reach of its presigned URL, so it cannot be overwritten later.
   */
  move(from: string, to: string): Promise<void>;
  /**
   * A URL that lets a client PUT exactly `size` bytes under `key` until `expiresAt`, with the
   * headers it must send (`contentType`, when given, is one of them); only where the store signs
   * URLs itself (S3). Local storage has none: this service receives such uploads and signs their
   * URLs (src/files/direct-upload.ts).
   */
  presignPut?(key: string, size: number, expiresAt: number, contentType?: string): Promise<PresignedPut>;
  /** The largest object one presigned PUT may carry, where the store has such a limit. */
  readonly maxPresignedPutBytes?: number;
  /** A path on this machine's disk holding the object, where the adapter has one. */
  localPath?(key: string): string;
  /**
   * Removes what writes interrupted by a killed process left behind (temp files), where the
   * adapter keeps any; returns how many. (S3 aborts a failed multipart upload itself; one cut
   * by a killed process is the bucket's lifecycle rule's to end.)
   */
  sweepTemporary?(now?: number): Promise<number>;
  /** The keys directly under `prefix/`. */
  list(prefix: string): Promise<string[]>;
  /** Readiness: throws when the store cannot be reached or written. */
  check(): Promise<void>;
  /** Releases connections, where the adapter holds any. */
  close?(): void;
}

/** The error get and move throw for a missing object, whatever the adapter. */
export const objectNotFound = (key: string): Error => Object.assign(new Error(`no object "${key}"`), { code: 'ENOENT' });
export const isObjectNotFound = (err: unknown): boolean => (err as { code?: string } | undefined)?.code === 'ENOENT';

const KEY_PATTERN = /^[A-Za-z0-9_-]+(\/[A-Za-z0-9_.-]+)*$/;

export function assertValidKey(key: string): void {
  if (!KEY_PATTERN.test(key) || key.split('/').some((part) => part === '..' || part === '.')) {
    throw new Error(`invalid object key "${key}"`);
  }
}

export const uploadKey = (fileId: string): string => `uploads/${fileId}`;
/** Where a direct upload lands before it is confirmed (its presigned URL can write only here). */
export const INCOMING_PREFIX = 'incoming';
export const incomingKey = (uploadId: string): string => `${INCOMING_PREFIX}/${uploadId}`;
/** Output keys derive from the task id, so a task that runs twice overwrites, never orphans. */
export const outputKey = (taskId: string, index: number): string => `outputs/${taskId}/${index}`;

/**
 * Deletes a task's output objects, outputs/{taskId}/0, 1, … as far as they exist (a run writes
 * them in order, so they are always a prefix); returns how many went. For a task that ended
 * without outputs, whichever run wrote them: nothing records or charges them.
 */
export async function deleteTaskOutputs(storage: ObjectStorage, taskId: string): Promise<number> {
  let index = 0;
  for (; await storage.head(outputKey(taskId, index)); index++) await storage.delete(outputKey(taskId, index));
  return index;
}
/**
 * The keys this service writes a file's bytes under (uploadKey, outputKey and incomingKey over
 * ids from newId): the only keys a backup may name, so a tampered one cannot reach elsewhere.
 */
export const FILE_OBJECT_KEY =
  /^(?:uploads\/file_[A-Za-z0-9_-]{1,64}|outputs\/task_[A-Za-z0-9_-]{1,64}\/(?:0|[1-9][0-9]{0,5})|incoming\/upl_[A-Za-z0-9_-]{1,64})$/;
/** A file's preview `side` px across (src/imaging/preview.ts); deleted with the file. */
export const previewKey = (fileId: string, side: number): string => `previews/${fileId}/${side}`;
