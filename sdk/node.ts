// @imgapi/sdk/node — the client for Node ≥ 20: uploads from a path, a Buffer or a stream, with
// progress as the bytes are sent, and downloads written to a file (atomically, never replacing
// one unless asked) or a stream.
//
//   const imgapi = new Imgapi({ baseUrl: process.env.IMGAPI_URL!, apiKey: process.env.IMGAPI_KEY });
//   await imgapi.run('resize', 'photo.jpg', { width: 800, format: 'webp' }, { destination: 'out/' });
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { countBytes, ImgapiBase, type DownloadOptions, type DownloadResult, type OpenedSource, type UploadOptions } from './client.js';
import { assembleUrl, base64url, keyBytes, type DeliverySource, type DeliveryUrlOptions, type Transform } from './delivery.js';
import { nameOf, toBlob, type BrowserSource } from './index.js';
import { pathInFolder, writeFile } from './save-file.js';

export * from './index.js';
export { verifyWebhook, WebhookSignatureError, type VerifyWebhookOptions, type WebhookEvent } from './webhooks.js';

/** A path, a Buffer or bytes, a Blob, or a stream (a Node Readable or a web ReadableStream). */
export type NodeSource = string | BrowserSource | NodeJS.ReadableStream | ReadableStream<Uint8Array>;
/**
 * A path (a directory: the file keeps the service's name, made safe and kept inside it), a
 * function choosing the path once the service's name is known (`(file) => path`: the file's
 * `filename`, already made safe), a Node Writable or a web WritableStream.
 */
export type NodeDestination = string | ((file: DownloadResult) => string) | NodeJS.WritableStream | WritableStream<Uint8Array>;

/** deliveryUrl() without the await: signed with node:crypto. */
export function deliveryUrlSync(source: DeliverySource, transform: string | Transform | undefined, options: DeliveryUrlOptions): string {
  const { path, secret, finish } = assembleUrl(source, transform, options);
  if (secret === undefined) return finish('_');
  return finish(base64url(crypto.createHmac('sha256', keyBytes(secret)).update(path).digest()));
}

export class Imgapi extends ImgapiBase<NodeSource, NodeDestination> {
  /** url() without the await (node:crypto): `imgapi.urlSync('file_…', 'w:720,f:auto')`. */
  urlSync(source: DeliverySource, transform?: string | Transform, options: { publicPreset?: boolean } = {}): string {
    return deliveryUrlSync(source, transform, { baseUrl: this.deliveryBaseUrl, signingKey: this.requireSigningKey(), ...options });
  }

  protected async open(source: NodeSource, options: UploadOptions): Promise<OpenedSource> {
    if (typeof source === 'string') {
      // Read lazily from the disk, again on a retry, never held whole in memory.
      const blob = await fs.openAsBlob(source, options.contentType ? { type: options.contentType } : {});
      return { blob, filename: options.filename ?? path.basename(source) };
    }
    if (source instanceof Blob || source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
      return { blob: toBlob(source, options.contentType), filename: options.filename ?? nameOf(source) ?? 'upload' };
    }
    const streamPath = (source as { path?: unknown }).path;
    const filename = options.filename ?? (typeof streamPath === 'string' ? path.basename(streamPath) : 'upload');
    return { ...(await spool(source, this.directUploadThreshold, options.contentType)), filename };
  }

  /** A multipart body of our own, streamed and counted (fetch's FormData cannot be watched). */
  protected override multipartBody(
    blob: Blob,
    filename: string,
    onBytes: (loaded: number) => void,
  ): { body: BodyInit; headers: Record<string, string> } {
    const boundary = `imgapi-${crypto.randomBytes(12).toString('hex')}`;
    // Escaped as browsers do: the name is UTF-8, with " and line breaks percent-encoded.
    const name = filename.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\nContent-Type: ${blob.type || 'application/octet-stream'}\r\n\r\n`,
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    return {
      body: concat([head, blob.stream().pipeThrough(countBytes(onBytes)), tail]),
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(head.length + blob.size + tail.length) },
    };
  }

  protected override rawBody(blob: Blob, onBytes: (loaded: number) => void): BodyInit {
    return blob.stream().pipeThrough(countBytes(onBytes));
  }

  protected async save(
    body: ReadableStream<Uint8Array>,
    destination: NodeDestination | undefined,
    file: DownloadResult,
    options: DownloadOptions,
  ): Promise<DownloadResult> {
    if (destination === undefined) {
      const blob = await new Response(body).blob();
      return { ...file, size: blob.size, blob: new Blob([blob], { type: file.contentType }) };
    }
    if (destination instanceof WritableStream) {
      await body.pipeTo(destination);
      return file;
    }
    if (typeof destination === 'function') destination = destination(file);
    if (typeof destination !== 'string') {
      await pipeline(Readable.fromWeb(body as import('node:stream/web').ReadableStream<Uint8Array>), destination);
      return file;
    }
    const target = (await isDirectory(destination)) ? pathInFolder(destination, file.filename) : destination;
    const size = await writeFile(Readable.fromWeb(body as import('node:stream/web').ReadableStream<Uint8Array>), target, options);
    return { ...file, size, path: target };
  }
}

async function isDirectory(target: string): Promise<boolean> {
  if (target.endsWith('/') || target.endsWith(path.sep)) return true;
  return (await fs.promises.stat(target).catch(() => undefined))?.isDirectory() ?? false;
}

/**
 * A stream of unknown length as a Blob: kept in memory while it is smaller than `threshold`
 * (a multipart upload), else written to a temporary file (a direct upload needs the exact size).
 */
async function spool(
  source: NodeJS.ReadableStream | ReadableStream<Uint8Array>,
  threshold: number,
  type: string | undefined,
): Promise<Omit<OpenedSource, 'filename'>> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  let file: { dir: string; path: string; out: fs.WriteStream } | undefined;
  const input =
    source instanceof ReadableStream ? Readable.fromWeb(source as import('node:stream/web').ReadableStream<Uint8Array>) : Readable.from(source);
  try {
    await pipeline(
      input,
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          size += chunk.length;
          if (file) return file.out.write(chunk) ? done() : file.out.once('drain', done);
          chunks.push(chunk);
          if (size < threshold) return done();
          const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-upload-'));
          file = { dir, path: path.join(dir, 'body'), out: fs.createWriteStream(path.join(dir, 'body')) };
          for (const held of chunks.splice(0)) file.out.write(held);
          done();
        },
        final(done) {
          if (!file) return done();
          file.out.end(done);
        },
      }),
    );
  } catch (err) {
    if (file) await fs.promises.rm(file.dir, { recursive: true, force: true });
    throw err;
  }
  if (!file) return { blob: toBlob(Buffer.concat(chunks), type) };
  const spooled = file;
  return {
    blob: await fs.openAsBlob(spooled.path, type ? { type } : {}),
    close: () => fs.promises.rm(spooled.dir, { recursive: true, force: true }),
  };
}

/** One stream of byte arrays and streams, in order. */
function concat(parts: Array<Uint8Array | ReadableStream<Uint8Array>>): ReadableStream<Uint8Array> {
  let index = 0;
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        const part = parts[index];
        if (part === undefined) return controller.close();
        if (part instanceof Uint8Array) {
          index++;
          return controller.enqueue(part);
        }
        reader ??= part.getReader();
        const { done, value } = await reader.read();
        if (!done) return controller.enqueue(value);
        reader = undefined;
        index++;
      }
    },
    async cancel(reason) {
      await reader?.cancel(reason);
    },
  });
}
