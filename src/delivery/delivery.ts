// The /r/ route's core: signature → source → cache lookup → (miss) single-flight → quota →
// slot → render → answer, and the store after it. The route (src/http/routes/delivery.ts) only
// reads the path and writes the answer.
//
// - The signature is checked before anything but the key lookup (cached: signing-keys.ts).
// - Cache keys hash the account, the source's identity and version (a file's id, which names
//   its bytes for ever; an origin object's origin id, path and content hash), the normalised transform with
//   its preset expanded, and the negotiated format: a change to any of them is a new key, so
//   an old render is never served for it. Keys of one account share renders (the key id is not
//   in the cache key): deleting a signing key stops its URLs at the signature check.
// - Single-flight: concurrent misses of one key in this process wait for one render (one
//   charge). Across processes the same miss may be rendered (and charged) once per process at
//   most: the second store replaces the first with the same bytes.
// - A miss is charged against monthlyRenders before it renders (one conditional UPDATE: exact
//   under concurrency) and refunded when it fails, whatever the cause: only renders count.
// - A render is answered as soon as it is encoded; storing it (object, then its row, then
//   eviction) follows, off the answer's path (the PNG of a 2 MP photo is half a megabyte to
//   write). Until the store has ended the render stays in `inFlight`, so a request for it
//   meanwhile — which has found its source live itself — is answered from those bytes, not
//   rendered again. The store keeps its guarantees: the row is written after the whole object
//   and only while the source is live, so neither a killed process nor a deletion that ran
//   before the store leaves an entry. A render that could not be stored was still answered
//   (and counted).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import type { RawBuilder } from 'kysely';
import { limitsOf, type PlanLimits, type PlanTable } from '../accounts/plans.js';
import { chargeRender, refundRender } from '../accounts/quota.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Logger } from 'pino';
import type { Database } from '../db/database.js';
import { AppError, TaskError } from '../errors.js';
import { fileIsLive, getLiveFile } from '../files/files.js';
import { IMAGE_FORMATS, isPopplerDocument, type OutputFormat } from '../imaging/formats.js';
import { sha256Hex } from '../ids.js';
import type { Metrics } from '../metrics.js';
import type { QueueEvents } from '../queue/events.js';
import type { ObjectStorage } from '../storage/storage.js';
import { ownedTempPrefix } from '../temp-files.js';
import { RenderSlots } from './admission.js';
import { checkOriginPath, originObject } from './origin-fetch.js';
import { findOrigin, originExists } from './origins.js';
import { findPreset } from './presets.js';
import { mediaTypeOf, render } from './render.js';
import { RenderCache, renderEntry, type CachedRender } from './render-cache.js';
import { deleteSigningKey, findSigningKey, forgetSigningKeys, knownSigningKey, signatureMatches } from './signing-keys.js';
import { invalidPair, MAX_RENDER_SIDE, normalise, parsePairs, presetOf, resolveTransform, type Transform } from './transform.js';
import type { Poppler, RunLimits } from '../programs/poppler.js';

export interface DeliveryRequest {
  keyId: string;
  signature: string;
  /** `{transform}/{source}` exactly as sent (what is signed). */
  signed: string;
  accept: string | undefined;
}

export interface Delivered {
  render: CachedRender;
  /** The render's bytes (a miss, or a hit from memory), or its stored object's stream. */
  body: Readable | Buffer;
  hit: boolean;
  /** The format came from Accept (f:auto): the answer varies by it. */
  negotiated: boolean;
}

/** The source a render reads, located and versioned. */
interface Source {
  /** What purges its renders: `file:<id>` or `origin:<id>`. */
  id: string;
  version: string;
  storageKey: string;
  format: string;
  expiresAt: number | null;
  /** The condition that it still exists, written with its render's row (it may have been deleted meanwhile). */
  live(now: number): RawBuilder<boolean>;
}

const FILE_ID = /^[A-Za-z0-9_-]{1,100}$/;
/** A stored file is never rewritten: its id names its bytes for ever. */
const FILE_VERSION = 'immutable';
/** How many transform texts are kept parsed. */
const PARSED_ENTRIES = 10_000;

const signatureInvalid = () => new AppError('SIGNATURE_INVALID', 'The URL signature does not match its key, or the key is unknown or deleted');

export interface DeliveryServices {
  config: Config;
  clock: Clock;
  database: Database;
  storage: ObjectStorage;
  plans: PlanTable;
  metrics: Metrics;
  events: QueueEvents;
  /** pdfinfo and pdftoppm, in the converter sandbox: a PDF source's page is rasterised before it is rendered. */
  poppler: Poppler;
  logger: Logger;
}

/** The width a PDF page is rasterised at when the transform gives neither `w` nor `h` (as previews). */
const PDF_PAGE_WIDTH = 1024;

export class Delivery {
  readonly cache: RenderCache;
  private readonly slots: RenderSlots;
  /** Transform texts without a preset, parsed (parseTransform). */
  private readonly parsed = new Map<string, ParsedTransform>();
  /** Renders of this process not yet stored (rendering, or answered and being stored), by cache key. */
  private readonly inFlight = new Map<string, InFlight>();
  /** Stores under way (stored() waits for them). */
  private readonly storing = new Set<Promise<void>>();
  /** Renders of this process whose store has ended (a request that looked meanwhile looks again). */
  private storesEnded = 0;

  constructor(private readonly services: DeliveryServices) {
    this.cache = new RenderCache(services.database, services.storage, services.config.renderCacheMaxBytes, services.config.renderMemoryCacheBytes);
    // A purge here: the other processes drop the renders they keep in memory now.
    this.cache.onPurge = () => services.events.changed('renders');
    services.events.on('changed:renders', () => this.cache.forgetMemory());
    this.slots = new RenderSlots(services.config.renderConcurrency, services.config.renderQueueMs);
    // Another process deleted a key: drop this process's copies now.
    services.events.on('changed:signing-keys', () => forgetSigningKeys(services.database));
  }

  /** Deletes a signing key: its URLs stop at once here and, told through the database, in the other processes. */
  async deleteSigningKey(accountId: string, keyId: string): Promise<void> {
    await deleteSigningKey(this.services.database, accountId, keyId);
    this.services.events.changed('signing-keys');
  }

  /**
   * A hit answered from this process's memory alone — the signing key, the parsed transform and
   * the render all held there, nothing awaited — or undefined for anything else, which `deliver`
   * then answers in full (errors, misses, `_` URLs, presets, origins, entries due for a look at
   * their row). What it answers is what `deliver` would: the same checks, in memory.
   */
  deliverFromMemory(request: DeliveryRequest): Delivered | undefined {
    const key = knownSigningKey(this.services.database, request.keyId);
    if (!key || key.disabled || request.signature === '_') return undefined;
    const { transformText, sourceText } = splitSigned(request.signed);
    const parsed = this.parsed.get(transformText);
    if (!parsed || !FILE_ID.test(sourceText) || !signatureMatches(key.secret, request.signed, request.signature)) return undefined;
    const format = outputFormat(parsed.transform, request.accept);
    const found = this.cache.peek(
      cacheKeyOf(key.accountId, `file:${sourceText}`, FILE_VERSION, parsed.normalised, format),
      this.services.clock.now(),
    );
    return found && { ...found, hit: true, negotiated: parsed.transform.f === 'auto' };
  }

  async deliver(request: DeliveryRequest): Promise<Delivered> {
    const { database, clock } = this.services;
    const key = await findSigningKey(database, request.keyId);
    if (!key) throw signatureInvalid();
    const { transformText, sourceText } = splitSigned(request.signed);
    if (request.signature === '_') {
      // Unsigned: only a public preset, as the whole transform (Cloudinary's strict transformations).
      const name = /^p:([a-z0-9-]{1,32})$/.exec(transformText)?.[1];
      const preset = name ? await findPreset(database, key.accountId, name) : undefined;
      if (!preset?.public) throw signatureInvalid();
    } else if (!signatureMatches(key.secret, request.signed, request.signature)) {
      throw signatureInvalid();
    }
    if (key.disabled) throw new AppError('ACCOUNT_DISABLED', 'The account of this URL has been disabled by the operator');
    const limits = limitsOf(this.services.plans, key.plan);

    const { transform, normalised, presetName } = await this.parseTransform(key.accountId, transformText);
    const now = clock.now();
    const negotiated = transform.f === 'auto';
    const format = outputFormat(transform, request.accept);
    const keyOf = (sourceId: string, version: string) => cacheKeyOf(key.accountId, sourceId, version, normalised, format);
    const hit = async (cacheKey: string): Promise<Delivered | undefined> => {
      const found = await this.cache.lookup(cacheKey, now);
      return found && { ...found, hit: true, negotiated };
    };

    // A file's bytes never change: its id is its version, so a hit needs no read of the file
    // (a deleted file's renders are purged with it; an expired one's carry its expiry).
    const fileId = sourceText.startsWith('o/') ? undefined : sourceText;
    let storesEnded = this.storesEnded;
    const early = fileId !== undefined && FILE_ID.test(fileId) ? await hit(keyOf(`file:${fileId}`, FILE_VERSION)) : undefined;
    if (early) return early;
    const source = await this.locate(key.accountId, sourceText, transform, limits, now);
    const cacheKey = keyOf(source.id, source.version);
    if (fileId === undefined) {
      const found = await hit(cacheKey);
      if (found) return found;
    }
    for (let looks = 0; ; looks++) {
      const known = this.inFlight.get(cacheKey);
      // Made already and being stored: no render for this request, a hit.
      if (known?.made) return { render: known.made.render, body: known.made.data, hit: true, negotiated };
      if (known) {
        const made = await known.making;
        return { render: made.render, body: made.data, hit: false, negotiated };
      }
      // A render that left inFlight while this request looked in the cache may be this one,
      // stored after the look began: look again before rendering it a second time (and charging
      // twice). Bounded: under a flood of other keys' stores, a duplicate render is the price.
      if (this.storesEnded === storesEnded || looks === 3) break;
      storesEnded = this.storesEnded;
      const found = await hit(cacheKey);
      if (found) return found;
    }
    const made = await this.renderAndStore({ accountId: key.accountId, limits, cacheKey, source, transform, format, preset: presetName });
    return { render: made.render, body: made.data, hit: false, negotiated };
  }

  /** Resolves when every render answered so far has been stored (or found not to be kept): before the service closes. */
  async stored(): Promise<void> {
    while (this.storing.size > 0) await Promise.allSettled([...this.storing]);
  }

  /** Renders a missing key (renderOnce) and stores it once made, keeping it in `inFlight` until stored; resolves when it is made. */
  private renderAndStore(miss: Miss): Promise<Made> {
    const { accountId, cacheKey, source, preset } = miss;
    const making = this.renderOnce(miss);
    const entry: InFlight = { making };
    this.inFlight.set(cacheKey, entry);
    const stored = making
      .then(async (made) => {
        entry.made = made;
        const now = this.services.clock.now();
        const kept = await this.cache.store(
          {
            key: cacheKey,
            accountId,
            source: source.id,
            preset,
            contentType: made.render.contentType,
            etag: made.render.etag,
            data: made.data,
            expiresAt: source.expiresAt,
          },
          now,
          source.live(now),
        );
        // Deleted while it rendered (its purge may have run before this store): answered, not kept.
        if (!kept) this.services.logger.debug({ key: cacheKey, source: source.id }, 'a delivery render of a deleted source was not kept');
      })
      .catch((err: unknown) => {
        // Its failure to render was the request's answer; a failure to store only costs a render later.
        if (entry.made) this.services.logger.warn({ err, key: cacheKey }, 'a delivery render could not be stored');
      })
      .finally(() => {
        this.storesEnded++;
        this.inFlight.delete(cacheKey);
        this.storing.delete(stored);
      });
    this.storing.add(stored);
    return making;
  }

  /**
   * The transform of a URL's transform text, its presets expanded. Texts without a preset (whose
   * meaning never changes) are kept parsed, a bounded number, so a hit does not parse them again.
   */
  private async parseTransform(accountId: string, text: string): Promise<ParsedTransform> {
    const known = this.parsed.get(text);
    if (known) return known;
    // What was signed is the text as sent; what is read is its decoded form (w%3A100 is w:100).
    let decoded: string;
    try {
      decoded = decodeURIComponent(text);
    } catch {
      throw invalidPair('transform', 'is not valid percent-encoding');
    }
    const pairs = parsePairs(decoded);
    const presetName = presetOf(pairs);
    const preset = presetName ? await findPreset(this.services.database, accountId, presetName) : undefined;
    if (presetName && !preset) throw invalidPair('p', `the account has no preset named "${presetName}"`);
    const transform = resolveTransform(pairs, preset?.pairs);
    const parsed = { transform, normalised: normalise(transform), presetName };
    if (!presetName) {
      if (this.parsed.size >= PARSED_ENTRIES) this.parsed.delete(this.parsed.keys().next().value!);
      this.parsed.set(text, parsed);
    }
    return parsed;
  }

  /** Where the source is and which version of it; 404 for another account's or a missing one. */
  private async locate(accountId: string, text: string, transform: Transform, limits: PlanLimits, now: number): Promise<Source> {
    const { database, config, storage } = this.services;
    if (text.startsWith('o/')) {
      const rest = text.slice(2);
      const slash = rest.indexOf('/');
      const name = slash < 0 ? rest : rest.slice(0, slash);
      const objectPath = slash < 0 ? '' : rest.slice(slash + 1);
      checkOriginPath(objectPath);
      if (transform.page !== undefined) throw invalidPair('page', 'page selects a page of a PDF source; origins serve images');
      const origin = await findOrigin(database, accountId, name);
      if (!origin) throw new AppError('NOT_FOUND', `The account has no origin named "${name}"`);
      const object = await originObject(origin, objectPath, {
        database,
        storage,
        allowPrivate: config.originAllowPrivateNetworks,
        timeoutMs: config.originTimeoutMs,
        cacheMs: config.originCacheMs,
        maxBytes: limits.maxFileBytes,
        now,
        observe: (seconds, outcome) => this.services.metrics.originFetchDuration.observe({ outcome }, seconds),
      });
      return {
        id: `origin:${origin.id}`,
        version: `${objectPath}\n${object.contentHash}`,
        storageKey: object.storageKey,
        format: object.format,
        expiresAt: null,
        live: () => originExists(database, accountId, origin.id),
      };
    }
    if (!FILE_ID.test(text)) {
      throw new AppError('VALIDATION_ERROR', 'source: is neither a fileId nor o/{origin}/{path}', {
        fields: [{ field: 'source', message: 'is neither a fileId nor o/{origin}/{path}' }],
      });
    }
    let file;
    try {
      file = await getLiveFile(database.db, accountId, text, now);
    } catch (err) {
      // An expired file is gone as a deleted one is: 404.
      if (err instanceof AppError && err.code === 'FILE_EXPIRED') throw new AppError('NOT_FOUND', 'File not found');
      throw err;
    }
    if (isPopplerDocument(file.format)) {
      // The page count is known from the upload (pdfinfo); a PDF poppler could not read has none, and fails when rendered.
      if (file.pages !== null && (transform.page ?? 1) > file.pages)
        throw invalidPair('page', `the PDF has ${file.pages} page${file.pages === 1 ? '' : 's'}; page:${transform.page} is not one of them`);
    } else if (transform.page !== undefined) {
      throw invalidPair('page', `page selects a page of a PDF source; this file is ${file.format}`);
    } else if (!IMAGE_FORMATS.has(file.format)) {
      throw new AppError('UNSUPPORTED_MEDIA_TYPE', `A ${file.format} file cannot be rendered by a delivery URL; images and PDFs can`);
    }
    return {
      id: `file:${file.id}`,
      version: FILE_VERSION,
      storageKey: file.storage_key,
      format: file.format,
      expiresAt: file.expires_at,
      live: (now) => fileIsLive(database, accountId, file.id, now),
    };
  }

  /** One render of a missing key: charged, admitted, rendered within the time limit (not stored: renderAndStore). */
  private async renderOnce({ accountId, limits, cacheKey, source, transform, format }: Miss): Promise<Made> {
    const { database, clock, config, metrics } = this.services;
    const chargedAt = clock.now();
    await chargeRender(database, accountId, limits, chargedAt);
    try {
      await this.slots.acquire();
      const started = performance.now();
      // The slot is held until the work has really stopped, even when the answer went at the deadline.
      const made = await this.withTimeLimit(
        (signal, deadline) => this.renderSource(source, transform, format, limits, signal, deadline),
        () => this.slots.release(),
      );
      metrics.renderDuration.observe((performance.now() - started) / 1000);
      // The key names these exact bytes (source version, transform, format): no hash of the output needed.
      return { render: renderEntry(cacheKey, mediaTypeOf(made.format), cacheKey.slice(0, 32), made.data.length), data: made.data };
    } catch (err) {
      await refundRender(database, accountId, chargedAt).catch(() => undefined);
      throw asRenderError(err, config.renderTimeoutMs);
    }
  }

  /**
   * Runs `work` with RENDER_TIMEOUT_SECONDS: at the deadline the answer is 504 RENDER_TIMEOUT
   * and the work is told to stop (its signal; libvips' own timeout); `settled` runs when the
   * work has ended, whenever that is.
   */
  private async withTimeLimit<T>(work: (signal: AbortSignal, deadline: number) => Promise<T>, settled: () => void): Promise<T> {
    const { renderTimeoutMs } = this.services.config;
    const controller = new AbortController();
    const timedOut = () => new AppError('RENDER_TIMEOUT', `The render took longer than ${renderTimeoutMs / 1000} s`);
    let timer: NodeJS.Timeout | undefined;
    const running = work(controller.signal, Date.now() + renderTimeoutMs);
    running.then(settled, settled);
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort(timedOut());
        reject(timedOut());
      }, renderTimeoutMs);
    });
    try {
      return await Promise.race([running, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The source on this machine's disk (local storage: where it is; S3: a copy in a temporary
   * directory), rendered. A local source needs no directory: the delivery's steps (rotate,
   * flip, resize, effects) write no files.
   */
  private async renderSource(source: Source, transform: Transform, format: RenderFormat, limits: PlanLimits, signal: AbortSignal, deadline: number) {
    const { storage } = this.services;
    const localPath = storage.localPath?.(source.storageKey);
    const job = { inputFormat: source.format, transform, format, limits, deadline, signal };
    const pdf = isPopplerDocument(source.format);
    if (localPath && !pdf) return render({ ...job, inputPath: localPath, tmpDir: os.tmpdir() });
    const tmpDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), ownedTempPrefix('imgapi-render-')));
    try {
      let inputPath = localPath;
      if (!inputPath) {
        inputPath = path.join(tmpDir, 'source');
        await pipeline(await storage.get(source.storageKey), fs.createWriteStream(inputPath), { signal });
      }
      if (pdf)
        return await render({
          ...job,
          inputFormat: 'png',
          inputPath: await this.pdfPage(inputPath, transform, tmpDir, { signal, deadline }),
          tmpDir,
        });
      return await render({ ...job, inputPath, tmpDir });
    } finally {
      await fs.promises.rm(tmpDir, { recursive: true, force: true });
    }
  }

  /**
   * A PDF source's `page` (default 1) as a PNG, rasterised at the size the transform asks (w or h;
   * covering both when both are given; PDF_PAGE_WIDTH wide without either), at most
   * MAX_RENDER_SIDE a side: the render's steps then work on it as on an image.
   */
  private async pdfPage(pdf: string, transform: Transform, dir: string, limits: RunLimits): Promise<string> {
    const { poppler } = this.services;
    const page = transform.page ?? 1;
    const size = (await poppler.pageSizes(pdf, { first: page, last: page }, limits)).get(page)!;
    const asked = Math.max(transform.w ? transform.w / size.width : 0, transform.h ? transform.h / size.height : 0) || PDF_PAGE_WIDTH / size.width;
    const scale = Math.min(asked, MAX_RENDER_SIDE / size.width, MAX_RENDER_SIDE / size.height);
    const pages = await poppler.rasterise(
      pdf,
      { first: page, last: page },
      Math.max(1, Math.round(size.width * scale)),
      'png',
      path.join(dir, 'page'),
      limits,
    );
    return pages.get(page)!;
  }
}

interface ParsedTransform {
  transform: Transform;
  normalised: string;
  presetName: string | undefined;
}

/** A render just made: its entry, and its bytes (served from memory to everyone who waited for it). */
interface Made {
  render: CachedRender;
  data: Buffer;
}

/** A missing render: whose, of what, how. */
interface Miss {
  accountId: string;
  limits: PlanLimits;
  cacheKey: string;
  source: Source;
  transform: Transform;
  format: RenderFormat;
  preset: string | undefined;
}

/** A render of this process not yet stored: being made, then (`made`) being stored. */
interface InFlight {
  making: Promise<Made>;
  made?: Made;
}

type RenderFormat = OutputFormat | ((hasAlpha: boolean) => OutputFormat) | undefined;

/** `{transform}/{source}` in its two parts. */
function splitSigned(signed: string): { transformText: string; sourceText: string } {
  const slash = signed.indexOf('/');
  return slash < 0 ? { transformText: signed, sourceText: '' } : { transformText: signed.slice(0, slash), sourceText: signed.slice(slash + 1) };
}

/** A render's cache key (see the header): the account, the source and its version, the normalised transform, the format. */
function cacheKeyOf(accountId: string, sourceId: string, version: string, normalised: string, format: RenderFormat): string {
  const formatClass = typeof format === 'function' ? 'auto-legacy' : (format ?? 'source');
  return sha256Hex([accountId, sourceId, version, normalised, formatClass].join('\n'));
}

/**
 * The output format: `f` as given; for `auto`, AVIF when Accept names it, else WebP, else (a
 * function of the source's alpha) PNG or JPEG; without `f`, the source's where it can be written.
 */
function outputFormat(transform: Transform, accept: string | undefined): RenderFormat {
  const f = transform.f;
  if (f === undefined) return undefined;
  if (f !== 'auto') return f as OutputFormat;
  const types = (accept ?? '')
    .toLowerCase()
    .split(',')
    .map((part) => part.trim().split(';'))
    .filter(([, ...params]) => !params.some((p) => /^\s*q\s*=\s*0(\.0*)?\s*$/.test(p)))
    .map(([type]) => type!.trim());
  if (types.includes('image/avif')) return 'avif';
  if (types.includes('image/webp')) return 'webp';
  return (hasAlpha) => (hasAlpha ? 'png' : 'jpeg');
}

/** A render's failure as the contract's answer: the input's faults as 4xx, the time limit as 504. */
function asRenderError(err: unknown, timeoutMs: number): unknown {
  if (!(err instanceof TaskError)) return err;
  switch (err.code) {
    case 'IMAGE_TOO_LARGE':
      return new AppError('IMAGE_TOO_LARGE', err.message);
    case 'PROCESSING_TIMEOUT':
      return new AppError('RENDER_TIMEOUT', `The render took longer than ${timeoutMs / 1000} s`);
    case 'INVALID_OPTIONS':
      return new AppError('VALIDATION_ERROR', err.message, { fields: [{ field: String(err.details?.field ?? 'transform'), message: err.message }] });
    case 'INTERNAL_ERROR':
      return err;
    default:
      // INVALID_IMAGE, UNSUPPORTED_FORMAT, CONVERSION_FAILED…: the source is not an image this renders.
      return new AppError('UNSUPPORTED_MEDIA_TYPE', err.message);
  }
}
