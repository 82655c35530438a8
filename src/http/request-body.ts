// Time limits on request bodies, and what becomes of a body's unread rest.
//
// A body that sends no byte for BODY_STALL_SECONDS, or is still arriving REQUEST_TIMEOUT_SECONDS
// after its request began, is answered 408 REQUEST_TIMEOUT (the error envelope) and its
// connection closes. Whatever was reading the body then sees it end unfinished, exactly as when
// a client disconnects, and cleans up the same way: every body reader (the upload, the direct
// upload's PUT, the JSON parser) handles that one case, so neither leaves anything behind.
//
// A request answered before anything read its body (a refusal in a hook: 401, 403, 413, 429…)
// has the rest read and discarded, within bounds, instead of the connection closing at once
// (lingerAfterAnswer): a client still sending then reads the answer rather than a reset.
//
// Node's own limits stay on as a backstop, for what this watch does not see (headers that never
// end): `serverTimeouts` for the server, and `clientErrorHandler` answers them with the envelope.
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { envelope } from './framing.js';

export interface BodyTimeouts {
  requestTimeoutMs: number;
  bodyStallMs: number;
}

/** How much later than ours Node's own request timeout closes a connection. */
const BACKSTOP_MS = 10_000;
/** Node's default limit on receiving the headers; never past the request's own limit. */
const HEADERS_TIMEOUT_MS = 60_000;

/** Node's http.Server settings: the backstop behind the watch below. */
export function serverTimeouts({ requestTimeoutMs }: BodyTimeouts) {
  return {
    requestTimeout: requestTimeoutMs + BACKSTOP_MS,
    http: {
      headersTimeout: Math.min(HEADERS_TIMEOUT_MS, requestTimeoutMs),
      // Node looks for expired requests this often (its default, 30 s, lets slow sockets linger).
      connectionsCheckingInterval: 5_000,
    },
  };
}

/** A request carries a body when it says so (RFC 9112 §6.3). */
function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** True once the whole body has arrived (the closing bytes included). */
export const bodyReceived = (request: FastifyRequest): boolean => !hasBody(request) || request.raw.complete;

/**
 * True when a request needs no answer: the body timed out and was answered 408 already, or the
 * client went away (before sending its body whole, or after: nobody is left to answer). A
 * client that half-closes after its body is still there (`httpAllowHalfOpen` in app.ts).
 */
export function bodyAbandoned(request: FastifyRequest, reply: FastifyReply): boolean {
  if (reply.sent) return true;
  const gone = (request.raw.destroyed && !request.raw.complete) || request.raw.socket?.destroyed === true;
  if (!gone) return false;
  request.log.info('the client went away before it was answered');
  return true;
}

export function registerBodyTimeouts(app: FastifyInstance, limits: BodyTimeouts): void {
  app.addHook('onRequest', async (request, reply) => {
    if (hasBody(request)) watchBody(request, reply, limits);
  });
  // A client gone while the hooks before parsing ran (authentication reads the database): its
  // request has closed already, and a parser would wait for ever on it (nothing answered, the
  // request held). Refused here, the request ends as any refused one does.
  app.addHook('preParsing', async (request, reply) => {
    if (hasBody(request) && !reply.sent && request.raw.destroyed && !request.raw.complete) {
      throw new AppError('VALIDATION_ERROR', 'The request body ended before it was complete');
    }
  });
  // Answered before the body arrived whole (a refusal, a timeout).
  app.addHook('onSend', async (request, reply) => {
    if (bodyReceived(request)) return;
    if (bodyUntouched(request)) {
      lingerAfterAnswer(request, reply);
      return;
    }
    // A reader took part of the body and may still hold it (an upload's write, a parser): the
    // rest is not read, and the connection closes after the answer. Node detaches an answered
    // request from its connection, so that closing would not end the request for its reader:
    // end it then, as a client's disconnect does.
    reply.header('connection', 'close');
    request.raw.socket?.once('close', () => request.raw.destroy());
  });
}

/**
 * Bounds on reading and discarding the rest of a body refused before anything read it (the
 * "lingering close" of nginx and Apache). Closing a connection with unread bytes makes the
 * kernel reset it, and a client still sending (Node's fetch, curl) then loses the answer: reading
 * on lets it read the refusal. A few MiB is seconds of a slow upload and costs no storage; past
 * either bound the connection is cut, so a client that sends forever holds nothing for long.
 */
const LINGER_BYTES = 8 * 1024 * 1024;
const LINGER_MS = 3_000;

/** Nothing has read the body yet: no parser ran, no handler took it (a refusal in a hook). */
const bodyUntouched = (request: FastifyRequest): boolean => request.raw.readableFlowing === null && !request.raw.readableDidRead;

/**
 * Answers on a connection that stays open while the body's rest is read and discarded (up to
 * LINGER_BYTES, and LINGER_MS after the answer went out): a body that then ends leaves a
 * connection fit for the next request; one past either bound is cut. Fastify's parsers mark
 * their refusals `Connection: close`, which would make Node close at once: the header goes.
 */
function lingerAfterAnswer(request: FastifyRequest, reply: FastifyReply): void {
  reply.removeHeader('connection');
  const raw = request.raw;
  const socket = raw.socket;
  let discarded = 0;
  let answered = false;
  let timer: NodeJS.Timeout | undefined;
  const cut = () => {
    if (raw.complete || socket.destroyed) return;
    request.log.info({ discarded }, 'cut off the rest of a refused request body');
    socket.destroy();
  };
  // Read from now on, here: Node's own discarding of an answered request's body counts nothing.
  raw.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded <= LINGER_BYTES) return;
    if (answered) cut();
    else raw.pause(); // cut once the answer is out
  });
  raw.resume();
  reply.raw.once('finish', () => {
    answered = true;
    if (discarded > LINGER_BYTES) return cut();
    timer = setTimeout(cut, LINGER_MS).unref();
  });
  const done = () => clearTimeout(timer);
  raw.once('end', done);
  socket.once('close', done);
}

function watchBody(request: FastifyRequest, reply: FastifyReply, { requestTimeoutMs, bodyStallMs }: BodyTimeouts): void {
  const raw = request.raw;
  const socket = raw.socket;
  const started = Date.now();
  let bytesRead = socket.bytesRead;
  let lastProgress = started;

  const check = () => {
    if (raw.complete || raw.destroyed || reply.sent) return stop();
    const now = Date.now();
    // Bytes buffered for a reader that has not taken them yet: the client is not the slow one.
    if (socket.bytesRead !== bytesRead || raw.readableLength > 0) {
      bytesRead = socket.bytesRead;
      lastProgress = now;
    }
    if (now - started >= requestTimeoutMs) {
      fire(
        new AppError('REQUEST_TIMEOUT', `The request body was still arriving after ${requestTimeoutMs / 1000} s (REQUEST_TIMEOUT_SECONDS)`, {
          limitSeconds: requestTimeoutMs / 1000,
        }),
      );
    } else if (now - lastProgress >= bodyStallMs) {
      fire(new AppError('REQUEST_TIMEOUT', `The request body stalled: no bytes for ${bodyStallMs / 1000} s`, { stallSeconds: bodyStallMs / 1000 }));
    }
  };
  const timer = setInterval(check, Math.min(1000, Math.max(50, Math.floor(bodyStallMs / 5))));
  const stop = () => clearInterval(timer);
  reply.raw.once('close', stop);

  const fire = (error: AppError) => {
    stop();
    request.log.info({ code: error.code, message: error.message }, 'request body timed out');
    if (reply.raw.headersSent) {
      socket.destroy();
      return;
    }
    // Fastify's own handler timeout answers the same way: the reply is sent from here while the
    // handler still waits for the body; the connection closes after it (onSend above), which
    // ends the body for its reader.
    void reply.send(error);
  };
}

/**
 * Node's client errors (a request that timed out before its handler could answer, malformed
 * HTTP, headers too large) in the error envelope, where the socket can still take an answer.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'REQUEST_TIMEOUT', 'The request did not arrive in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'VALIDATION_ERROR', 'The request headers are too large']
        : [400, 'VALIDATION_ERROR', 'The HTTP request is malformed'];
  const response = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !response?.headersSent) {
    const { requestId, body } = envelope(code, message);
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
