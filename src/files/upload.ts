// Uploads: the bytes streamed to storage while a meter counts them (the plan's size limit holds
// while streaming) and, when asked (an Idempotency-Key's fingerprint), hashes them, then recorded. What the file is, is identify.ts's one step,
// shared with direct uploads: the meter asks it of the first bytes, refusing an unknown type
// before the rest of the body is stored, and of the stored object once it is whole.
import crypto from 'node:crypto';
import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import type { Clock } from '../clock.js';
import type { Database, Tx } from '../db/database.js';
import { AppError } from '../errors.js';
import { newId } from '../ids.js';
import type { PlanLimits } from '../accounts/plans.js';
import { storageRefused } from '../accounts/quota.js';
import { SNIFF_HEAD_BYTES, type Sniffed } from '../imaging/sniff.js';
import { uploadKey, type ObjectStorage } from '../storage/storage.js';
import { insertChargedFiles, type FileRecord } from './files.js';
import { hashFileOffThread } from './file-hash.js';
import { FrameCounter } from '../imaging/frame-count.js';
import type { PdfPageCounter } from '../documents/pdf.js';
import { fileTooLarge, identify, identifyHead, PROBE_BYTES, uploadEtag, type StoredUpload } from './identify.js';

export class UploadMeter extends Transform {
  size = 0;
  sniffed: Sniffed | undefined;
  /** A ZIP or OLE2 head: perhaps a presentation, decided once the object is stored. */
  container: 'zip' | 'ole' | undefined;
  /** Frames of a GIF or WebP over the whole file: the head alone may not show them all. */
  readonly frameCounter = new FrameCounter();
  /** Undefined when the caller hashes the stored file instead (off the event loop: src/files/file-hash.ts). */
  private readonly hash: crypto.Hash | undefined;
  private readonly headChunks: Buffer[] = [];
  private headLength = 0;

  constructor(
    private readonly maxBytes: number,
    options: { hash?: boolean } = {},
  ) {
    super();
    this.hash = options.hash === false ? undefined : crypto.createHash('sha256');
  }

  get head(): Buffer {
    return Buffer.concat(this.headChunks);
  }

  /** The bytes' SHA-256 (hex); undefined when made with `hash: false`. */
  get sha256(): string | undefined {
    return this.hash?.copy().digest('hex');
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      callback(fileTooLarge(this.maxBytes));
      return;
    }
    if (this.headLength < PROBE_BYTES) {
      const part = chunk.subarray(0, PROBE_BYTES - this.headLength);
      this.headChunks.push(part);
      this.headLength += part.length;
    }
    this.hash?.update(chunk);
    this.frameCounter.push(chunk);
    // Refuse an unknown type as soon as enough bytes arrived, not after storing everything.
    if (!this.sniffed && !this.container && this.headLength >= SNIFF_HEAD_BYTES) {
      const error = this.identify();
      if (error) return callback(error);
    }
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    if (this.size === 0) return callback(new AppError('VALIDATION_ERROR', 'The file is empty', { fields: [{ field: 'file', message: 'is empty' }] }));
    callback(this.sniffed || this.container ? null : this.identify());
  }

  private identify(): AppError | null {
    try {
      const found = identifyHead(this.head);
      if ('sniffed' in found) this.sniffed = found.sniffed;
      else this.container = found.container;
      return null;
    } catch (err) {
      if (err instanceof AppError) return err;
      throw err;
    }
  }
}

/**
 * Streams the body into storage under a fresh id. Nothing is left behind when it fails, nor
 * when the body ends unfinished (its client went away): the storage write fails with it.
 * `sha256` only when asked: the ETag comes from the id, so only an Idempotency-Key's
 * fingerprint needs the bytes' hash.
 */
export async function storeUpload(
  storage: ObjectStorage,
  body: Readable,
  filename: string | undefined,
  limits: PlanLimits,
  /** A PDF's page count (pdfinfo); without it a PDF is stored without `pages`. */
  pdfPages: PdfPageCounter | undefined,
  options: { sha256: boolean },
): Promise<StoredUpload & { sha256: string | undefined }> {
  const fileId = newId('file');
  const key = uploadKey(fileId);
  // On local disk the stored file is hashed afterwards on a thread of its own, not on the event loop as it streams.
  const localFile = options.sha256 ? storage.localPath?.(key) : undefined;
  const meter = new UploadMeter(limits.maxFileBytes, { hash: options.sha256 && localFile === undefined });
  try {
    // pipeline, not pipe: a body destroyed half-way (a client that disconnected) fails the
    // meter and so the write, which then removes its temporary file and closes it.
    await storage.put(
      key,
      pipeline(body, meter, () => {}),
    );
  } catch (err) {
    await storage.delete(key).catch(() => {});
    // The multipart parser truncates a part past its limit; the meter's own error says why.
    throw err;
  }
  try {
    const [identified, sha256] = await Promise.all([
      identify(storage, key, meter.size, meter.head, filename, meter.frameCounter.result(), pdfPages),
      localFile === undefined ? meter.sha256 : storedSha256(localFile, meter.size),
    ]);
    return { fileId, key, size: meter.size, sha256, etag: uploadEtag(fileId), ...identified };
  } catch (err) {
    await storage.delete(key).catch(() => {});
    throw err;
  }
}

/** The SHA-256 of the stored file of `size` bytes, hashed off the event loop. */
async function storedSha256(file: string, size: number): Promise<string> {
  const hashed = await hashFileOffThread(file);
  if (hashed.size !== size) throw new Error(`the stored upload ${file} has ${hashed.size} bytes, ${size} were written`);
  return hashed.sha256;
}

/**
 * Records an upload and charges its bytes to the account's storage, unless they are already
 * `reserved` (a confirmed direct upload: its reservation becomes the file). Not reserved, the
 * charge and the file's row are one statement (`insertChargedFiles`): the caller needs no
 * transaction.
 */
export async function recordUpload(
  database: Database,
  tx: Tx,
  clock: Clock,
  accountId: string,
  limits: PlanLimits,
  upload: StoredUpload,
  options: { reserved?: boolean } = {},
): Promise<FileRecord> {
  const now = clock.now();
  const row: FileRecord = {
    id: upload.fileId,
    account_id: accountId,
    origin: 'upload',
    storage_key: upload.key,
    filename: upload.filename,
    mime_type: upload.sniffed.mimeType,
    format: upload.sniffed.format,
    size: upload.size,
    width: upload.header.width ?? null,
    height: upload.header.height ?? null,
    pages: upload.header.pages ?? null,
    etag: upload.etag,
    task_id: null,
    output_index: null,
    created_at: now,
    expires_at: now + limits.retentionSeconds * 1000,
    deleted_at: null,
  };
  if (options.reserved) await tx.insertInto('files').values(row).execute();
  else if (!(await insertChargedFiles(database, tx, accountId, [row], limits.storageBytes)))
    throw await storageRefused(tx, accountId, limits, upload.size);
  return row;
}
