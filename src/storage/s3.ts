// Objects in an S3-compatible bucket (AWS S3, MinIO, R2, Ceph…) through the AWS SDK v3. Bytes
// stream both ways: uploads of unknown length go up as a multipart upload in bounded parts, and
// reads hand back the response body itself. Direct uploads get real presigned PUT URLs.
import { Transform, pipeline, type Readable, type TransformCallback } from 'node:stream';
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { StorageConfig } from '../config.js';
import { assertValidKey, objectNotFound, type ByteRange, type ObjectStorage, type PresignedPut } from './storage.js';

type S3Config = Extract<StorageConfig, { kind: 's3' }>;

/** Parts of a streamed upload: memory per upload is about PART_BYTES × (QUEUE_SIZE + 1). */
const PART_BYTES = 8 * 1024 * 1024;
const QUEUE_SIZE = 2;
/** S3's longest presigned URL. */
const MAX_PRESIGN_SECONDS = 7 * 86_400;
/** S3's largest single PUT, and so the largest direct upload and the largest CopyObject. */
const S3_MAX_SINGLE_PUT_BYTES = 5 * 1024 ** 3;

class ByteCounter extends Transform {
  bytes = 0;
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    callback(null, chunk);
  }
}

/** Skips `skip` bytes, passes `remaining`, then ends (ignoring the rest). */
class Slice extends Transform {
  constructor(
    private skip: number,
    private remaining: number,
  ) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.remaining === 0) return callback();
    if (this.skip >= chunk.length) {
      this.skip -= chunk.length;
      return callback();
    }
    const part = chunk.subarray(this.skip, this.skip + this.remaining);
    this.skip = 0;
    this.remaining -= part.length;
    this.push(part);
    if (this.remaining === 0) this.push(null);
    callback();
  }
}

const statusOf = (err: unknown): number | undefined => (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
const isMissing = (err: unknown): boolean => {
  const name = (err as { name?: string }).name;
  return name === 'NoSuchKey' || name === 'NotFound' || statusOf(err) === 404;
};

export class S3Storage implements ObjectStorage {
  readonly name = 's3';
  readonly maxPresignedPutBytes = S3_MAX_SINGLE_PUT_BYTES;
  private readonly client: S3Client;
  private readonly bucket: string;

  constructor(config: S3Config) {
    this.bucket = config.bucket;
    this.client = new S3Client({
      region: config.region,
      endpoint: config.endpoint,
      forcePathStyle: config.forcePathStyle,
      credentials: config.credentials,
      // Plain bodies with a Content-Length rather than aws-chunked ones with trailing checksums:
      // what every S3-compatible store reads (TLS and S3's own MD5 ETags still guard the bytes).
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async put(key: string, body: Readable | Buffer): Promise<{ size: number }> {
    assertValidKey(key);
    if (Buffer.isBuffer(body)) {
      // Bytes in memory: their length is known, nothing to count or to destroy on failure.
      await this.upload(key, body).done();
      return { size: body.length };
    }
    const counter = new ByteCounter();
    // The source's own failure is the one to report (a failed abort of the multipart upload
    // would otherwise take its place).
    let sourceError: unknown;
    body.on('error', (err) => {
      sourceError ??= err;
    });
    // pipeline, not pipe: errors travel to the counter (and so to the upload), and a failed
    // upload destroys the source instead of leaving it open.
    pipeline(body, counter, () => {});
    try {
      await this.upload(key, counter).done();
    } catch (err) {
      counter.destroy();
      body.destroy();
      throw sourceError ?? err;
    }
    return { size: counter.bytes };
  }

  /**
   * One PutObject when the body fits in a part; else a multipart upload, aborted on failure so
   * nothing is left behind (leavePartsOnError: false).
   */
  private upload(key: string, body: Readable | Buffer): Upload {
    return new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: key, Body: body },
      partSize: PART_BYTES,
      queueSize: QUEUE_SIZE,
      leavePartsOnError: false,
    });
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    assertValidKey(key);
    try {
      const response = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range ? `bytes=${range.start}-${range.end}` : undefined }),
      );
      const body = response.Body as Readable;
      if (!range) return body;
      // A store that ignored the range, or answered another one, is cut to the asked bytes.
      const answered = /^bytes (\d+)-(\d+)\//.exec(response.ContentRange ?? '');
      const from = answered ? Number(answered[1]) : 0;
      if (answered && from === range.start && Number(answered[2]) === range.end) return body;
      if (from > range.start) {
        body.destroy();
        throw new Error(`the store answered bytes from ${from} for a range from ${range.start}`);
      }
      return pipeline(body, new Slice(range.start - from, range.end - range.start + 1), () => {});
    } catch (err) {
      throw isMissing(err) ? objectNotFound(key) : err;
    }
  }

  async head(key: string): Promise<{ size: number; modifiedAt: number } | null> {
    assertValidKey(key);
    try {
      const response = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { size: Number(response.ContentLength ?? 0), modifiedAt: response.LastModified?.getTime() ?? 0 };
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  async move(from: string, to: string): Promise<void> {
    assertValidKey(from);
    assertValidKey(to);
    try {
      // Server-side copy (objects up to 5 GiB: every direct upload is one S3 PUT, so at most that).
      await this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: to, CopySource: `${this.bucket}/${from}` }));
    } catch (err) {
      throw isMissing(err) ? objectNotFound(from) : err;
    }
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: from }));
  }

  async list(prefix: string): Promise<string[]> {
    assertValidKey(prefix);
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: `${prefix}/`, Delimiter: '/', ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) if (object.Key) keys.push(object.Key);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return keys;
  }

  /** A presigned PutObject whose signature covers Content-Length: S3 refuses any other size. */
  async presignPut(key: string, size: number, expiresAt: number, contentType?: string): Promise<PresignedPut> {
    assertValidKey(key);
    const expiresIn = Math.min(MAX_PRESIGN_SECONDS, Math.max(1, Math.ceil((expiresAt - Date.now()) / 1000)));
    const command = new PutObjectCommand({ Bucket: this.bucket, Key: key, ContentLength: size, ContentType: contentType });
    const url = await getSignedUrl(this.client, command, {
      expiresIn,
      signableHeaders: new Set(['content-length', ...(contentType ? ['content-type'] : [])]),
    });
    return { url, headers: { 'content-length': String(size), ...(contentType ? { 'content-type': contentType } : {}) } };
  }

  async check(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
  }

  close(): void {
    this.client.destroy();
  }
}
