// Credentials read on every request (API keys, delivery URLs' signing keys) served from memory:
// one read-through cache for both, so their staleness bound and their races are the same.
//
// - An entry is served for at most KEY_CACHE_MS after the read that produced it started; past
//   KEY_REFRESH_MS it is re-read in the background, so a busy key never waits for the database.
// - Concurrent first reads of one id share one read.
// - `clear()` (a key deleted or revoked, a plan changed through this process) bumps a generation:
//   a read that started before it is not kept, so it cannot bring back what was just removed.
// - An unknown id is not remembered (a stream of made-up ids must not fill the cache); a known
//   one found gone is, as a marker that an older read in flight cannot overwrite.
import type { Database } from '../db/database.js';

/**
 * How long a key (and what it grants: account, plan, secret) may be served from memory: a change
 * made by another process applies within this; one made through this process's database handle
 * applies at once.
 */
export const KEY_CACHE_MS = 900;
const KEY_REFRESH_MS = 400;
const KEY_CACHE_ENTRIES = 10_000;

interface Entry<V> {
  /** performance.now() when the read that produced `value` started. */
  readAt: number;
  /** Undefined: the key was found gone (kept so that an older read cannot bring it back). */
  value: V | undefined;
  refreshing?: Promise<unknown>;
}

export class KeyCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private readonly loading = new Map<string, Promise<V | undefined>>();
  private generation = 0;

  /** Forgets everything: the next request of every key reads the database. */
  clear(): void {
    this.entries.clear();
    this.loading.clear();
    this.generation++;
  }

  /**
   * The value of `id` if memory holds a fresh one (no database read; past KEY_REFRESH_MS a
   * background re-read by `read`), else undefined.
   */
  peek(id: string, read: () => Promise<V | undefined>): V | undefined {
    const entry = this.entries.get(id);
    if (entry?.value === undefined) return undefined;
    const age = performance.now() - entry.readAt;
    if (age >= KEY_CACHE_MS) return undefined;
    if (age >= KEY_REFRESH_MS && !entry.refreshing) {
      // A failed refresh leaves the entry to expire; the next read then reports the error.
      entry.refreshing = this.load(id, read).catch(() => undefined);
    }
    return entry.value;
  }

  /** The value of `id`: from memory when fresh, else read once by `read` (however many ask). */
  async get(id: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const known = this.peek(id, read);
    if (known !== undefined) return known;
    let pending = this.loading.get(id);
    if (!pending) {
      pending = this.load(id, read).finally(() => {
        if (this.loading.get(id) === pending) this.loading.delete(id);
      });
      this.loading.set(id, pending);
    }
    return pending;
  }

  /** Reads now and keeps the answer, unless the cache was cleared meanwhile. */
  private async load(id: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const generation = this.generation;
    const readAt = performance.now();
    const value = await read();
    if (this.generation === generation) this.store(id, readAt, value);
    return value;
  }

  /** Keeps what a read that started at `readAt` found, unless a later read is already kept. */
  private store(id: string, readAt: number, value: V | undefined): void {
    const current = this.entries.get(id);
    if (current && current.readAt >= readAt) return;
    if (value === undefined && !current) return;
    if (!current && this.entries.size >= KEY_CACHE_ENTRIES) {
      const now = performance.now();
      for (const [key, entry] of this.entries) if (now - entry.readAt >= KEY_CACHE_MS) this.entries.delete(key);
      if (this.entries.size >= KEY_CACHE_ENTRIES) this.entries.clear();
    }
    this.entries.set(id, { readAt, value });
  }
}

/** One cache per database handle (each test's app has its own): `of(database)`, `clear(database)`. */
export function keyCachePerDatabase<V>() {
  const caches = new WeakMap<Database, KeyCache<V>>();
  return {
    of(database: Database): KeyCache<V> {
      let cache = caches.get(database);
      if (!cache) caches.set(database, (cache = new KeyCache<V>()));
      return cache;
    },
    clear(database: Database): void {
      caches.get(database)?.clear();
    },
  };
}
