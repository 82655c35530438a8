// The thread the raw decoders run on (off-thread.ts is the main thread's side). libheif,
// OpenJPEG and the lossless-JPEG decoder are WebAssembly or plain JavaScript that run to the end
// once started: a 12 MP HEIC takes about a second of one core, a large JPEG 2000 several. On the
// event loop that would hold every HTTP request and every other task for as long. So would making
// the PNG that carries a profile or EXIF to sharp (to-sharp.ts), which is done here too.
import fs from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { TaskError } from '../../errors.js';
import { decodeRaw, type RawDecoderName } from './raw.js';
import { sharpInputOf, type SharpInput } from './to-sharp.js';

export interface DecodeRequest {
  id: number;
  file: string;
  format: RawDecoderName;
  maxPixels: number;
}

export type DecodeReply =
  | { id: number; input: SharpInput }
  | { id: number; taskError: Pick<TaskError, 'code' | 'message' | 'transient' | 'details'> }
  | { id: number; failure: string };

/** `bytes` in an ArrayBuffer of its own, which can be handed to the main thread without a copy. */
const detachable = (bytes: Buffer): Buffer =>
  bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : Buffer.from(new Uint8Array(bytes).buffer);

async function decode({ id, file, format, maxPixels }: DecodeRequest): Promise<{ reply: DecodeReply; transfer: ArrayBuffer[] }> {
  try {
    const input = sharpInputOf(await decodeRaw(await fs.promises.readFile(file), format, maxPixels));
    if (input.kind === 'png') {
      const png = detachable(input.png);
      return { reply: { id, input: { kind: 'png', png } }, transfer: [png.buffer as ArrayBuffer] };
    }
    const image = { ...input.image, data: detachable(input.image.data) };
    return { reply: { id, input: { kind: 'raw', image } }, transfer: [image.data.buffer as ArrayBuffer] };
  } catch (err) {
    if (err instanceof TaskError) {
      const { code, message, transient, details } = err;
      return { reply: { id, taskError: { code, message, transient, details } }, transfer: [] };
    }
    return { reply: { id, failure: err instanceof Error ? err.message : String(err) }, transfer: [] };
  }
}

parentPort?.on('message', (request: DecodeRequest) => {
  void decode(request).then(({ reply, transfer }) => parentPort!.postMessage(reply, transfer));
});
