// One attempt to deliver: POST the body to the endpoint with node:http(s), and report what
// happened. No redirect is followed (a 3xx is a failed attempt); the connection goes only to an
// address checked at connect time (src/webhooks/address.ts) unless private networks are allowed;
// the whole exchange is bounded by `timeoutMs`; at most RESPONSE_BODY_CAP bytes of the answer
// are read, for the deliveries log.
import http from 'node:http';
import https from 'node:https';
import { ForbiddenAddressError, publicOnly } from './address.js';

/** Bytes of a receiver's answer read (and kept in the log): enough for an error message. */
const RESPONSE_BODY_CAP = 4096;
/** Characters of it kept in the deliveries log. */
const LOGGED_BODY_CHARS = 1024;

export interface SendResult {
  ok: boolean;
  statusCode?: number;
  durationMs: number;
  error?: string;
  responseBody?: string;
}

export interface SendOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  headers: Record<string, string>;
  /** Aborts the attempt (the worker is stopping). */
  signal?: AbortSignal;
}

export function postWebhook(urlText: string, body: string, options: SendOptions): Promise<SendResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    const finish = (result: Omit<SendResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      request?.destroy();
      resolve({ ...result, durationMs: elapsed() });
    };
    const fail = (error: string) => finish({ ok: false, error });
    const timer = setTimeout(() => fail(`no answer within ${options.timeoutMs / 1000} s`), options.timeoutMs);
    const onAbort = () => fail('the worker stopped during the attempt');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    let request: http.ClientRequest | undefined;

    let url: URL;
    try {
      url = new URL(urlText);
    } catch {
      return fail('the endpoint URL is invalid');
    }
    const literal = publicOnly.literal(url, options.allowPrivate);
    if (literal) return fail(literal.message);
    const client = url.protocol === 'https:' ? https : http;
    try {
      request = client.request(url, {
        method: 'POST',
        agent: false,
        headers: {
          ...options.headers,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'user-agent': 'imgapi-webhooks/1',
        },
        ...publicOnly.requestOptions(options.allowPrivate),
      });
    } catch (err) {
      return fail((err as Error).message);
    }
    publicOnly.watch(request, options.allowPrivate, (err) => fail(err.message));
    request.on('error', (err) => fail(describe(err)));
    request.on('response', (response) => {
      const statusCode = response.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let size = 0;
      const done = () => {
        const text = Buffer.concat(chunks).toString('utf8').slice(0, LOGGED_BODY_CHARS);
        const ok = statusCode >= 200 && statusCode < 300;
        const error = ok
          ? undefined
          : statusCode >= 300 && statusCode < 400
            ? `answered ${statusCode}${response.headers.location ? ` (redirect to ${response.headers.location})` : ''}: redirects are not followed`
            : `answered ${statusCode}`;
        finish({ ok, statusCode, ...(error ? { error } : {}), ...(text ? { responseBody: text } : {}) });
      };
      response.on('data', (chunk: Buffer) => {
        if (size >= RESPONSE_BODY_CAP) return;
        chunks.push(chunk.subarray(0, RESPONSE_BODY_CAP - size));
        size += chunk.length;
        // Enough read: the rest of the answer is not waited for.
        if (size >= RESPONSE_BODY_CAP) done();
      });
      response.on('end', done);
      response.on('error', done);
    });
    request.end(body);
  });
}

function describe(err: Error): string {
  if (err instanceof ForbiddenAddressError) return err.message;
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ENOTFOUND') return 'the host does not resolve';
  if (code === 'ECONNRESET') return 'the connection was reset';
  return code ? `${err.message} (${code})` : err.message;
}
