// The transform grammar of delivery URLs: `-`, or `name:value` pairs joined by `,` in any order.
// One table of pairs (PAIRS), each with its range, mirroring what sharp accepts so that a bad
// value is a 400 naming the pair, never a 500. A preset (`p:name`) is expanded where it stands:
// pairs after it override its own, pairs before it are overridden by it. The result is
// normalised (each name once, numbers in one spelling, `w`/`h` multiplied by `dpr`), so that two
// spellings of one render share one cache entry.
import { FITS, FORMATS as DELIVERY_FORMATS, GRAVITIES } from '../../sdk/delivery.js';
import { AppError } from '../errors.js';
import { canonicalFormat } from '../imaging/formats.js';

// The value lists are the SDK's, which checks a transform before signing it: one grammar.
export { FITS, GRAVITIES };
const FLIPS = ['h', 'v', 'hv'] as const;

/** The largest side of a render, after `dpr`. */
export const MAX_RENDER_SIDE = 4096;
/** Preset names, and origin names: the same alphabet. */
const NAME_PATTERN = /^[a-z0-9-]{1,32}$/;

export interface Transform {
  w?: number;
  h?: number;
  fit?: (typeof FITS)[number];
  g?: (typeof GRAVITIES)[number];
  f?: (typeof DELIVERY_FORMATS)[number];
  q?: number;
  /** 6 or 8 hex digits, lower case. */
  bg?: string;
  rot?: 90 | 180 | 270;
  flip?: (typeof FLIPS)[number];
  blur?: number;
  sharpen?: number;
  page?: number;
}

type Name = keyof Transform | 'dpr' | 'p';

interface Pair {
  /** The value, parsed; undefined: refused with `expects`. */
  parse(text: string): unknown;
  expects: string;
}

const integer = (min: number, max: number): Pair => ({
  parse: (text) => (/^\d{1,6}$/.test(text) && Number(text) >= min && Number(text) <= max ? Number(text) : undefined),
  expects: `a whole number from ${min} to ${max}`,
});
const decimal = (min: number, max: number): Pair => ({
  parse: (text) => (/^\d{1,4}(\.\d{1,3})?$/.test(text) && Number(text) >= min && Number(text) <= max ? Number(text) : undefined),
  expects: `a number from ${min} to ${max} (at most 3 decimals)`,
});
const choice = (values: readonly string[]): Pair => ({
  parse: (text) => (values.includes(text) ? text : undefined),
  expects: values.join(', '),
});

/** Every pair the grammar knows, with its range. */
const PAIRS: Record<Name, Pair> = {
  p: { parse: (text) => (NAME_PATTERN.test(text) ? text : undefined), expects: 'a preset name ([a-z0-9-], 1–32 characters)' },
  w: { ...integer(1, MAX_RENDER_SIDE), expects: `a width in px from 1 to ${MAX_RENDER_SIDE}` },
  h: { ...integer(1, MAX_RENDER_SIDE), expects: `a height in px from 1 to ${MAX_RENDER_SIDE}` },
  fit: choice(FITS),
  g: choice(GRAVITIES),
  dpr: decimal(1, 4),
  // An alias (`jpg`) is the format's own name from here on: one cache entry for both spellings.
  f: { parse: (text) => (DELIVERY_FORMATS.includes(text as never) ? canonicalFormat(text) : undefined), expects: DELIVERY_FORMATS.join(', ') },
  q: integer(1, 100),
  bg: { parse: (text) => (/^([0-9a-fA-F]{6}|[0-9a-fA-F]{8})$/.test(text) ? text.toLowerCase() : undefined), expects: '6 or 8 hex digits' },
  rot: { parse: (text) => (['90', '180', '270'].includes(text) ? Number(text) : undefined), expects: '90, 180 or 270' },
  flip: choice(FLIPS),
  blur: decimal(0.3, 1000),
  sharpen: decimal(0.01, 10),
  page: integer(1, 100_000),
};

/** The order names are written in a normalised transform. */
const ORDER = Object.keys(PAIRS) as Name[];

/** 400 VALIDATION_ERROR naming the pair. */
export const invalidPair = (field: string, message: string): AppError =>
  new AppError('VALIDATION_ERROR', `${field}: ${message}`, { fields: [{ field, message }] });

/** A transform as written: its pairs in order (a preset as `p`). */
export type Pairs = [Name, unknown][];

/** Reads `-` or the pairs of a URL's transform segment (or of a preset); 400 naming the bad pair. */
export function parsePairs(text: string): Pairs {
  if (text === '-') return [];
  if (text.length === 0) throw invalidPair('transform', 'is empty; write - for the source as it is');
  if (text.length > 1024) throw invalidPair('transform', 'is longer than 1024 characters');
  const pairs: Pairs = [];
  const seen = new Set<string>();
  for (const part of text.split(',')) {
    const colon = part.indexOf(':');
    const name = colon < 0 ? part : part.slice(0, colon);
    if (!Object.hasOwn(PAIRS, name)) {
      throw invalidPair(name || 'transform', `"${part}" is not a known name:value pair (names: ${ORDER.join(', ')})`);
    }
    if (colon < 0) throw invalidPair(name, `"${part}" has no value (write ${name}:value)`);
    if (seen.has(name)) throw invalidPair(name, `${name} is given twice`);
    seen.add(name);
    const value = PAIRS[name as Name].parse(part.slice(colon + 1));
    if (value === undefined) throw invalidPair(name, `"${part}": ${name} takes ${PAIRS[name as Name].expects}`);
    pairs.push([name as Name, value]);
  }
  return pairs;
}

/** The preset named in a transform, if any. */
export const presetOf = (pairs: Pairs): string | undefined => pairs.find(([name]) => name === 'p')?.[1] as string | undefined;

/**
 * The transform with its preset expanded where it stands (`preset` holds the preset's own
 * pairs) and `dpr` applied: what is rendered. Checks what needs more than one pair.
 */
export function resolveTransform(pairs: Pairs, preset?: Pairs): Transform {
  const values: Partial<Record<Name, unknown>> = {};
  for (const [name, value] of pairs) {
    if (name === 'p') for (const [inner, innerValue] of preset ?? []) values[inner] = innerValue;
    else values[name] = value;
  }
  const { dpr = 1, p: _p, ...rest } = values as Transform & { dpr?: number; p?: string };
  const transform = rest as Transform;
  for (const side of ['w', 'h'] as const) {
    const px = transform[side];
    if (px === undefined) continue;
    const scaled = Math.round(px * dpr);
    if (scaled > MAX_RENDER_SIDE) {
      throw invalidPair(side, `${side}:${px} at dpr:${dpr} is ${scaled} px; a render is at most ${MAX_RENDER_SIDE} px a side`);
    }
    transform[side] = scaled;
  }
  if ((transform.g === 'attention' || transform.g === 'entropy' || transform.g === 'face') && transform.fit !== 'cover') {
    throw invalidPair('g', `g:${transform.g} chooses a crop, so it needs fit:cover`);
  }
  return transform;
}

/** The normalised text of a resolved transform: the render's identity in cache keys. */
export function normalise(transform: Transform): string {
  const parts = ORDER.flatMap((name) => (name in transform ? [`${name}:${String(transform[name as keyof Transform])}`] : []));
  return parts.length ? parts.join(',') : '-';
}

/**
 * A preset's transform (a request body's `transform`): pairs without `p` (presets do not nest),
 * checked as a URL's are (so a preset that cannot render is refused now), normalised as written
 * (`dpr` kept: it applies where the preset is used). Faults are 400 naming `transform`.
 */
export function parsePresetTransform(text: string): string {
  const asField = (message: string) => new AppError('VALIDATION_ERROR', `transform: ${message}`, { fields: [{ field: 'transform', message }] });
  let pairs: Pairs;
  try {
    pairs = parsePairs(text);
    if (presetOf(pairs)) throw asField('a preset cannot name another preset (p)');
    resolveTransform(pairs);
  } catch (err) {
    throw err instanceof AppError && err.message.startsWith('transform: ') ? err : err instanceof AppError ? asField(err.message) : err;
  }
  const byName = new Map(pairs);
  const normalised = ORDER.filter((name) => byName.has(name)).map((name) => `${name}:${String(byName.get(name))}`);
  return normalised.length ? normalised.join(',') : '-';
}
