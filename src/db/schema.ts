// Row types of the tables, as Kysely sees them. Times are integer milliseconds since the
// epoch (portable across SQLite and PostgreSQL, compared with the application's clock).
// JSON columns are text, parsed by the code that owns them.
import type { Generated } from 'kysely';

export interface AccountsTable {
  id: string;
  email: string;
  password_hash: string | null;
  plan: string;
  is_admin: number;
  storage_used: Generated<number>;
  /** No longer read or written: superseded by account_lanes (a time per lane). */
  last_served_at: Generated<number>;
  created_at: number;
  /** When the operator disabled the account (its keys, sessions and logins refused); null when enabled. */
  disabled_at: number | null;
  /** Bumped by every change of the account's webhook endpoints (src/webhooks/store.ts caches them by it). */
  webhooks_version: Generated<number>;
  /** Bumped by every queuing of work, under the account's lock (PostgreSQL: quota.markingAccountForWork). */
  work_version: Generated<number>;
}

interface ApiKeysTable {
  id: string;
  account_id: string;
  name: string;
  prefix: string;
  key_hash: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

export interface FilesTable {
  id: string;
  account_id: string;
  origin: 'upload' | 'output';
  storage_key: string;
  filename: string;
  mime_type: string;
  format: string;
  size: number;
  width: number | null;
  height: number | null;
  pages: number | null;
  etag: string;
  task_id: string | null;
  output_index: number | null;
  created_at: number;
  expires_at: number;
  deleted_at: number | null;
}

/** What GET /api/files/{fileId}/info answers, computed once per file (src/files/info.ts); removed with its file. */
interface FileInfoTable {
  file_id: string;
  /** The answer's JSON (without `faces`, which is asked for apart). */
  info: string;
  created_at: number;
}

/** A task's states, in the order it goes through them: the API, the queue and the dashboard read this list. */
export const TASK_STATUSES = ['queued', 'processing', 'completed', 'failed', 'canceled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
/** Waiting or running: counted against the plan's queue limit, and their inputs must stay. */
export const ACTIVE_STATUSES = ['queued', 'processing'] as const satisfies readonly TaskStatus[];
export const isFinished = (status: TaskStatus): boolean => !(ACTIVE_STATUSES as readonly TaskStatus[]).includes(status);

/**
 * Which workers' slots a task takes (an operation decides it from its options, when the task is
 * queued): `image`, WORKER_CONCURRENCY's; `ai`, a network on the one inference thread, AI_CONCURRENCY's.
 */
export type TaskLane = 'image' | 'ai';

export interface TasksTable {
  id: string;
  account_id: string;
  batch_id: string | null;
  batch_index: number | null;
  type: string;
  status: TaskStatus;
  priority: number;
  lane: TaskLane;
  input: string;
  options: string;
  output_file_id: string | null;
  output_file_ids: string | null;
  result: string | null;
  error_code: string | null;
  error_message: string | null;
  /** JSON: the error's `details`, when it has any. */
  error_details: string | null;
  progress: number;
  attempts: number;
  max_attempts: number;
  /** Claims that ended with the lease lapsing (see MAX_LOST_LEASES in queue.ts). */
  lost_leases: Generated<number>;
  /** 1 once a task that ended without outputs had its output objects swept (maintenance.ts). */
  outputs_swept: Generated<number>;
  charged: number;
  run_at: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  started_at: number | null;
  /** When the task was last claimed (its account stamped served then, in its lane). */
  claimed_at: number | null;
  completed_at: number | null;
}

interface TaskInputsTable {
  task_id: string;
  file_id: string;
  position: number;
}

export interface BatchesTable {
  id: string;
  account_id: string;
  type: string;
  size: number;
  created_at: number;
}

interface UsageCountersTable {
  account_id: string;
  period: string;
  used: number;
}

interface IdempotencyKeysTable {
  account_id: string;
  key: string;
  fingerprint: string;
  status_code: number;
  response: string;
  created_at: number;
}

interface RateLimitsTable {
  subject: string;
  window: number;
  count: number;
  /** The process (its limiter's id) that reserved last. */
  holder: string | null;
  /** The latest window in which two processes reserved (0: none yet). */
  shared_window: Generated<number>;
}

interface PeriodicRunsTable {
  name: string;
  last_run: number;
}

interface SessionsTable {
  /** SHA-256 of the cookie's token. */
  id: string;
  account_id: string;
  csrf_token: string;
  created_at: number;
  expires_at: number;
  user_agent: string | null;
}

interface AuthThrottleTable {
  subject: string;
  window_start: number;
  count: number;
}

interface SetupTokensTable {
  token_hash: string;
  created_at: number;
  expires_at: number;
}

interface InvitesTable {
  id: string;
  code_hash: string;
  prefix: string;
  email: string | null;
  created_by: string;
  created_at: number;
  expires_at: number;
  used_at: number | null;
  used_by: string | null;
}

type UploadStatus = 'pending' | 'confirmed' | 'expired';

export interface UploadsTable {
  id: string;
  account_id: string;
  file_id: string;
  filename: string;
  content_type: string | null;
  size: number;
  status: UploadStatus;
  created_at: number;
  url_expires_at: number;
  expires_at: number;
  confirmed_at: number | null;
  swept_at: number | null;
}

/** A webhook endpoint of an account (src/webhooks/). `events` is a JSON array of event types. */
export interface WebhooksTable {
  id: string;
  account_id: string;
  url: string;
  events: string;
  description: string | null;
  /** Signs the deliveries, so kept as issued; shown once, never returned or logged after. */
  secret: string;
  created_at: number;
}

type DeliveryStatus = 'pending' | 'delivering' | 'delivered' | 'failed';

/** One event for one endpoint, queued like a task: claimed with a lease, retried with backoff. */
export interface WebhookDeliveriesTable {
  id: string;
  webhook_id: string;
  account_id: string;
  event_id: string;
  event_type: string;
  /** The exact JSON body every attempt sends. */
  payload: string;
  status: DeliveryStatus;
  attempts: Generated<number>;
  /** pending: when the next attempt may start; delivering: when the lease lapses. */
  run_at: number;
  lease_owner: string | null;
  /** No attempt starts after this (24 hours after the delivery was created). */
  give_up_at: number;
  last_status_code: number | null;
  last_duration_ms: number | null;
  last_error: string | null;
  /** JSON: every attempt, oldest first ({at, statusCode?, durationMs, error?, responseBody?}). */
  attempt_log: Generated<string>;
  created_at: number;
  finished_at: number | null;
}

/** When each account last had a task claimed in each lane: the claim serves the longest-waiting first. */
interface AccountLanesTable {
  account_id: string;
  lane: TaskLane;
  last_served_at: number;
}

/**
 * SQLite's views whose INSTEAD OF triggers write two tables in one statement (migration 0014;
 * PostgreSQL does it with data-modifying CTEs). Not tables: backups and DB leave them out; use
 * them through `db.withTables<SqliteViews>()`.
 */
// A type, not an interface: withTables wants a record type.
export type SqliteViews = {
  /** Rows inserted here are files, charged to their account's storage. */
  charged_files: FilesTable;
  /** A row inserted here completes a task with its outputs, or fails 'completion refused' and writes nothing. */
  task_completions: {
    task_id: string;
    worker_id: string;
    webhooks_version: number;
    /** JSON: the outputs' rows of `files`. */
    outputs: string;
    bytes: number;
    storage_limit: number;
    output_file_id: string | null;
    output_file_ids: string | null;
    result: string;
    completed_at: number;
  };
  /**
   * A row inserted here is a queued task charged one task, with its inputs, or fails 'queueing
   * refused' and writes nothing.
   */
  queued_tasks: Omit<TasksTable, 'lost_leases' | 'outputs_swept'> & {
    lost_leases: number;
    outputs_swept: number;
    /** JSON: the task's input file ids, in order. */
    input_files: string;
    month_period: string;
    day_period: string;
    monthly_tasks: number;
    max_queued_tasks: number;
    storage_limit: number;
  };
};

export interface DB {
  account_lanes: AccountLanesTable;
  uploads: UploadsTable;
  sessions: SessionsTable;
  auth_throttle: AuthThrottleTable;
  setup_tokens: SetupTokensTable;
  invites: InvitesTable;
  rate_limits: RateLimitsTable;
  periodic_runs: PeriodicRunsTable;
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  files: FilesTable;
  file_info: FileInfoTable;
  tasks: TasksTable;
  task_inputs: TaskInputsTable;
  batches: BatchesTable;
  usage_counters: UsageCountersTable;
  idempotency_keys: IdempotencyKeysTable;
  webhooks: WebhooksTable;
  webhook_deliveries: WebhookDeliveriesTable;
  signing_keys: SigningKeysTable;
  presets: PresetsTable;
  origins: OriginsTable;
  origin_objects: OriginObjectsTable;
  render_cache: RenderCacheTable;
}

// Delivery URLs (src/delivery/) ----------------------------------------------------------

interface SigningKeysTable {
  /** The public key id in delivery URLs (sk_…). */
  id: string;
  account_id: string;
  /**
   * Kept as issued (like a webhook's secret): the service must compute HMACs with it, so a hash
   * would not do. Shown once at creation, never returned or logged after.
   */
  secret: string;
  created_at: number;
}

interface PresetsTable {
  account_id: string;
  name: string;
  /** The normalised transform (src/delivery/transform.ts). */
  transform: string;
  public: number;
  created_at: number;
  updated_at: number;
}

interface OriginsTable {
  id: string;
  account_id: string;
  name: string;
  base_url: string;
  created_at: number;
}

interface OriginObjectsTable {
  origin_id: string;
  path: string;
  storage_key: string;
  format: string;
  bytes: number;
  /** sha256 of the bytes: the source's version in render cache keys. */
  content_hash: string;
  etag: string | null;
  last_modified: string | null;
  /** When the origin last confirmed (or sent) these bytes. */
  checked_at: number;
}

interface RenderCacheTable {
  key: string;
  account_id: string;
  /** `file:<fileId>` or `origin:<originId>`: what purges the render. */
  source: string;
  /** The preset the transform named, if any: what purges the render when the preset changes. */
  preset: string | null;
  storage_key: string;
  content_type: string;
  /** The bytes' strong validator (a hash of them). */
  etag: string;
  bytes: number;
  /** The source file's expiry: a hit past it is not served. */
  expires_at: number | null;
  created_at: number;
  last_used_at: number;
}
