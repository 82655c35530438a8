// Direct uploads: presign → the client PUTs the bytes → confirm. Presign reserves the declared
// size in the account's storage, in the transaction that records the upload; confirm turns the
// reservation into the file (no second charge); the sweep releases abandoned ones.
//
// With S3 the URL is S3's own presigned PUT (its signature fixes the length). With local
// storage the URL points at this service, `PUT /uploads/{uploadId}?expires=&size=&signature=`,
// signed with an HMAC over the upload id, expiry and size; `receive` checks it before reading a
// byte and streams the body to storage under a meter that refuses any other length.
//
// The bytes land under incoming/{uploadId}; confirm moves them to uploads/{fileId} before
// sniffing them, so a URL that is still valid can never change a confirmed file.
import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import type { Selectable } from 'kysely';
import { iso, type Clock } from '../clock.js';
import type { Database, Tx } from '../db/database.js';
import type { UploadsTable } from '../db/schema.js';
import { AppError, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { PlanLimits } from '../accounts/plans.js';
import { chargeStorage, lockAccount, releaseStorage } from '../accounts/quota.js';
import { INCOMING_PREFIX, incomingKey, isObjectNotFound, uploadKey, type ObjectStorage } from '../storage/storage.js';
import type { FileRecord } from './files.js';
import { inspectStoredObject } from './identify.js';
import { recordUpload } from './upload.js';
import type { PdfPageCounter } from '../documents/pdf.js';

type UploadRow = Selectable<UploadsTable>;

/**
 * How long after its URL expires an upload may still be confirmed, when its bytes arrived (a
 * PUT that started before the expiry may end after it). Then the sweep cleans up.
 */
export const CONFIRM_GRACE_MS = 3600_000;
/** Swept upload records are kept this long (confirm answers 410 meanwhile, then 404). */
const RECORD_KEEP_MS = 30 * 86_400_000;
const SWEEP_BATCH = 500;

export interface PresignRequest {
  filename: string;
  size: number;
  contentType?: string;
}

export interface DirectUploadDeps {
  database: Database;
  storage: ObjectStorage;
  clock: Clock;
  publicUrl: string;
  urlTtlMs: number;
  /** Signs local upload URLs; unused when the storage presigns its own (S3). */
  signingSecret: string | undefined;
  /** A confirmed PDF's page count. */
  pdfPages?: PdfPageCounter;
}

export class DirectUploads {
  constructor(private readonly deps: DirectUploadDeps) {}

  /** Whether this service receives the PUTs itself (local storage) rather than the store (S3). */
  get receivesUploads(): boolean {
    return !this.deps.storage.presignPut;
  }

  /** Records the upload and reserves its size, in the caller's transaction; returns the 201's data. */
  async presign(tx: Tx, accountId: string, limits: PlanLimits, request: PresignRequest) {
    const { storage, clock, urlTtlMs } = this.deps;
    if (request.size > limits.maxFileBytes) {
      throw new AppError('FILE_TOO_LARGE', `The file is larger than the plan's limit of ${limits.maxFileBytes} bytes`, {
        limit: limits.maxFileBytes,
        size: request.size,
      });
    }
    const storeLimit = storage.maxPresignedPutBytes;
    if (storeLimit !== undefined && request.size > storeLimit) {
      throw new AppError(
        'FILE_TOO_LARGE',
        `A direct upload to this store is one PUT of at most ${storeLimit} bytes; send larger files to POST /api/upload`,
        {
          limit: storeLimit,
          size: request.size,
        },
      );
    }
    const now = clock.now();
    // Whole seconds, so the URL's expiry and the answer's expiresAt are the same instant.
    const urlExpiresAt = Math.floor((now + urlTtlMs) / 1000) * 1000;
    const uploadId = newId('upl');
    await chargeStorage(tx, accountId, limits, request.size);
    await tx
      .insertInto('uploads')
      .values({
        id: uploadId,
        account_id: accountId,
        file_id: newId('file'),
        filename: request.filename,
        content_type: request.contentType ?? null,
        size: request.size,
        status: 'pending',
        created_at: now,
        url_expires_at: urlExpiresAt,
        expires_at: urlExpiresAt + CONFIRM_GRACE_MS,
        confirmed_at: null,
        swept_at: null,
      })
      .execute();
    const target = storage.presignPut
      ? await storage.presignPut(incomingKey(uploadId), request.size, urlExpiresAt, request.contentType)
      : {
          url: `${this.deps.publicUrl}/uploads/${uploadId}?${new URLSearchParams({
            expires: String(urlExpiresAt / 1000),
            size: String(request.size),
            signature: this.sign(uploadId, String(urlExpiresAt / 1000), String(request.size)),
          })}`,
          headers: { 'content-length': String(request.size), ...(request.contentType ? { 'content-type': request.contentType } : {}) },
        };
    return { uploadId, url: target.url, method: 'PUT' as const, headers: target.headers, expiresAt: iso(urlExpiresAt) };
  }

  /** Over the URL's parts exactly as written, so any change to them is a different signature. */
  private sign(uploadId: string, expires: string, size: string): string {
    const secret = this.deps.signingSecret;
    if (!secret) throw new Error('local upload URLs need a signing secret');
    return crypto.createHmac('sha256', secret).update(`PUT\n/uploads/${uploadId}\n${expires}\n${size}`).digest('base64url');
  }

  /**
   * The PUT of a local-storage upload URL. Refuses before reading the body: a bad signature
   * (403 UPLOAD_SIGNATURE_INVALID), an expired URL (403 UPLOAD_URL_EXPIRED), a Content-Length
   * other than the signed size (400 UPLOAD_SIZE_MISMATCH). Then streams the body to storage,
   * failing at the first byte past the size or on a short body; storage keeps nothing then.
   */
  async receive(uploadId: string, query: Record<string, unknown>, request: IncomingMessage): Promise<{ uploadId: string; size: number }> {
    const { database, storage, clock } = this.deps;
    const text = (name: string) => (typeof query[name] === 'string' ? (query[name] as string) : '');
    const expires = text('expires');
    const sizeText = text('size');
    const signature = text('signature');
    const valid =
      /^upl_[A-Za-z0-9_-]{1,64}$/.test(uploadId) &&
      /^\d{1,12}$/.test(expires) &&
      /^\d{1,15}$/.test(sizeText) &&
      /^[A-Za-z0-9_-]{43}$/.test(signature) &&
      crypto.timingSafeEqual(Buffer.from(signature), Buffer.from(this.sign(uploadId, expires, sizeText)));
    if (!valid)
      throw new AppError('UPLOAD_SIGNATURE_INVALID', 'The upload URL or its signature was changed; use the URL exactly as presign returned it');
    if (clock.now() >= Number(expires) * 1000) {
      throw new AppError('UPLOAD_URL_EXPIRED', 'The upload URL has expired; ask for a new one with POST /api/upload/presign', {
        expiredAt: iso(Number(expires) * 1000),
      });
    }
    const size = Number(sizeText);
    const declared = request.headers['content-length'];
    if (declared !== undefined && Number(declared) !== size) {
      throw new AppError('UPLOAD_SIZE_MISMATCH', `The body must be exactly ${size} bytes; Content-Length says ${declared}`, {
        expected: size,
        received: Number(declared),
      });
    }
    const upload = await database.db.selectFrom('uploads').selectAll().where('id', '=', uploadId).executeTakeFirst();
    if (!upload) throw notFound('Upload');
    if (upload.status === 'expired') throw new AppError('UPLOAD_URL_EXPIRED', 'The upload has expired', { expiredAt: iso(upload.url_expires_at) });
    if (upload.status === 'confirmed') throw alreadyConfirmed(upload.file_id);
    // A client gone (or a body timed out) while the upload was looked up: its request has closed
    // already, so the listeners below would never hear of it and the write would wait for ever
    // on an empty temporary file.
    if (request.destroyed) throw sizeMismatch(size, 0, 'the connection closed');
    const meter = new ExactSize(size);
    // pipe() does not pass on the source's failure: a client that goes away mid-body ends the
    // write with an error instead of leaving it waiting.
    request.on('error', (err) => meter.destroy(err));
    request.on('close', () => {
      if (!request.complete) meter.destroy(sizeMismatch(size, meter.received, 'the connection closed'));
    });
    await storage.put(incomingKey(uploadId), request.pipe(meter));
    // A confirm (or the sweep) that finished while the bytes streamed: they would replace nothing, so they go.
    const current = await database.db.selectFrom('uploads').select(['status', 'file_id']).where('id', '=', uploadId).executeTakeFirst();
    if (current?.status !== 'pending') {
      await storage.delete(incomingKey(uploadId));
      if (current?.status === 'confirmed') throw alreadyConfirmed(current.file_id);
      throw new AppError('UPLOAD_URL_EXPIRED', 'The upload has expired', { expiredAt: iso(upload.url_expires_at) });
    }
    return { uploadId, size };
  }

  /**
   * Turns an arrived upload into a file, once: checks that the bytes are there and of the
   * declared size, moves them out of reach of the URL, inspects them as an upload is inspected,
   * and records the file against the reservation. A second confirm answers the same file.
   *
   * The file is recorded by the `work` handed to `commit`, which runs it in a transaction of
   * its own making: the caller adds to that transaction (the route: the idempotent response)
   * and shapes the answer, which confirm returns as it is.
   */
  async confirm<R>(
    accountId: string,
    limits: PlanLimits,
    uploadId: string,
    commit: (work: (tx: Tx) => Promise<FileRecord>) => Promise<R>,
  ): Promise<R> {
    const { database, storage, clock } = this.deps;
    const now = clock.now();
    const upload = await database.db
      .selectFrom('uploads')
      .selectAll()
      .where('id', '=', uploadId)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    if (!upload) throw notFound('Upload');
    if (upload.status === 'confirmed') {
      await dropLatePut(storage, upload.id);
      return commit((tx) => confirmedFile(tx, upload));
    }
    if (upload.status === 'expired' || now >= upload.expires_at) throw uploadExpired(upload);

    const finalKey = uploadKey(upload.file_id);
    const incoming = await storage.head(incomingKey(upload.id));
    if (incoming) {
      if (incoming.size !== upload.size) {
        await storage.delete(incomingKey(upload.id));
        throw sizeMismatch(upload.size, incoming.size, 'the stored object');
      }
      try {
        await storage.move(incomingKey(upload.id), finalKey);
      } catch (err) {
        if (!isObjectNotFound(err)) throw err; // a concurrent confirm moved it first
      }
    }
    // Also where an earlier confirm that failed half-way (or a concurrent one) left the bytes.
    const stored = await storage.head(finalKey);
    if (!stored) {
      if (now >= upload.url_expires_at) throw uploadExpired(upload);
      throw new AppError('UPLOAD_NOT_RECEIVED', "Nothing has been uploaded to this upload's URL yet; PUT the file first", { uploadId: upload.id });
    }
    if (stored.size !== upload.size) {
      await storage.delete(finalKey);
      throw sizeMismatch(upload.size, stored.size, 'the stored object');
    }
    let inspected;
    try {
      inspected = await inspectStoredObject(
        storage,
        { fileId: upload.file_id, key: finalKey, size: stored.size, filename: upload.filename },
        limits,
        this.deps.pdfPages,
      );
    } catch (err) {
      // Refused (type, size limit): the bytes go; the client may PUT another file while the URL lasts.
      if (err instanceof AppError) await storage.delete(finalKey);
      throw err;
    }
    let committed: R;
    try {
      committed = await commit(async (tx) => {
        await lockAccount(database, tx, accountId); // the lock order in quota.ts: account, then upload
        const claimed = await tx
          .updateTable('uploads')
          .set({ status: 'confirmed', confirmed_at: now })
          .where('id', '=', upload.id)
          .where('status', '=', 'pending')
          .executeTakeFirst();
        if (Number(claimed.numUpdatedRows) !== 1) {
          const current = await tx.selectFrom('uploads').selectAll().where('id', '=', upload.id).executeTakeFirstOrThrow();
          if (current.status === 'confirmed') return confirmedFile(tx, current); // a concurrent confirm won
          throw uploadExpired(current);
        }
        return recordUpload(database, tx, clock, accountId, limits, inspected, { reserved: true });
      });
    } catch (err) {
      if (err instanceof AppError && err.code === 'UPLOAD_EXPIRED') await storage.delete(finalKey);
      throw err;
    }
    await dropLatePut(storage, upload.id);
    return committed;
  }
}

/**
 * A PUT that landed under incoming/ after the confirm moved the bytes away is never kept. With
 * local storage the receiver refuses it; an S3 URL takes it directly, so the confirm deletes what
 * arrived up to now and the sweep (sweepOrphanedIncoming) what arrives later, while the URL lasts.
 */
async function dropLatePut(storage: ObjectStorage, uploadId: string): Promise<void> {
  await storage.delete(incomingKey(uploadId)).catch(() => {});
}

const alreadyConfirmed = (fileId: string) =>
  new AppError('UPLOAD_ALREADY_CONFIRMED', 'This upload was confirmed; its file can no longer be replaced', { fileId });

function confirmedFile(tx: Tx, upload: UploadRow): Promise<FileRecord> {
  return tx.selectFrom('files').selectAll().where('id', '=', upload.file_id).executeTakeFirstOrThrow();
}

const uploadExpired = (upload: UploadRow) =>
  new AppError(
    'UPLOAD_EXPIRED',
    'The upload expired before it was confirmed; its reservation was released. Start again with POST /api/upload/presign',
    {
      expiredAt: iso(upload.url_expires_at),
    },
  );

const sizeMismatch = (expected: number, received: number, what: string) =>
  new AppError('UPLOAD_SIZE_MISMATCH', `The upload must be exactly ${expected} bytes; ${what} had ${received}`, { expected, received });

/** Passes exactly `size` bytes: fails at the first byte past it, and at the end when short. */
class ExactSize extends Transform {
  received = 0;
  constructor(private readonly size: number) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.received += chunk.length;
    if (this.received > this.size) return callback(sizeMismatch(this.size, this.received, 'the body had at least'));
    callback(null, chunk);
  }
  override _flush(callback: TransformCallback): void {
    callback(this.received === this.size ? null : sizeMismatch(this.size, this.received, 'the body had'));
  }
}

/**
 * Cleans up after uploads whose confirm window ended: an unconfirmed one is marked expired and
 * its reservation released (one transaction), then whatever arrived is deleted; a confirmed one
 * loses any bytes PUT again to its URL after the confirm. Returns how many were abandoned.
 */
export async function sweepUploads(deps: { database: Database; storage: ObjectStorage }, now: number): Promise<number> {
  const { database, storage } = deps;
  let abandoned = 0;
  for (;;) {
    const due = await database.db
      .selectFrom('uploads')
      .select(['id', 'account_id', 'file_id', 'size', 'status'])
      .where('swept_at', 'is', null)
      .where('expires_at', '<=', now)
      .limit(SWEEP_BATCH)
      .execute();
    for (const upload of due) {
      let status = upload.status;
      if (status === 'pending') {
        // The record first, conditionally: a confirm committing meanwhile wins, and its file
        // keeps its bytes; once expired, no confirm can succeed, so the bytes may go.
        const expired = await database.transaction(async (tx) => {
          await lockAccount(database, tx, upload.account_id); // the lock order in quota.ts
          const marked = await tx
            .updateTable('uploads')
            .set({ status: 'expired' })
            .where('id', '=', upload.id)
            .where('status', '=', 'pending')
            .executeTakeFirst();
          if (Number(marked.numUpdatedRows) !== 1) return false;
          await releaseStorage(tx, upload.account_id, Number(upload.size));
          return true;
        });
        if (expired) abandoned++;
        else status = (await database.db.selectFrom('uploads').select('status').where('id', '=', upload.id).executeTakeFirstOrThrow()).status;
      }
      await storage.delete(incomingKey(upload.id));
      if (status === 'expired') await storage.delete(uploadKey(upload.file_id));
      // Last: a crash before this leaves the row for the next sweep to finish.
      await database.db.updateTable('uploads').set({ swept_at: now }).where('id', '=', upload.id).execute();
    }
    if (due.length < SWEEP_BATCH) break;
  }
  await database.db
    .deleteFrom('uploads')
    .where('swept_at', '<', now - RECORD_KEEP_MS)
    .execute();
  return abandoned;
}

/**
 * Deletes bytes under incoming/ that no upload will collect: their upload was confirmed (a PUT
 * after the confirm), swept already (a PUT that ended after it) or is gone. Returns how many.
 */
export async function sweepOrphanedIncoming(deps: { database: Database; storage: ObjectStorage }): Promise<number> {
  const { database, storage } = deps;
  const keys = await storage.list(INCOMING_PREFIX);
  let removed = 0;
  for (let i = 0; i < keys.length; i += SWEEP_BATCH) {
    const batch = keys.slice(i, i + SWEEP_BATCH).map((key) => ({ key, uploadId: key.slice(INCOMING_PREFIX.length + 1) }));
    // An upload's row exists before its URL does, so bytes can never arrive ahead of it.
    const open = await database.db
      .selectFrom('uploads')
      .select('id')
      .where(
        'id',
        'in',
        batch.map((entry) => entry.uploadId),
      )
      .where('swept_at', 'is', null)
      .where('status', '=', 'pending')
      .execute();
    const collectable = new Set(open.map((row) => row.id));
    for (const entry of batch) {
      if (collectable.has(entry.uploadId)) continue;
      await storage.delete(entry.key);
      removed++;
    }
  }
  return removed;
}
