// The hand-written layer over the generated types: upload (multipart, or presign + PUT + confirm
// for large files), process, batch, wait (long-polling), download and run (all of it in one call).
// Browser-safe: fetch and web streams only. Node's sources and destinations (paths, Buffers,
// streams) are added by ./node.ts on the same base.
import createClient, { type Client } from 'openapi-fetch';
import { DeliveryUrlError, deliveryUrl, type DeliverySource, type SigningKey, type Transform } from './delivery.js';
import { ImgapiError } from './errors.js';
import { safeFileName } from './file-names.js';
import type { paths } from './openapi.js';
import { Transport, type RetryEvent, type RetryOptions } from './transport.js';
import {
  isFinished,
  type Account,
  type ApiFile,
  type Batch,
  type FileInfo,
  type BatchKind,
  type BatchOptions,
  type JobOptions,
  type JobRequest,
  type Kind,
  type PipelineOutput,
  type PipelineStep,
  type PresignedUpload,
  type QueuedBatch,
  type QueuedTask,
  type Task,
  type CreatedWebhook,
  type CreateWebhookRequest,
  type WebhookDelivery,
  type WebhookDeliveryList,
  type WebhookList,
} from './types.js';

export interface ImgapiOptions {
  /** The service's address, e.g. `http://localhost:3000`. */
  baseUrl: string;
  /**
   * Sent as `x-api-key`. A page on the dashboard's own origin may leave it out: its session cookie
   * is sent instead, and its CSRF token goes in `headers` as `x-csrf-token`.
   */
  apiKey?: string;
  /** Further headers for every API request. */
  headers?: Record<string, string>;
  /** Files of this many bytes or more go by direct upload (presign → PUT → confirm); default 16 MiB. */
  directUploadThreshold?: number;
  retry?: RetryOptions;
  /** Called before each retry: which request, after what, and how long it waits. */
  onRetry?: (event: RetryEvent) => void;
  /**
   * Keep to the plan's request rate (the server's `RateLimit-Limit`) by waiting before a request
   * rather than being refused 429 and retrying; for clients that send many requests at once.
   */
  paceRequests?: boolean;
  /** A fetch of your own (a proxy agent, a test double). */
  fetch?: (request: Request) => Promise<Response>;
  /** The signing key url() signs delivery URLs with (server-side code only: the secret must not reach browsers). */
  signingKey?: SigningKey;
  /** Where delivery URLs point (a CDN in front of the service's /r/ paths); default `baseUrl`. */
  deliveryBaseUrl?: string;
}

export interface Progress {
  /** Bytes sent (upload) or received (download) so far. */
  loaded: number;
  /** Bytes in all, when known. */
  total: number | undefined;
}

export interface UploadOptions {
  /** The name the file is stored under; by default the source's own name, else "upload". */
  filename?: string;
  /** Sent along; the service still sniffs the type from the bytes. */
  contentType?: string;
  /**
   * Called as bytes go out. Node reports them as they are sent; in a browser fetch cannot see a
   * request's progress, so it is called when each request has been sent whole.
   */
  onProgress?: (progress: Progress) => void;
  signal?: AbortSignal;
}

export interface RequestOptions {
  signal?: AbortSignal;
  /** Your own Idempotency-Key (one is made for every POST otherwise, and reused by its retries). */
  idempotencyKey?: string;
}

export interface InfoOptions extends RequestOptions {
  /** Also find the faces (`info.faces`, best score first): found once by the server and kept. */
  faces?: boolean;
}

export interface WaitOptions {
  /** Give up after this long with ImgapiError TIMEOUT (default: wait as long as the task runs). */
  timeoutMs?: number;
  /** The longest one long-poll waits (1–30, default 30); lower it to see `progress` more often. */
  pollSeconds?: number;
  /** Each reading of the task, finished or not. */
  onUpdate?: (task: Task) => void;
  signal?: AbortSignal;
}

/** As WaitOptions, for a batch: each reading of the batch (its tasks, counts and overall status). */
export interface BatchWaitOptions extends Omit<WaitOptions, 'onUpdate'> {
  onUpdate?: (batch: Batch) => void;
}

export interface DownloadOptions {
  onProgress?: (progress: Progress) => void;
  signal?: AbortSignal;
  /** Node, a path destination: replace a file of that name (by default ImgapiError FILE_EXISTS). */
  overwrite?: boolean;
}

export interface DownloadResult {
  fileId: string;
  /**
   * The name the service gives the file (Content-Disposition), reduced to one safe file name:
   * no path, no leading dot, no control or bidi characters (see safeFileName).
   */
  filename: string;
  contentType: string;
  size: number;
  /** The bytes, when no destination was given. */
  blob?: Blob;
  /** Node: where the file was written, when the destination was a path. */
  path?: string;
}

/** An input already stored: run() uses it as it is instead of uploading. */
export interface FileRef {
  fileId: string;
}

export interface RunOptions<Destination> extends WaitOptions {
  /** Where the output goes (see download()); by default it is answered as a Blob. */
  destination?: Destination;
  /** Replace an existing file at a path destination (see download()). */
  overwrite?: boolean;
  /** Upload progress of each input, with its position in the inputs. */
  onUploadProgress?: (progress: Progress & { index: number }) => void;
  onDownloadProgress?: (progress: Progress) => void;
}

export interface RunResult {
  /** The inputs, as uploaded (or as given by fileId). */
  inputs: string[];
  task: Task;
  output: DownloadResult;
}

/** A source opened for upload: its bytes as a Blob (read lazily where possible). */
export interface OpenedSource {
  blob: Blob;
  filename: string;
  /** Removes what opening made (a spooled temporary file). */
  close?: () => Promise<void>;
}

export const DEFAULT_DIRECT_UPLOAD_THRESHOLD = 16 * 1024 * 1024;

/**
 * What the browser and Node clients share. `Source` is what upload() takes, `Destination`
 * where download() can write.
 */
export abstract class ImgapiBase<Source, Destination> {
  /**
   * The typed openapi-fetch client for every route, with the same key, retries and
   * Idempotency-Keys: `await imgapi.api.GET('/api/files', { params: { query: { limit: 10 } } })`.
   */
  readonly api: Client<paths>;
  readonly directUploadThreshold: number;
  protected readonly baseUrl: string;
  protected readonly transport: Transport;
  protected readonly signingKey: SigningKey | undefined;
  protected readonly deliveryBaseUrl: string;
  private readonly headers: Record<string, string>;

  constructor(options: ImgapiOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.signingKey = options.signingKey;
    this.deliveryBaseUrl = options.deliveryBaseUrl ?? this.baseUrl;
    this.headers = { ...options.headers, ...(options.apiKey ? { 'x-api-key': options.apiKey } : {}) };
    this.directUploadThreshold = options.directUploadThreshold ?? DEFAULT_DIRECT_UPLOAD_THRESHOLD;
    this.transport = new Transport({ ...options.retry, fetch: options.fetch, onRetry: options.onRetry, pace: options.paceRequests });
    this.api = createClient<paths>({ baseUrl: this.baseUrl, headers: this.headers, fetch: (request) => this.transport.send(() => request.clone()) });
  }

  /** The bytes and name of `source`. */
  protected abstract open(source: Source, options: UploadOptions): Promise<OpenedSource>;
  /** Writes a download's bytes to `destination`, or answers them as a Blob without one. */
  protected abstract save(
    body: ReadableStream<Uint8Array>,
    destination: Destination | undefined,
    file: DownloadResult,
    options: DownloadOptions,
  ): Promise<DownloadResult>;

  /**
   * An upload's request body. Here FormData, which fetch serialises itself (no progress until it
   * is sent); Node streams its own multipart body to count the bytes.
   */
  protected multipartBody(blob: Blob, filename: string, _onBytes: (loaded: number) => void): { body: BodyInit; headers: Record<string, string> } {
    const form = new FormData();
    form.append('file', blob, filename);
    return { body: form, headers: {} };
  }

  /** A direct upload's PUT body. */
  protected rawBody(blob: Blob, _onBytes: (loaded: number) => void): BodyInit {
    return blob;
  }

  /** Stores a file: multipart below `directUploadThreshold`, else presign → PUT → confirm. */
  async upload(source: Source, options: UploadOptions = {}): Promise<ApiFile> {
    const opened = await this.open(source, options);
    try {
      const { blob, filename } = opened;
      const report = progressReporter(blob.size, options.onProgress);
      report(0);
      const file =
        blob.size >= this.directUploadThreshold
          ? await this.directUpload(blob, filename, options, report)
          : await this.multipartUpload(blob, filename, options, report);
      report(blob.size);
      return file;
    } finally {
      await opened.close?.();
    }
  }

  private async multipartUpload(blob: Blob, filename: string, options: UploadOptions, report: (loaded: number) => void): Promise<ApiFile> {
    const response = await this.transport.send(() => {
      const { body, headers } = this.multipartBody(blob, filename, report);
      return this.request('POST', '/api/upload', { body, headers, signal: options.signal });
    });
    return dataOf<ApiFile>(response);
  }

  private async directUpload(blob: Blob, filename: string, options: UploadOptions, report: (loaded: number) => void): Promise<ApiFile> {
    const contentType = options.contentType ?? (blob.type || undefined);
    const presigned = await this.json<PresignedUpload>(
      'POST',
      '/api/upload/presign',
      { filename, size: blob.size, ...(contentType ? { contentType } : {}) },
      options,
    );
    // The URL is the service's own or a storage's; it carries its authorisation, so no API key.
    const put = await this.transport.send(() => {
      const body = this.rawBody(blob, report);
      const init: RequestInit & { duplex?: 'half' } = {
        method: presigned.method,
        headers: presigned.headers,
        body,
        signal: options.signal,
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
      };
      return new Request(new URL(presigned.url, this.baseUrl), init);
    });
    if (!put.ok) throw await ImgapiError.fromResponse(put);
    await put.body?.cancel();
    return this.json<ApiFile>('POST', '/api/upload/confirm', { uploadId: presigned.uploadId }, options);
  }

  /**
   * A signed delivery URL for an `<img src>`, built offline (Web Crypto, so async):
   * `await imgapi.url('file_…', { w: 720, f: 'auto' })` or `url({ origin: 'shop', path: 'a b.jpg' }, 'w:720')`.
   * `{ publicPreset: true }` makes the unsigned form (`_`) of a public preset: `url(fileId, 'p:thumb', { publicPreset: true })`.
   */
  async url(source: DeliverySource, transform?: string | Transform, options: { publicPreset?: boolean } = {}): Promise<string> {
    return deliveryUrl(source, transform, { baseUrl: this.deliveryBaseUrl, signingKey: this.requireSigningKey(), ...options });
  }

  protected requireSigningKey(): SigningKey {
    if (!this.signingKey) throw new DeliveryUrlError('url() needs the signingKey option: { keyId, secret }');
    return this.signingKey;
  }

  /** Queues one task: `process('resize', { fileId, width: 800 })`. Its options are typed per kind. */
  process<K extends Kind>(kind: K, request: JobRequest<K>, options: RequestOptions = {}): Promise<QueuedTask> {
    return this.json<QueuedTask>('POST', `/api/process/${kind}`, request, options);
  }

  /** Queues one task per file with shared options, all or nothing. */
  batch<K extends BatchKind>(kind: K, fileIds: string[], batchOptions: BatchOptions<K>, options: RequestOptions = {}): Promise<QueuedBatch> {
    return this.json<QueuedBatch>('POST', `/api/process/batch/${kind}`, { ...batchOptions, fileIds }, options);
  }

  /** The batch: its tasks in order, their counts, its overall `status` and `completedAt`. */
  getBatch(batchId: string, options: RequestOptions = {}): Promise<Batch> {
    return this.json<Batch>('GET', `/api/batches/${encodeURIComponent(batchId)}`, undefined, options);
  }

  task(taskId: string, options: RequestOptions = {}): Promise<Task> {
    return this.json<Task>('GET', `/api/tasks/${encodeURIComponent(taskId)}`, undefined, options);
  }

  /** DELETE /api/tasks/{id}: the task, now `canceled` (a finished one is answered as it is). */
  cancel(taskId: string, options: RequestOptions = {}): Promise<Task> {
    return this.json<Task>('DELETE', `/api/tasks/${encodeURIComponent(taskId)}`, undefined, options);
  }

  /**
   * GET /api/files/{id}/info: format, upright size, frames, alpha, colour space, orientation, EXIF,
   * GPS, palette, dominant colour, BlurHash, ThumbHash and a 64-bit perceptual hash (computed
   * once by the server and kept), and with `faces: true` the faces found. Documents fail with
   * `INFO_UNAVAILABLE`.
   */
  info(fileId: string, options: InfoOptions = {}): Promise<FileInfo> {
    return this.json<FileInfo>('GET', `/api/files/${encodeURIComponent(fileId)}/info${options.faces ? '?faces=1' : ''}`, undefined, options);
  }

  account(options: RequestOptions = {}): Promise<Account> {
    return this.json<Account>('GET', '/api/account', undefined, options);
  }

  /** Registers a webhook endpoint; the answer's `secret` (verify deliveries with it) is shown this once. */
  createWebhook(request: CreateWebhookRequest, options: RequestOptions = {}): Promise<CreatedWebhook> {
    return this.json<CreatedWebhook>('POST', '/api/webhooks', request, options);
  }

  /** The account's webhook endpoints, newest first (without their secrets). */
  webhooks(options: RequestOptions = {}): Promise<WebhookList> {
    return this.json<WebhookList>('GET', '/api/webhooks', undefined, options);
  }

  /** Deletes an endpoint; its pending deliveries are not sent. */
  async deleteWebhook(webhookId: string, options: RequestOptions = {}): Promise<void> {
    const response = await this.transport.send(() =>
      this.request('DELETE', `/api/webhooks/${encodeURIComponent(webhookId)}`, { signal: options.signal }),
    );
    if (!response.ok) throw await ImgapiError.fromResponse(response);
    await response.body?.cancel();
  }

  /** An endpoint's recent deliveries, newest first, each with its attempts. */
  webhookDeliveries(webhookId: string, page: { limit?: number; cursor?: string } = {}, options: RequestOptions = {}): Promise<WebhookDeliveryList> {
    const query = new URLSearchParams();
    if (page.limit !== undefined) query.set('limit', String(page.limit));
    if (page.cursor !== undefined) query.set('cursor', page.cursor);
    const search = query.size ? `?${query}` : '';
    return this.json<WebhookDeliveryList>('GET', `/api/webhooks/${encodeURIComponent(webhookId)}/deliveries${search}`, undefined, options);
  }

  /** Queues a `webhook.test` event for the endpoint. */
  testWebhook(webhookId: string, options: RequestOptions = {}): Promise<WebhookDelivery> {
    return this.json<WebhookDelivery>('POST', `/api/webhooks/${encodeURIComponent(webhookId)}/test`, undefined, options);
  }

  /** Sends a delivery's event again (the same event id and body), as a new delivery. */
  resendWebhookDelivery(webhookId: string, deliveryId: string, options: RequestOptions = {}): Promise<WebhookDelivery> {
    const path = `/api/webhooks/${encodeURIComponent(webhookId)}/deliveries/${encodeURIComponent(deliveryId)}/resend`;
    return this.json<WebhookDelivery>('POST', path, undefined, options);
  }

  /**
   * The task once it has finished — `completed`, `failed` (see its `error`) or `canceled` —
   * long-polling (`?wait=`) so it answers as soon as it finishes.
   */
  async wait(taskId: string, options: WaitOptions = {}): Promise<Task> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    const longest = Math.min(30, Math.max(1, Math.round(options.pollSeconds ?? 30)));
    for (;;) {
      const seconds = Math.min(longest, Math.max(1, Math.ceil((deadline - Date.now()) / 1000)));
      const task = await this.json<Task>('GET', `/api/tasks/${encodeURIComponent(taskId)}?wait=${seconds}`, undefined, options);
      options.onUpdate?.(task);
      if (isFinished(task)) return task;
      if (Date.now() >= deadline) {
        throw new ImgapiError({ code: 'TIMEOUT', status: 0, message: `Task ${taskId} is still ${task.status} after ${options.timeoutMs} ms`, task });
      }
    }
  }

  /**
   * The batch once every task has finished (`completedAt` set; `status` completed, failed,
   * canceled or partial), long-polling the batch (`?wait=`): one request per wait, however many
   * tasks it has, instead of one per task.
   */
  async waitBatch(batchId: string, options: BatchWaitOptions = {}): Promise<Batch> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    const longest = Math.min(30, Math.max(1, Math.round(options.pollSeconds ?? 30)));
    for (;;) {
      const seconds = Math.min(longest, Math.max(1, Math.ceil((deadline - Date.now()) / 1000)));
      const batch = await this.json<Batch>('GET', `/api/batches/${encodeURIComponent(batchId)}?wait=${seconds}`, undefined, options);
      options.onUpdate?.(batch);
      if (batch.completedAt !== null) return batch;
      if (Date.now() >= deadline) {
        throw new ImgapiError({ code: 'TIMEOUT', status: 0, message: `Batch ${batchId} is still ${batch.status} after ${options.timeoutMs} ms` });
      }
    }
  }

  /**
   * A file's bytes: written to `destination`, or answered as `blob` without one. A path that
   * exists is not replaced unless `overwrite` (ImgapiError FILE_EXISTS).
   */
  async download(fileId: string, destination?: Destination, options: DownloadOptions = {}): Promise<DownloadResult> {
    const response = await this.transport.send(() => this.request('GET', `/api/download/${encodeURIComponent(fileId)}`, { signal: options.signal }));
    if (!response.ok) throw await ImgapiError.fromResponse(response);
    const size = Number(response.headers.get('content-length') ?? NaN);
    const file: DownloadResult = {
      fileId,
      // The server's word, never a path: one safe name, whatever the header says.
      filename: safeFileName(filenameOf(response.headers.get('content-disposition')), fileId),
      contentType: response.headers.get('content-type') ?? 'application/octet-stream',
      size: Number.isFinite(size) ? size : 0,
    };
    const body = response.body ?? new Blob([]).stream();
    const report = progressReporter(Number.isFinite(size) ? size : undefined, options.onProgress);
    report(0);
    const saved = await this.save(body.pipeThrough(countBytes(report)), destination, file, options);
    report(saved.size);
    return saved;
  }

  /**
   * The whole flow: uploads `input` (or uses a `{fileId}`; an array for a several-input kind
   * such as image-to-pdf), queues `kind` with `options`, waits, and downloads the output.
   * Throws ImgapiError with the task's error code when it fails (TASK_CANCELED when canceled).
   */
  async run<K extends Kind>(
    kind: K,
    input: Source | FileRef | Array<Source | FileRef>,
    options: JobOptions<K>,
    runOptions: RunOptions<Destination> = {},
  ): Promise<RunResult> {
    const sources = Array.isArray(input) ? input : [input];
    const inputs = await Promise.all(
      sources.map(async (source, index) =>
        isFileRef(source)
          ? source.fileId
          : (
              await this.upload(source, {
                signal: runOptions.signal,
                onProgress: (progress) => runOptions.onUploadProgress?.({ ...progress, index }),
              })
            ).fileId,
      ),
    );
    const body = { ...options, ...(Array.isArray(input) ? { fileIds: inputs } : { fileId: inputs[0] }) };
    const queued = await this.json<QueuedTask>('POST', `/api/process/${kind}`, body, { signal: runOptions.signal });
    const task = await this.wait(queued.taskId, runOptions);
    if (task.status !== 'completed' || !task.outputFileId) throw taskFailure(task);
    const output = await this.download(task.outputFileId, runOptions.destination, {
      signal: runOptions.signal,
      onProgress: runOptions.onDownloadProgress,
      overwrite: runOptions.overwrite,
    });
    return { inputs, task, output };
  }

  /**
   * Several transforms in one task — one decode, one encode, charged once — as `run` does it:
   * `pipeline('photo.jpg', [{ kind: 'resize', width: 800 }, { kind: 'watermark', text: '©' }], { format: 'webp' })`.
   * Each step is typed by its kind.
   */
  pipeline(
    input: Source | FileRef,
    steps: PipelineStep[],
    output: PipelineOutput = {},
    runOptions: RunOptions<Destination> = {},
  ): Promise<RunResult> {
    return this.run('pipeline', input, { ...output, steps }, runOptions);
  }

  /** A request to the API: base URL, key and headers. */
  protected request(
    method: string,
    path: string,
    init: { body?: BodyInit; headers?: Record<string, string>; signal?: AbortSignal; idempotencyKey?: string } = {},
  ): Request {
    const headers = new Headers({ ...this.headers, ...init.headers });
    if (init.idempotencyKey) headers.set('idempotency-key', init.idempotencyKey);
    // fetch sends a streamed body (Node's uploads) only with duplex "half".
    const requestInit: RequestInit & { duplex?: 'half' } = {
      method,
      headers,
      body: init.body,
      signal: init.signal,
      ...(init.body instanceof ReadableStream ? { duplex: 'half' } : {}),
    };
    return new Request(this.baseUrl + path, requestInit);
  }

  private async json<T>(method: string, path: string, body: unknown, options: RequestOptions): Promise<T> {
    const response = await this.transport.send(() =>
      this.request(method, path, {
        body: body === undefined ? undefined : JSON.stringify(body),
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        signal: options.signal,
        idempotencyKey: options.idempotencyKey,
      }),
    );
    return dataOf<T>(response);
  }
}

/** The `data` of a success envelope, or the ImgapiError the response stands for. */
async function dataOf<T>(response: Response): Promise<T> {
  if (!response.ok) throw await ImgapiError.fromResponse(response);
  const envelope = (await response.json()) as { data: T };
  return envelope.data;
}

/** The error run() throws for a task that did not complete. */
export function taskFailure(task: Task): ImgapiError {
  if (task.status === 'canceled') return new ImgapiError({ code: 'TASK_CANCELED', status: 0, message: `Task ${task.taskId} was canceled`, task });
  const error = task.error;
  return new ImgapiError({
    code: error?.code ?? 'INTERNAL_ERROR',
    status: 0,
    message: error?.message ?? `Task ${task.taskId} ended ${task.status} without an output`,
    details: error?.details,
    task,
  });
}

const isFileRef = (value: unknown): value is FileRef =>
  typeof value === 'object' && value !== null && !(value instanceof Blob) && typeof (value as Partial<FileRef>).fileId === 'string';

/** A progress callback that reports each new count once. */
function progressReporter(total: number | undefined, onProgress: ((progress: Progress) => void) | undefined): (loaded: number) => void {
  let last = -1;
  return (loaded) => {
    if (!onProgress || loaded === last) return;
    last = loaded;
    onProgress({ loaded, total });
  };
}

/** Passes bytes through, calling `onBytes` with the running count. */
export function countBytes(onBytes: (loaded: number) => void): TransformStream<Uint8Array, Uint8Array> {
  let loaded = 0;
  return new TransformStream({
    transform(chunk, controller) {
      loaded += chunk.byteLength;
      onBytes(loaded);
      controller.enqueue(chunk);
    },
  });
}

/** The file name of a Content-Disposition: `filename*` (UTF-8) first, then `filename`. */
export function filenameOf(header: string | null): string | undefined {
  if (!header) return undefined;
  const extended = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(header)?.[1];
  if (extended !== undefined) {
    try {
      return decodeURIComponent(extended.trim());
    } catch {
      // a malformed encoding: fall back to the plain name
    }
  }
  return /filename\s*=\s*"([^"]*)"/i.exec(header)?.[1] ?? /filename\s*=\s*([^;\s]+)/i.exec(header)?.[1];
}
