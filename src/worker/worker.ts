// The loop that runs claimed tasks: claim only what there are free slots for, heartbeat while
// running, write outputs under keys derived from the task id, complete while holding the lease.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import { createDocumentTools, type DocumentTools } from '../documents/tools.js';
import type { Database } from '../db/database.js';
import { TaskError } from '../errors.js';
import { newId, sha256Hex } from '../ids.js';
import { limitsOf, type PlanLimits, type PlanTable } from '../accounts/plans.js';
import { addStorage } from '../accounts/quota.js';
import type { FileRecord } from '../files/files.js';
import type { Metrics } from '../metrics.js';
import { getOperation } from '../operations/registry.js';
import type { InputFile, OperationResult } from '../operations/types.js';
import type { TaskQueue, TaskRow, CompletedOutput } from '../queue/queue.js';
import { outputKey, type ObjectStorage } from '../storage/storage.js';

export interface WorkerDeps {
  config: Config;
  database: Database;
  storage: ObjectStorage;
  queue: TaskQueue;
  clock: Clock;
  plans: PlanTable;
  logger: Logger;
  metrics: Metrics;
}

class LeaseLost extends Error {
  constructor() {
    super('lease lost');
  }
}

/** Shutdown reached its deadline: the task goes back to the queue for another worker at once. */
class Released extends Error {
  constructor() {
    super('released at shutdown');
  }
}

export class WorkerPool {
  readonly id = newId('req').replace('req_', `wrk_${os.hostname().slice(0, 20)}_`);
  private running = false;
  private readonly active = new Map<string, AbortController>();
  private wake: (() => void) | undefined;
  private loopDone: Promise<void> | undefined;
  private reaper: NodeJS.Timeout | undefined;
  private readonly onQueued = () => this.wake?.();
  /** LibreOffice (its pool caps conversions across this pool's tasks) and poppler. */
  readonly documents: DocumentTools;

  constructor(
    private readonly deps: WorkerDeps,
    readonly concurrency: number,
  ) {
    this.documents = createDocumentTools(deps.config, (event) =>
      deps.logger.info({ converter: 'libreoffice', ...event }, `presentation conversion ${event.outcome} (waited ${event.waitMs} ms, ran ${event.runMs} ms)`),
    );
  }

  start(): void {
    if (this.running || this.concurrency <= 0) return;
    this.running = true;
    this.deps.queue.events.on('queued', this.onQueued);
    const reapEvery = Math.max(500, Math.floor(this.deps.config.leaseMs / 2));
    this.reaper = setInterval(() => {
      this.deps.queue.reapExpiredLeases().catch((err) => this.deps.logger.error({ err }, 'lease reaper failed'));
    }, reapEvery);
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming, lets running tasks finish until `deadlineMs`, then aborts the rest and puts
   * them back in the queue, where another worker picks them up at once.
   */
  async stop(deadlineMs = 10_000): Promise<void> {
    if (!this.running) return;
    this.running = false;
    clearInterval(this.reaper);
    this.deps.queue.events.off('queued', this.onQueued);
    this.wake?.();
    await this.loopDone;
    const deadline = Date.now() + deadlineMs;
    while (this.active.size && Date.now() < deadline) await sleep(50);
    for (const controller of this.active.values()) controller.abort(new Released());
    while (this.active.size) await sleep(20);
  }

  get busy(): number {
    return this.active.size;
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const free = this.concurrency - this.active.size;
      let claimed: TaskRow[] = [];
      if (free > 0) {
        try {
          claimed = await this.deps.queue.claim(this.id, free, this.deps.config.leaseMs);
        } catch (err) {
          this.deps.logger.error({ err }, 'claim failed');
        }
      }
      for (const task of claimed) this.launch(task);
      if (claimed.length === 0 || this.active.size >= this.concurrency) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.deps.config.pollIntervalMs);
          this.wake = () => {
            clearTimeout(timer);
            this.wake = undefined;
            resolve();
          };
        });
      }
    }
  }

  private launch(task: TaskRow): void {
    const controller = new AbortController();
    this.active.set(task.id, controller);
    this.execute(task, controller)
      .catch((err) => this.deps.logger.error({ err, taskId: task.id }, 'task bookkeeping failed'))
      .finally(() => {
        this.active.delete(task.id);
        this.wake?.();
      });
  }

  private async execute(task: TaskRow, controller: AbortController): Promise<void> {
    const { config, queue, logger, metrics } = this.deps;
    const started = Date.now();
    // Before the heartbeat starts: should this throw, no timer is left renewing the lease of a
    // task nobody runs, and the reaper gives the task back once the lease lapses.
    const tmpDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'imgapi-task-'));
    let progress = 0;
    const heartbeat = setInterval(() => {
      queue
        .heartbeat(task.id, this.id, config.leaseMs, progress)
        .then((held) => {
          if (!held) controller.abort(new LeaseLost());
        })
        .catch((err) => logger.warn({ err, taskId: task.id }, 'heartbeat failed'));
    }, Math.max(200, Math.floor(config.leaseMs / 3)));
    const timeout = setTimeout(
      () => controller.abort(new TaskError('PROCESSING_TIMEOUT', `The task ran past its time limit of ${this.timeLimitMs(task.type) / 1000} s`)),
      this.timeLimitMs(task.type),
    );
    let outcome = 'completed';
    try {
      const limits = await this.currentLimits(task.account_id);
      const result = await abortable(this.run(task, limits, controller.signal, tmpDir, (p) => (progress = p)), controller.signal);
      const stored = await this.storeOutputs(task, result);
      const first = stored[0];
      const summary = {
        ...(first ? { format: first.format, size: first.size, width: first.width, height: first.height, pages: first.pages } : {}),
        ...result.result,
      };
      const done = await queue.complete(task, this.id, stored, summary, result.bundled ?? false, limits.retentionSeconds * 1000, (tx) =>
        addStorage(tx, task.account_id, stored.reduce((sum, o) => sum + o.size, 0)),
      );
      if (!done) {
        outcome = 'discarded';
        await this.discardOutputs(task, stored);
      }
    } catch (err) {
      if (err instanceof Released) {
        outcome = 'released';
        if (await queue.release(task, this.id)) logger.info({ taskId: task.id }, 'task released at shutdown; back in the queue');
      } else if (err instanceof LeaseLost) {
        outcome = 'discarded';
        logger.info({ taskId: task.id }, 'task lease lost or canceled; output discarded');
        await this.discardOutputs(task, []);
      } else {
        const failure =
          err instanceof TaskError
            ? { code: err.code, message: err.message, transient: err.transient }
            : { code: 'INTERNAL_ERROR', message: 'The task failed because of an internal error', transient: true };
        if (!(err instanceof TaskError)) logger.error({ err, taskId: task.id }, 'task failed with an internal error');
        outcome = await queue.fail(task, this.id, failure);
        if (outcome === 'failed') outcome = `failed:${failure.code}`;
      }
    } finally {
      clearInterval(heartbeat);
      clearTimeout(timeout);
      await fs.promises.rm(tmpDir, { recursive: true, force: true });
      metrics.taskDuration.observe({ kind: task.type, outcome: outcome.split(':')[0]! }, (Date.now() - started) / 1000);
    }
  }

  /** TASK_TIMEOUT_SECONDS, plus what the kind needs beyond it (a conversion's own limit). */
  private timeLimitMs(kind: string): number {
    return this.deps.config.taskTimeoutMs + (getOperation(kind)?.extraTimeMs?.(this.deps.config) ?? 0);
  }

  /** The account's plan as it is now: a plan change applies to tasks that have not run yet. */
  private async currentLimits(accountId: string): Promise<PlanLimits> {
    const account = await this.deps.database.db.selectFrom('accounts').select('plan').where('id', '=', accountId).executeTakeFirst();
    return limitsOf(this.deps.plans, account?.plan);
  }

  private async run(
    task: TaskRow,
    limits: PlanLimits,
    signal: AbortSignal,
    tmpDir: string,
    progress: (p: number) => void,
  ): Promise<OperationResult> {
    const op = getOperation(task.type);
    if (!op) throw new TaskError('INTERNAL_ERROR', `This server has no "${task.type}" operation`);
    const files = await this.deps.database.db
      .selectFrom('task_inputs')
      .innerJoin('files', 'files.id', 'task_inputs.file_id')
      .selectAll('files')
      .where('task_inputs.task_id', '=', task.id)
      .orderBy('task_inputs.position')
      .execute();
    const inputs: InputFile[] = [];
    for (const file of files) {
      if (file.deleted_at !== null) throw new TaskError('INPUT_MISSING', `The input file ${file.id} was deleted before the task ran`);
      inputs.push({ file, path: await this.localCopy(file, tmpDir) });
    }
    return op.run({
      taskId: task.id,
      options: JSON.parse(task.options),
      inputs,
      limits,
      deadline: Date.now() + this.timeLimitMs(task.type),
      signal,
      tmpDir,
      progress,
      documents: this.documents,
    });
  }

  /** A path to the input's bytes: the object itself on local storage, else a downloaded copy. */
  private async localCopy(file: FileRecord, tmpDir: string): Promise<string> {
    const { storage } = this.deps;
    if (storage.localPath) return storage.localPath(file.storage_key);
    const target = path.join(tmpDir, file.id);
    await pipeline(await storage.get(file.storage_key), fs.createWriteStream(target));
    return target;
  }

  private async storeOutputs(task: TaskRow, result: OperationResult): Promise<CompletedOutput[]> {
    const stored: CompletedOutput[] = [];
    for (const [index, output] of result.outputs.entries()) {
      const key = outputKey(task.id, index);
      let size: number;
      let etag: string;
      if (output.data) {
        await this.deps.storage.put(key, Readable.from([output.data]));
        size = output.data.length;
        etag = sha256Hex(output.data).slice(0, 32);
      } else {
        // A file the operation wrote: streamed, hashed and counted on the way.
        const hash = crypto.createHash('sha256');
        size = 0;
        const meter = new Transform({
          transform(chunk: Buffer, _encoding, callback) {
            hash.update(chunk);
            size += chunk.length;
            callback(null, chunk);
          },
        });
        const file = fs.createReadStream(output.path);
        file.on('error', (err) => meter.destroy(err));
        await this.deps.storage.put(key, file.pipe(meter));
        etag = hash.digest('hex').slice(0, 32);
      }
      stored.push({
        fileId: newId('file'),
        storageKey: key,
        filename: output.filename,
        mimeType: output.mimeType,
        format: output.format,
        size,
        etag,
        width: output.width,
        height: output.height,
        pages: output.pages,
      });
    }
    return stored;
  }

  /**
   * Deletes what this run wrote unless the task completed elsewhere (same keys: the completer's
   * objects) or will run again (it will overwrite them).
   */
  private async discardOutputs(task: TaskRow, stored: CompletedOutput[]): Promise<void> {
    const current = await this.deps.database.db.selectFrom('tasks').select('status').where('id', '=', task.id).executeTakeFirst();
    if (current && (current.status === 'canceled' || current.status === 'failed')) {
      for (const output of stored) await this.deps.storage.delete(output.storageKey);
    }
  }
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
