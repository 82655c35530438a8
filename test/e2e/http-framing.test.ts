// What HTTP/1.1's framing leaves to the application (src/http/framing.ts), over raw sockets: a
// request target in absolute-form is served as its origin-form (RFC 9112 §3.2.2: a server must
// accept it), and the Host rule (§3.2: none on HTTP/1.1, or more than one, is 400) is answered
// in the error envelope. The database plays no part: SQLite only.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/services.js';
import { startServer, type TestServer } from '../helpers.js';
import { png, signer, type Signer } from '../delivery/helpers.js';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Resolves when the server has closed the connection (the test ends it otherwise). */
  closed: Promise<void>;
}

/** Sends `text` on a new connection and reads one answer (its Content-Length body). */
async function exchange(url: string, text: string): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  await once(socket, 'connect');
  let received = '';
  socket.setEncoding('latin1').on('data', (chunk: string) => (received += chunk));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(text);
  const whole = () => {
    const end = received.indexOf('\r\n\r\n');
    const length = end < 0 ? null : /\r\ncontent-length: (\d+)/i.exec(received.slice(0, end));
    return length !== null && Buffer.byteLength(received, 'latin1') >= end + 4 + Number(length[1]);
  };
  // The answer is whole, or the connection ended (a test then sees what arrived).
  await within(Promise.race([closed, new Promise<void>((resolve) => socket.on('data', () => whole() && resolve()))]), 15_000, 'an answer');
  const end = received.indexOf('\r\n\r\n');
  assert.ok(end > 0, `no answer: ${JSON.stringify(received.slice(0, 200))}`);
  const [statusLine, ...lines] = received.slice(0, end).split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  const body = received.slice(end + 4, end + 4 + Number(headers['content-length'] ?? 0));
  // Kept open by the server: ended by the test's timeout at the latest (node:test ends the file).
  socket.unref();
  return { status: Number(statusLine!.split(' ')[1]), headers, body, closed };
}

/** `promise`, or a failure naming `what` once `ms` have passed without it. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`not within ${ms} ms: ${what}`)), ms)));
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('HTTP framing: absolute-form targets and the Host line', () => {
  let server: TestServer;
  let account: Signer;
  let fileId: string;
  let host: string;
  const logLines: Record<string, any>[] = [];

  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line) logLines.push(JSON.parse(line));
        done();
      },
    });
    server = await startServer({ dialect: 'sqlite', workers: 0, logger: createLogger(loadConfig({ LOG_LEVEL: 'info' }), sink) });
    account = await signer(server);
    fileId = await account.client.uploadOk(await png(60, 40), 'a.png');
    host = new URL(server.url).host;
  });
  after(async () => server?.close());

  const request = (target: string, headers: string[] = [`Host: ${host}`], method = 'GET', version = 'HTTP/1.1') =>
    `${method} ${target} ${version}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`;

  it('serves an absolute-form target as its origin-form: a delivery URL (a miss, then a hit from memory), /healthz, and 405 for another method', async () => {
    const path = new URL(account.url('w:30', fileId)).pathname;
    const miss = await exchange(server.url, request(`http://${host}${path}`));
    assert.equal(miss.status, 200, miss.body);
    assert.equal(miss.headers['imgapi-cache'], 'miss');
    await server.services.delivery.stored();
    // The same render again: from the store, then from this process's memory, which the
    // front handler answers: the same target must read the same there.
    for (let i = 0; i < 2; i++) {
      const hit = await exchange(server.url, request(`http://${host}${path}`));
      assert.equal(hit.status, 200, hit.body);
      assert.equal(hit.headers['imgapi-cache'], 'hit');
      assert.equal(hit.headers['content-length'], miss.headers['content-length']);
    }
    assert.equal((await exchange(server.url, request(`http://${host}/healthz`))).status, 200);
    const refused = await exchange(server.url, request(`http://${host}${path}`, [`Host: ${host}`], 'POST'));
    assert.equal(refused.status, 405, refused.body);
    assert.equal(refused.headers.allow, 'GET, HEAD');
    // A wrong signature is still one, whatever the form.
    const forged = path.replace(/\/r\/([^/]+)\/[^/]+\//, '/r/$1/AAAA/');
    assert.equal(JSON.parse((await exchange(server.url, request(`http://${host}${forged}`))).body).error.code, 'SIGNATURE_INVALID');
  });

  it('refuses an HTTP/1.1 request without Host, and any with two, with 400 in the envelope, and closes the connection', async () => {
    for (const [what, text] of [
      ['no Host', request('/healthz', [])],
      ['two Host lines', request('/healthz', [`Host: ${host}`, 'Host: elsewhere.example'])],
      ['two Host lines, on a delivery URL', request(new URL(account.url('w:30', fileId)).pathname, [`Host: ${host}`, `host: ${host}`])],
    ] as const) {
      const answer = await exchange(server.url, text);
      assert.equal(answer.status, 400, what);
      const error = JSON.parse(answer.body).error;
      assert.equal(error.code, 'VALIDATION_ERROR', what);
      assert.match(error.message, /Host/, what);
      assert.match(answer.headers['x-request-id']!, /^req_/, what);
      assert.equal(error.requestId, answer.headers['x-request-id'], what);
      await within(answer.closed, 10_000, `${what}: the server closes the connection`);
    }
    // HTTP/1.0 has no Host rule.
    assert.equal((await exchange(server.url, request('/healthz', [], 'GET', 'HTTP/1.0'))).status, 200);
  });

  it("keeps a direct upload URL's query out of the access log in absolute-form too", async () => {
    const target = `http://${host}/uploads/upl_nothing?expires=1&signature=secret-looking`;
    const answer = await exchange(server.url, request(target, [`Host: ${host}`, 'Content-Length: 0'], 'PUT'));
    assert.ok(answer.status >= 400 && answer.status < 500, `${answer.status} ${answer.body}`);
    const line = logLines.find((l) => l.msg === 'request completed' && String(l.req?.url).includes('/uploads/upl_nothing'));
    assert.ok(line, 'an access-log line for the PUT');
    assert.equal(line.req.url, `http://${host}/uploads/upl_nothing?[signed]`);
    assert.ok(!JSON.stringify(logLines).includes('secret-looking'));
  });
});
