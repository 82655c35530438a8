// @imgapi/sdk — the browser-safe entry (fetch and web streams only; Node adds ./node.ts).
//
//   const imgapi = new Imgapi({ baseUrl: 'https://imgapi.example.net', apiKey });
//   const { output } = await imgapi.run('convert', fileInput.files[0], { format: 'webp' });
import { ImgapiBase, type DownloadResult, type OpenedSource, type UploadOptions } from './client.js';

export { ImgapiError, type ClientErrorCode, type ErrorCode } from './errors.js';
export {
  DeliveryUrlError,
  deliveryPath,
  deliveryUrl,
  sourceSegment,
  transformSegment,
  MAX_RENDER_SIDE,
  TRANSFORM_NAMES,
  type DeliverySource,
  type DeliveryUrlOptions,
  type SigningKey,
  type Transform,
  type TransformName,
} from './delivery.js';
export type { RetryEvent, RetryOptions } from './transport.js';
export type {
  BatchWaitOptions,
  DownloadOptions,
  DownloadResult,
  FileRef,
  ImgapiOptions,
  InfoOptions,
  Progress,
  RequestOptions,
  RunOptions,
  RunResult,
  UploadOptions,
  WaitOptions,
} from './client.js';
export { DEFAULT_DIRECT_UPLOAD_THRESHOLD, ImgapiBase, taskFailure } from './client.js';
export { safeFileName, withoutControlCharacters } from './file-names.js';
export * from './types.js';
export type { components, operations, paths } from './openapi.js';

/** What the browser client uploads: a File (its name is kept), a Blob, or bytes. */
export type BrowserSource = Blob | ArrayBuffer | ArrayBufferView;

export class Imgapi extends ImgapiBase<BrowserSource, WritableStream<Uint8Array>> {
  protected async open(source: BrowserSource, options: UploadOptions): Promise<OpenedSource> {
    return { blob: toBlob(source, options.contentType), filename: options.filename ?? nameOf(source) ?? 'upload' };
  }

  protected async save(
    body: ReadableStream<Uint8Array>,
    destination: WritableStream<Uint8Array> | undefined,
    file: DownloadResult,
  ): Promise<DownloadResult> {
    if (destination) {
      await body.pipeTo(destination);
      return file;
    }
    const blob = await new Response(body).blob();
    return { ...file, size: blob.size, blob: blob.type ? blob : new Blob([blob], { type: file.contentType }) };
  }
}

/** A Blob of any source the two clients share. */
export function toBlob(source: Blob | ArrayBuffer | ArrayBufferView, contentType?: string): Blob {
  if (source instanceof Blob) return contentType && source.type !== contentType ? new Blob([source], { type: contentType }) : source;
  const options = contentType ? { type: contentType } : {};
  if (source instanceof ArrayBuffer) return new Blob([source], options);
  const { buffer } = source;
  // A view of a SharedArrayBuffer is copied: a Blob takes only plain ArrayBuffer memory.
  const bytes = buffer instanceof ArrayBuffer ? new Uint8Array(buffer, source.byteOffset, source.byteLength) : new Uint8Array(source.byteLength);
  if (!(buffer instanceof ArrayBuffer)) bytes.set(new Uint8Array(buffer, source.byteOffset, source.byteLength));
  return new Blob([bytes], options);
}

/** A File's name (a Blob has none). */
export function nameOf(source: unknown): string | undefined {
  const name = (source as { name?: unknown } | null)?.name;
  return typeof name === 'string' && name ? name : undefined;
}
