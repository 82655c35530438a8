// The dashboard's one way to the server: same-origin requests with the session cookie, the
// session's CSRF token on every state-changing request, the API's envelope unwrapped, and
// RATE_LIMITED answered by waiting as Retry-After says (a session's writes share the plan's rate
// limit; its reads have the dashboard's own budget, src/http/auth.ts SESSION_READS_PER_SECOND).
// Never an API key.
import type { components } from '../../sdk/openapi';

export { isFinished, TASK_STATUSES, type TaskStatus } from '../../src/db/schema';

export interface FieldError {
  field: string;
  message: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly requestId?: string,
  ) {
    super(message);
  }

  get fields(): FieldError[] {
    const fields = this.details?.fields;
    return Array.isArray(fields) ? (fields as FieldError[]) : [];
  }
}

let csrfToken: string | undefined;
export function setCsrfToken(token: string | undefined): void {
  csrfToken = token;
}

let onSessionLost: (() => void) | undefined;
/** Called when the server no longer knows the session (expired, logged out elsewhere). */
export function setSessionLostHandler(handler: () => void): void {
  onSessionLost = handler;
}

// A few requests at a time: a long list's thumbnails load in order, within the session's read budget.
const MAX_IN_FLIGHT = 4;
let inFlight = 0;
const waiting: (() => void)[] = [];

async function slot<T>(fn: () => Promise<T>): Promise<T> {
  if (inFlight >= MAX_IN_FLIGHT) await new Promise<void>((resolve) => waiting.push(resolve));
  inFlight++;
  try {
    return await fn();
  } finally {
    inFlight--;
    waiting.shift()?.();
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const MAX_RATE_RETRIES = 6;

// A session's writes share the plan's per-second rate. When an answer says none is left this
// second (RateLimit-Remaining: 0), the next write waits for the window to turn (RateLimit-Reset)
// instead of being refused: deleting or uploading many files never meets a 429 on its way.
let writesPausedUntil = 0;

function noteWriteBudget(remaining: string | null, reset: string | null): void {
  if (remaining === '0') writesPausedUntil = Date.now() + Math.max(1, Number(reset ?? '1') || 1) * 1000;
}

async function waitForWriteBudget(signal?: AbortSignal): Promise<void> {
  const wait = writesPausedUntil - Date.now();
  if (wait > 0) await sleep(wait, signal);
}

export interface RequestOptions {
  json?: unknown;
  body?: BodyInit;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Long-polls skip the in-flight limit: they wait on the server, not on the rate limit. */
  unlimited?: boolean;
}

async function send(method: string, url: string, options: RequestOptions): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
  let body = options.body;
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  if (STATE_CHANGING.has(method) && csrfToken) headers['x-csrf-token'] = csrfToken;
  const write = STATE_CHANGING.has(method);
  for (let attempt = 0; ; attempt++) {
    if (write) await waitForWriteBudget(options.signal);
    const run = () => fetch(url, { method, headers, body, credentials: 'same-origin', signal: options.signal });
    const response = await (options.unlimited ? run() : slot(run));
    if (write) noteWriteBudget(response.headers.get('ratelimit-remaining'), response.headers.get('ratelimit-reset'));
    if (response.status === 429 && attempt < MAX_RATE_RETRIES) {
      const seconds = Number(response.headers.get('retry-after') ?? '1');
      // Only the per-second rate limit is worth waiting for; quotas answer 429 too, for longer.
      if (seconds <= 5 && (await peekCode(response)) === 'RATE_LIMITED') {
        await sleep(Math.max(1, seconds) * 1000 * (1 + Math.random() * 0.3), options.signal);
        continue;
      }
    }
    return response;
  }
}

async function peekCode(response: Response): Promise<string | undefined> {
  try {
    return ((await response.clone().json()) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

async function toError(response: Response): Promise<ApiError> {
  let payload: { error?: { code: string; message: string; details?: Record<string, unknown>; requestId?: string } } | undefined;
  try {
    payload = await response.json();
  } catch {
    // not JSON
  }
  const error = payload?.error;
  if (response.status === 401 && (error?.code === 'NOT_AUTHENTICATED' || error?.code === 'API_KEY_MISSING')) onSessionLost?.();
  return new ApiError(
    response.status,
    error?.code ?? `HTTP_${response.status}`,
    error?.message ?? response.statusText,
    error?.details,
    error?.requestId,
  );
}

async function request<T>(method: string, url: string, options: RequestOptions = {}): Promise<T> {
  const response = await send(method, url, options);
  if (!response.ok) throw await toError(response);
  if (response.status === 204) return undefined as T;
  const payload = (await response.json()) as { data: T };
  return payload.data;
}

export const api = {
  get: <T>(url: string, options?: RequestOptions) => request<T>('GET', url, options),
  post: <T>(url: string, json?: unknown, options?: RequestOptions) => request<T>('POST', url, { ...options, json }),
  patch: <T>(url: string, json: unknown, options?: RequestOptions) => request<T>('PATCH', url, { ...options, json }),
  put: <T>(url: string, json: unknown, options?: RequestOptions) => request<T>('PUT', url, { ...options, json }),
  del: <T>(url: string, options?: RequestOptions) => request<T>('DELETE', url, options),
};

/** An image (a preview) as a Blob, through the same limiter and retries. */
export async function fetchBlob(url: string, signal?: AbortSignal): Promise<Blob> {
  const response = await send('GET', url, { signal, headers: { accept: 'image/*' } });
  if (!response.ok) throw await toError(response);
  return response.blob();
}

// Types of what the API answers --------------------------------------------------------------

type Plan = 'free' | 'pro' | 'max';

export interface SessionInfo {
  authenticated: boolean;
  account?: { accountId: string; email: string; plan: Plan; isAdmin: boolean; createdAt: string };
  csrfToken?: string;
  expiresAt?: string;
  signupMode: 'open' | 'invite' | 'closed';
  setupRequired: boolean;
}

// The file and task resources as the API's OpenAPI document describes them (sdk/openapi.ts is
// generated from it); their statuses are the server's own list.
export type ApiFile = components['schemas']['FileMetadata'];
export type ApiTask = components['schemas']['Task'];

interface Counter {
  used: number;
  limit: number;
  resetsAt?: string;
}

export interface AccountInfo {
  email: string;
  plan: Plan;
  limits: Record<string, number | boolean>;
  usage: { monthlyTasks: Counter; dailyBatchFiles: Counter; storageBytes: Counter };
}

/** Uploads one file (multipart, part "file") with progress, as the API's POST /api/upload. */
export function uploadFile(file: File, onProgress: (fraction: number) => void, signal?: AbortSignal): Promise<ApiFile> {
  const attempt = () =>
    new Promise<{ status: number; text: string; retryAfter: number }>((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', '/api/upload');
      xhr.withCredentials = true;
      xhr.setRequestHeader('accept', 'application/json');
      if (csrfToken) xhr.setRequestHeader('x-csrf-token', csrfToken);
      xhr.upload.onprogress = (event) => {
        if (event.lengthComputable) onProgress(event.loaded / event.total);
      };
      xhr.onload = () => {
        noteWriteBudget(xhr.getResponseHeader('ratelimit-remaining'), xhr.getResponseHeader('ratelimit-reset'));
        resolve({ status: xhr.status, text: xhr.responseText, retryAfter: Number(xhr.getResponseHeader('retry-after') ?? '1') });
      };
      xhr.onerror = () => reject(new ApiError(0, 'NETWORK_ERROR', 'The upload did not reach the server'));
      xhr.onabort = () => reject(new ApiError(0, 'ABORTED', 'The upload was canceled'));
      signal?.addEventListener('abort', () => xhr.abort());
      const form = new FormData();
      form.append('file', file, file.name);
      xhr.send(form);
    });
  return (async () => {
    for (let retry = 0; ; retry++) {
      await waitForWriteBudget(signal);
      const { status, text, retryAfter } = await attempt();
      let payload: { data?: ApiFile; error?: { code: string; message: string; details?: Record<string, unknown>; requestId?: string } } = {};
      try {
        payload = JSON.parse(text);
      } catch {
        // not JSON
      }
      if (status === 201 && payload.data) return payload.data;
      if (status === 429 && payload.error?.code === 'RATE_LIMITED' && retry < MAX_RATE_RETRIES) {
        await sleep(Math.max(1, retryAfter) * 1000, signal);
        continue;
      }
      const error = payload.error;
      throw new ApiError(status, error?.code ?? `HTTP_${status}`, error?.message ?? 'The upload failed', error?.details, error?.requestId);
    }
  })();
}

export const downloadUrl = (fileId: string) => `/api/download/${encodeURIComponent(fileId)}`;
export const previewUrl = (fileId: string, box = 320) => `/api/preview/${encodeURIComponent(fileId)}?width=${box}&height=${box}`;
