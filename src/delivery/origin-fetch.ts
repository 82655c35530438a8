// Fetching a source from an origin: `GET baseUrl/path` under the webhook address rules (no
// loopback, private, link-local or metadata address, checked at lookup and on the address
// connected to: src/webhooks/address.ts), no redirects, at most the plan's maxFileBytes, one
// time limit for the whole exchange (ORIGIN_TIMEOUT_SECONDS). The body streams through the
// upload meter (count, hash, sniff: src/files/upload.ts) into storage; what is not an image is
// refused as soon as its first bytes show it.
//
// Kept objects are used for ORIGIN_CACHE_SECONDS, then revalidated with If-None-Match /
// If-Modified-Since: a 304 keeps them. When a revalidation fails (the origin is down), the kept
// copy is served (stale-if-error); a 404 forgets it.
import http from 'node:http';
import https from 'node:https';
import { pipeline } from 'node:stream';
import { AppError } from '../errors.js';
import { UploadMeter } from '../files/upload.js';
import { IMAGE_FORMATS } from '../imaging/formats.js';
import type { ObjectStorage } from '../storage/storage.js';
import { publicOnly } from '../webhooks/address.js';
import { sha256Hex } from '../ids.js';
import type { Database } from '../db/database.js';
import { findOriginObject, forgetOriginObject, saveOriginObject, type Origin, type OriginObject } from './origins.js';

export const ORIGIN_OBJECTS_PREFIX = 'origin-objects';

export interface OriginFetchOptions {
  database: Database;
  storage: ObjectStorage;
  allowPrivate: boolean;
  timeoutMs: number;
  cacheMs: number;
  maxBytes: number;
  now: number;
  /** Observes each fetch's duration (seconds) and outcome. */
  observe?: (seconds: number, outcome: string) => void;
}

/** A path with a `.` or `..` segment (as sent, or percent-encoded): 400 naming `source`. */
export function checkOriginPath(path: string): void {
  const segments = path.split('/');
  const bad = segments.some((segment) => {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return true;
    }
    return decoded === '.' || decoded === '..' || decoded.includes('/') || decoded.includes('\\') || decoded.includes('\0');
  });
  if (path.length === 0 || bad) {
    const message = path.length === 0 ? 'the origin path is empty' : 'the origin path has a "." or ".." segment (or an encoded slash)';
    throw new AppError('VALIDATION_ERROR', `source: ${message}`, { fields: [{ field: 'source', message }] });
  }
}

const originFailed = (origin: Origin, reason: string) =>
  new AppError('ORIGIN_FAILED', `The origin "${origin.name}" could not be fetched: ${reason}`, { origin: origin.name });

/** The object at `path` of `origin`, fetched or revalidated as needed. */
export async function originObject(origin: Origin, path: string, options: OriginFetchOptions): Promise<OriginObject> {
  const kept = await findOriginObject(options.database, origin.id, path);
  if (kept && options.now - kept.checkedAt < options.cacheMs) return kept;
  const started = performance.now();
  let outcome = 'error';
  try {
    const fetched = await fetchObject(origin, path, kept, options);
    outcome = kept && fetched.contentHash === kept.contentHash ? 'revalidated' : 'fetched';
    return fetched;
  } catch (err) {
    if (err instanceof AppError && err.code === 'NOT_FOUND') {
      outcome = 'not_found';
      if (kept) {
        await forgetOriginObject(options.database, origin.id, path);
        await options.storage.delete(kept.storageKey).catch(() => undefined);
      }
    } else if (kept && err instanceof AppError && err.code === 'ORIGIN_FAILED') {
      outcome = 'stale';
      return kept;
    }
    throw err;
  } finally {
    options.observe?.((performance.now() - started) / 1000, outcome);
  }
}

async function fetchObject(origin: Origin, path: string, kept: OriginObject | undefined, options: OriginFetchOptions): Promise<OriginObject> {
  const url = new URL(`${origin.baseUrl.replace(/\/+$/, '')}/${path}`);
  const literal = publicOnly.literal(url, options.allowPrivate);
  if (literal) throw originFailed(origin, literal.message);
  const controller = new AbortController();
  let failure: AppError | undefined;
  const fail = (err: AppError) => {
    failure ??= err;
    controller.abort(err);
  };
  const timer = setTimeout(() => fail(originFailed(origin, `no complete answer within ${options.timeoutMs / 1000} s`)), options.timeoutMs);
  try {
    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const client = url.protocol === 'https:' ? https : http;
      const request = client.request(url, {
        method: 'GET',
        agent: false,
        signal: controller.signal,
        headers: {
          'user-agent': 'imgapi-origin/1',
          accept: 'image/*',
          ...(kept?.etag ? { 'if-none-match': kept.etag } : {}),
          ...(kept?.lastModified ? { 'if-modified-since': kept.lastModified } : {}),
        },
        ...publicOnly.requestOptions(options.allowPrivate),
      });
      publicOnly.watch(request, options.allowPrivate, (err) => fail(originFailed(origin, err.message)));
      request.on('response', resolve);
      request.on('error', (err) => reject(failure ?? originFailed(origin, describe(err))));
      request.end();
    });
    const status = response.statusCode ?? 0;
    if (status === 304 && kept) {
      response.resume();
      const confirmed = { ...kept, checkedAt: options.now };
      await saveOriginObject(options.database, origin.id, path, confirmed);
      return confirmed;
    }
    if (status !== 200) {
      response.resume();
      if (status === 404 || status === 410) throw new AppError('NOT_FOUND', `The origin "${origin.name}" has no such object`);
      throw originFailed(
        origin,
        status >= 300 && status < 400 ? `it answered ${status} (a redirect; redirects are not followed)` : `it answered ${status}`,
      );
    }
    const declared = Number(response.headers['content-length']);
    if (Number.isFinite(declared) && declared > options.maxBytes) {
      response.destroy();
      throw originFailed(origin, `the object is ${declared} bytes, more than the plan's maxFileBytes (${options.maxBytes})`);
    }
    return await store(origin, path, response, options);
  } catch (err) {
    throw failure ?? err;
  } finally {
    clearTimeout(timer);
  }
}

async function store(origin: Origin, path: string, response: http.IncomingMessage, options: OriginFetchOptions): Promise<OriginObject> {
  const meter = new UploadMeter(options.maxBytes);
  const storageKey = `${ORIGIN_OBJECTS_PREFIX}/${sha256Hex(`${origin.id}\n${path}`).slice(0, 40)}`;
  try {
    await options.storage.put(
      storageKey,
      pipeline(response, meter, () => {}),
    );
  } catch (err) {
    await options.storage.delete(storageKey).catch(() => undefined);
    if (err instanceof AppError && err.code === 'FILE_TOO_LARGE')
      throw originFailed(origin, `the object is larger than the plan's maxFileBytes (${options.maxBytes})`);
    if (err instanceof AppError && (err.code === 'UNSUPPORTED_MEDIA_TYPE' || err.code === 'VALIDATION_ERROR')) throw notAnImage(origin);
    if (err instanceof AppError) throw err;
    throw originFailed(origin, describe(err as Error));
  }
  const format = meter.sniffed?.format;
  if (!format || !IMAGE_FORMATS.has(format)) {
    await options.storage.delete(storageKey).catch(() => undefined);
    throw notAnImage(origin);
  }
  const object: OriginObject = {
    storageKey,
    format,
    bytes: meter.size,
    contentHash: meter.sha256!,
    etag: headerText(response.headers.etag),
    lastModified: headerText(response.headers['last-modified']),
    checkedAt: options.now,
  };
  await saveOriginObject(options.database, origin.id, path, object);
  return object;
}

const notAnImage = (origin: Origin) =>
  new AppError('UNSUPPORTED_MEDIA_TYPE', `What the origin "${origin.name}" sent is not an image this service reads`);

/** A validator worth sending back: short, printable. */
const headerText = (value: string | undefined): string | null => (value && value.length <= 256 && /^[\x20-\x7e]+$/.test(value) ? value : null);

function describe(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND') return 'the host does not resolve';
  if (code === 'ECONNRESET') return 'the connection was reset';
  if (code === 'EWEBHOOKADDRESS') return err.message;
  return code ? `${err.message} (${code})` : err.message;
}
