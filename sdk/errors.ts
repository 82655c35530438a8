// The one error the SDK throws: the API's error envelope as a class, and the few failures that
// happen on the client's side (the network, a wait that ran out, a task that failed or was canceled).
import type { ApiErrorCode, TaskErrorCode } from './types.js';

/** Failures of the client's own: `status` is 0 for them. */
export type ClientErrorCode =
  /** No response after every retry (connection refused, reset, DNS). */
  | 'NETWORK_ERROR'
  /** `wait()` (or `run()`) gave up after its `timeoutMs`. */
  | 'TIMEOUT'
  /** An error status whose body is not the API's error envelope (a proxy's page, say). */
  | 'UNEXPECTED_RESPONSE'
  /** `run()`: the task was canceled. */
  | 'TASK_CANCELED'
  /** `download()` to a path: a file of that name exists and `overwrite` was not asked (`details.path`). */
  | 'FILE_EXISTS';

/**
 * What `ImgapiError.code` can be: the codes the OpenAPI document lists for the API's operations,
 * a failed task's codes, and the client's own.
 */
export type ErrorCode = ApiErrorCode | TaskErrorCode | ClientErrorCode;

export interface ImgapiErrorInit {
  code: ErrorCode;
  message: string;
  status: number;
  requestId?: string;
  details?: Record<string, unknown>;
  /** `run()`: the task that failed, with its `error`. */
  task?: unknown;
  cause?: unknown;
}

export class ImgapiError extends Error {
  override readonly name = 'ImgapiError';
  /** The API's code (`RATE_LIMITED`, `FILE_EXPIRED`, a failed task's `INVALID_IMAGE`…) or a ClientErrorCode. */
  readonly code: ErrorCode;
  /** The HTTP status of the error response; 0 when there was none (see ClientErrorCode, and a failed task). */
  readonly status: number;
  /** The response's x-request-id: quote it when reporting a problem. */
  readonly requestId: string | undefined;
  /** What the API adds for the code: `fields` of a VALIDATION_ERROR, `limit`/`used`/`resetsAt` of a quota… */
  readonly details: Record<string, unknown> | undefined;
  /** For a task that failed in `run()`: the task as the API answered it. */
  readonly task: unknown;

  constructor(init: ImgapiErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.details = init.details;
    this.task = init.task;
  }

  /** The error a non-2xx response stands for; reads its body. */
  static async fromResponse(response: Response): Promise<ImgapiError> {
    const requestId = response.headers.get('x-request-id') ?? undefined;
    const text = await response.text().catch(() => '');
    const envelope = parseEnvelope(text);
    if (!envelope) {
      return new ImgapiError({
        code: 'UNEXPECTED_RESPONSE',
        status: response.status,
        requestId,
        message: `${response.status} ${response.statusText || 'error'}${text ? `: ${text.slice(0, 200)}` : ''}`,
      });
    }
    return new ImgapiError({ ...envelope, status: response.status, requestId: envelope.requestId ?? requestId });
  }
}

interface Envelope {
  code: ErrorCode;
  message: string;
  requestId?: string;
  details?: Record<string, unknown>;
}

/** `{"success": false, "error": {code, message, details?, requestId}}`, or undefined. */
export function parseEnvelope(text: string): Envelope | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  const error = isObject(body) && isObject(body.error) ? body.error : undefined;
  if (!error || typeof error.code !== 'string' || typeof error.message !== 'string') return undefined;
  return {
    // As the service says it: the document lists every code it answers.
    code: error.code as ErrorCode,
    message: error.message,
    requestId: typeof error.requestId === 'string' ? error.requestId : undefined,
    details: isObject(error.details) ? error.details : undefined,
  };
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
