// The render cache: renders kept in the service's storage under `renders/`, shared by every
// process, indexed by the render_cache table. A render becomes visible when its row is written,
// after its object is stored whole (the storage port's put is atomic: a renderer killed
// mid-write leaves no object, and never a row), so a half-written render is never served.
//
// - Keys are hashes of the source's identity and version, the normalised transform (presets
//   expanded) and the negotiated format (delivery.ts): a new version of any of them is a new key.
// - "Last used" is written at most once a minute per render (REFRESH_USED_MS), from the row the
//   hit read anyway: a hit costs one indexed read and, rarely, one write.
// - Eviction: after each store, while the index holds more than RENDER_CACHE_MAX_BYTES, the
//   least recently used go (their rows first, then their objects).
// - Purges: by source (a file deleted, an origin deleted) and by preset (changed or deleted).
// Renders are no account's files: nothing here touches storageBytes.
import type { Database } from '../db/database.js';
import { isObjectNotFound, type ObjectStorage } from '../storage/storage.js';
import { Readable } from 'node:stream';

export const RENDERS_PREFIX = 'renders';
/** "Last used" is bumped at most this often per render. */
const REFRESH_USED_MS = 60_000;
const EVICT_BATCH = 100;

export interface CachedRender {
  key: string;
  storageKey: string;
  contentType: string;
  etag: string;
  bytes: number;
}

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
  constructor(
    private readonly database: Database,
    private readonly storage: ObjectStorage,
    private readonly maxBytes: number,
  ) {}

  /** The stored render of `key`, if any (not past its source's expiry); bumps its use now and then. */
  async find(key: string, now: number): Promise<CachedRender | undefined> {
    const row = await this.database.db.selectFrom('render_cache').selectAll().where('key', '=', key).executeTakeFirst();
    if (!row || (row.expires_at !== null && Number(row.expires_at) <= now)) return undefined;
    if (now - Number(row.last_used_at) > REFRESH_USED_MS) {
      await this.database.db.updateTable('render_cache').set({ last_used_at: now }).where('key', '=', key).execute();
    }
    return { key, storageKey: row.storage_key, contentType: row.content_type, etag: row.etag, bytes: Number(row.bytes) };
  }

  /** The render's bytes; undefined when its object went (evicted or purged by another process meanwhile). */
  async open(render: CachedRender): Promise<Readable | undefined> {
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

  /** Stores a render (object first, then its row), then evicts past the size cap. */
  async store(render: NewRender, now: number): Promise<CachedRender> {
    const storageKey = `${RENDERS_PREFIX}/${render.key}`;
    await this.storage.put(storageKey, Readable.from([render.data]));
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
    // Another process may have made the same render meanwhile: the same bytes under the same key.
    await this.database.db
      .insertInto('render_cache')
      .values({ key: render.key, ...values })
      .onConflict((oc) => oc.column('key').doUpdateSet(values))
      .execute();
    await this.evict(render.key);
    return { key: render.key, storageKey, contentType: render.contentType, etag: render.etag, bytes: render.data.length };
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
   * Deletes the least recently used renders while the cache is over its cap; never `keep` (the
   * render just stored, about to be served, even when it alone passes the cap).
   */
  async evict(keep?: string): Promise<number> {
    let total = await this.totalBytes();
    let evicted = 0;
    while (total > this.maxBytes) {
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
        if (total <= this.maxBytes) break;
        if (row.key === keep) continue;
        going.push(row);
        total -= Number(row.bytes);
      }
      await this.remove(going);
      evicted += going.length;
    }
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
    await this.remove(rows);
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
    await this.remove(rows);
    return rows.length;
  }

  /** Rows first (nothing serves them after), then the objects. */
  private async remove(rows: { key: string; storage_key: string }[]): Promise<void> {
    if (rows.length === 0) return;
    await this.database.db
      .deleteFrom('render_cache')
      .where(
        'key',
        'in',
        rows.map((r) => r.key),
      )
      .execute();
    for (const row of rows) await this.storage.delete(row.storage_key).catch(() => undefined);
  }
}
