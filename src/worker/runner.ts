// Runs one claimed task to its outcome. A scratch directory of its own, made when the operation
// first asks for one (a resize never does: ~5 file operations per job saved); a heartbeat that renews
// the lease and aborts the run when the lease is lost (reaped, canceled); one deadline, computed
// once, for both the timer that aborts the run and the operation's own checks; then the outcome
// reported to the queue: completed with its outputs, failed (a transient fault retried), given
// back at shutdown, or dropped when the lease was lost. Outputs go through the OutputStore.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import type { DocumentTools } from '../programs/tools.js';
import { isStorageFull, TaskError } from '../errors.js';
import { findAccountById } from '../accounts/accounts.js';
import { limitsOf, type PlanLimits, type PlanTable } from '../accounts/plans.js';
import type { FileRecord, StoredOutput } from '../files/files.js';
import type { Metrics } from '../metrics.js';
import { getOperation } from '../operations/registry.js';
import type { InputFile, OperationResult } from '../operations/types.js';
import type { ClaimedTask, TaskQueue, TaskRow } from '../queue/queue.js';
import type { ObjectStorage } from '../storage/storage.js';
import { taskInputFiles } from '../tasks/tasks.js';
import { ownedTempPrefix } from '../temp-files.js';
import type { OutputStore } from './outputs.js';
import { Released } from './pool.js';

export interface RunnerDeps {
  config: Config;
  database: Database;
  storage: ObjectStorage;
  queue: TaskQueue;
  plans: PlanTable;
  logger: Logger;
  metrics: Metrics;
  documents: DocumentTools;
  outputs: OutputStore;
}

/** The abort reason when the heartbeat finds the lease gone. */
class LeaseLost extends Error {
  constructor() {
    super('lease lost');
  }
}

export class TaskRunner {
  constructor(
    private readonly deps: RunnerDeps,
    /** The lease owner this runner reports as. */
    private readonly workerId: string,
  ) {}

  /** Runs the task and reports its outcome; `stop` aborts it (with `Released`) at shutdown. */
  async run(task: TaskRow & Partial<Pick<ClaimedTask, 'account' | 'inputs'>>, stop: AbortSignal): Promise<void> {
    const { config, queue, logger, metrics, outputs } = this.deps;
    const started = Date.now();
    const timeLimitMs = this.timeLimitMs(task.type, task.options);
    const deadline = started + timeLimitMs;
    const aborter = new AbortController();
    const signal = AbortSignal.any([stop, aborter.signal]);
    // Named for this process, so the sweep can tell it from one a killed process left. Refused once
    // the run has ended: an aborted operation still running must not make one nobody removes.
    let scratch: Promise<string> | undefined;
    let ended = false;
    const scratchDir = () =>
      ended
        ? Promise.reject(new Error('the task ended; no scratch directory'))
        : (scratch ??= fs.promises.mkdtemp(path.join(os.tmpdir(), ownedTempPrefix('imgapi-task-'))));
    let progress = 0;
    const heartbeat = setInterval(
      () => {
        queue
          .heartbeat(task.id, this.workerId, config.leaseMs, progress)
          .then((held) => {
            if (!held) aborter.abort(new LeaseLost());
          })
          .catch((err) => logger.warn({ err, taskId: task.id }, 'heartbeat failed'));
      },
      Math.max(200, Math.floor(config.leaseMs / 3)),
    );
    const timeout = setTimeout(
      () => aborter.abort(new TaskError('PROCESSING_TIMEOUT', `The task ran past its time limit of ${timeLimitMs / 1000} s`)),
      deadline - Date.now(),
    );
    let outcome = 'completed';
    try {
      const { limits, storageUsed } = task.account
        ? { limits: limitsOf(this.deps.plans, task.account.plan), storageUsed: task.account.storageUsed }
        : await this.currentAccount(task.account_id);
      const result = await abortable(this.execute(task, limits, { signal, deadline, scratchDir, progress: (p) => (progress = p) }), signal);
      const stored = await outputs.store(task, result.outputs, limits, storageUsed);
      const completed = await queue.complete({
        task,
        workerId: this.workerId,
        result: summarize(stored, result),
        outputFileIds: stored.map((o) => o.fileId),
        bundled: result.bundled ?? false,
        recordOutputs: (tx, now) => outputs.record(tx, task, stored, limits, now),
        recordingOutputs: (now) => outputs.recording(task, stored, limits, now),
      });
      if (!completed) {
        // Lost, canceled, or failed because the outputs did not fit in the account's storage.
        const status = await outputs.discardIfEnded(task);
        outcome = status === 'failed' ? 'failed:STORAGE_LIMIT_EXCEEDED' : 'discarded';
      }
    } catch (err) {
      outcome = await this.settleFailure(task, err);
    } finally {
      clearInterval(heartbeat);
      clearTimeout(timeout);
      ended = true;
      // A directory that could not be made failed the operation that asked for it; nothing to remove then.
      if (scratch) await scratch.then((dir) => fs.promises.rm(dir, { recursive: true, force: true })).catch(() => {});
      metrics.taskDuration.observe({ kind: task.type, outcome: outcome.split(':')[0]! }, (Date.now() - started) / 1000);
      if (outcome.startsWith('failed:')) metrics.taskFailures.inc({ kind: task.type, code: outcome.slice('failed:'.length) });
    }
  }

  /** A run that threw: given back at shutdown, dropped with a lost lease, else failed or retried. Answers the outcome. */
  private async settleFailure(task: TaskRow, err: unknown): Promise<string> {
    const { queue, logger, outputs } = this.deps;
    if (err instanceof Released) {
      if (await queue.release(task, this.workerId)) logger.info({ taskId: task.id }, 'task released at shutdown; back in the queue');
      return 'released';
    }
    if (err instanceof LeaseLost) {
      logger.info({ taskId: task.id }, 'task lease lost or canceled; output discarded');
      await outputs.discardIfEnded(task);
      return 'discarded';
    }
    // A full disk or store is nobody's input fault: retried with backoff like any internal error.
    const failure =
      err instanceof TaskError
        ? { code: err.code, message: err.message, transient: err.transient, details: err.details }
        : isStorageFull(err)
          ? { code: 'INTERNAL_ERROR', message: 'The service ran out of storage space', transient: true }
          : { code: 'INTERNAL_ERROR', message: 'The task failed because of an internal error', transient: true };
    if (!(err instanceof TaskError))
      logger.error({ err, taskId: task.id }, isStorageFull(err) ? 'storage is full' : 'task failed with an internal error');
    const outcome = await queue.fail(task, this.workerId, failure);
    if (outcome !== 'failed') return outcome;
    // Ended without outputs: none is kept, whichever run wrote them (an earlier one whose worker
    // died or lost its lease, too; the sweep catches the tasks that end elsewhere).
    await outputs.discard(task.id);
    return `failed:${failure.code}`;
  }

  /** The kind's time limit for these options (an AI upscale's, a deck's with LibreOffice's), else TASK_TIMEOUT_SECONDS. */
  private timeLimitMs(kind: string, options: string): number {
    return getOperation(kind)?.timeLimitMs?.(this.deps.config, JSON.parse(options)) ?? this.deps.config.taskTimeoutMs;
  }

  /**
   * The account's plan as it is now (a plan change applies to tasks that have not run yet), and
   * its storage used (for the outputs' early check: one read of the account).
   */
  private async currentAccount(accountId: string): Promise<{ limits: PlanLimits; storageUsed: number }> {
    const account = await findAccountById(this.deps.database, accountId);
    return { limits: limitsOf(this.deps.plans, account?.plan), storageUsed: Number(account?.storage_used ?? 0) };
  }

  private async execute(
    task: TaskRow & Partial<Pick<ClaimedTask, 'inputs'>>,
    limits: PlanLimits,
    run: { signal: AbortSignal; deadline: number; scratchDir: () => Promise<string>; progress: (percent: number) => void },
  ): Promise<OperationResult> {
    const op = getOperation(task.type);
    if (!op) throw new TaskError('INTERNAL_ERROR', `This server has no "${task.type}" operation`);
    const inputs: InputFile[] = [];
    // The claim read them with the task; a task handed over otherwise reads them now.
    for (const file of task.inputs ?? (await taskInputFiles(this.deps.database, task.id))) {
      if (file.deleted_at !== null) throw new TaskError('INPUT_MISSING', `The input file ${file.id} was deleted before the task ran`);
      inputs.push({ file, path: await this.localCopy(file, run.scratchDir) });
    }
    return op.run({ taskId: task.id, options: JSON.parse(task.options), inputs, limits, ...run, documents: this.deps.documents });
  }

  /** A path to the input's bytes: the object itself on local storage, else a downloaded copy. */
  private async localCopy(file: FileRecord, scratchDir: () => Promise<string>): Promise<string> {
    const { storage } = this.deps;
    if (storage.localPath) return storage.localPath(file.storage_key);
    const target = path.join(await scratchDir(), file.id);
    await pipeline(await storage.get(file.storage_key), fs.createWriteStream(target));
    return target;
  }
}

/** The task's `result`: what its first output is, then what the operation adds. */
function summarize(stored: StoredOutput[], result: OperationResult): Record<string, unknown> {
  const first = stored[0];
  return {
    ...(first ? { format: first.format, size: first.size, width: first.width, height: first.height, pages: first.pages } : {}),
    ...result.result,
  };
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
