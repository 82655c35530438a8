// The storage port: every byte the service keeps goes through it. Keys are generated ids,
// never client file names. Adapters: local directory (default) and S3.
import type { Readable } from 'node:stream';

export interface ByteRange {
  start: number;
  /** Inclusive. */
  end: number;
}

export interface ObjectStorage {
  readonly name: string;
  /** Stores the stream under `key`, atomically: a failed write leaves nothing behind. */
  put(key: string, body: Readable): Promise<{ size: number }>;
  get(key: string, range?: ByteRange): Promise<Readable>;
  head(key: string): Promise<{ size: number } | null>;
  delete(key: string): Promise<void>;
  /** A path on this machine's disk holding the object, where the adapter has one. */
  localPath?(key: string): string;
  /** Readiness: throws when the store cannot be reached or written. */
  check(): Promise<void>;
}

const KEY_PATTERN = /^[A-Za-z0-9_-]+(\/[A-Za-z0-9_.-]+)*$/;

export function assertValidKey(key: string): void {
  if (!KEY_PATTERN.test(key) || key.split('/').some((part) => part === '..' || part === '.')) {
    throw new Error(`invalid object key "${key}"`);
  }
}

export const uploadKey = (fileId: string): string => `uploads/${fileId}`;
/** Output keys derive from the task id, so a task that runs twice overwrites, never orphans. */
export const outputKey = (taskId: string, index: number): string => `outputs/${taskId}/${index}`;
