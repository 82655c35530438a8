// SVG parts of ZIP decks (PPTX, PPSX, ODP), re-written before LibreOffice reads them: an SVG
// part's <image href="file:///…"> (or <use>, url(), XInclude…) would have LibreOffice draw a
// file of this machine into the slide. The converter sandbox (sandbox.ts) keeps such files out
// of reach; this is defence in depth behind it, and the guard for SVG when it cannot be set up.
// Each SVG part goes through safeSvg (src/imaging/svg.ts, on the decoding thread), the one SVG re-writer of the service,
// which keeps no outside reference.
//
// Which parts are SVG: LibreOffice tells a picture by its bytes (vcl's GraphicFormatDetector:
// `<svg` early in the part, after gunzipping an svgz), else by a name ending .svg. Here, more
// widely: a part holding an svg element anywhere (`<svg` or `<svg:svg` then a space, `/` or `>`;
// ODF's own `<svg:title>`, `<svg:desc>`… are other elements), gunzipped first when it is gzip,
// and any part named .svg or .svgz. A gzip part that does not inflate whole within the cap is
// taken for SVG too, and one that is not a safe SVG becomes an empty one: a picture not drawn.
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { TaskError } from '../errors.js';
import { safeSvgOffThread } from '../imaging/decode-thread.js';

/** The most an SVG part (inflated) may hold to be re-written; a bigger one is not drawn. */
const MAX_SVG_PART_BYTES = 32 * 1024 * 1024;
/** Drawn in place of an SVG part that cannot be made safe. */
const EMPTY_SVG = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>');

const GZIP = [0x1f, 0x8b];
const SVG_NAME = /\.svgz?$/i;
const OPENING = Buffer.from('<svg');
/** Bytes that may follow `<svg` in an svg element's start tag: whitespace, `/`, `>`. */
const AFTER_NAME = new Set([0x20, 0x09, 0x0a, 0x0d, 0x2f, 0x3e]);

/** Fed a part's inflated bytes chunk by chunk; says whether LibreOffice could read it as SVG. */
export class SvgPartDetector {
  private gzip: Buffer[] | undefined;
  private gzipBytes = 0;
  private carry = Buffer.alloc(0);
  private found: boolean;
  private first = true;

  constructor(name: string) {
    this.found = SVG_NAME.test(name);
  }

  push(chunk: Buffer): void {
    if (this.found) return;
    if (this.first) {
      this.first = false;
      if (chunk[0] === GZIP[0] && chunk[1] === GZIP[1]) this.gzip = [];
    }
    if (this.gzip) {
      this.gzipBytes += chunk.length;
      if (this.gzipBytes > MAX_SVG_PART_BYTES) this.found = true;
      else this.gzip.push(chunk);
      return;
    }
    const text = Buffer.concat([this.carry, chunk]);
    this.found = holdsSvgElement(text);
    this.carry = text.subarray(Math.max(0, text.length - 8));
  }

  isSvg(): boolean {
    if (!this.found && this.gzip) {
      const inflated = gunzip(Buffer.concat(this.gzip));
      this.found = inflated === undefined || holdsSvgElement(inflated);
      this.gzip = undefined;
    }
    return this.found;
  }
}

function holdsSvgElement(bytes: Buffer): boolean {
  for (let at = bytes.indexOf(OPENING); at >= 0; at = bytes.indexOf(OPENING, at + 1)) {
    let next = at + OPENING.length;
    if (bytes.subarray(next, next + 4).toString('latin1') === ':svg') next += 4;
    if (AFTER_NAME.has(bytes[next]!)) return true;
  }
  return false;
}

/** A gzip stream inflated, or undefined when it is damaged or inflates past the cap. */
function gunzip(bytes: Buffer): Buffer | undefined {
  try {
    return zlib.gunzipSync(bytes, { maxOutputLength: MAX_SVG_PART_BYTES });
  } catch {
    return undefined;
  }
}

/**
 * Writes the ZIP package `input` to `target` with each part named in `svgParts` re-written by
 * safeSvg (within the plan's `maxPixels` for embedded images); every other part is copied,
 * entries in their order (an ODF package's `mimetype` stays first and stored).
 */
export async function rewriteSvgParts(
  input: string,
  svgParts: ReadonlySet<string>,
  target: string,
  maxPixels: number,
  signal?: AbortSignal,
): Promise<void> {
  const source = await yauzl.openPromise(input, { lazyEntries: true, autoClose: false, validateEntrySizes: true, strictFileNames: false });
  source.on('error', () => {}); // read errors reach the entry streams
  const out = new yazl.ZipFile();
  // yazl reports a failed read of an added stream on the ZipFile, not on its output stream.
  out.on('error', (err: Error) => (out.outputStream as Readable).destroy(err));
  const written = pipeline(out.outputStream, fs.createWriteStream(target), { signal });
  try {
    for await (const entry of source.eachEntry()) {
      // Stored parts stay stored; the others are deflated anew, quickly (the file is temporary).
      const options = { mtime: entry.getLastModDate(), compressionLevel: entry.compressionMethod === 0 ? 0 : 1 };
      if (entry.fileName.endsWith('/')) out.addEmptyDirectory(entry.fileName, { mtime: options.mtime });
      else if (svgParts.has(entry.fileName)) out.addBuffer(await safePart(source, entry, maxPixels), entry.fileName, options);
      else out.addReadStreamLazy(entry.fileName, options, (callback) => source.openReadStream(entry, callback));
    }
    out.end();
    await written;
  } catch (err) {
    (out.outputStream as Readable).destroy(err as Error);
    await written.catch(() => {});
    throw err;
  } finally {
    source.close();
  }
}

/** An SVG part without outside references, or EMPTY_SVG when it cannot be read as a safe SVG. */
async function safePart(source: yauzl.ZipFile, entry: yauzl.Entry, maxPixels: number): Promise<Buffer> {
  if (entry.uncompressedSize > MAX_SVG_PART_BYTES) return EMPTY_SVG;
  const chunks: Buffer[] = [];
  for await (const chunk of await source.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
  let svg: Buffer | undefined = Buffer.concat(chunks);
  if (svg[0] === GZIP[0] && svg[1] === GZIP[1]) svg = gunzip(svg);
  if (!svg) return EMPTY_SVG;
  try {
    return await safeSvgOffThread({ bytes: svg }, maxPixels);
  } catch (err) {
    if (err instanceof TaskError) return EMPTY_SVG;
    throw err;
  }
}
