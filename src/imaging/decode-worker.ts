// The decoding thread (decode-thread.ts is the main thread's side): the work on untrusted bytes
// that is JavaScript or WebAssembly running to its end once started. On the event loop it would
// hold every HTTP request and every other task for as long:
//   - the raw decoders (decoders/raw.ts): libheif, OpenJPEG, lossless JPEG, BMP — a 12 MP HEIC
//     is about a second of one core, a large JPEG 2000 several — and the PNG that carries a
//     profile, EXIF or 16-bit samples to sharp (decoders/to-sharp.ts);
//   - the SVG rewrite (svg.ts): a strict XML parse of the whole document, about 0.1 s per MB.
import fs from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { TaskError } from '../errors.js';
import { decodeRaw, type RawDecoderName } from './decoders/raw.js';
import { sharpInputOf, type SharpInput } from './decoders/to-sharp.js';
import { safeSvg } from './svg.js';

export type DecodeWork =
  | { kind: 'raw'; file: string; format: RawDecoderName; maxPixels: number }
  | { kind: 'svg'; file: string; maxPixels: number }
  | { kind: 'svg'; bytes: Uint8Array; maxPixels: number };

export type DecodeResult = { kind: 'raw'; input: SharpInput } | { kind: 'svg'; svg: Buffer };

export type DecodeReply =
  | { id: number; result: DecodeResult }
  | { id: number; taskError: Pick<TaskError, 'code' | 'message' | 'transient' | 'details'> }
  | { id: number; failure: string };

/** `bytes` in an ArrayBuffer of its own, which can be handed to the main thread without a copy. */
const detachable = (bytes: Buffer): Buffer =>
  bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : Buffer.from(new Uint8Array(bytes).buffer);

async function perform(work: DecodeWork): Promise<DecodeResult> {
  if (work.kind === 'svg') {
    const bytes =
      'file' in work ? await fs.promises.readFile(work.file) : Buffer.from(work.bytes.buffer, work.bytes.byteOffset, work.bytes.byteLength);
    return { kind: 'svg', svg: detachable(await safeSvg(bytes, work.maxPixels)) };
  }
  const input = sharpInputOf(await decodeRaw(await fs.promises.readFile(work.file), work.format, work.maxPixels));
  return input.kind === 'png'
    ? { kind: 'raw', input: { kind: 'png', png: detachable(input.png) } }
    : { kind: 'raw', input: { kind: 'raw', image: { ...input.image, data: detachable(input.image.data) } } };
}

/** The one large buffer of a result, handed over rather than copied. */
function transferOf(result: DecodeResult): ArrayBuffer[] {
  if (result.kind === 'svg') return [result.svg.buffer as ArrayBuffer];
  return [(result.input.kind === 'png' ? result.input.png : result.input.image.data).buffer as ArrayBuffer];
}

async function reply(id: number, work: DecodeWork): Promise<{ reply: DecodeReply; transfer: ArrayBuffer[] }> {
  try {
    const result = await perform(work);
    return { reply: { id, result }, transfer: transferOf(result) };
  } catch (err) {
    if (err instanceof TaskError) {
      const { code, message, transient, details } = err;
      return { reply: { id, taskError: { code, message, transient, details } }, transfer: [] };
    }
    return { reply: { id, failure: err instanceof Error ? err.message : String(err) }, transfer: [] };
  }
}

parentPort?.on('message', ({ id, work }: { id: number; work: DecodeWork }) => {
  void reply(id, work).then(({ reply, transfer }) => parentPort!.postMessage(reply, transfer));
});
