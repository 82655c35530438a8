// Every request the SDK sends goes through `Transport.send`: an Idempotency-Key on each POST
// (the same one on its retries, so a retry never does the work twice), and retries with
// backoff on network errors, 5xx and 429, waiting what Retry-After (or a quota's resetsAt) says.
import { ImgapiError, parseEnvelope } from './errors.js';

export interface RetryOptions {
  /** Attempts after the first (default 4). */
  retries?: number;
  /** The first backoff (default 500 ms); it doubles with each attempt, with jitter. */
  baseDelayMs?: number;
  /**
   * The longest wait before a retry (default 60 s). A response that asks for longer (a monthly
   * quota's reset, a long Retry-After) is not retried: its error is thrown at once.
   */
  maxDelayMs?: number;
}

export interface RetryEvent {
  method: string;
  url: string;
  /** 1 for the first retry. */
  attempt: number;
  delayMs: number;
  /** The response that is retried, or undefined after a network error. */
  status?: number;
  code?: string;
  error?: unknown;
}

export type FetchLike = (request: Request) => Promise<Response>;

export interface TransportOptions extends RetryOptions {
  fetch?: FetchLike;
  onRetry?: (event: RetryEvent) => void;
  /**
   * Start no more requests in any second than the server's `RateLimit-Limit` (once a response
   * has told it), waiting instead of being refused 429: for a client that sends many at once.
   */
  pace?: boolean;
}

/** The window requests are counted in when paced: the server's second, and a margin for the way there. */
const PACE_WINDOW_MS = 1050;

export class Transport {
  private readonly fetch: FetchLike;
  private readonly retries: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly onRetry?: (event: RetryEvent) => void;
  private readonly pace: boolean;
  /** The server's requests a second (its last RateLimit-Limit), when pacing. */
  private limit: number | undefined;
  /** When the requests of the last PACE_WINDOW_MS started, oldest first. */
  private readonly starts: number[] = [];

  constructor(options: TransportOptions = {}) {
    // Called as a plain function: a browser's fetch must not be called as a method of another object.
    const given = options.fetch;
    this.fetch = given ? (request) => given(request) : (request) => fetch(request);
    this.retries = options.retries ?? 4;
    this.baseDelayMs = options.baseDelayMs ?? 500;
    this.maxDelayMs = options.maxDelayMs ?? 60_000;
    this.onRetry = options.onRetry;
    this.pace = options.pace ?? false;
  }

  /** When pacing: waits until one more request fits in the server's rate, and counts it. */
  private async nextSlot(signal: AbortSignal): Promise<void> {
    for (;;) {
      const now = Date.now();
      while (this.starts.length && this.starts[0]! <= now - PACE_WINDOW_MS) this.starts.shift();
      if (this.limit === undefined || this.starts.length < this.limit) {
        this.starts.push(now);
        return;
      }
      await sleep(this.starts[0]! + PACE_WINDOW_MS - now, signal);
    }
  }

  /**
   * Sends the request `make` builds (once per attempt, so a body is read afresh each time) and
   * answers the final response, successful or not. Throws ImgapiError NETWORK_ERROR when no
   * attempt got a response, and the signal's reason when it is aborted.
   */
  async send(make: () => Request): Promise<Response> {
    let idempotencyKey: string | undefined;
    for (let attempt = 0; ; attempt++) {
      const request = make();
      if (request.method === 'POST') {
        idempotencyKey ??= request.headers.get('idempotency-key') ?? newIdempotencyKey();
        request.headers.set('idempotency-key', idempotencyKey);
      }
      let response: Response | undefined;
      let failure: unknown;
      try {
        if (this.pace) await this.nextSlot(request.signal);
        response = await this.fetch(request);
        const limit = Number(response.headers.get('ratelimit-limit'));
        if (Number.isSafeInteger(limit) && limit > 0) this.limit = limit;
      } catch (err) {
        if (request.signal.aborted) throw request.signal.reason ?? err;
        failure = err;
      }
      if (response && !(response.status >= 500 || response.status === 429)) return response;

      const envelope = response ? parseEnvelope(await response.clone().text()) : undefined;
      const delayMs = response ? this.delayFor(response, envelope?.details, attempt) : this.backoff(attempt);
      if (attempt >= this.retries || delayMs === undefined) {
        if (response) return response;
        throw new ImgapiError({
          code: 'NETWORK_ERROR',
          status: 0,
          message: `${request.method} ${request.url}: ${describe(failure)}`,
          cause: failure,
        });
      }
      await response?.body?.cancel().catch(() => {});
      this.onRetry?.({
        method: request.method,
        url: request.url,
        attempt: attempt + 1,
        delayMs,
        status: response?.status,
        code: envelope?.code,
        error: failure,
      });
      await sleep(delayMs, request.signal);
    }
  }

  /**
   * How long to wait before retrying `response`: what Retry-After (or a quota's `resetsAt`)
   * asks, plus up to a tenth more so that clients refused together do not return together;
   * the backoff when it asks nothing; undefined when it asks for longer than maxDelayMs.
   */
  private delayFor(response: Response, details: Record<string, unknown> | undefined, attempt: number): number | undefined {
    const asked = retryAfterMs(response.headers.get('retry-after')) ?? resetsInMs(details?.resetsAt);
    if (asked === undefined) return this.backoff(attempt);
    return asked <= this.maxDelayMs ? Math.round(asked * (1 + Math.random() / 10)) : undefined;
  }

  /** Exponential with "equal jitter": half fixed, half random, so clients spread out. */
  private backoff(attempt: number): number {
    const ceiling = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** attempt);
    return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
  }
}

/** Retry-After in seconds or as an HTTP date. */
function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** A quota error's `details.resetsAt`, as a wait. */
function resetsInMs(resetsAt: unknown): number | undefined {
  const at = typeof resetsAt === 'string' ? Date.parse(resetsAt) : NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** 128 random bits, hex: crypto.getRandomValues works in browsers on plain http too. */
function newIdempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // Node's fetch says only "fetch failed"; the reason (ECONNREFUSED…) is its cause.
  const cause = err.cause instanceof Error ? err.cause.message : undefined;
  return cause ? `${err.message} (${cause})` : err.message;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', abort, { once: true });
  });
}
