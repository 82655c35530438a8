// Delivery URLs, built offline: `{base}/r/{keyId}/{signature}/{transform}/{source}`, where the
// signature is base64url (no padding) of HMAC-SHA256(secret, "{transform}/{source}") — the rest
// of the path exactly as sent, so the source is percent-encoded first and the encoded text signed.
// Browser-safe: Web Crypto only (async). The Node entry adds a synchronous signer (node:crypto).
//
//   await deliveryUrl('file_abc', { w: 720, f: 'auto', dpr: 2 }, { baseUrl, signingKey: { keyId, secret } });
//   → https://img.example.net/r/sk_…/Xy…/w:720,f:auto,dpr:2/file_abc

/** One of the account's signing keys: `keyId` is public; `secret` is shown once and stays on your server. */
export interface SigningKey {
  keyId: string;
  /** Needed except for public presets (`publicPreset`). */
  secret?: string;
}

/** A stored file (its fileId) or an object of one of the account's origins. */
export type DeliverySource = string | { origin: string; path: string };

// The grammar's value lists: the server's transform parser (src/delivery/transform.ts) reads these
// same lists, so the SDK and the server cannot disagree on what a pair accepts.
export const FITS = ['cover', 'contain', 'fill', 'inside', 'outside'] as const;
export const GRAVITIES = [
  'center',
  'north',
  'northeast',
  'east',
  'southeast',
  'south',
  'southwest',
  'west',
  'northwest',
  'attention',
  'entropy',
  'face',
] as const;
/** The formats a render may be written in (the server's format table: test/web/file-formats.test.ts holds them together). */
export const RENDER_FORMATS = ['jpeg', 'png', 'webp', 'avif', 'gif', 'jxl'] as const;
/** What `f` takes: a render format, `auto` (by the request's Accept), or `jpg` (an alias of `jpeg`, rendered and cached as it). */
export const FORMATS = [...RENDER_FORMATS, 'auto', 'jpg'] as const;

/** The transform as named pairs; `p` (a preset) comes first, so the other pairs override it. */
export interface Transform {
  /** A preset's name: the pairs given beside it override its own. */
  p?: string;
  /** Width in px (1–4,096, after `dpr`). */
  w?: number;
  /** Height in px (1–4,096, after `dpr`). */
  h?: number;
  /** Default `inside`. */
  fit?: (typeof FITS)[number];
  /** Gravity, for `fit: 'cover'`. */
  g?: (typeof GRAVITIES)[number];
  /** Device pixel ratio, 1–4: multiplies `w` and `h`. */
  dpr?: number;
  /** `auto` picks AVIF, WebP or JPEG (PNG with alpha) from the request's Accept. */
  f?: (typeof FORMATS)[number];
  /** Quality 1–100. */
  q?: number;
  /** Background, 6 or 8 hex digits (RRGGBB or RRGGBBAA), without `#`. */
  bg?: string;
  rot?: 90 | 180 | 270;
  flip?: 'h' | 'v' | 'hv';
  /** Blur sigma (0.3–1,000). */
  blur?: number;
  /** Sharpen sigma (0.01–10). */
  sharpen?: number;
  /** A PDF's page, from 1. */
  page?: number;
}

export type TransformName = keyof Transform;

/** What each pair accepts, as text (the URL's form): one entry per name, in the order URLs list them. */
const PAIRS: Record<TransformName, { check: (value: string) => boolean; expects: string }> = {
  p: { check: (v) => /^[a-z0-9-]{1,32}$/.test(v), expects: 'a preset name ([a-z0-9-], 1–32 characters)' },
  w: { check: (v) => integerIn(v, 1, 4096), expects: 'a whole number of px from 1 to 4096' },
  h: { check: (v) => integerIn(v, 1, 4096), expects: 'a whole number of px from 1 to 4096' },
  fit: { check: (v) => (FITS as readonly string[]).includes(v), expects: FITS.join(', ') },
  g: { check: (v) => (GRAVITIES as readonly string[]).includes(v), expects: GRAVITIES.join(', ') },
  dpr: { check: (v) => numberIn(v, 1, 4), expects: 'a number from 1 to 4' },
  f: { check: (v) => (FORMATS as readonly string[]).includes(v), expects: FORMATS.join(', ') },
  q: { check: (v) => integerIn(v, 1, 100), expects: 'a whole number from 1 to 100' },
  bg: { check: (v) => /^(?:[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$/.test(v), expects: '6 or 8 hex digits' },
  rot: { check: (v) => ['90', '180', '270'].includes(v), expects: '90, 180 or 270' },
  flip: { check: (v) => ['h', 'v', 'hv'].includes(v), expects: 'h, v or hv' },
  blur: { check: (v) => numberIn(v, 0.3, 1000), expects: 'a sigma from 0.3 to 1000' },
  sharpen: { check: (v) => numberIn(v, 0.01, 10), expects: 'a sigma from 0.01 to 10' },
  page: { check: (v) => integerIn(v, 1, 100_000), expects: 'a page number from 1' },
};

/** The pair names in the order URLs list them. */
export const TRANSFORM_NAMES = Object.keys(PAIRS) as TransformName[];

/** The largest side of a render, after `dpr`. */
export const MAX_RENDER_SIDE = 4096;

function integerIn(value: string, min: number, max: number): boolean {
  return /^\d{1,6}$/.test(value) && Number(value) >= min && Number(value) <= max;
}

function numberIn(value: string, min: number, max: number): boolean {
  return /^\d{1,4}(?:\.\d{1,3})?$/.test(value) && Number(value) >= min && Number(value) <= max;
}

/** A transform or source the service would refuse, found before any request. */
export class DeliveryUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DeliveryUrlError';
  }
}

/**
 * The transform segment of a delivery URL: `-` for none, else `name:value` pairs joined by `,`.
 * A string is checked and kept as written (its order is yours); an object is listed in the
 * order of TRANSFORM_NAMES (`p` first). Throws DeliveryUrlError naming the bad pair.
 */
export function transformSegment(transform: string | Transform | undefined): string {
  if (transform === undefined || transform === '' || transform === '-') return '-';
  const pairs = typeof transform === 'string' ? splitPairs(transform) : objectPairs(transform);
  if (pairs.length === 0) return '-';
  const seen = new Set<string>();
  for (const [name, value] of pairs) {
    const rule = Object.hasOwn(PAIRS, name) ? PAIRS[name as TransformName] : undefined;
    if (!rule) throw new DeliveryUrlError(`unknown transform name "${name}"; known: ${TRANSFORM_NAMES.join(', ')}`);
    if (seen.has(name)) throw new DeliveryUrlError(`"${name}" is given twice`);
    seen.add(name);
    if (!rule.check(value)) throw new DeliveryUrlError(`${name}:${value} — ${name} takes ${rule.expects}`);
  }
  const values = new Map(pairs);
  const dpr = Number(values.get('dpr') ?? 1);
  for (const side of ['w', 'h']) {
    const px = values.get(side);
    const scaled = Math.round(Number(px) * dpr);
    if (px !== undefined && scaled > MAX_RENDER_SIDE)
      throw new DeliveryUrlError(`${side}:${px} at dpr:${dpr} is ${scaled} px; a render is at most ${MAX_RENDER_SIDE} px a side`);
  }
  // A preset may set fit itself; without one, a chosen crop needs fit:cover.
  const g = values.get('g');
  if ((g === 'attention' || g === 'entropy') && !values.has('p') && values.get('fit') !== 'cover')
    throw new DeliveryUrlError(`g:${g} chooses a crop, so it needs fit:cover`);
  return pairs.map(([name, value]) => `${name}:${value}`).join(',');
}

function splitPairs(transform: string): [string, string][] {
  return transform.split(',').map((pair) => {
    const colon = pair.indexOf(':');
    if (colon <= 0) throw new DeliveryUrlError(`"${pair}" is not a name:value pair (e.g. w:720)`);
    return [pair.slice(0, colon), pair.slice(colon + 1)];
  });
}

function objectPairs(transform: Transform): [string, string][] {
  const unknown = Object.keys(transform).filter((name) => !Object.hasOwn(PAIRS, name));
  if (unknown.length) throw new DeliveryUrlError(`unknown transform name ${unknown.join(', ')}; known: ${TRANSFORM_NAMES.join(', ')}`);
  return TRANSFORM_NAMES.flatMap((name): [string, string][] => {
    const value = transform[name];
    return value === undefined ? [] : [[name, String(value)]];
  });
}

/**
 * The source segment: a fileId as it is, or `o/{origin}/{path}` with each path segment
 * percent-encoded (give the path decoded: "photos/a b.jpg"). `..` and `.` segments are refused,
 * as the service refuses them.
 */
export function sourceSegment(source: DeliverySource): string {
  if (typeof source === 'string') {
    if (!/^[A-Za-z0-9_-]{1,100}$/.test(source)) throw new DeliveryUrlError(`"${source}" is not a fileId (or pass {origin, path})`);
    return source;
  }
  if (!/^[a-z0-9-]{1,32}$/.test(source.origin))
    throw new DeliveryUrlError(`origin "${source.origin}" is not an origin name ([a-z0-9-], 1–32 characters)`);
  const segments = source.path.replace(/^\/+/, '').split('/');
  if (segments.length === 1 && segments[0] === '') throw new DeliveryUrlError('the origin path is empty');
  if (segments.some((s) => s === '..' || s === '.')) throw new DeliveryUrlError(`the origin path "${source.path}" has a "." or ".." segment`);
  return `o/${source.origin}/${segments.map(encodeURIComponent).join('/')}`;
}

/** What is signed, and what follows the signature in the URL: `{transform}/{source}`. */
export function deliveryPath(source: DeliverySource, transform?: string | Transform): string {
  return `${transformSegment(transform)}/${sourceSegment(source)}`;
}

export interface DeliveryUrlOptions {
  /** The service (or the CDN in front of its /r/ paths), e.g. `https://img.example.net`. */
  baseUrl: string;
  signingKey: SigningKey;
  /**
   * Sign with `_` instead of an HMAC: accepted only when the transform is exactly `p:{name}` and
   * that preset is public. No secret is needed.
   */
  publicPreset?: boolean;
}

/** base64url without padding. */
export function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The HMAC key: the secret's text as issued (UTF-8), as the service keys its check. */
export const keyBytes = (secret: string) => new TextEncoder().encode(secret);

/** A URL from the path and a signature function (sync or async): the shared half of both signers. */
export function assembleUrl(
  source: DeliverySource,
  transform: string | Transform | undefined,
  options: DeliveryUrlOptions,
): { path: string; secret: string | undefined; finish: (signature: string) => string } {
  const path = deliveryPath(source, transform);
  const { keyId, secret } = options.signingKey;
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(keyId)) throw new DeliveryUrlError(`"${keyId}" is not a signing key id`);
  const base = options.baseUrl.replace(/\/+$/, '');
  const finish = (signature: string) => `${base}/r/${keyId}/${signature}/${path}`;
  if (options.publicPreset) {
    if (!/^p:[a-z0-9-]{1,32}$/.test(path.slice(0, path.indexOf('/'))))
      throw new DeliveryUrlError('an unsigned (_) URL takes exactly one public preset as its transform: "p:name"');
    return { path, secret: undefined, finish };
  }
  if (!secret) throw new DeliveryUrlError("signing needs the key's secret (or publicPreset for a public preset)");
  return { path, secret, finish };
}

/**
 * A signed delivery URL, built offline with Web Crypto (browsers and Node ≥ 20). Keep the secret
 * on your server: sign there (or at build time) and send pages only the URLs.
 */
export async function deliveryUrl(source: DeliverySource, transform: string | Transform | undefined, options: DeliveryUrlOptions): Promise<string> {
  const { path, secret, finish } = assembleUrl(source, transform, options);
  if (secret === undefined) return finish('_');
  // Browsers offer Web Crypto only to secure contexts (https, localhost).
  if (!globalThis.crypto?.subtle)
    throw new DeliveryUrlError('Web Crypto is not available here (a page on plain http?): sign on a server, or with urlSync() in Node');
  const key = await crypto.subtle.importKey('raw', keyBytes(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return finish(base64url(new Uint8Array(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(path)))));
}
