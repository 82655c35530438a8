// One error type and one closed set of codes, each mapped to its HTTP status.
// Clients get the code and a safe message; internal detail goes to the log.

export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  BATCH_TOO_LARGE: 400,
  UPLOAD_SIZE_MISMATCH: 400,
  WEBHOOK_URL_NOT_ALLOWED: 400,
  API_KEY_MISSING: 401,
  API_KEY_INVALID: 401,
  NOT_AUTHENTICATED: 401,
  INVALID_CREDENTIALS: 401,
  PLAN_NO_API_ACCESS: 403,
  ACCOUNT_DISABLED: 403,
  STORAGE_LIMIT_EXCEEDED: 403,
  UPLOAD_URL_EXPIRED: 403,
  UPLOAD_SIGNATURE_INVALID: 403,
  CSRF_TOKEN_INVALID: 403,
  FORBIDDEN: 403,
  SIGNUP_CLOSED: 403,
  INVITE_INVALID: 403,
  SETUP_TOKEN_INVALID: 403,
  RESET_LINK_INVALID: 403,
  WEBHOOK_LIMIT_EXCEEDED: 403,
  SIGNATURE_INVALID: 403,
  ORIGIN_LIMIT_EXCEEDED: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  IDEMPOTENCY_KEY_REUSED: 409,
  INPUT_NOT_SUPPORTED: 409,
  TASK_NOT_CANCELABLE: 409,
  BATCH_NOT_FINISHED: 409,
  FILE_IN_USE: 409,
  UPLOAD_NOT_RECEIVED: 409,
  UPLOAD_ALREADY_CONFIRMED: 409,
  EMAIL_TAKEN: 409,
  SETUP_COMPLETED: 409,
  FILE_EXPIRED: 410,
  UPLOAD_EXPIRED: 410,
  FILE_TOO_LARGE: 413,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  IMAGE_TOO_LARGE: 422,
  PREVIEW_UNAVAILABLE: 415,
  INFO_UNAVAILABLE: 415,
  RANGE_NOT_SATISFIABLE: 416,
  RATE_LIMITED: 429,
  MONTHLY_QUOTA_EXCEEDED: 429,
  DAILY_BATCH_QUOTA_EXCEEDED: 429,
  TOO_MANY_QUEUED_TASKS: 429,
  RENDER_QUOTA_EXCEEDED: 429,
  INTERNAL_ERROR: 500,
  ORIGIN_FAILED: 502,
  SERVICE_UNAVAILABLE: 503,
  RENDER_BUSY: 503,
  RENDER_TIMEOUT: 504,
  INSUFFICIENT_STORAGE: 507,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
  }
}

export const notFound = (what = 'Resource'): AppError => new AppError('NOT_FOUND', `${what} not found`);

/** 400 VALIDATION_ERROR naming each field: the message lists them (`field: message; …`), `details.fields` holds them. */
export const fieldsInvalid = (fields: { field: string; message: string }[]): AppError =>
  new AppError('VALIDATION_ERROR', fields.map((f) => `${f.field}: ${f.message}`).join('; '), { fields });

/**
 * The service's own disk, database or object store is full: a local write (ENOSPC, or EDQUOT
 * past a quota), SQLite (SQLITE_FULL), PostgreSQL (53100 disk_full) or a store answering 507.
 * Nobody's input is at fault: the request answers 507 INSUFFICIENT_STORAGE, a task is retried.
 */
export function isStorageFull(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  const status = (err as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
  return code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL' || code === '53100' || status === 507;
}

/** Codes a failed task can carry. `transient` faults are retried with backoff. */
export const TASK_ERROR_CODES = [
  'INVALID_IMAGE',
  'UNSUPPORTED_FORMAT',
  'IMAGE_TOO_LARGE',
  'TARGET_SIZE_UNREACHABLE',
  'PROCESSING_TIMEOUT',
  'CONVERSION_FAILED',
  'CONVERSION_TIMEOUT',
  'DOCUMENT_ENCRYPTED',
  'INPUT_MISSING',
  /** An option the input cannot honour (text a watermark cannot draw): `details.field` names it. */
  'INVALID_OPTIONS',
  /** The outputs would take the account past its storage limit: nothing kept, refunded. */
  'STORAGE_LIMIT_EXCEEDED',
  /** An output is larger than the plan's maxFileBytes: nothing kept, refunded. */
  'OUTPUT_TOO_LARGE',
  'INTERNAL_ERROR',
] as const;
export type TaskErrorCode = (typeof TASK_ERROR_CODES)[number];

/** Thrown by an operation: the task fails with this code (an input fault, not retried). */
export class TaskError extends Error {
  constructor(
    readonly code: TaskErrorCode,
    message: string,
    readonly transient = false,
    /** Shown as the task error's `details` (INVALID_OPTIONS: `{field}`). */
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'TaskError';
  }
}

/** The task fails INVALID_OPTIONS naming `field`: the option cannot be honoured for this input. */
export const invalidOption = (field: string, message: string): TaskError =>
  new TaskError('INVALID_OPTIONS', `${field}: ${message}`, false, { field });
