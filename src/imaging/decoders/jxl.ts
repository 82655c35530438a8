// JPEG XL, decoded here: sharp's prebuilt libvips has no JPEG XL loader (`sharp.format.jxl`
// reads nothing). The header is read by this file — the codestream's SizeHeader and, for the
// orientation, the start of its ImageMetadata (ISO/IEC 18181-1 §D.2, §D.3) — so the pixel
// limit holds before any pixel memory exists; the pixels come from libjxl's WebAssembly build
// (@jsquash/jxl: sRGB, 8-bit RGBA, orientation applied), run on the decoding thread
// (decode-worker.ts). A file is a bare codestream (FF 0A) or an ISO-BMFF container whose
// `jxlc` box, or first `jxlp` box, holds the codestream. Animations: the first frame.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { TaskError } from '../../errors.js';
import { checkPixelsToDecode } from '../limits.js';
import { isOpaque, stripAlpha, type HeaderInfo, type RawDecoder, type RawImage } from './pixels.js';

const invalid = (why: string) => new TaskError('INVALID_IMAGE', `The JPEG XL image is invalid: ${why}`);

/** Where the codestream starts: 0 for a bare one, else inside the container's jxlc/jxlp box. */
function codestreamStart(b: Buffer): number {
  if (b[0] === 0xff && b[1] === 0x0a) return 0;
  let at = 0;
  while (at + 8 <= b.length) {
    let size = b.readUInt32BE(at);
    const type = b.toString('latin1', at + 4, at + 8);
    let header = 8;
    if (size === 1) {
      if (at + 16 > b.length) break;
      size = Number(b.readBigUInt64BE(at + 8));
      header = 16;
    }
    if (type === 'jxlc') return at + header;
    if (type === 'jxlp') return at + header + 4; // a 4-byte sequence number precedes the part
    if (size === 0 || size < header) break; // to the end of the file (and no codestream seen), or damaged
    at += size;
  }
  throw invalid('no codestream box (jxlc, jxlp) in the first bytes of its container');
}

/** Bits, least significant first, as the codestream packs them. */
class Bits {
  private position: number;
  constructor(
    private readonly b: Buffer,
    start: number,
  ) {
    this.position = start * 8;
  }
  u(n: number): number {
    let value = 0;
    for (let i = 0; i < n; i++, this.position++) {
      const byte = this.b[this.position >> 3];
      if (byte === undefined) throw invalid('the header is cut short');
      value += ((byte >> (this.position & 7)) & 1) * 2 ** i;
    }
    return value;
  }
  /** U32(Bits(9)+1, Bits(13)+1, Bits(18)+1, Bits(30)+1): the distribution of a side's length. */
  side(): number {
    return this.u([9, 13, 18, 30][this.u(2)]!) + 1;
  }
}

/** Aspect ratios a SizeHeader may name instead of a width (1-based). */
const RATIOS: readonly (readonly [number, number])[] = [
  [1, 1],
  [12, 10],
  [4, 3],
  [3, 2],
  [16, 9],
  [5, 4],
  [2, 1],
];

/** Stored size and orientation from the codestream's first bytes. */
export function jxlHeader(input: Buffer): { width: number; height: number; orientation: number } {
  const start = codestreamStart(input);
  if (input[start] !== 0xff || input[start + 1] !== 0x0a) throw invalid('its codestream has no signature');
  const bits = new Bits(input, start + 2);
  const small = bits.u(1) === 1;
  const height = small ? (bits.u(5) + 1) * 8 : bits.side();
  const ratio = bits.u(3);
  const width = ratio ? Math.floor((height * RATIOS[ratio - 1]![0]) / RATIOS[ratio - 1]![1]) : small ? (bits.u(5) + 1) * 8 : bits.side();
  // ImageMetadata: all_default, then extra_fields, then the orientation (1–8).
  let orientation = 1;
  if (bits.u(1) === 0 && bits.u(1) === 1) orientation = bits.u(3) + 1;
  return { width, height, orientation };
}

async function readHeader(input: Buffer): Promise<HeaderInfo> {
  const { width, height, orientation } = jxlHeader(input);
  const swap = orientation >= 5;
  // The extra channels (alpha) are further into the metadata: "may have alpha", as pixels.ts allows.
  return { width: swap ? height : width, height: swap ? width : height, hasAlpha: true, frames: 1 };
}

type Decode = (bytes: ArrayBuffer) => Promise<{ data: Uint8ClampedArray; width: number; height: number }>;

/** libjxl, instantiated once per thread; again after a failure (an aborted WebAssembly instance is not reused). */
let codec: Promise<Decode> | undefined;
const loadCodec = (): Promise<Decode> =>
  (codec ??= (async () => {
    const module = await WebAssembly.compile(await fs.promises.readFile(fileURLToPath(import.meta.resolve('@jsquash/jxl/codec/dec/jxl_dec.wasm'))));
    // Imported by its resolved address: the package's own typings need the DOM's.
    const jsquash = (await import(import.meta.resolve('@jsquash/jxl/decode.js'))) as {
      default: Decode;
      init(module: WebAssembly.Module): Promise<unknown>;
    };
    await jsquash.init(module);
    return jsquash.default;
  })());

async function decode(input: Buffer, maxPixels: number): Promise<RawImage> {
  const header = await readHeader(input);
  checkPixelsToDecode(header.width, header.height, 4, maxPixels);
  const run = await loadCodec();
  let decoded: Awaited<ReturnType<Decode>>;
  try {
    const bytes = input.buffer.slice(input.byteOffset, input.byteOffset + input.byteLength) as ArrayBuffer;
    decoded = await run(bytes);
  } catch (err) {
    codec = undefined;
    throw invalid(`libjxl could not decode it (${(err as Error).message})`);
  }
  const { width, height } = decoded;
  if (width !== header.width || height !== header.height)
    throw invalid(`its pixels are ${width}×${height}, its header says ${header.width}×${header.height}`);
  const rgba = Buffer.from(decoded.data.buffer, decoded.data.byteOffset, decoded.data.byteLength);
  return isOpaque(rgba) ? { data: stripAlpha(rgba, width * height), width, height, channels: 3 } : { data: rgba, width, height, channels: 4 };
}

export const jxl: RawDecoder = { readHeader, decode };
