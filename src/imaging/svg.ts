// SVG without outside references: the one place that prepares an SVG for librsvg (through
// libvips). What librsvg 2.61 resolves was measured (test/security/svg-references.test.ts):
//   - given a file PATH, every href / xlink:href (<image>, <use>, <feImage>, gradients,
//     patterns…), CSS url() and @import, <?xml-stylesheet?> and XInclude naming a file in the
//     SVG's directory or below — relative, absolute or file:// — is loaded. With local storage
//     that directory holds every account's uploads.
//   - given BYTES (no base URL), nothing relative, file: or network is loaded, but data: URLs
//     are: PNG, JPEG and SVG images, and SVG documents for <use> and url() paint servers. A
//     400 KB data: PNG of 144 MP inside a 50×50 SVG costs 1.6 GB and 9 s to render.
//   - external entities are never loaded; internal ones are, with libxml2's amplification cap.
// So SVG is always handed over as bytes, and those bytes are the document re-written here by a
// strict XML parser (saxes): no DOCTYPE (internal entities expanded within a budget), no
// processing instructions, comments or xml:base; every href that is not a local "#fragment" is
// dropped, except a data: PNG, JPEG or SVG on <image>/<feImage> within the caps below (an SVG
// one re-written the same way); every CSS url() that is not a "#fragment" becomes `none` and
// every @import is disabled, after CSS escapes that spell letters are decoded. What librsvg
// parses is exactly what was checked. libvips' `unlimited` SVG flag (which lifts librsvg's
// XML limits) is never set.
import { StringDecoder } from 'node:string_decoder';
import { SaxesParser, type SaxesTagPlain } from 'saxes';
import sharp from 'sharp';
import { TaskError } from '../errors.js';
import { sniff } from './sniff.js';

/** Decoded bytes of all the data: images one document (with its nested SVGs) may embed. */
const MAX_EMBEDDED_BYTES = 8 * 1024 * 1024;
/** Pixels of all its embedded raster images together (and never more than the plan's maxPixels). */
export const MAX_EMBEDDED_PIXELS = 32_000_000;
/** An SVG data: image may embed SVG images this deep. */
const MAX_SVG_NESTING = 2;
/** Characters internal entities may add to a document. */
const MAX_ENTITY_EXPANSION = 1024 * 1024;

/** Elements whose href may be an embedded image. */
const IMAGE_ELEMENTS = new Set(['image', 'feImage']);

/** The SVG without outside references; TaskError INVALID_IMAGE when it is not well-formed XML. */
export async function safeSvg(svg: Buffer, maxPixels: number): Promise<Buffer> {
  return rewrite(svg, { bytes: MAX_EMBEDDED_BYTES, pixels: Math.min(MAX_EMBEDDED_PIXELS, maxPixels) }, 0);
}

/** What the embedded images of one document may still use; shared by its nested SVGs. */
interface Budget {
  bytes: number;
  pixels: number;
}

/** A data: href whose image is checked once the document is parsed. */
interface PendingImage {
  attribute: string;
  url: string;
}

async function rewrite(svg: Buffer, budget: Budget, depth: number): Promise<Buffer> {
  const parts = parse(svg);
  const out: Buffer[] = [];
  for (const part of parts) {
    if (Buffer.isBuffer(part)) {
      out.push(part);
      continue;
    }
    const embedded = await embeddedImage(part.url, budget, depth);
    if (embedded) out.push(Buffer.from(` ${part.attribute}="${embedded}"`));
  }
  return Buffer.concat(out);
}

/** The document re-serialised, with its data: hrefs left as PendingImage in place. */
function parse(svg: Buffer): (Buffer | PendingImage)[] {
  const parts: (Buffer | PendingImage)[] = [];
  let text = '';
  const emit = (s: string) => {
    text += s;
    if (text.length > 1 << 20) flush();
  };
  const flush = () => {
    if (text) parts.push(Buffer.from(text, 'utf8'));
    text = '';
  };

  // Names are kept as written and prefixes not resolved: libxml2 (in librsvg) only warns about
  // an undeclared prefix (`xlink:href` without xmlns:xlink is common), so this must not refuse it.
  const parser = new SaxesParser({ xmlns: false, position: false });
  let expanded = 0;
  /** Depth inside an element being dropped whole (XInclude), 0 when not. */
  let dropping = 0;
  /** Open elements: whether each is a <style> (its text is CSS). */
  const styles: boolean[] = [];

  parser.on('doctype', (doctype) => {
    // Internal general entities with a plain value (Illustrator declares its namespaces so);
    // external ones stay undefined and fail the parse, as in librsvg.
    for (const [, name, double, single] of doctype.matchAll(/<!ENTITY\s+([^\s%"'<>]+)\s+(?:"([^"]*)"|'([^']*)')\s*>/g)) {
      const value = double ?? single!;
      if (/[&<]/.test(value) || name! in parser.ENTITIES) continue;
      Object.defineProperty(parser.ENTITIES, name!, {
        enumerable: true,
        get() {
          expanded += value.length;
          if (expanded > MAX_ENTITY_EXPANSION) throw new TaskError('INVALID_IMAGE', 'The SVG expands its entities past 1 MiB');
          return value;
        },
      });
    }
  });
  parser.on('opentag', (tag: SaxesTagPlain) => {
    const element = localName(tag.name);
    // XInclude (<xi:include>; SVG has no element of that name) is dropped whole.
    if (dropping || element === 'include') {
      if (!tag.isSelfClosing) dropping++;
      return;
    }
    emit(`<${tag.name}`);
    for (const [name, value] of Object.entries(tag.attributes)) {
      const kept = keptAttribute(name, value, element);
      if (kept === undefined) continue;
      if (typeof kept === 'string') emit(` ${name}="${escapeAttribute(kept)}"`);
      else {
        flush();
        parts.push(kept);
      }
    }
    emit(tag.isSelfClosing ? '/>' : '>');
    if (!tag.isSelfClosing) styles.push(element === 'style');
  });
  parser.on('closetag', (tag) => {
    if (tag.isSelfClosing) return;
    if (dropping) {
      dropping--;
      return;
    }
    styles.pop();
    emit(`</${tag.name}>`);
  });
  const onText = (content: string) => {
    if (dropping || styles.length === 0) return; // whitespace around the root
    emit(escapeText(styles[styles.length - 1] ? neutraliseCss(content) : content));
  };
  parser.on('text', onText);
  parser.on('cdata', onText);
  // Comments, processing instructions (<?xml-stylesheet?>), the XML declaration and the DOCTYPE
  // are not written out.

  try {
    const decoder = new StringDecoder(encodingOf(svg));
    const CHUNK = 1 << 20;
    for (let at = 0; at < svg.length; at += CHUNK) parser.write(decoder.write(svg.subarray(at, at + CHUNK)));
    parser.write(decoder.end());
    parser.close();
  } catch (err) {
    if (err instanceof TaskError) throw err;
    throw new TaskError('INVALID_IMAGE', `The SVG is not well-formed XML: ${(err as Error).message.slice(0, 200)}`);
  }
  flush();
  return parts;
}

/** The encoding Node decodes the document with: UTF-8 unless the declaration names latin-1. */
function encodingOf(svg: Buffer): BufferEncoding {
  const declared = /^(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z][\w.:-]*)["']/.exec(svg.toString('latin1', 0, 256))?.[1]?.toLowerCase();
  if (declared === undefined || declared === 'utf-8' || declared === 'utf8' || declared === 'us-ascii' || declared === 'ascii') return 'utf8';
  if (declared === 'iso-8859-1' || declared === 'latin1' || declared === 'iso_8859-1' || declared === 'windows-1252') return 'latin1';
  throw new TaskError('INVALID_IMAGE', `The SVG's encoding "${declared}" is not supported (use UTF-8)`);
}

/** An attribute as written out (string), checked later (PendingImage) or dropped (undefined). */
function keptAttribute(name: string, value: string, element: string): string | PendingImage | undefined {
  if (name === 'xmlns' || name.startsWith('xmlns:')) return value;
  if (name === 'xml:base') return undefined;
  // href in any namespace (xlink:href, SVG 2's plain href, or a prefix bound to XLink).
  if (localName(name) === 'href') {
    const target = value.trim();
    if (target.startsWith('#')) return target;
    if (IMAGE_ELEMENTS.has(element) && /^data:/i.test(target)) return { attribute: name, url: target };
    return undefined;
  }
  return neutraliseCss(value);
}

/**
 * A data: image as a canonical data: URL, when it is a PNG or JPEG within the budget, or an SVG
 * (rewritten the same way) not nested too deep; else undefined (the href is dropped).
 */
async function embeddedImage(url: string, budget: Budget, depth: number): Promise<string | undefined> {
  const bytes = decodeDataUrl(url, budget.bytes);
  if (!bytes) return undefined;
  budget.bytes -= bytes.length;
  const sniffed = sniff(bytes);
  const format = sniffed && !('refused' in sniffed) ? sniffed.format : undefined;
  if (format === 'svg') {
    if (depth >= MAX_SVG_NESTING) return undefined;
    try {
      return `data:image/svg+xml;base64,${(await rewrite(bytes, budget, depth + 1)).toString('base64')}`;
    } catch {
      return undefined; // a broken embedded image is not drawn, as librsvg would do
    }
  }
  if (format !== 'png' && format !== 'jpeg') return undefined; // the only rasters librsvg draws
  const meta = await sharp(bytes, { limitInputPixels: false })
    .metadata()
    .catch(() => undefined);
  const pixels = (meta?.width ?? 0) * (meta?.height ?? 0);
  if (!pixels || pixels > budget.pixels) return undefined;
  budget.pixels -= pixels;
  return `data:image/${format};base64,${bytes.toString('base64')}`;
}

/** The bytes of a data: URL, or undefined when it is malformed, empty or larger than `maxBytes`. */
function decodeDataUrl(url: string, maxBytes: number): Buffer | undefined {
  const comma = url.indexOf(',');
  if (comma < 0) return undefined;
  const base64 = /;\s*base64\s*$/i.test(url.slice(5, comma));
  const body = url.slice(comma + 1);
  // A bound from the text's length before anything is decoded.
  if ((base64 ? (body.length * 3) / 4 : body.length) > maxBytes * 3) return undefined;
  const bytes = base64
    ? Buffer.from(body.replace(/\s+/g, ''), 'base64')
    : Buffer.from(
        Buffer.from(body, 'utf8')
          .toString('latin1')
          .replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
        'latin1',
      );
  return bytes.length > 0 && bytes.length <= maxBytes ? bytes : undefined;
}

/**
 * CSS (a <style> element's text or an attribute's value) that loads nothing: escapes that spell
 * letters, digits, "-", "_" or non-ASCII are decoded first (so `\75rl(` and `@\69mport` show),
 * then every @import is disabled and every url() not naming a "#fragment" becomes `none`.
 */
export function neutraliseCss(css: string): string {
  if (!/[\\]|url\(|@import/i.test(css)) return css;
  const decoded = css.replace(/\\([0-9A-Fa-f]{1,6}(?:\r\n|[ \t\r\n\f])?|[^0-9A-Fa-f\r\n\f])/g, (escape, body: string) => {
    const hex = /^[0-9A-Fa-f]+/.exec(body)?.[0];
    const code = hex ? parseInt(hex, 16) : body.codePointAt(0)!;
    if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return escape;
    const char = String.fromCodePoint(code);
    return /^[A-Za-z0-9_-]$/.test(char) || code >= 0x80 ? char : escape;
  });
  const noImports = decoded.replace(/@import/gi, '@blocked-import');
  let out = '';
  let from = 0;
  const opening = /url\(/gi;
  for (let match = opening.exec(noImports); match; match = opening.exec(noImports)) {
    let at = match.index + match[0].length;
    while (/\s/.test(noImports[at] ?? '')) at++;
    const quote = noImports[at];
    let target: string;
    let end: number;
    if (quote === '"' || quote === "'") {
      let close = at + 1;
      while (close < noImports.length && noImports[close] !== quote) close += noImports[close] === '\\' ? 2 : 1;
      target = noImports.slice(at + 1, close);
      end = noImports.indexOf(')', close);
    } else {
      end = noImports.indexOf(')', at);
      target = noImports.slice(at, end < 0 ? undefined : end).trim();
    }
    end = end < 0 ? noImports.length : end + 1;
    out += noImports.slice(from, match.index) + (target.startsWith('#') ? noImports.slice(match.index, end) : 'none');
    from = end;
    opening.lastIndex = end;
  }
  return out + noImports.slice(from);
}

/** `xlink:href` → `href`. */
const localName = (name: string): string => name.slice(name.indexOf(':') + 1);

const escapeText = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\r/g, '&#13;');
const escapeAttribute = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/"/g, '&quot;').replace(/\t/g, '&#9;').replace(/\n/g, '&#10;').replace(/\r/g, '&#13;');
