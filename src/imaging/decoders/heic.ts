// HEIC, through libheif's WebAssembly build.
//
// heic-decode (our declared dependency) wraps libheif-js, but its API cannot serve us: `decode`
// and `decode.all` do not say which image is the primary one (example.heic from libheif has two
// top-level images) nor whether it has alpha, always return RGBA, log to the console on bad
// input, and decode through a setTimeout callback in which a WebAssembly trap becomes an
// unhandled rejection (a crashed process) while the caller's promise never settles. So we load
// the very libheif-js build heic-decode uses (resolved from heic-decode's own location, so the
// version is the one its dependency pins) and call its bindings directly, synchronously.
//
// libheif applies the HEIF transformations (clap crop, irot rotation, imir mirror) both to the
// size it reports for an image handle and to the pixels it decodes (heif_js_decode_image2 passes
// no decoding options, so ignore_transformations is false). EXIF orientation inside a HEIC is
// ignored, as the HEIF specification requires; the raw pixels carry no EXIF for sharp to re-apply.
//
// The decode is synchronous WebAssembly: it blocks the event loop for its duration (about 0.2 s
// for a 1280×854 photo) and cannot be interrupted by a deadline.
import { createRequire } from 'node:module';
import { TaskError } from '../../errors.js';
import { checkPixelsToDecode } from '../limits.js';
import { isOpaque, stripAlpha, type HeaderInfo, type RawDecoder, type RawImage } from './pixels.js';

interface HeifEnum {
  value: number;
}
interface HeifError {
  code: HeifEnum;
  subcode: HeifEnum;
  message: string;
}
type HeifContext = object;
type HeifHandle = object;
interface HeifPlane {
  id: HeifEnum;
  width: number;
  height: number;
  stride: number;
  /** A view into the WebAssembly memory: valid until the next call into the module. */
  data: Uint8Array;
}
interface HeifDecoded {
  image: object;
  channels: HeifPlane[];
}

/** The part of libheif-js's Emscripten module (libheif-wasm/libheif-bundle.js) used here. */
interface Libheif {
  HEAPU8: Uint8Array;
  ready?: Promise<unknown>;
  heif_image_handle: abstract new () => HeifHandle;
  heif_error_code: Record<string, HeifEnum>;
  heif_suberror_code: Record<string, HeifEnum>;
  heif_colorspace: Record<string, HeifEnum>;
  heif_chroma: Record<string, HeifEnum>;
  heif_channel: Record<string, HeifEnum>;
  heif_context_alloc(): HeifContext | null;
  heif_context_free(context: HeifContext): void;
  /** Copies the file into the module's memory. */
  heif_context_read_from_memory(context: HeifContext, data: Uint8Array): HeifError;
  heif_js_context_get_primary_image_handle(context: HeifContext): HeifHandle | HeifError;
  heif_image_handle_release(handle: HeifHandle): void;
  heif_image_handle_get_width(handle: HeifHandle): number;
  heif_image_handle_get_height(handle: HeifHandle): number;
  heif_image_handle_has_alpha_channel(handle: HeifHandle): number;
  heif_image_handle_is_premultiplied_alpha(handle: HeifHandle): number;
  heif_js_decode_image2(handle: HeifHandle, colorspace: HeifEnum, chroma: HeifEnum): HeifDecoded | HeifError | Record<string, never>;
  heif_image_release(image: object): void;
  // Plain C functions of the module (not embind): they take the handle's pointer, and those that
  // return a heif_error by value take first the address to write it to.
  _malloc(size: number): number;
  _free(pointer: number): void;
  heif_image_handle_get_color_profile_type(handle: number): number;
  heif_image_handle_get_raw_color_profile_size(handle: number): number;
  heif_image_handle_get_raw_color_profile(error: number, handle: number, out: number): void;
  heif_image_handle_get_number_of_metadata_blocks(handle: number, typeFilter: number): number;
  heif_image_handle_get_list_of_metadata_block_IDs(handle: number, typeFilter: number, ids: number, count: number): number;
  heif_image_handle_get_metadata_size(handle: number, id: number): number;
  heif_image_handle_get_metadata(error: number, handle: number, id: number, out: number): void;
}

type LibheifFactory = (options: { print: (text: string) => void; printErr: (text: string) => void }) => Libheif;

/**
 * WebAssembly memory only grows. After a decode leaves the instance's memory above this, the
 * instance is dropped (the garbage collector returns its memory) and the next call makes a new
 * one, which costs about 0.1 s. The module's memory is capped at 2 GiB.
 */
const LIBHEIF_RECYCLE_BYTES = 256 * 1024 * 1024;

let libheifFactory: LibheifFactory | undefined;
let libheifInstance: Libheif | undefined;

function loadLibheifFactory(): LibheifFactory {
  if (!libheifFactory) {
    try {
      const fromHere = createRequire(import.meta.url);
      const fromHeicDecode = createRequire(fromHere.resolve('heic-decode'));
      libheifFactory = fromHeicDecode('libheif-js/libheif-wasm/libheif-bundle.js') as LibheifFactory;
    } catch (err) {
      throw new TaskError('INTERNAL_ERROR', `The HEIC decoder could not be loaded: ${(err as Error).message}`);
    }
  }
  return libheifFactory;
}

async function getLibheif(): Promise<Libheif> {
  if (!libheifInstance) {
    // libde265 prints diagnostics for damaged streams ("SPS error: ..."); the error we return says enough.
    const instance = loadLibheifFactory()({ print: () => {}, printErr: () => {} });
    if (instance.ready) await instance.ready;
    libheifInstance ??= instance;
  }
  return libheifInstance;
}

function dropLibheif(instance: Libheif): void {
  if (libheifInstance === instance) libheifInstance = undefined;
}

/**
 * Opens the file in a fresh libheif context, hands the primary image's handle to `use` and
 * always frees the context. A heif_error becomes a TaskError. Anything else thrown from inside
 * the module (an Emscripten abort, a WebAssembly trap) leaves its memory in an unknown state:
 * the instance is dropped so the next call starts from a fresh one.
 */
async function withPrimaryImage<T>(input: Buffer, use: (m: Libheif, handle: HeifHandle) => T): Promise<T> {
  const m = await getLibheif();
  const exitCode = process.exitCode; // an Emscripten exit() would set it for the whole process
  let context: HeifContext | null = null;
  let handle: HeifHandle | null = null;
  try {
    context = m.heif_context_alloc();
    if (!context) throw new Error('heif_context_alloc failed');
    const readError = m.heif_context_read_from_memory(context, input);
    if (readError?.code?.value !== m.heif_error_code.heif_error_Ok!.value) throw heifTaskError(m, readError);
    const primary = m.heif_js_context_get_primary_image_handle(context);
    if (!(primary instanceof m.heif_image_handle)) throw heifTaskError(m, primary as HeifError);
    handle = primary;
    return use(m, handle);
  } catch (err) {
    if (err instanceof TaskError) throw err;
    dropLibheif(m);
    process.exitCode = exitCode;
    throw new TaskError('INVALID_IMAGE', 'The HEIC image could not be decoded');
  } finally {
    if (libheifInstance === m) {
      try {
        if (handle) m.heif_image_handle_release(handle);
        if (context) m.heif_context_free(context);
        if (m.HEAPU8.length > LIBHEIF_RECYCLE_BYTES) dropLibheif(m);
      } catch {
        dropLibheif(m);
        process.exitCode = exitCode;
      }
    }
  }
}

function heifTaskError(m: Libheif, err: HeifError | undefined): TaskError {
  const code = err?.code?.value;
  const subcode = err?.subcode?.value;
  const detail = err?.message || 'unknown error';
  const is = (table: Record<string, HeifEnum>, name: string, value: number | undefined) => table[name]?.value === value;
  if (
    is(m.heif_error_code, 'heif_error_Unsupported_filetype', code) ||
    is(m.heif_error_code, 'heif_error_Unsupported_feature', code) ||
    is(m.heif_suberror_code, 'heif_suberror_No_matching_decoder_installed', subcode) ||
    is(m.heif_suberror_code, 'heif_suberror_Unsupported_codec', subcode)
  ) {
    return new TaskError('UNSUPPORTED_FORMAT', `This HEIF image's encoding is not supported: ${detail}`);
  }
  if (
    is(m.heif_error_code, 'heif_error_Memory_allocation_error', code) &&
    !is(m.heif_suberror_code, 'heif_suberror_Security_limit_exceeded', subcode)
  ) {
    return new TaskError('IMAGE_TOO_LARGE', `The HEIC image is too large to decode: ${detail}`);
  }
  return new TaskError('INVALID_IMAGE', `The HEIC image is invalid: ${detail}`);
}

function primarySize(m: Libheif, handle: HeifHandle): { width: number; height: number } {
  const width = m.heif_image_handle_get_width(handle);
  const height = m.heif_image_handle_get_height(handle);
  if (!(width > 0 && height > 0)) throw new TaskError('INVALID_IMAGE', 'The HEIC image has no dimensions');
  return { width, height };
}

export const heic: RawDecoder = {
  readHeader: readHeicHeader,
  decode: decodeHeic,
};

async function readHeicHeader(input: Buffer): Promise<HeaderInfo> {
  return withPrimaryImage(input, (m, handle) => ({
    ...primarySize(m, handle),
    hasAlpha: Boolean(m.heif_image_handle_has_alpha_channel(handle)),
    frames: 1,
  }));
}

async function decodeHeic(input: Buffer, maxPixels: number): Promise<RawImage> {
  return withPrimaryImage(input, (m, handle): RawImage => {
    const { width, height } = primarySize(m, handle);
    const alpha = Boolean(m.heif_image_handle_has_alpha_channel(handle));
    checkPixelsToDecode(width, height, alpha ? 4 : 3, maxPixels);

    const chroma = alpha ? m.heif_chroma.heif_chroma_interleaved_RGBA! : m.heif_chroma.heif_chroma_interleaved_RGB!;
    const decoded = m.heif_js_decode_image2(handle, m.heif_colorspace.heif_colorspace_RGB!, chroma);
    if (!('channels' in decoded)) throw heifTaskError(m, 'code' in decoded ? (decoded as HeifError) : undefined);
    try {
      const interleaved = m.heif_channel.heif_channel_interleaved!.value;
      const plane = decoded.channels.find((c) => c.id.value === interleaved);
      if (!plane) throw new TaskError('INVALID_IMAGE', 'The HEIC decoder returned no RGB plane');
      const data = copyPlane(plane, width, height, alpha ? 4 : 3);
      const metadata = readMetadata(m, handle);
      if (!alpha) return { data, width, height, channels: 3, ...metadata };
      if (isOpaque(data)) return { data: stripAlpha(data, width * height), width, height, channels: 3, ...metadata };
      if (m.heif_image_handle_is_premultiplied_alpha(handle)) unpremultiply(data);
      return { data, width, height, channels: 4, ...metadata };
    } finally {
      m.heif_image_release(decoded.image);
    }
  });
}

/** Copy a decoded interleaved plane out of WebAssembly memory into a tightly packed Buffer. */
function copyPlane(plane: HeifPlane, width: number, height: number, bytesPerPixel: number): Buffer {
  const rowBytes = width * bytesPerPixel;
  const { stride, data } = plane;
  if (plane.width !== width || plane.height !== height || stride < rowBytes || data.length < stride * (height - 1) + rowBytes) {
    throw new TaskError('INVALID_IMAGE', 'The HEIC decoder returned an image of an unexpected size');
  }
  const out = Buffer.allocUnsafe(rowBytes * height); // every byte is written below
  if (stride === rowBytes) {
    out.set(data.subarray(0, rowBytes * height));
  } else {
    for (let y = 0; y < height; y++) out.set(data.subarray(y * stride, y * stride + rowBytes), y * rowBytes);
  }
  return out;
}

/** sharp expects straight alpha in raw input. */
function unpremultiply(rgba: Buffer): void {
  for (let i = 0; i < rgba.length; i += 4) {
    const a = rgba[i + 3]!;
    if (a === 0 || a === 255) continue;
    for (let c = i; c < i + 3; c++) rgba[c] = Math.min(255, Math.round((rgba[c]! * 255) / a));
  }
}

// ICC profile and EXIF --------------------------------------------------------------------------

/** Metadata larger than this is dropped rather than copied (an ICC profile is a few KiB, EXIF at most 64 KiB in a JPEG). */
const MAX_METADATA_BYTES = 4 * 1024 * 1024;
/** heif_color_profile_type: a raw ICC profile ('prof', or 'rICC' restricted); 'nclx' is a code point triple, not a profile. */
const ICC_PROFILE_TYPES = new Set([0x70726f66, 0x72494343]);

/**
 * The primary image's ICC profile and EXIF, carried into the output as a JPEG's are
 * (decoders/to-sharp.ts). An nclx colour (code points, no profile) is left out: libheif has
 * already converted the pixels with it, as it does for an image without any colour property.
 * EXIF orientation is not applied in a HEIF file (irot and imir are, by libheif); it is set to 1
 * so that no later step turns the image a second time. Unreadable metadata is dropped, never fatal.
 */
function readMetadata(m: Libheif, handle: HeifHandle): { icc?: Buffer; exif?: Buffer } {
  const pointer = (handle as { $$?: { ptr?: number } }).$$?.ptr;
  if (!pointer) return {};
  const icc = readIcc(m, pointer);
  const exif = readExif(m, pointer);
  return { ...(icc ? { icc } : {}), ...(exif ? { exif } : {}) };
}

/** Calls `use` with `size` bytes of module memory (and a heif_error's 12), always freed. */
function withMemory<T>(m: Libheif, size: number, use: (out: number, error: number) => T): T {
  const out = m._malloc(size);
  const error = m._malloc(16);
  try {
    if (!out || !error) throw new Error('malloc failed');
    return use(out, error);
  } finally {
    m._free(out);
    m._free(error);
  }
}

/** A heif_error written at `error`: its code is the first int32, 0 for success. */
const succeeded = (m: Libheif, error: number): boolean => new DataView(m.HEAPU8.buffer).getInt32(error, true) === 0;

function readIcc(m: Libheif, handle: number): Buffer | undefined {
  if (!ICC_PROFILE_TYPES.has(m.heif_image_handle_get_color_profile_type(handle) >>> 0)) return undefined;
  const size = m.heif_image_handle_get_raw_color_profile_size(handle);
  if (!(size > 0 && size <= MAX_METADATA_BYTES)) return undefined;
  return withMemory(m, size, (out, error) => {
    m.heif_image_handle_get_raw_color_profile(error, handle, out);
    return succeeded(m, error) ? Buffer.from(m.HEAPU8.subarray(out, out + size)) : undefined;
  });
}

function readExif(m: Libheif, handle: number): Buffer | undefined {
  const type = m._malloc(5);
  const ids = m._malloc(4);
  try {
    m.HEAPU8.set([0x45, 0x78, 0x69, 0x66, 0], type); // "Exif"
    if (m.heif_image_handle_get_number_of_metadata_blocks(handle, type) < 1) return undefined;
    if (m.heif_image_handle_get_list_of_metadata_block_IDs(handle, type, ids, 1) < 1) return undefined;
    const id = new DataView(m.HEAPU8.buffer).getUint32(ids, true);
    const size = m.heif_image_handle_get_metadata_size(handle, id);
    if (!(size > 4 && size <= MAX_METADATA_BYTES)) return undefined;
    const block = withMemory(m, size, (out, error) => {
      m.heif_image_handle_get_metadata(error, handle, id, out);
      return succeeded(m, error) ? Buffer.from(m.HEAPU8.subarray(out, out + size)) : undefined;
    });
    return block && exifTiff(block);
  } finally {
    m._free(type);
    m._free(ids);
  }
}

/**
 * The TIFF structure of a HEIF Exif block (ISO/IEC 23008-12 A.2.1: a 32-bit offset to the TIFF
 * header, then the data, often "Exif\0\0" first), with its orientation set to 1; undefined when
 * it is not one.
 */
export function exifTiff(block: Buffer): Buffer | undefined {
  const start = 4 + block.readUInt32BE(0);
  if (start + 8 > block.length) return undefined;
  const tiff = Buffer.from(block.subarray(start));
  const order = tiff.toString('latin1', 0, 2);
  if (order !== 'II' && order !== 'MM') return undefined;
  const le = order === 'II';
  const u16 = (at: number) => (le ? tiff.readUInt16LE(at) : tiff.readUInt16BE(at));
  const ifd = le ? tiff.readUInt32LE(4) : tiff.readUInt32BE(4);
  if (u16(2) !== 42 || ifd + 2 > tiff.length) return undefined;
  const entries = u16(ifd);
  for (let i = 0; i < entries; i++) {
    const entry = ifd + 2 + i * 12;
    if (entry + 12 > tiff.length) return undefined;
    // Orientation (0x0112), SHORT, one value: stored in the first two bytes of the value field.
    if (u16(entry) === 0x0112 && u16(entry + 2) === 3) {
      if (le) tiff.writeUInt16LE(1, entry + 8);
      else tiff.writeUInt16BE(1, entry + 8);
    }
  }
  return tiff;
}
