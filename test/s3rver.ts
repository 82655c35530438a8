// An S3-protocol server for the tests: s3rver in a child process on a loopback port, with one
// bucket, its data in a temp directory. It checks presigned URLs' expiry but not signatures or
// lengths, and cannot read aws-chunked bodies (the adapter sends plain ones). For a test that kills
// a client mid-upload it can hold one PUT part-way (holdFirstPutUnder).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import readline from 'node:readline';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { REPO_ROOT, tempDir } from './helpers.js';

export interface S3Server {
  endpoint: string;
  bucket: string;
  /** The service's environment for this server (STORAGE=s3 and the rest). */
  env: Record<string, string>;
  /** The storage config for an S3Storage built directly. */
  storageConfig: {
    kind: 's3';
    bucket: string;
    endpoint: string;
    region: string;
    forcePathStyle: boolean;
    credentials: { accessKeyId: string; secretAccessKey: string };
  };
  /** Every key in the bucket under `prefix`. */
  listKeys(prefix?: string): Promise<string[]>;
  /** With holdFirstPutUnder: that PUT, once part of its body has arrived (it is never answered). */
  heldPut: Promise<HeldPut>;
  stop(): Promise<void>;
}

export interface HeldPut {
  key: string;
  /** Bytes of the body read before holding it. */
  received: number;
  /** Its Content-Length. */
  length: number;
}

// s3rver's defaults; any well-formed credentials would do.
const ACCESS_KEY = 'S3RVER';
const SECRET_KEY = 'S3RVER';

const CHILD = `
import { once } from 'node:events';
import S3rver from 's3rver';
const [directory, bucket, holdPrefix] = process.argv.slice(1);
const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
if (holdPrefix) {
  // Ahead of s3rver's own middleware (Koa composes the list when it starts listening): the first
  // PUT under the prefix reads one chunk of its body, says so on stdout, and stalls until its client goes.
  let held = false;
  server.middleware.unshift(async (ctx, next) => {
    const key = ctx.path.slice(bucket.length + 2);
    if (held || ctx.method !== 'PUT' || !key.startsWith(holdPrefix)) return next();
    held = true;
    const [chunk] = await once(ctx.req, 'data');
    ctx.req.pause();
    process.stdout.write(JSON.stringify({ held: { key, received: chunk.length, length: Number(ctx.get('content-length')) } }) + '\\n');
    await once(ctx.req.socket, 'close');
  });
}
const { port } = await server.run();
process.stdout.write(JSON.stringify({ port }) + '\\n');
// The test process holds our stdin: when it goes, so do we.
process.stdin.on('end', () => process.exit(0)).resume();
process.on('SIGTERM', () => process.exit(0));
`;

export async function startS3rver(bucket = 'imgapi-test', { holdFirstPutUnder = '' } = {}): Promise<S3Server> {
  const directory = tempDir('imgapi-s3rver-');
  const child: ChildProcess = spawn(process.execPath, ['--input-type=module', '-e', CHILD, directory, bucket, holdFirstPutUnder], {
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  // Its stdout is one JSON object a line: its port once it listens, then any held PUT.
  let heard!: (held: HeldPut) => void;
  const heldPut = new Promise<HeldPut>((resolve) => (heard = resolve));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`s3rver did not start in 20 s: ${stderr}`)), 20_000);
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      const said = JSON.parse(line) as { port?: number; held?: HeldPut };
      if (said.held) heard(said.held);
      if (said.port === undefined) return;
      clearTimeout(timer);
      resolve(said.port);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`s3rver exited with ${code}: ${stderr}`));
    });
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const storageConfig = {
    kind: 's3' as const,
    bucket,
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
  };
  const client = new S3Client({
    region: 'us-east-1',
    endpoint,
    forcePathStyle: true,
    credentials: storageConfig.credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  return {
    endpoint,
    bucket,
    storageConfig,
    env: {
      STORAGE: 's3',
      S3_BUCKET: bucket,
      S3_ENDPOINT: endpoint,
      S3_REGION: 'us-east-1',
      S3_FORCE_PATH_STYLE: 'true',
      AWS_ACCESS_KEY_ID: ACCESS_KEY,
      AWS_SECRET_ACCESS_KEY: SECRET_KEY,
    },
    async listKeys(prefix = '') {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
        for (const object of page.Contents ?? []) keys.push(object.Key!);
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return keys;
    },
    heldPut,
    async stop() {
      client.destroy();
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
