// Output sizes decided by the options alone, so limits can be checked before decoding.
import colorString from 'color-string';

export interface Size {
  width: number;
  height: number;
}

/** How a resize fills its box (sharp's names). */
export const FITS = ['cover', 'contain', 'fill', 'inside', 'outside'] as const;
export type Fit = (typeof FITS)[number];

/** The size sharp's resize produces for these options (same rounding). */
export function resizedSize(source: Size, options: { width?: number; height?: number; fit?: Fit; withoutEnlargement?: boolean }): Size {
  const { width, height } = options;
  const fit = options.fit ?? 'inside';
  let target: Size;
  if (width !== undefined && height !== undefined) {
    if (fit === 'inside' || fit === 'outside') {
      const scaleW = width / source.width;
      const scaleH = height / source.height;
      const scale = fit === 'inside' ? Math.min(scaleW, scaleH) : Math.max(scaleW, scaleH);
      target = { width: Math.max(1, Math.round(source.width * scale)), height: Math.max(1, Math.round(source.height * scale)) };
    } else {
      target = { width, height };
    }
  } else if (width !== undefined) {
    target = { width, height: Math.max(1, Math.round((source.height * width) / source.width)) };
  } else if (height !== undefined) {
    target = { width: Math.max(1, Math.round((source.width * height) / source.height)), height };
  } else {
    target = source;
  }
  if (options.withoutEnlargement && (target.width > source.width || target.height > source.height)) {
    if (fit === 'cover' || fit === 'contain' || fit === 'fill') {
      return { width: Math.min(target.width, source.width), height: Math.min(target.height, source.height) };
    }
    return source;
  }
  return target;
}

/** The largest box of `ratio` ("16:9") that fits inside the source. */
export function aspectBox(source: Size, ratio: string): Size {
  const [w, h] = parseAspectRatio(ratio)!;
  const byWidth = { width: source.width, height: Math.round((source.width * h) / w) };
  if (byWidth.height <= source.height) return { width: byWidth.width, height: Math.max(1, byWidth.height) };
  return { width: Math.max(1, Math.round((source.height * w) / h)), height: source.height };
}

export function parseAspectRatio(ratio: string): [number, number] | undefined {
  const match = /^(\d{1,5}(?:\.\d{1,4})?):(\d{1,5}(?:\.\d{1,4})?)$/.exec(ratio);
  if (!match) return undefined;
  const w = Number(match[1]);
  const h = Number(match[2]);
  return w > 0 && h > 0 ? [w, h] : undefined;
}

/** A CSS colour (name, #hex, rgb()/rgba()) as sharp takes it; undefined when it is not one. */
export function parseColour(text: string): { r: number; g: number; b: number; alpha: number } | undefined {
  // color-string answers [r, g, b, alpha] or null (its type says only number[]).
  const [r, g, b, alpha] = colorString.get.rgb(text) ?? [];
  if (r === undefined || g === undefined || b === undefined || alpha === undefined) return undefined;
  return { r, g, b, alpha };
}
