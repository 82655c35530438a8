// Numbered, portable migrations (one set for SQLite and PostgreSQL). Never edit one after it
// has landed: add the next number instead.
import { DEFAULT_MIGRATION_TABLE, SqliteAdapter, sql, type Kysely, type Migration } from 'kysely';
import { ConfigError } from '../config.js';

const ms = 'bigint' as const;

export const migrations: Record<string, Migration> = {
  '0001_initial': {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('accounts')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('email', 'text', (c) => c.notNull().unique())
        .addColumn('password_hash', 'text')
        .addColumn('plan', 'text', (c) => c.notNull())
        .addColumn('is_admin', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('storage_used', ms, (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', ms, (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('api_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('prefix', 'text', (c) => c.notNull())
        .addColumn('key_hash', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('last_used_at', ms)
        .addColumn('revoked_at', ms)
        .execute();
      await db.schema.createIndex('api_keys_account').on('api_keys').column('account_id').execute();

      await db.schema
        .createTable('files')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('origin', 'text', (c) => c.notNull())
        .addColumn('storage_key', 'text', (c) => c.notNull())
        .addColumn('filename', 'text', (c) => c.notNull())
        .addColumn('mime_type', 'text', (c) => c.notNull())
        .addColumn('format', 'text', (c) => c.notNull())
        .addColumn('size', ms, (c) => c.notNull())
        .addColumn('width', 'integer')
        .addColumn('height', 'integer')
        .addColumn('pages', 'integer')
        .addColumn('etag', 'text', (c) => c.notNull())
        .addColumn('task_id', 'text')
        .addColumn('output_index', 'integer')
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('expires_at', ms, (c) => c.notNull())
        .addColumn('deleted_at', ms)
        .execute();
      await db.schema.createIndex('files_account_created').on('files').columns(['account_id', 'created_at']).execute();
      await db.schema.createIndex('files_expires').on('files').columns(['deleted_at', 'expires_at']).execute();
      // One output row per task and slot: a task that runs twice cannot leave two outputs.
      await db.schema.createIndex('files_task_output').on('files').columns(['task_id', 'output_index']).unique().execute();

      await db.schema
        .createTable('batches')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('size', 'integer', (c) => c.notNull())
        .addColumn('created_at', ms, (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('tasks')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('batch_id', 'text')
        .addColumn('batch_index', 'integer')
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('priority', 'integer', (c) => c.notNull())
        .addColumn('input', 'text', (c) => c.notNull())
        .addColumn('options', 'text', (c) => c.notNull())
        .addColumn('output_file_id', 'text')
        .addColumn('output_file_ids', 'text')
        .addColumn('result', 'text')
        .addColumn('error_code', 'text')
        .addColumn('error_message', 'text')
        .addColumn('progress', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull())
        .addColumn('charged', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('run_at', ms, (c) => c.notNull())
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', ms)
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('started_at', ms)
        .addColumn('completed_at', ms)
        .execute();
      // Shaped for the claim query: runnable tasks by priority, then age.
      await db.schema.createIndex('tasks_claim').on('tasks').columns(['status', 'priority', 'run_at']).execute();
      await db.schema.createIndex('tasks_lease').on('tasks').columns(['status', 'lease_expires_at']).execute();
      await db.schema.createIndex('tasks_account_created').on('tasks').columns(['account_id', 'created_at']).execute();
      await db.schema.createIndex('tasks_batch').on('tasks').column('batch_id').execute();

      // Which files each task reads: retention and deletes keep inputs of unfinished tasks.
      await db.schema
        .createTable('task_inputs')
        .addColumn('task_id', 'text', (c) => c.notNull())
        .addColumn('file_id', 'text', (c) => c.notNull())
        .addColumn('position', 'integer', (c) => c.notNull())
        .addPrimaryKeyConstraint('task_inputs_pk', ['task_id', 'position'])
        .execute();
      await db.schema.createIndex('task_inputs_file').on('task_inputs').column('file_id').execute();

      await db.schema
        .createTable('usage_counters')
        .addColumn('account_id', 'text', (c) => c.notNull())
        .addColumn('period', 'text', (c) => c.notNull())
        .addColumn('used', ms, (c) => c.notNull())
        .addPrimaryKeyConstraint('usage_counters_pk', ['account_id', 'period'])
        .execute();

      await db.schema
        .createTable('idempotency_keys')
        .addColumn('account_id', 'text', (c) => c.notNull())
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('fingerprint', 'text', (c) => c.notNull())
        .addColumn('status_code', 'integer', (c) => c.notNull())
        .addColumn('response', 'text', (c) => c.notNull())
        .addColumn('created_at', ms, (c) => c.notNull())
        .addPrimaryKeyConstraint('idempotency_keys_pk', ['account_id', 'key'])
        .execute();
      await db.schema.createIndex('idempotency_keys_created').on('idempotency_keys').column('created_at').execute();
    },
  },
  '0002_limits': {
    async up(db: Kysely<any>) {
      // Fixed one-second windows per API key or session, shared by every API process.
      await db.schema
        .createTable('rate_limits')
        .addColumn('subject', 'text', (c) => c.primaryKey())
        .addColumn('window', ms, (c) => c.notNull())
        .addColumn('count', 'integer', (c) => c.notNull())
        .execute();
      // Periodic work (the retention sweep) runs once per tick however many processes run.
      await db.schema
        .createTable('periodic_runs')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('last_run', ms, (c) => c.notNull())
        .execute();
      // Fair claiming: within a priority, the account served longest ago goes first.
      await db.schema
        .alterTable('accounts')
        .addColumn('last_served_at', ms, (c) => c.notNull().defaultTo(0))
        .execute();
    },
  },
  '0003_uploads': {
    async up(db: Kysely<any>) {
      // Direct uploads: presigned, then PUT by the client, then confirmed into a file. The declared
      // size is reserved in accounts.storage_used from presign until the file exists or the upload
      // is abandoned (the sweep then deletes whatever arrived and releases the reservation).
      await db.schema
        .createTable('uploads')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        // The file the upload becomes, fixed at presign: concurrent confirms agree on it.
        .addColumn('file_id', 'text', (c) => c.notNull().unique())
        .addColumn('filename', 'text', (c) => c.notNull())
        .addColumn('content_type', 'text')
        .addColumn('size', ms, (c) => c.notNull())
        // pending → confirmed | expired
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('url_expires_at', ms, (c) => c.notNull())
        // Confirm is accepted until then; after it the sweep cleans up.
        .addColumn('expires_at', ms, (c) => c.notNull())
        .addColumn('confirmed_at', ms)
        .addColumn('swept_at', ms)
        .execute();
      await db.schema.createIndex('uploads_sweep').on('uploads').columns(['swept_at', 'expires_at']).execute();
    },
  },
  '0004_dashboard': {
    async up(db: Kysely<any>) {
      // Dashboard sessions: the cookie holds a random token, the table only its SHA-256.
      await db.schema
        .createTable('sessions')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('csrf_token', 'text', (c) => c.notNull())
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('expires_at', ms, (c) => c.notNull())
        .addColumn('user_agent', 'text')
        .execute();
      await db.schema.createIndex('sessions_account').on('sessions').column('account_id').execute();
      await db.schema.createIndex('sessions_expires').on('sessions').column('expires_at').execute();

      // Attempts at login, sign-up and setup per email and per client address, in windows of
      // minutes (rate_limits holds one-second windows and is pruned every minute).
      await db.schema
        .createTable('auth_throttle')
        .addColumn('subject', 'text', (c) => c.primaryKey())
        .addColumn('window_start', ms, (c) => c.notNull())
        .addColumn('count', 'integer', (c) => c.notNull())
        .execute();

      // One-time tokens for creating the first administrator, printed in the server's log.
      await db.schema
        .createTable('setup_tokens')
        .addColumn('token_hash', 'text', (c) => c.primaryKey())
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('expires_at', ms, (c) => c.notNull())
        .execute();

      // Invitations to sign up when SIGNUP_MODE=invite; the code is shown once, stored hashed.
      await db.schema
        .createTable('invites')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('code_hash', 'text', (c) => c.notNull().unique())
        .addColumn('prefix', 'text', (c) => c.notNull())
        .addColumn('email', 'text')
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('expires_at', ms, (c) => c.notNull())
        .addColumn('used_at', ms)
        .addColumn('used_by', 'text')
        .execute();
    },
  },
  '0005_lost_leases': {
    async up(db: Kysely<any>) {
      // Claims of a task that ended with its lease lapsing (the worker died or hung while
      // running it). A task that does this twice is failed instead of being handed to a third.
      await db.schema
        .alterTable('tasks')
        .addColumn('lost_leases', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
    },
  },
  '0006_task_error_details': {
    async up(db: Kysely<any>) {
      // A failed task's error `details` as JSON (INVALID_OPTIONS names the option in `field`).
      await db.schema.alterTable('tasks').addColumn('error_details', 'text').execute();
    },
  },
  '0007_outputs_swept': {
    async up(db: Kysely<any>) {
      // Tasks that ended without outputs are swept of what a dead worker wrote once each, marked
      // here, instead of behind a completed_at cursor that missed a task committed late.
      await db.schema
        .alterTable('tasks')
        .addColumn('outputs_swept', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      const cursor = await db.selectFrom('periodic_runs').select('last_run').where('name', '=', 'unrecorded-outputs').executeTakeFirst();
      if (cursor) {
        await db
          .updateTable('tasks')
          .set({ outputs_swept: 1 })
          .where('status', 'in', ['failed', 'canceled'])
          .where('completed_at', '<', Number(cursor.last_run) - 60_000)
          .execute();
        await db.deleteFrom('periodic_runs').where('name', '=', 'unrecorded-outputs').execute();
      }
      await db.schema
        .createIndex('tasks_outputs_unswept')
        .on('tasks')
        .column('id')
        .where(sql.ref('outputs_swept'), '=', 0)
        .where(sql.ref('status'), 'in', ['failed', 'canceled'])
        .execute();
    },
  },
  '0008_webhooks': {
    async up(db: Kysely<any>) {
      // Webhook endpoints. The secret signs every delivery, so it is kept as issued (a hash could
      // not sign); it is shown once at creation and never returned or logged after.
      await db.schema
        .createTable('webhooks')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('events', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('secret', 'text', (c) => c.notNull())
        .addColumn('created_at', ms, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('webhooks_account').on('webhooks').column('account_id').execute();

      // One event for one endpoint, and the queue of its attempts (like a task): claimed with a
      // lease (`run_at` is then when the lease lapses), retried with backoff until `give_up_at`.
      await db.schema
        .createTable('webhook_deliveries')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('webhook_id', 'text', (c) => c.notNull().references('webhooks.id'))
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('event_id', 'text', (c) => c.notNull())
        .addColumn('event_type', 'text', (c) => c.notNull())
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('run_at', ms, (c) => c.notNull())
        .addColumn('lease_owner', 'text')
        .addColumn('give_up_at', ms, (c) => c.notNull())
        .addColumn('last_status_code', 'integer')
        .addColumn('last_duration_ms', 'integer')
        .addColumn('last_error', 'text')
        .addColumn('attempt_log', 'text', (c) => c.notNull().defaultTo('[]'))
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('finished_at', ms)
        .execute();
      await db.schema.createIndex('webhook_deliveries_runnable').on('webhook_deliveries').columns(['status', 'run_at']).execute();
      await db.schema.createIndex('webhook_deliveries_webhook').on('webhook_deliveries').columns(['webhook_id', 'created_at']).execute();
    },
  },
  '0009_account_disabled': {
    async up(db: Kysely<any>) {
      // Set by the operator: the account's keys, sessions and logins are refused while it is set.
      await db.schema.alterTable('accounts').addColumn('disabled_at', ms).execute();
    },
  },
  '0010_delivery_urls': {
    async up(db: Kysely<any>) {
      // Delivery URLs (/r/…): the keys that sign them, named transforms, the origins sources
      // are fetched from, the objects fetched, and the index of stored renders.
      await db.schema
        .createTable('signing_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('secret', 'text', (c) => c.notNull())
        .addColumn('created_at', ms, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('signing_keys_account').on('signing_keys').column('account_id').execute();

      await db.schema
        .createTable('presets')
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('transform', 'text', (c) => c.notNull())
        .addColumn('public', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('updated_at', ms, (c) => c.notNull())
        .addPrimaryKeyConstraint('presets_pk', ['account_id', 'name'])
        .execute();

      await db.schema
        .createTable('origins')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('base_url', 'text', (c) => c.notNull())
        .addColumn('created_at', ms, (c) => c.notNull())
        .addUniqueConstraint('origins_account_name', ['account_id', 'name'])
        .execute();

      // One object fetched from an origin, kept in storage and revalidated with its validators.
      await db.schema
        .createTable('origin_objects')
        .addColumn('origin_id', 'text', (c) => c.notNull())
        .addColumn('path', 'text', (c) => c.notNull())
        .addColumn('storage_key', 'text', (c) => c.notNull())
        .addColumn('format', 'text', (c) => c.notNull())
        .addColumn('bytes', ms, (c) => c.notNull())
        .addColumn('content_hash', 'text', (c) => c.notNull())
        .addColumn('etag', 'text')
        .addColumn('last_modified', 'text')
        .addColumn('checked_at', ms, (c) => c.notNull())
        .addPrimaryKeyConstraint('origin_objects_pk', ['origin_id', 'path'])
        .execute();

      // The render cache's index: a render is visible once its row exists (its object is
      // written first); `source` is what purges it; `last_used_at` orders eviction.
      await db.schema
        .createTable('render_cache')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('account_id', 'text', (c) => c.notNull())
        .addColumn('source', 'text', (c) => c.notNull())
        .addColumn('preset', 'text')
        .addColumn('storage_key', 'text', (c) => c.notNull())
        .addColumn('content_type', 'text', (c) => c.notNull())
        .addColumn('etag', 'text', (c) => c.notNull())
        .addColumn('bytes', ms, (c) => c.notNull())
        .addColumn('expires_at', ms)
        .addColumn('created_at', ms, (c) => c.notNull())
        .addColumn('last_used_at', ms, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('render_cache_source').on('render_cache').columns(['account_id', 'source']).execute();
      await db.schema.createIndex('render_cache_preset').on('render_cache').columns(['account_id', 'preset']).execute();
      await db.schema.createIndex('render_cache_last_used').on('render_cache').column('last_used_at').execute();
    },
  },
  '0011_task_lanes': {
    async up(db: Kysely<any>) {
      // The slots a task takes: AI work (an esrgan upscale, alone or as a pipeline step) has its own.
      await db.schema
        .alterTable('tasks')
        .addColumn('lane', 'text', (c) => c.notNull().defaultTo('image'))
        .execute();
      // Decided here as the operations decide it today (this migration must not change with them).
      const esrganStep = (step: Record<string, unknown>) => step.kind === 'upscale' && step.model === 'esrgan';
      const candidates = await db
        .selectFrom('tasks')
        .select(['id', 'type', 'options'])
        .where('type', 'in', ['upscale', 'pipeline'])
        .where('options', 'like', '%esrgan%')
        .execute();
      for (const task of candidates as { id: string; type: string; options: string }[]) {
        const options = JSON.parse(task.options) as Record<string, unknown> & { steps?: Record<string, unknown>[] };
        const ai = task.type === 'upscale' ? options.model === 'esrgan' : (options.steps ?? []).some(esrganStep);
        if (ai) await db.updateTable('tasks').set({ lane: 'ai' }).where('id', '=', task.id).execute();
      }
      // The claim filters on status and lane, then orders by priority and run_at.
      await db.schema.dropIndex('tasks_claim').execute();
      await db.schema.createIndex('tasks_claim').on('tasks').columns(['status', 'lane', 'priority', 'run_at']).execute();
      // Fair turns per lane: an account busy in one lane does not lose its turn in the other.
      await db.schema
        .createTable('account_lanes')
        .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
        .addColumn('lane', 'text', (c) => c.notNull())
        .addColumn('last_served_at', ms, (c) => c.notNull())
        .addPrimaryKeyConstraint('account_lanes_pk', ['account_id', 'lane'])
        .execute();
      await db
        .insertInto('account_lanes')
        .columns(['account_id', 'lane', 'last_served_at'])
        .expression(
          db
            .selectFrom('accounts')
            .select(['id', sql.lit('image').as('lane'), 'last_served_at'])
            .where('last_served_at', '>', 0),
        )
        .execute();
    },
  },
  '0012_file_info': {
    async up(db: Kysely<any>) {
      // GET /api/files/{fileId}/info, computed once per file and kept; deleted with its file.
      await db.schema
        .createTable('file_info')
        .addColumn('file_id', 'text', (c) => c.primaryKey().references('files.id'))
        .addColumn('info', 'text', (c) => c.notNull())
        .addColumn('created_at', ms, (c) => c.notNull())
        .execute();
    },
  },
  '0013_statement_budget': {
    async up(db: Kysely<any>) {
      // The process that reserved last in a subject's window, and the latest window in which two
      // processes reserved: a process alone on a key reserves its expected demand at once.
      await db.schema.alterTable('rate_limits').addColumn('holder', 'text').execute();
      await db.schema
        .alterTable('rate_limits')
        .addColumn('shared_window', ms, (c) => c.notNull().defaultTo(0))
        .execute();
      // Bumped by every change of the account's webhook endpoints: a process keeps the endpoints
      // it read with the number, and a task's end reads only the number.
      await db.schema
        .alterTable('accounts')
        .addColumn('webhooks_version', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
    },
  },
  '0014_sqlite_folded_writes': {
    async up(db: Kysely<any>) {
      // When a task was last claimed: the claim stamps its account served in its lane with it
      // (on SQLite through the trigger below).
      await db.schema.alterTable('tasks').addColumn('claimed_at', ms).execute();
      // Bumped by every queuing of work under the account's lock: a PostgreSQL statement that
      // queues alone tells by it whether tasks were added since its snapshot.
      await db.schema
        .alterTable('accounts')
        .addColumn('work_version', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      // SQLite's WITH cannot write (PostgreSQL folds these writes into one statement with
      // data-modifying CTEs): triggers make one statement write two tables, so that it needs no
      // transaction around it. PostgreSQL has neither of them.
      if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
      // A claim (a task taken from queued to processing) stamps its account served in its lane.
      await sql`
        CREATE TRIGGER tasks_claimed_stamp_lane AFTER UPDATE OF claimed_at ON tasks
        WHEN OLD.status = 'queued' AND NEW.status = 'processing'
        BEGIN
          INSERT INTO account_lanes (account_id, lane, last_served_at) VALUES (NEW.account_id, NEW.lane, NEW.claimed_at)
          ON CONFLICT (account_id, lane) DO UPDATE SET last_served_at = excluded.last_served_at;
        END`.execute(db);
      // A file inserted through charged_files is charged to its account's storage in the same
      // statement (the caller's INSERT … SELECT … WHERE holds the limit). Files inserted into
      // \`files\` itself (a confirmed direct upload's, whose bytes were reserved; a restore's) are
      // not: only the writers that mean to charge name this view. A column added to files must
      // be added here by a later migration.
      await sql`CREATE VIEW charged_files AS SELECT * FROM files`.execute(db);
      const columns = [
        'id',
        'account_id',
        'origin',
        'storage_key',
        'filename',
        'mime_type',
        'format',
        'size',
        'width',
        'height',
        'pages',
        'etag',
        'task_id',
        'output_index',
        'created_at',
        'expires_at',
        'deleted_at',
      ];
      await sql`
        CREATE TRIGGER charged_files_insert INSTEAD OF INSERT ON charged_files
        BEGIN
          UPDATE accounts SET storage_used = storage_used + NEW.size WHERE id = NEW.account_id;
          INSERT INTO files (${sql.raw(columns.join(', '))}) VALUES (${sql.raw(columns.map((c) => `NEW.${c}`).join(', '))});
        END`.execute(db);
      // A completion with no webhook event to write (TaskQueue.completeAlone), one statement: a row
      // inserted here completes the task and records its outputs (JSON file rows of `bytes` in all,
      // charged through charged_files) while the lease is still the worker's, the account is at the
      // webhooks_version the worker knows to want no event, and the outputs fit its storage;
      // otherwise the statement fails 'completion refused' and has written nothing.
      await sql`
        CREATE VIEW task_completions (task_id, worker_id, webhooks_version, outputs, bytes, storage_limit, output_file_id, output_file_ids, result, completed_at)
        AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0`.execute(db);
      await sql`
        CREATE TRIGGER task_completions_insert INSTEAD OF INSERT ON task_completions
        BEGIN
          SELECT RAISE(ABORT, 'completion refused') WHERE NOT EXISTS (
            SELECT 1 FROM tasks JOIN accounts ON accounts.id = tasks.account_id
            WHERE tasks.id = NEW.task_id AND tasks.lease_owner = NEW.worker_id AND tasks.status = 'processing'
              AND accounts.webhooks_version = NEW.webhooks_version
              AND (NEW.bytes = 0 OR accounts.storage_used + NEW.bytes <= NEW.storage_limit));
          INSERT INTO charged_files (${sql.raw(columns.join(', '))})
            SELECT ${sql.raw(columns.map((c) => `value ->> '${c}'`).join(', '))} FROM json_each(NEW.outputs);
          UPDATE tasks SET status = 'completed', progress = 100, output_file_id = NEW.output_file_id,
              output_file_ids = NEW.output_file_ids, result = NEW.result, error_code = NULL, error_message = NULL,
              error_details = NULL, lease_owner = NULL, lease_expires_at = NULL, completed_at = NEW.completed_at
            WHERE id = NEW.task_id;
        END`.execute(db);
      // A task queued and charged one task, without a transaction (tasks.ts insertQueuedTask), one
      // statement: a row inserted here is the task, its inputs (`input_files`, a JSON array of
      // file ids in order) and its count in the month's and the day's counters, written only
      // while the account's storage is not full, its queued and running tasks leave room, the
      // month's count stays within its limit and every input is still live; otherwise the
      // statement fails 'queueing refused' and has written nothing.
      const taskColumns = [
        'id',
        'account_id',
        'batch_id',
        'batch_index',
        'type',
        'status',
        'priority',
        'lane',
        'input',
        'options',
        'output_file_id',
        'output_file_ids',
        'result',
        'error_code',
        'error_message',
        'error_details',
        'progress',
        'attempts',
        'max_attempts',
        'lost_leases',
        'outputs_swept',
        'charged',
        'run_at',
        'lease_owner',
        'lease_expires_at',
        'created_at',
        'started_at',
        'claimed_at',
        'completed_at',
      ];
      const terms = ['input_files', 'month_period', 'day_period', 'monthly_tasks', 'max_queued_tasks', 'storage_limit'];
      await sql`
        CREATE VIEW queued_tasks (${sql.raw([...taskColumns, ...terms].join(', '))})
        AS SELECT ${sql.raw([...taskColumns, ...terms].map(() => 'NULL').join(', '))} WHERE 0`.execute(db);
      await sql`
        CREATE TRIGGER queued_tasks_insert INSTEAD OF INSERT ON queued_tasks
        BEGIN
          SELECT RAISE(ABORT, 'queueing refused') WHERE
               (SELECT storage_used FROM accounts WHERE id = NEW.account_id) >= NEW.storage_limit
            OR (SELECT count(*) FROM tasks WHERE account_id = NEW.account_id AND status IN ('queued', 'processing')) + 1 > NEW.max_queued_tasks
            OR coalesce((SELECT used FROM usage_counters WHERE account_id = NEW.account_id AND period = NEW.month_period), 0) + 1 > NEW.monthly_tasks
            OR EXISTS (SELECT 1 FROM json_each(NEW.input_files) AS input WHERE NOT EXISTS (
                 SELECT 1 FROM files WHERE files.id = input.value AND files.account_id = NEW.account_id
                   AND files.deleted_at IS NULL AND files.expires_at > NEW.created_at));
          INSERT INTO usage_counters (account_id, period, used) VALUES (NEW.account_id, NEW.month_period, 1), (NEW.account_id, NEW.day_period, 1)
            ON CONFLICT (account_id, period) DO UPDATE SET used = used + 1;
          INSERT INTO tasks (${sql.raw(taskColumns.join(', '))}) VALUES (${sql.raw(taskColumns.map((c) => `NEW.${c}`).join(', '))});
          INSERT INTO task_inputs (task_id, file_id, position) SELECT NEW.id, input.value, input.key FROM json_each(NEW.input_files) AS input;
        END`.execute(db);
    },
  },
};

export interface SchemaState {
  /** The migrations the database has run, by name, in order. */
  applied: string[];
  /** Of those, the ones this code does not have: a newer version migrated the database. */
  unknown: string[];
  /** This code's migrations the database has not run yet. */
  pending: string[];
}

/** Which migrations a database has run, against those this code knows. */
export async function schemaState(db: Kysely<any>): Promise<SchemaState> {
  const tables = await db.introspection.getTables({ withInternalKyselyTables: true });
  const applied = tables.some((t) => t.name === DEFAULT_MIGRATION_TABLE)
    ? (await sql<{ name: string }>`select name from ${sql.table(DEFAULT_MIGRATION_TABLE)} order by name`.execute(db)).rows.map((r) => r.name)
    : [];
  return {
    applied,
    unknown: applied.filter((name) => !(name in migrations)),
    pending: Object.keys(migrations).filter((name) => !applied.includes(name)),
  };
}

/**
 * Refuses to start on a database that a newer version of imgapi has migrated: this code would
 * misread what it does not know of the schema, and a newer version's data is not this one's to
 * change. The way back is the backup taken before the upgrade.
 */
export async function refuseNewerSchema(db: Kysely<any>): Promise<void> {
  const { unknown } = await schemaState(db);
  if (unknown.length === 0) return;
  throw new ConfigError([
    `DATABASE_URL: the database was migrated by a newer version of imgapi (migration${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} ` +
      `unknown to this one, whose latest is ${Object.keys(migrations).at(-1)}). Run that version or a later one; to go back to this ` +
      'version, restore the backup taken before the upgrade (docs/operations.md, "Backups and upgrades")',
  ]);
}
