// Uploads that do not finish (API.md "Upload"), over real sockets, on every dialect: a client
// that goes away at any point of a multipart upload or of a direct upload's PUT, a body that
// stalls or outlasts REQUEST_TIMEOUT_SECONDS (408 REQUEST_TIMEOUT), a full disk (507
// INSUFFICIENT_STORAGE, on a real, full tmpfs) and a process killed mid-upload leave nothing:
// no file under the data directory, no open file handle, no server socket, no charge. And file
// names never carry bidi or other format characters into Content-Disposition. A client that
// half-closes after its body is answered; a refusal made before the body is read reaches a client
// still sending it (and one sending for ever is cut off); oversize, aborted and stalled uploads
// at once leave the temporary and incoming directories empty.
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createServices } from '../../src/services.js';
import { loadConfig } from '../../src/config.js';
import { createAccount, createApiKey } from '../../src/accounts/accounts.js';
import { ownedTempPrefix } from '../../src/temp-files.js';
import pino from 'pino';
import {
  Client,
  DIALECTS,
  MAIN_ENTRY,
  POSTGRES_URL,
  REPO_ROOT,
  apiFetch,
  corpusFile,
  nodeOptions,
  sleep,
  startServer,
  tempDir,
  type TestServer,
} from '../helpers.js';
import { freePort } from '../e2e/processes.js';

const JPEG = fs.readFileSync(corpusFile('images/wide-gamut/P3-sRGB-color-ring.jpg'));
const BOUNDARY = 'unfinished-upload-boundary';
/** Stall window and request time limit of the servers under test, in seconds. */
const STALL_SECONDS = 1;
const REQUEST_TIMEOUT_SECONDS = 3;
/** Pro's file limit in the servers under test. */
const OVERSIZE_LIMIT = 2 * 1024 * 1024;

// What the process holds ---------------------------------------------------------------------

function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((name) => fs.statSync(path.join(dir, name)).isFile());
}

function openFds(): string[] {
  const links: string[] = [];
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      links.push(fs.readlinkSync(`/proc/self/fd/${fd}`));
    } catch {
      // closed while we looked
    }
  }
  return links;
}

const socketInode = (link: string) => /^socket:\[(\d+)\]$/.exec(link)?.[1];

/** The machine's TCP sockets: local and remote port, inode. */
function tcpSockets(): { local: number; remote: number; inode: string }[] {
  const sockets = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of fs.readFileSync(table, 'utf8').split('\n').slice(1)) {
      const columns = line.trim().split(/\s+/);
      if (columns.length < 10) continue;
      const port = (address: string) => parseInt(address.split(':').pop()!, 16);
      sockets.push({ local: port(columns[1]!), remote: port(columns[2]!), inode: columns[9]! });
    }
  }
  return sockets;
}

/** This process's sockets on `serverPort` connected to `clientPort`: the server's end of one connection. */
function serverSockets(serverPort: number, clientPort: number): number {
  const inodes = new Set(openFds().map(socketInode));
  return tcpSockets().filter((s) => s.local === serverPort && s.remote === clientPort && inodes.has(s.inode)).length;
}

/** Open descriptors, but the database pool's connections (it grows and shrinks on its own). */
function fdCount(): number {
  const database = new Set(
    tcpSockets()
      .filter((s) => s.remote === Number(new URL(POSTGRES_URL).port || 5432))
      .map((s) => s.inode),
  );
  return openFds().filter((link) => !database.has(socketInode(link) ?? '')).length;
}

async function waitFor(what: string, timeoutMs: number, probe: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// Raw HTTP ---------------------------------------------------------------------------------

interface RawConnection {
  socket: net.Socket;
  /** Everything the server sent so far. */
  received(): string;
  closed: Promise<void>;
}

async function connect(port: number): Promise<RawConnection> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let text = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (text += chunk));
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, received: () => text, closed };
}

function parseResponse(text: string): { status: number; headers: Record<string, string>; body: any } {
  const end = text.indexOf('\r\n\r\n');
  assert.ok(end > 0, `no complete response in ${JSON.stringify(text.slice(0, 200))}`);
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(text.slice(end + 4)) };
}

/** The first whole response on a raw connection (headers and a Content-Length body), once it has arrived. */
async function responseOn(raw: RawConnection): Promise<ReturnType<typeof parseResponse>> {
  let closed = false;
  void raw.closed.then(() => (closed = true));
  const whole = () => {
    const text = raw.received();
    const end = text.indexOf('\r\n\r\n');
    const length = end < 0 ? null : /\r\ncontent-length: (\d+)/i.exec(text.slice(0, end));
    return length !== null && text.length >= end + 4 + Number(length[1]);
  };
  await waitFor('a whole response', 15_000, () => {
    if (!whole() && closed) throw new Error(`the connection closed before a whole response: ${JSON.stringify(raw.received().slice(0, 300))}`);
    return whole();
  });
  return parseResponse(raw.received());
}

/**
 * Writes `head`, then `bodyBytes` of filler, reading nothing meanwhile (a client busy sending its
 * body, as fetch is, reads the answer only after); then reads again. Stops early when the
 * connection closes.
 */
async function sendBeforeReading(raw: RawConnection, head: string, bodyBytes: number): Promise<void> {
  raw.socket.pause();
  raw.socket.write(head);
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  for (let sent = 0; sent < bodyBytes && raw.socket.writable; sent += chunk.length) {
    if (!raw.socket.write(chunk.subarray(0, Math.min(chunk.length, bodyBytes - sent)))) {
      await Promise.race([once(raw.socket, 'drain').catch(() => {}), raw.closed]);
    }
  }
  raw.socket.resume();
}

const uploadHead = (key: string, contentLength: number) =>
  `POST /api/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${key}\r\n` +
  `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: ${contentLength}\r\n\r\n`;

/** The bytes of a multipart upload of `data`, in the pieces a cut falls between. */
function multipartUpload(key: string, data: Buffer, filename = 'photo.jpg') {
  const partHead = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: image/jpeg\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
  const head = Buffer.from(
    `POST /api/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${key}\r\n` +
      `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: ${partHead.length + data.length + tail.length}\r\n\r\n`,
  );
  return { head, partHead, data, tail };
}

/** A direct upload of JPEG's size; its URL addressed to the test server's real port. */
async function presign(
  server: TestServer,
  client: Client,
  filename: string,
): Promise<{ uploadId: string; url: string; headers: Record<string, string> }> {
  const response = await client.post('/api/upload/presign', { filename, size: JPEG.length });
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return { ...response.body.data, url: response.body.data.url.replace(server.config.publicUrl, server.url) };
}

function expect408(text: string, limit: 'stall' | 'deadline'): void {
  const response = parseResponse(text);
  assert.equal(response.status, 408, text);
  assert.equal(response.body.success, false);
  assert.equal(response.body.error.code, 'REQUEST_TIMEOUT');
  assert.match(response.body.error.message, limit === 'stall' ? /stalled/ : /REQUEST_TIMEOUT_SECONDS/);
  assert.equal(response.body.error.requestId, response.headers['x-request-id']);
  assert.equal(response.headers.connection, 'close');
}

// The checks after every unfinished upload ---------------------------------------------------

async function usedStorage(client: Client): Promise<number> {
  const response = await client.get('/api/account');
  assert.equal(response.status, 200);
  return response.body.data.usage.storageBytes.used;
}

interface Baseline {
  used: number;
  fds: number;
}

async function baseline(client: Client): Promise<Baseline> {
  return { used: await usedStorage(client), fds: fdCount() };
}

/** Nothing under the data directory's objects, no handle on them, no socket, no charge, no file. */
async function assertNothingLeft(server: TestServer, client: Client, before: Baseline, clientPort?: number): Promise<void> {
  const objects = path.join(server.dataDir, 'objects');
  const port = Number(new URL(server.url).port);
  const left = () => ({
    files: filesUnder(objects),
    handles: openFds().filter((link) => link.startsWith(objects)),
    sockets: clientPort === undefined ? 0 : serverSockets(port, clientPort),
    fds: fdCount(),
  });
  await waitFor('the unfinished upload to be cleaned up', 10_000, () => {
    const now = left();
    return now.files.length === 0 && now.handles.length === 0 && now.sockets === 0 && now.fds <= before.fds;
  }).catch((err) => {
    throw new Error(`${err.message}: ${JSON.stringify({ ...left(), baselineFds: before.fds })}`);
  });
  assert.equal(await usedStorage(client), before.used);
  const files = await client.get('/api/files');
  assert.deepEqual(files.body.data.files, []);
}

for (const dialect of DIALECTS) {
  describe(`unfinished uploads leave nothing (${dialect})`, () => {
    let server: TestServer;
    let client: Client;
    let key: string;
    let port: number;
    let objects: string;

    before(async () => {
      server = await startServer({
        dialect,
        workers: 0,
        env: { BODY_STALL_SECONDS: String(STALL_SECONDS), REQUEST_TIMEOUT_SECONDS: String(REQUEST_TIMEOUT_SECONDS) },
        // Max is the rate-limited plan here: one request a second (the 429 below). Pro takes files
        // of up to 2 MiB, so an oversize body is quick to send.
        plans: { max: { requestsPerSecond: 1 }, pro: { maxFileBytes: OVERSIZE_LIMIT } },
      });
      key = await server.newKey('pro');
      client = new Client(server.url, key);
      port = Number(new URL(server.url).port);
      objects = path.join(server.dataDir, 'objects');
      // Warm up (database pool, storage directories), and leave nothing.
      const fileId = await client.uploadOk(JPEG);
      assert.equal((await client.request('DELETE', `/api/files/${fileId}`)).status, 204);
    });
    after(() => server?.close());

    const upload = () => multipartUpload(key, JPEG);
    type Upload = ReturnType<typeof upload>;
    const cuts: { where: string; bytes: (u: Upload) => Buffer; storing: boolean; how: 'reset' | 'half-close' }[] = [
      { where: 'in the request headers', bytes: (u) => u.head.subarray(0, u.head.length - 30), storing: false, how: 'reset' },
      { where: 'after the part headers', bytes: (u) => Buffer.concat([u.head, u.partHead]), storing: false, how: 'reset' },
      {
        where: 'in the middle of the file',
        bytes: (u) => Buffer.concat([u.head, u.partHead, u.data.subarray(0, u.data.length >> 1)]),
        storing: true,
        how: 'reset',
      },
      {
        where: 'in the middle of the file (half-close)',
        bytes: (u) => Buffer.concat([u.head, u.partHead, u.data.subarray(0, u.data.length >> 1)]),
        storing: true,
        how: 'half-close',
      },
      { where: 'just before the closing boundary', bytes: (u) => Buffer.concat([u.head, u.partHead, u.data]), storing: true, how: 'reset' },
      {
        where: 'just before the closing boundary (half-close)',
        bytes: (u) => Buffer.concat([u.head, u.partHead, u.data]),
        storing: true,
        how: 'half-close',
      },
      // The part is over (its delimiter arrived); the body is not: still no upload.
      {
        where: 'inside the closing boundary',
        bytes: (u) => Buffer.concat([u.head, u.partHead, u.data, u.tail.subarray(0, u.tail.length - 4)]),
        storing: true,
        how: 'reset',
      },
    ];
    for (const cut of cuts) {
      it(`a multipart upload cut ${cut.where}`, async () => {
        const before = await baseline(client);
        const raw = await connect(port);
        raw.socket.write(cut.bytes(upload()));
        if (cut.storing) await waitFor('the upload to reach storage', 5000, () => filesUnder(objects).length > 0);
        await sleep(200);
        if (cut.how === 'reset') raw.socket.destroy();
        else raw.socket.end();
        await raw.closed;
        await assertNothingLeft(server, client, before, raw.socket.localPort);
      });
    }

    it('a client that half-closes once it has sent the whole body is answered 201, five times of five', async () => {
      const before = await baseline(client);
      const fileIds: string[] = [];
      for (let i = 0; i < 5; i++) {
        const u = upload();
        const raw = await connect(port);
        raw.socket.end(Buffer.concat([u.head, u.partHead, u.data, u.tail]));
        await raw.closed; // the server closes after its answer
        const response = parseResponse(raw.received());
        assert.equal(response.status, 201, raw.received().slice(0, 300));
        fileIds.push(response.body.data.fileId);
      }
      const listed = (await client.get('/api/files')).body.data.files.map((file: { fileId: string }) => file.fileId);
      assert.deepEqual([...listed].sort(), [...fileIds].sort());
      assert.equal(await usedStorage(client), before.used + 5 * JPEG.length);
      for (const fileId of fileIds) assert.equal((await client.request('DELETE', `/api/files/${fileId}`)).status, 204);
    });

    it('a refusal before the body is read reaches a client still sending it: 401, 403 PLAN_NO_API_ACCESS, 413, 429', async () => {
      const before = await baseline(client);
      const freeKey = await server.newKey('free');
      const MiB = 1024 * 1024;
      const refusals = [
        { what: 'an unknown key', head: uploadHead('imgapi_not_a_key', 4 * MiB), send: 4 * MiB, status: 401, code: 'API_KEY_INVALID' },
        { what: 'a Free key', head: uploadHead(freeKey, 4 * MiB), send: 4 * MiB, status: 403, code: 'PLAN_NO_API_ACCESS' },
        // Declared past Pro's file limit: refused on its Content-Length; the client sends on regardless.
        { what: 'an upload declared too large', head: uploadHead(key, 200 * MiB), send: 4 * MiB, status: 413, code: 'FILE_TOO_LARGE' },
        {
          what: 'a JSON body declared past 1 MiB',
          head: `POST /api/process/convert HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${4 * MiB}\r\n\r\n`,
          send: 4 * MiB,
          status: 413,
          code: 'PAYLOAD_TOO_LARGE',
        },
      ];
      for (const refusal of refusals) {
        const raw = await connect(port);
        await sendBeforeReading(raw, refusal.head, refusal.send);
        const response = await responseOn(raw);
        assert.equal(response.status, refusal.status, refusal.what);
        assert.equal(response.body.error.code, refusal.code, refusal.what);
        assert.equal(response.body.error.requestId, response.headers['x-request-id'], refusal.what);
        raw.socket.destroy();
      }
      // 429: three uploads at once on one request a second; the windows they fall in admit at most two.
      const limitedKey = await server.newKey('max');
      const racing = await Promise.all([1, 2, 3].map(() => connect(port)));
      await Promise.all(racing.map((raw) => sendBeforeReading(raw, uploadHead(limitedKey, 4 * MiB), 4 * MiB)));
      const answers = await Promise.all(racing.map((raw) => responseOn(raw).catch(() => undefined)));
      const limited = answers.filter((answer) => answer?.status === 429);
      assert.ok(limited.length >= 1, JSON.stringify(answers.map((answer) => answer?.status)));
      for (const answer of limited) {
        assert.equal(answer!.body.error.code, 'RATE_LIMITED');
        assert.ok(answer!.headers['retry-after']);
      }
      for (const raw of racing) raw.socket.destroy();
      await assertNothingLeft(server, client, before);
    });

    it('a client that sends on forever after a refusal reads it, and its connection is cut after a bounded rest', async () => {
      const raw = await connect(port);
      raw.socket.write(uploadHead('imgapi_not_a_key', 1024 ** 4));
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let open = true;
      let written = 0;
      void raw.closed.then(() => (open = false));
      while (open) {
        written += chunk.length;
        if (raw.socket.write(chunk)) await new Promise((resolve) => setImmediate(resolve));
        else await Promise.race([once(raw.socket, 'drain').catch(() => {}), raw.closed]);
      }
      const response = parseResponse(raw.received());
      assert.equal(response.status, 401);
      assert.equal(response.body.error.code, 'API_KEY_INVALID');
      // Cut by the byte bound (8 MiB, plus what the kernels' buffers held), not after megabytes more.
      assert.ok(written < 64 * 1024 * 1024, `${written} bytes sent before the cut`);
    });

    it('oversize, aborted and stalled uploads and PUTs all at once leave the temporary and incoming directories empty', async () => {
      const u = upload();
      const oversize = Buffer.alloc(OVERSIZE_LIMIT + 512 * 1024, 0x5a);
      /** A chunk of a chunked body (no Content-Length: the size is only known as it streams). */
      const chunked = (data: Buffer) => Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from('\r\n')]);
      const chunkedUploadHead = Buffer.from(
        `POST /api/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${key}\r\n` +
          `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      // The direct uploads are presigned first: their reservations are in the baseline.
      const urls = await Promise.all(Array.from({ length: 9 }, async () => new URL((await presign(server, client, 'mix.jpg')).url)));
      const putHead = (chunkedBody: boolean) => {
        const url = urls.pop()!;
        const length = chunkedBody ? 'Transfer-Encoding: chunked' : `Content-Length: ${JPEG.length}`;
        return Buffer.from(`PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: 127.0.0.1\r\n${length}\r\n\r\n`);
      };
      const before = await baseline(client);
      /** Writes `pieces` one after another (a client sending on regardless of any answer), then ends as `how` says. */
      const play = async (pieces: Buffer[], how: 'wait' | 'abort' | 'stall') => {
        const raw = await connect(port);
        for (const piece of pieces) {
          if (!raw.socket.writable) break;
          if (!raw.socket.write(piece)) await Promise.race([once(raw.socket, 'drain').catch(() => {}), raw.closed]);
        }
        if (how === 'abort') {
          await waitFor('the body to reach storage', 5000, () => filesUnder(objects).length > 0 || !raw.socket.writable);
          raw.socket.destroy();
        }
        await raw.closed; // 'wait' and 'stall': the server answers (413, 400, 408) and closes
      };
      const oversizeParts = [
        u.partHead,
        ...Array.from({ length: 10 }, (_, i) => oversize.subarray((i * oversize.length) / 10, ((i + 1) * oversize.length) / 10)),
      ];
      const players = [];
      for (let i = 0; i < 3; i++) {
        // Oversize without Content-Length: refused 413 mid-stream.
        players.push(play([chunkedUploadHead, ...oversizeParts.map(chunked), Buffer.from('0\r\n\r\n')], 'wait'));
        // Cut mid-body, and cut while oversize.
        players.push(play([u.head, u.partHead, u.data.subarray(0, u.data.length >> 1)], 'abort'));
        players.push(play([chunkedUploadHead, ...oversizeParts.slice(0, 6).map(chunked)], 'abort'));
        // Stalled: 408 after BODY_STALL_SECONDS.
        players.push(play([u.head, u.partHead, u.data.subarray(0, 1000)], 'stall'));
        players.push(play([chunkedUploadHead, chunked(u.partHead), chunked(u.data.subarray(0, 1000))], 'stall'));
        // The same for a direct upload's PUT: longer than declared, cut, stalled.
        players.push(play([putHead(true), chunked(JPEG), chunked(JPEG), Buffer.from('0\r\n\r\n')], 'wait'));
        players.push(play([putHead(false), JPEG.subarray(0, JPEG.length >> 1)], 'abort'));
        players.push(play([putHead(false), JPEG.subarray(0, 1000)], 'stall'));
      }
      await Promise.all(players);
      await assertNothingLeft(server, client, before);
      for (const dir of ['.tmp', 'incoming']) assert.deepEqual(filesUnder(path.join(objects, dir)), [], dir);
    });

    it("a direct upload's PUT whose client went while the upload was looked up leaves no temporary file", async () => {
      const presigned = await presign(server, client, 'gone.jpg');
      const url = new URL(presigned.url);
      // What the receiver meets when the client goes (or its body times out) during the database
      // lookup before it reads the body: a request that has closed already. Made for real, on a
      // server of the test's own, and handed to the service's receiver.
      const side = http.createServer();
      await new Promise<void>((resolve) => side.listen(0, '127.0.0.1', () => resolve()));
      try {
        const arrived = once(side, 'request') as Promise<[http.IncomingMessage]>;
        const raw = await connect((side.address() as net.AddressInfo).port);
        raw.socket.write(`PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${JPEG.length}\r\n\r\n`);
        raw.socket.write(JPEG.subarray(0, 1000));
        const [request] = await arrived;
        request.on('error', () => {}); // "aborted": the client's going, as the service's server sees it too
        const closed = new Promise((resolve) => request.once('close', resolve));
        raw.socket.destroy();
        await closed;
        let outcome: string | undefined;
        server.services.uploads.receive(presigned.uploadId, Object.fromEntries(url.searchParams), request).then(
          () => (outcome = 'stored'),
          (err: { code?: string }) => (outcome = err.code ?? 'failed'),
        );
        await waitFor('the receiver to give up on a closed request', 5000, () => outcome !== undefined);
        assert.equal(outcome, 'UPLOAD_SIZE_MISMATCH');
        assert.deepEqual(filesUnder(objects), []);
      } finally {
        side.closeAllConnections();
        side.close();
      }
    });

    it("a direct upload's PUT cut in the middle leaves nothing but its reservation", async () => {
      const presigned = await presign(server, client, 'big.jpg');
      const before = await baseline(client);
      const url = new URL(presigned.url);
      const raw = await connect(port);
      raw.socket.write(`PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${JPEG.length}\r\n\r\n`);
      raw.socket.write(JPEG.subarray(0, JPEG.length >> 1));
      await waitFor('the PUT to reach storage', 5000, () => filesUnder(objects).length > 0);
      raw.socket.destroy();
      await raw.closed;
      await assertNothingLeft(server, client, before, raw.socket.localPort);
      const confirm = await client.post('/api/upload/confirm', { uploadId: presigned.uploadId });
      assert.equal(confirm.status, 409);
      assert.equal(confirm.body.error.code, 'UPLOAD_NOT_RECEIVED');
    });

    it('a stalled multipart body is answered 408 REQUEST_TIMEOUT and leaves nothing', async () => {
      const before = await baseline(client);
      const u = upload();
      const raw = await connect(port);
      raw.socket.write(Buffer.concat([u.head, u.partHead, u.data.subarray(0, 1000)]));
      const stalledAt = Date.now();
      await raw.closed; // the server closes the connection after its answer
      const waited = Date.now() - stalledAt;
      expect408(raw.received(), 'stall');
      assert.ok(waited >= STALL_SECONDS * 1000 - 100 && waited < STALL_SECONDS * 1000 + 2000, `answered after ${waited} ms`);
      await assertNothingLeft(server, client, before, raw.socket.localPort);
    });

    it('a body still trickling in after REQUEST_TIMEOUT_SECONDS is answered 408 and leaves nothing', async () => {
      const before = await baseline(client);
      const u = upload();
      const raw = await connect(port);
      const started = Date.now();
      raw.socket.write(Buffer.concat([u.head, u.partHead, u.data.subarray(0, 4096)]));
      // A byte every 250 ms: never a stall, never done.
      let offset = 4096;
      const trickle = setInterval(() => raw.socket.writable && raw.socket.write(u.data.subarray(offset, ++offset)), 250);
      await raw.closed;
      clearInterval(trickle);
      const took = Date.now() - started;
      expect408(raw.received(), 'deadline');
      assert.ok(took >= REQUEST_TIMEOUT_SECONDS * 1000 - 100 && took < REQUEST_TIMEOUT_SECONDS * 1000 + 2000, `answered after ${took} ms`);
      await assertNothingLeft(server, client, before, raw.socket.localPort);
    });

    it('a stalled direct-upload PUT and a stalled JSON body are answered 408 too', async () => {
      const presigned = await presign(server, client, 'slow.jpg');
      const before = await baseline(client);
      const url = new URL(presigned.url);
      const put = await connect(port);
      put.socket.write(`PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${JPEG.length}\r\n\r\n`);
      put.socket.write(JPEG.subarray(0, 2000));
      const json = await connect(port);
      json.socket.write(
        `POST /api/process/convert HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"fileId":`,
      );
      await Promise.all([put.closed, json.closed]);
      expect408(put.received(), 'stall');
      expect408(json.received(), 'stall');
      await assertNothingLeft(server, client, before, put.socket.localPort);
    });

    it('100 slow connections end in 408 at REQUEST_TIMEOUT_SECONDS while /healthz stays fast', async () => {
      const before = await baseline(client);
      const u = upload();
      const connections = await Promise.all(Array.from({ length: 100 }, () => connect(port)));
      for (const raw of connections) raw.socket.write(Buffer.concat([u.head, u.partHead, u.data.subarray(0, 4096)]));
      let offset = 4096;
      const trickle = setInterval(() => {
        offset++;
        for (const raw of connections) if (raw.socket.writable) raw.socket.write(u.data.subarray(offset - 1, offset));
      }, 500);
      const latencies: number[] = [];
      let open = true;
      const allClosed = Promise.all(connections.map((raw) => raw.closed)).then(() => (open = false));
      while (open) {
        const started = performance.now();
        const health = await fetch(`${server.url}/healthz`);
        await health.arrayBuffer();
        latencies.push(performance.now() - started);
        assert.equal(health.status, 200);
        await sleep(100);
      }
      await allClosed;
      clearInterval(trickle);
      for (const raw of connections) expect408(raw.received(), 'deadline');
      latencies.sort((a, b) => a - b);
      const median = latencies[latencies.length >> 1]!;
      const worst = latencies[latencies.length - 1]!;
      console.log(`/healthz during 100 slow uploads: ${latencies.length} probes, median ${median.toFixed(1)} ms, worst ${worst.toFixed(1)} ms`);
      assert.ok(median < 100 && worst < 1000, `median ${median} ms, worst ${worst} ms`);
      await assertNothingLeft(server, client, before);
      for (const raw of connections) assert.equal(serverSockets(port, raw.socket.localPort!), 0);
    });

    it('the OpenAPI document lists 408 and 507 for the upload routes', async () => {
      const document = (await fetch(`${server.url}/openapi.json`).then((r) => r.json())) as any;
      for (const [route, method] of [
        ['/api/upload', 'post'],
        ['/uploads/{uploadId}', 'put'],
      ] as const) {
        const responses = document.paths[route][method].responses;
        assert.ok(responses['408'] && responses['507'], `${method} ${route}: ${Object.keys(responses).join(', ')}`);
      }
    });

    it('the sweep deletes direct-upload bytes that no upload will collect, and only those', async () => {
      const incoming = path.join(objects, 'incoming');
      const pending = await presign(server, client, 'pending.jpg');
      const swept = await presign(server, client, 'swept.jpg');
      for (const upload of [pending, swept]) {
        assert.equal((await apiFetch(upload.url, { method: 'PUT', headers: upload.headers, body: new Uint8Array(JPEG) })).response.status, 200);
      }
      // Bytes that arrived after their upload was swept, and bytes of an upload that does not exist.
      await server.services.database.db.updateTable('uploads').set({ swept_at: Date.now() }).where('id', '=', swept.uploadId).execute();
      fs.writeFileSync(path.join(incoming, 'upl_nobodyEverPresignedThis'), JPEG);
      assert.equal(await server.services.maintenance.tick(true), true);
      assert.deepEqual(fs.readdirSync(incoming), [pending.uploadId]);
      assert.equal((await client.post('/api/upload/confirm', { uploadId: pending.uploadId })).status, 201);
      const files = (await client.get('/api/files')).body.data.files;
      for (const file of files) await client.request('DELETE', `/api/files/${file.fileId}`);
    });

    it('names keep no bidi or other format characters, in the API and in Content-Disposition', async () => {
      const hostile = [
        'invoice\u202Egpj.exe',
        '\u2066evil\u2069\u200F.jpg',
        'zero\u200Bwidth\uFEFF\u00AD.jpg',
        'line\u2028para\u2029.jpg',
        'arabic\u061Cmark\u0085.jpg',
      ];
      const unsafe = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;
      const checkDownload = async (fileId: string) => {
        const disposition = (await client.get(`/api/download/${fileId}`)).headers.get('content-disposition')!;
        const ascii = /filename="([^"]*)"/.exec(disposition)![1]!;
        const utf8 = decodeURIComponent(/filename\*=UTF-8''(\S+)/.exec(disposition)![1]!);
        assert.match(ascii, /^[\x20-\x7e]+$/);
        assert.doesNotMatch(utf8, unsafe, disposition);
        assert.doesNotMatch(disposition, /%E2%80%AE|%E2%81%A6|%E2%80%8B|%EF%BB%BF/i);
        return utf8;
      };
      const ids: string[] = [];
      for (const name of hostile) {
        const response = await client.upload(JPEG, name);
        assert.equal(response.status, 201, JSON.stringify(response.body));
        assert.doesNotMatch(response.body.data.filename, unsafe);
        ids.push(response.body.data.fileId);
        await checkDownload(response.body.data.fileId);
      }
      assert.equal(await checkDownload(ids[0]!), 'invoicegpj.exe');
      // A row stored before names were cleaned: the header is cleaned as it is built.
      await server.services.database.db.updateTable('files').set({ filename: 'old\u202Egnp.jpg' }).where('id', '=', ids[1]!).execute();
      assert.equal(await checkDownload(ids[1]!), 'oldgnp.jpg');
      assert.equal((await client.get(`/api/files/${ids[1]}`)).body.data.filename, 'oldgnp.jpg', 'and so is the resource');
      // The name a direct upload declares.
      const presigned = await presign(server, client, 'direct\u202Egpj.exe');
      assert.equal((await apiFetch(presigned.url, { method: 'PUT', headers: presigned.headers, body: new Uint8Array(JPEG) })).response.status, 200);
      const confirmed = await client.post('/api/upload/confirm', { uploadId: presigned.uploadId });
      assert.equal(confirmed.status, 201);
      assert.equal(confirmed.body.data.filename, 'directgpj.exe');
      assert.equal(await checkDownload(confirmed.body.data.fileId), 'directgpj.exe');
      for (const fileId of [...ids, confirmed.body.data.fileId]) await client.request('DELETE', `/api/files/${fileId}`);
    });
  });
}

// A client gone while the hooks before the body ran: the request ends, nothing waits on it ----------

describe('a client gone before its body is read', () => {
  let server: TestServer;
  /** The requests (by their x-test-slow-hook) that reached the hook, and those answered. */
  const hooked = new Set<string>();
  const ended = new Set<string>();
  before(async () => {
    server = await startServer({
      workers: 0,
      beforeListen(app) {
        // Plays a slow hook (authentication on a busy database) that outlasts the client.
        app.addHook('onRequest', async (request) => {
          const name = request.headers['x-test-slow-hook'];
          if (typeof name !== 'string') return;
          const closed = new Promise((resolve) => request.raw.once('close', resolve));
          hooked.add(name);
          await closed;
        });
        // Answered (to nobody): the request's lifecycle is over.
        app.addHook('onSend', async (request) => {
          const name = request.headers['x-test-slow-hook'];
          if (typeof name === 'string') ended.add(name);
        });
      },
    });
  });
  after(() => server?.close());

  it('a JSON body, a multipart upload and a direct-upload PUT each end their request instead of waiting for ever', async () => {
    const key = await server.newKey('pro');
    const client = new Client(server.url, key);
    const presigned = await presign(server, client, 'gone.jpg');
    const url = new URL(presigned.url);
    const u = multipartUpload(key, JPEG);
    const requests = {
      json: `POST /api/process/convert HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n`,
      multipart: u.head.toString('latin1').replace(/\r\n\r\n$/, '\r\n'),
      put: `PUT ${url.pathname}${url.search} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${JPEG.length}\r\n`,
    };
    for (const [name, head] of Object.entries(requests)) {
      const raw = await connect(Number(new URL(server.url).port));
      raw.socket.write(`${head}x-test-slow-hook: ${name}\r\n\r\n{"fileId":`);
      await waitFor('the request to reach the hook', 5000, () => hooked.has(name));
      raw.socket.destroy();
      await raw.closed;
    }
    await waitFor('every request to end', 5000, () => ended.size === 3).catch((err) => {
      throw new Error(`${err.message}: ended ${[...ended].join(', ') || 'none'}`);
    });
    assert.deepEqual([...ended].sort(), ['json', 'multipart', 'put']);
    assert.deepEqual(filesUnder(path.join(server.dataDir, 'objects')), []);
  });
});

// Headers that never end: Node's own limit (the backstop), answered with the envelope -----------

describe('headers that never end', () => {
  let server: TestServer;
  before(async () => {
    server = await startServer({ workers: 0, env: { REQUEST_TIMEOUT_SECONDS: '2' } });
  });
  after(() => server?.close());

  it('are answered 408 REQUEST_TIMEOUT in the error envelope, and the connection closes', async () => {
    const raw = await connect(Number(new URL(server.url).port));
    const started = Date.now();
    raw.socket.write('POST /api/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-');
    const trickle = setInterval(() => raw.socket.writable && raw.socket.write('x'), 500);
    await raw.closed;
    clearInterval(trickle);
    const response = parseResponse(raw.received());
    assert.equal(response.status, 408);
    assert.equal(response.body.error.code, 'REQUEST_TIMEOUT');
    assert.equal(response.body.error.requestId, response.headers['x-request-id']);
    // Node checks its connections every 5 s.
    assert.ok(Date.now() - started < 2000 + 5000 + 1000, `closed after ${Date.now() - started} ms`);
  });
});

// A real full file system: a small tmpfs as the data directory ---------------------------------

function mountTmpfs(dir: string, size: string): string | undefined {
  const result = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { encoding: 'utf8' });
  return result.status === 0 ? undefined : (result.stderr || result.error?.message || 'mount failed').trim();
}

for (const dialect of DIALECTS) {
  describe(`a full disk (${dialect})`, () => {
    const mountPoint = tempDir('imgapi-full-disk-');
    const mountError = mountTmpfs(mountPoint, '4m');
    let server: TestServer;
    let client: Client;
    const filler = path.join(mountPoint, 'filler');

    before(async () => {
      if (mountError) return;
      server = await startServer({ dialect, workers: 0, env: { DATA_DIR: mountPoint } });
      client = new Client(server.url, await server.newKey('pro'));
    });
    after(async () => {
      await server?.close();
      if (!mountError) spawnSync('umount', [mountPoint]);
      fs.rmSync(mountPoint, { recursive: true, force: true });
    });

    /** Fills the file system but for `leave` bytes. */
    function fill(leave: number): void {
      const { bavail, bsize } = fs.statfsSync(mountPoint);
      fs.writeFileSync(filler, Buffer.alloc(Math.max(0, bavail * bsize - leave)));
    }

    it(
      'an upload or direct-upload PUT that does not fit answers 507 INSUFFICIENT_STORAGE and keeps nothing',
      { skip: mountError && `cannot mount a tmpfs: ${mountError}` },
      async () => {
        const objects = path.join(mountPoint, 'objects');
        const presigned = await presign(server, client, 'later.jpg');
        const before = await baseline(client);
        fill(64 * 1024);

        const refused = await client.upload(JPEG, 'photo.jpg');
        assert.equal(refused.status, 507, JSON.stringify(refused.body));
        assert.equal(refused.body.error.code, 'INSUFFICIENT_STORAGE');
        assert.equal(refused.body.error.requestId, refused.headers.get('x-request-id'));
        const { response: put, body: putBody } = await apiFetch(presigned.url, {
          method: 'PUT',
          headers: presigned.headers,
          body: new Uint8Array(JPEG),
        });
        assert.equal(put.status, 507);
        assert.equal(JSON.parse(putBody.toString('utf8')).error.code, 'INSUFFICIENT_STORAGE');
        assert.deepEqual(filesUnder(objects), []);
        assert.ok(!openFds().some((link) => link.startsWith(objects)));
        assert.equal(await usedStorage(client), before.used);
        assert.deepEqual((await client.get('/api/files')).body.data.files, []);

        // Space again: the same requests succeed.
        fs.rmSync(filler);
        const fileId = await client.uploadOk(JPEG, 'photo.jpg');
        // Not last: a client has the whole body a moment before the server ends the response, and a
        // server closing meanwhile would wait for the connection's keep-alive timeout.
        assert.deepEqual(await client.download(fileId), JPEG);
        assert.equal((await apiFetch(presigned.url, { method: 'PUT', headers: presigned.headers, body: new Uint8Array(JPEG) })).response.status, 200);
        assert.equal((await client.post('/api/upload/confirm', { uploadId: presigned.uploadId })).status, 201);
      },
    );
  });
}

// A process killed mid-upload: its temp file is swept when the service starts again ------------

describe('a process killed mid-upload', () => {
  const dataDir = tempDir();
  const env = {
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    WORKER_CONCURRENCY: '0',
    PATH: process.env.PATH ?? '',
    HOME: os.tmpdir(),
    ...nodeOptions(),
  };
  const planted: string[] = [];
  let child: ChildProcess | undefined;

  async function serve(port: number): Promise<ChildProcess> {
    const proc = spawn(process.execPath, [...MAIN_ENTRY, 'serve'], {
      cwd: REPO_ROOT,
      env: { ...env, PORT: String(port) },
      stdio: 'ignore',
    });
    await waitFor('the service to start', 30_000, async () => {
      if (proc.exitCode !== null) throw new Error(`the service exited with ${proc.exitCode}`);
      return fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
    });
    return proc;
  }

  after(() => {
    if (child?.exitCode === null) child.kill('SIGKILL');
    for (const dir of planted) fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('leaves a temp file and a task directory that the next start sweeps', async () => {
    const services = await createServices(loadConfig(env), { logger: pino({ level: 'silent' }) });
    const account = await createAccount(services.database, services.clock, { email: 'killed@example.com', plan: 'pro' });
    const { key } = await createApiKey(services.database, services.clock, account.id, 'test');
    await services.close();

    const port = await freePort();
    child = await serve(port);
    const killedPid = child.pid!;
    const u = multipartUpload(key, JPEG);
    const raw = await connect(port);
    raw.socket.write(Buffer.concat([u.head, u.partHead, u.data.subarray(0, u.data.length >> 1)]));
    const tmp = path.join(dataDir, 'objects', '.tmp');
    await waitFor('the upload to reach storage', 10_000, () => filesUnder(tmp).length === 1);
    child.kill('SIGKILL');
    await once(child, 'exit');
    raw.socket.destroy();
    assert.equal(filesUnder(tmp).length, 1, 'the killed process left its temp file');

    // A task directory of the killed process, and one of a process still running (this one).
    const deadTaskDir = path.join(os.tmpdir(), `${ownedTempPrefix('imgapi-task-').replace(`-${process.pid}-`, `-${killedPid}-`)}abc123`);
    const liveTaskDir = path.join(os.tmpdir(), `${ownedTempPrefix('imgapi-task-')}def456`);
    for (const dir of [deadTaskDir, liveTaskDir]) {
      fs.mkdirSync(path.join(dir, 'soffice-x'), { recursive: true });
      planted.push(dir);
    }

    child = await serve(port);
    await waitFor('the temp file to be swept', 10_000, () => filesUnder(tmp).length === 0 && !fs.existsSync(deadTaskDir));
    assert.ok(fs.existsSync(liveTaskDir), "a running process's task directory stays");
    assert.deepEqual(filesUnder(path.join(dataDir, 'objects')), []);
    child.kill('SIGTERM');
    await once(child, 'exit');
  });
});
