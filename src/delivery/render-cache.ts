// The render cache: renders kept in the service's storage under `renders/`, shared by every
// process, indexed by the render_cache table. A render becomes visible when its row is written,
// after its object is stored whole (the storage port's put is atomic: a renderer killed
// mid-write leaves no object, and never a row), so a half-written render is never served. An
// object whose row was never written (killed between the two) is swept once an hour old
// (sweepOrphanedRenders).
//
// - Keys are hashes of the source's identity and version, the normalised transform (presets
//   expanded) and the negotiated format (delivery.ts): a new version of any of them is a new key.
// - "Last used" is written at most once a minute per render (REFRESH_USED_MS), from the row the
//   hit read anyway: a hit costs one indexed read and, rarely, one write.
// - Eviction: after each store, while the index holds more than RENDER_CACHE_MAX_BYTES, the
//   least recently used go (their rows first, then their objects), a batch at a time, down to
//   90 % of the cap. The index's size is not summed on every store (a SUM over the whole table:
//   over a second for a full cache): each process keeps a running total, re-summed at most once a minute (RESUM_MS) and
//   whenever it evicts, and adds what it stores meanwhile. Other processes' stores reach it at
//   the next re-sum, so with several processes the cap is approximate: over by at most what the
//   others stored in the last minute.
// - Purges: by source (a file deleted, an origin deleted) and by preset (changed or deleted).
// - Memory: renders up to MEMORY_ITEM_BYTES are also kept in this process's memory
//   (RENDER_MEMORY_CACHE_BYTES, least recently used out), so a hit reads no file. An entry is
//   served without a look at its row for at most KEY_CACHE_MS (the bound API and signing keys have); a
//   purge here drops its entries at once, and `onPurge` tells the other processes (delivery.ts:
//   PostgreSQL NOTIFY), which otherwise stop serving a purged render within KEY_CACHE_MS.
// Renders are no account's files: nothing here touches storageBytes.
import { KEY_CACHE_MS } from '../accounts/key-cache.js';
import { sql, type RawBuilder } from 'kysely';
import type { Database } from '../db/database.js';
import { isObjectNotFound, type ObjectStorage } from '../storage/storage.js';
import type { Readable } from 'node:stream';

const RENDERS_PREFIX = 'renders';
/** "Last used" is bumped at most this often per render. */
const REFRESH_USED_MS = 60_000;
const EVICT_BATCH = 100;
/** The running total of the index's bytes is re-summed from the table at most this often. */
const RESUM_MS = 60_000;
/** Renders larger than this are not kept in memory. */
const MEMORY_ITEM_BYTES = 256 * 1024;
/** Past the cap, eviction goes down to this share of it. */
const EVICT_TO = 0.9;

export interface CachedRender {
  key: string;
  storageKey: string;
  contentType: string;
  etag: string;
  bytes: number;
}

/** The entry a render of `key` has once stored (and, answered before its store, already has). */
export const renderEntry = (key: string, contentType: string, etag: string, bytes: number): CachedRender => ({
  key,
  storageKey: `${RENDERS_PREFIX}/${key}`,
  contentType,
  etag,
  bytes,
});

export interface NewRender {
  key: string;
  accountId: string;
  source: string;
  preset: string | undefined;
  contentType: string;
  etag: string;
  data: Buffer;
  expiresAt: number | null;
}

export class RenderCache {
  /** This process's idea of the index's bytes (see the header), and when it was last summed. */
  private knownBytes = 0;
  private summedAt = -Infinity;
  /** Small renders in memory, least recently used first (a Map keeps insertion order). */
  private readonly memory = new Map<string, Remembered>();
  private memoryBytes = 0;
  /** Told of every purge (delivery.ts passes it on to the other processes). */
  onPurge: () => void = () => {};

  constructor(
    private readonly database: Database,
    private readonly storage: ObjectStorage,
    private readonly maxBytes: number,
    private readonly memoryMaxBytes = 0,
  ) {}

  /**
   * The stored render of `key` and its bytes (from memory, or a stream of its object), if any
   * and not past its source's expiry; bumps its use now and then.
   */
  async lookup(key: string, now: number): Promise<{ render: CachedRender; body: Buffer | Readable } | undefined> {
    const known = this.peek(key, now);
    if (known) return known;
    const remembered = this.memory.get(key);
    const render = await this.find(key, now);
    if (!render) {
      this.forget(key);
      return undefined;
    }
    if (remembered && remembered.render.storageKey === render.storageKey) {
      remembered.checkedAt = performance.now();
      return { render, body: remembered.data };
    }
    const body = await this.open(render);
    if (!body || render.bytes > MEMORY_ITEM_BYTES || this.memoryMaxBytes === 0) return body && { render, body };
    const data = Buffer.concat(await body.toArray());
    this.remember(render, data);
    return { render, body: data };
  }

  /**
   * The render of `key` and its bytes if this process's memory holds them, not past their
   * source's expiry and with their row seen within KEY_CACHE_MS; else undefined (lookup reads the row).
   */
  peek(key: string, now: number): { render: CachedRender; body: Buffer } | undefined {
    const remembered = this.memory.get(key);
    if (!remembered || (remembered.expiresAt !== null && remembered.expiresAt <= now)) return undefined;
    this.memory.delete(key);
    this.memory.set(key, remembered);
    if (performance.now() - remembered.checkedAt > KEY_CACHE_MS) return undefined;
    return { render: remembered.render, body: remembered.data };
  }

  /** Drops every render this process keeps in memory (another process purged some). */
  forgetMemory(): void {
    this.memory.clear();
    this.memoryBytes = 0;
  }

  private async find(key: string, now: number): Promise<(CachedRender & { expiresAt: number | null }) | undefined> {
    const row = await this.database.db.selectFrom('render_cache').selectAll().where('key', '=', key).executeTakeFirst();
    if (!row || (row.expires_at !== null && Number(row.expires_at) <= now)) return undefined;
    if (now - Number(row.last_used_at) > REFRESH_USED_MS) {
      await this.database.db.updateTable('render_cache').set({ last_used_at: now }).where('key', '=', key).execute();
    }
    const expiresAt = row.expires_at === null ? null : Number(row.expires_at);
    return { key, storageKey: row.storage_key, contentType: row.content_type, etag: row.etag, bytes: Number(row.bytes), expiresAt };
  }

  /** The render's bytes; undefined when its object went (evicted or purged by another process meanwhile). */
  private async open(render: CachedRender): Promise<Readable | undefined> {
    try {
      return await this.storage.get(render.storageKey);
    } catch (err) {
      if (isObjectNotFound(err)) {
        await this.database.db.deleteFrom('render_cache').where('key', '=', render.key).execute();
        return undefined;
      }
      throw err;
    }
  }

  private remember(render: CachedRender & { expiresAt: number | null }, data: Buffer): void {
    if (data.length > MEMORY_ITEM_BYTES || data.length > this.memoryMaxBytes) return;
    this.forget(render.key);
    const { expiresAt, ...entry } = render;
    this.memory.set(render.key, { render: entry, data, expiresAt, checkedAt: performance.now() });
    this.memoryBytes += data.length;
    for (const [key] of this.memory) {
      if (this.memoryBytes <= this.memoryMaxBytes) break;
      this.forget(key);
    }
  }

  private forget(key: string): void {
    const remembered = this.memory.get(key);
    if (!remembered) return;
    this.memory.delete(key);
    this.memoryBytes -= remembered.data.length;
  }

  /**
   * Stores a render (object first, then its row), then evicts past the size cap. With `live`
   * (its source's module's condition that the source still exists), the row is written only
   * while it holds, in the same statement: a render of a source deleted while it rendered is
   * not kept (its purge may have run before this store) and undefined is answered.
   */
  async store(render: NewRender, now: number, live?: RawBuilder<boolean>): Promise<CachedRender | undefined> {
    const stored = renderEntry(render.key, render.contentType, render.etag, render.data.length);
    const { storageKey } = stored;
    await this.storage.put(storageKey, render.data);
    const values = {
      account_id: render.accountId,
      source: render.source,
      preset: render.preset ?? null,
      storage_key: storageKey,
      content_type: render.contentType,
      etag: render.etag,
      bytes: render.data.length,
      expires_at: render.expiresAt,
      created_at: now,
      last_used_at: now,
    };
    const row = { key: render.key, ...values };
    const columns = Object.keys(row) as (keyof typeof row)[];
    // Another process may have made the same render meanwhile: the same bytes under the same key.
    const written = await this.database.db
      .insertInto('render_cache')
      .$if(live === undefined, (qb) => qb.values(row))
      .$if(live !== undefined, (qb) =>
        qb.columns(columns).expression(
          sql`select ${sql.join(
            columns.map((c) => row[c]),
            sql`, `,
          )} where ${live!}`,
        ),
      )
      .onConflict((oc) => oc.column('key').doUpdateSet(values))
      .executeTakeFirst();
    if (Number(written.numInsertedOrUpdatedRows) === 0) {
      await this.storage.delete(storageKey).catch(() => undefined);
      return undefined;
    }
    this.knownBytes += render.data.length;
    this.remember({ ...stored, expiresAt: render.expiresAt }, render.data);
    if (performance.now() - this.summedAt > RESUM_MS || this.knownBytes > this.maxBytes) await this.evict(render.key);
    return stored;
  }

  /** Bytes of every stored render (the cache-bytes gauge). */
  async totalBytes(): Promise<number> {
    const row = await this.database.db
      .selectFrom('render_cache')
      .select((eb) => eb.fn.sum<number>('bytes').as('total'))
      .executeTakeFirst();
    return Number(row?.total ?? 0);
  }

  /**
   * When the cache is over its cap, deletes the least recently used renders until it is under
   * 90 % of it (so that a full cache is not evicted from on every store); never `keep` (the
   * render just stored, about to be served, even when it alone passes the cap).
   */
  async evict(keep?: string): Promise<number> {
    let total = await this.totalBytes();
    this.summedAt = performance.now();
    let evicted = 0;
    const target = total > this.maxBytes ? Math.floor(this.maxBytes * EVICT_TO) : total;
    while (total > target) {
      const oldest = await this.database.db
        .selectFrom('render_cache')
        .select(['key', 'storage_key', 'bytes'])
        .orderBy('last_used_at')
        .orderBy('key')
        .limit(EVICT_BATCH)
        .execute();
      if (oldest.length === 0 || (oldest.length === 1 && oldest[0]!.key === keep)) break;
      const going: typeof oldest = [];
      for (const row of oldest) {
        if (total <= target) break;
        if (row.key === keep) continue;
        going.push(row);
        total -= Number(row.bytes);
      }
      await this.remove(going);
      evicted += going.length;
    }
    this.knownBytes = total;
    return evicted;
  }

  /** Purges the renders of a source (`file:<id>`, `origin:<id>`). */
  async purgeSource(accountId: string, source: string): Promise<number> {
    const rows = await this.database.db
      .selectFrom('render_cache')
      .select(['key', 'storage_key'])
      .where('account_id', '=', accountId)
      .where('source', '=', source)
      .execute();
    await this.purge(rows);
    return rows.length;
  }

  /** Purges the renders made through a preset (it was changed or deleted). */
  async purgePreset(accountId: string, preset: string): Promise<number> {
    const rows = await this.database.db
      .selectFrom('render_cache')
      .select(['key', 'storage_key'])
      .where('account_id', '=', accountId)
      .where('preset', '=', preset)
      .execute();
    await this.purge(rows);
    return rows.length;
  }

  /** Removes renders, and tells the other processes to drop theirs from memory. */
  private async purge(rows: { key: string; storage_key: string }[]): Promise<void> {
    await this.remove(rows);
    this.onPurge();
  }

  private remove(rows: { key: string; storage_key: string }[]): Promise<void> {
    for (const row of rows) this.forget(row.key);
    return removeRenders(this.database, this.storage, rows);
  }
}

interface Remembered {
  render: CachedRender;
  data: Buffer;
  expiresAt: number | null;
  /** When its row was last seen (performance.now()). */
  checkedAt: number;
}

/** Rows first (nothing serves them after), then the objects. */
async function removeRenders(database: Database, storage: ObjectStorage, rows: { key: string; storage_key: string }[]): Promise<void> {
  if (rows.length === 0) return;
  await database.db
    .deleteFrom('render_cache')
    .where(
      'key',
      'in',
      rows.map((r) => r.key),
    )
    .execute();
  for (const row of rows) await storage.delete(row.storage_key).catch(() => undefined);
}

/**
 * An object under renders/ with no row this long after it was written is left over; a younger
 * one may be a store under way (the object is written before its row). Stores take seconds; the
 * margin also covers a store's clock (S3's) running behind this process's.
 */
const ORPHAN_AGE_MS = 60 * 60_000;
const ORPHAN_BATCH = 500;

/**
 * The orphan sweep (maintenance.ts, once an hour): objects under renders/ that no row names,
 * left by a store that ended between writing the object and its row (the process killed there,
 * or the insert failed), once ORPHAN_AGE_MS old. A store of the same key that overwrites such an
 * object as it is deleted leaves a row without its object, which the next lookup finds and
 * renders again (lookup → open). Returns how many went.
 */
export async function sweepOrphanedRenders(database: Database, storage: ObjectStorage, now: number): Promise<number> {
  const keys = await storage.list(RENDERS_PREFIX);
  let removed = 0;
  for (let i = 0; i < keys.length; i += ORPHAN_BATCH) {
    const batch = keys.slice(i, i + ORPHAN_BATCH);
    const rows = await database.db
      .selectFrom('render_cache')
      .select('key')
      .where(
        'key',
        'in',
        batch.map((storageKey) => storageKey.slice(RENDERS_PREFIX.length + 1)),
      )
      .execute();
    const named = new Set(rows.map((row) => `${RENDERS_PREFIX}/${row.key}`));
    for (const storageKey of batch) {
      if (named.has(storageKey)) continue;
      const object = await storage.head(storageKey);
      if (!object || object.modifiedAt > now - ORPHAN_AGE_MS) continue;
      await storage.delete(storageKey);
      removed++;
    }
  }
  return removed;
}

/**
 * The retention sweep's part (maintenance.ts): renders of files that have expired are no longer
 * served (their rows carry the expiry); this deletes them, a batch per tick. Returns how many.
 */
export async function sweepExpiredRenders(database: Database, storage: ObjectStorage, now: number): Promise<number> {
  const rows = await database.db
    .selectFrom('render_cache')
    .select(['key', 'storage_key'])
    .where('expires_at', '<=', now)
    .limit(EVICT_BATCH * 5)
    .execute();
  await removeRenders(database, storage, rows);
  return rows.length;
}
