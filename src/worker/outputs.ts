// A task's outputs on their way out, named after the kind that made them (`<stem>.<tag>.<ext>`,
// operations/common.ts outputName):
// held to the plan's storage rules before a byte is written,
// written under keys derived from the task id (a task run twice overwrites, never orphans) and
// hashed on the way, recorded as the account's files in the transaction that completes the
// task, and discarded when the task ends without them.
import fs from 'node:fs';
import crypto from 'node:crypto';
import { Readable, Transform, pipeline as streamPipeline } from 'node:stream';
import type { Database, Tx } from '../db/database.js';
import { TaskError } from '../errors.js';
import { newId } from '../ids.js';
import type { PlanLimits } from '../accounts/plans.js';
import { recordOutputs, recordingOutputs, type StoredOutput } from '../files/files.js';
import { outputName } from '../operations/common.js';
import { getOperation } from '../operations/registry.js';
import type { OperationOutput } from '../operations/types.js';
import type { TaskQueue, TaskRow } from '../queue/queue.js';
import { deleteTaskOutputs, outputKey, type ObjectStorage } from '../storage/storage.js';

/**
 * Bytes in memory, a slice at a time with a turn of the event loop between slices: hashing a
 * large output (a 4096 × 3072 PNG from an AI upscale is ~25 MB, 30–60 ms of SHA-256) in one
 * call would hold up every request the process serves meanwhile.
 */
async function* slices(data: Buffer, size = 1024 * 1024): AsyncGenerator<Buffer> {
  for (let start = 0; start < data.length; start += size) {
    if (start > 0) await new Promise((resolve) => setImmediate(resolve));
    yield data.subarray(start, start + size);
  }
}

function parseOptions(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export interface OutputStoreDeps {
  database: Database;
  storage: ObjectStorage;
  queue: TaskQueue;
}

export class OutputStore {
  constructor(private readonly deps: OutputStoreDeps) {}

  /**
   * Writes the outputs to storage, each under its task-derived key, measured and hashed as it
   * goes. First the storage rules (API.md): an output larger than the plan's maxFileBytes fails
   * the task OUTPUT_TOO_LARGE, outputs that would take the account past its storage limit fail
   * it STORAGE_LIMIT_EXCEEDED (both refunded), before anything is written. The storage check is
   * only a shortcut, against `storageUsed` as read when the task started: `record` makes it
   * again, exactly, in the transaction that charges the bytes.
   */
  async store(task: TaskRow, outputs: OperationOutput[], limits: PlanLimits, storageUsed: number): Promise<StoredOutput[]> {
    this.checkSizes(await outputSizes(outputs), limits, storageUsed);
    const options = parseOptions(task.options);
    const stored: StoredOutput[] = [];
    for (const [index, output] of outputs.entries()) {
      const key = outputKey(task.id, index);
      const { size, etag } = await this.write(key, output);
      stored.push({
        fileId: newId('file'),
        storageKey: key,
        filename: outputName(getOperation(task.type), output.filename, options),
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

  /** Records stored outputs as files, in the completing transaction (see TaskQueue.complete). */
  record(tx: Tx, task: TaskRow, outputs: StoredOutput[], limits: PlanLimits, now: number) {
    return recordOutputs(this.deps.database, tx, { id: task.id, accountId: task.account_id }, outputs, this.terms(limits, now));
  }

  /** `record` as CTEs of the completing statement (see TaskQueue.complete). */
  recording(task: TaskRow, outputs: StoredOutput[], limits: PlanLimits, now: number) {
    return recordingOutputs(this.deps.database, { id: task.id, accountId: task.account_id }, outputs, this.terms(limits, now));
  }

  private terms(limits: PlanLimits, now: number) {
    return { now, retentionMs: limits.retentionSeconds * 1000, storageLimit: limits.storageBytes };
  }

  /** Deletes every output object of the task: it ended without outputs. */
  async discard(taskId: string): Promise<void> {
    await deleteTaskOutputs(this.deps.storage, taskId);
  }

  /**
   * After a completion that did not happen: deletes the task's output objects when it ended
   * without them (canceled, failed), and leaves them when it completed elsewhere (same keys:
   * the completer's objects) or will run again (it will overwrite them). Answers its status.
   */
  async discardIfEnded(task: TaskRow): Promise<string | undefined> {
    const status = await this.deps.queue.statusOf(task.id);
    if (status === 'canceled' || status === 'failed') await this.discard(task.id);
    return status;
  }

  private checkSizes(sizes: { filename: string; size: number }[], limits: PlanLimits, used: number): void {
    let total = 0;
    for (const { filename, size } of sizes) {
      if (size > limits.maxFileBytes) {
        throw new TaskError(
          'OUTPUT_TOO_LARGE',
          `The output ${filename} would be ${size} bytes; the plan allows ${limits.maxFileBytes} bytes per file`,
        );
      }
      total += size;
    }
    if (total > 0 && used + total > limits.storageBytes) {
      throw new TaskError(
        'STORAGE_LIMIT_EXCEEDED',
        `The output (${total} bytes) would take the account past its storage limit (${used} of ${limits.storageBytes} bytes used); nothing was kept`,
      );
    }
  }

  /** Streams the output (bytes in memory, or a file the operation wrote) to storage, hashed and counted on the way. */
  private async write(key: string, output: OperationOutput): Promise<{ size: number; etag: string }> {
    const { storage } = this.deps;
    const hash = crypto.createHash('sha256');
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        hash.update(chunk);
        size += chunk.length;
        callback(null, chunk);
      },
    });
    // pipeline forwards a read error to the meter (so put fails) and closes the file when put
    // gives up; its own callback has nothing to add to what put reports.
    const source = output.data ? Readable.from(slices(output.data)) : fs.createReadStream(output.path);
    await storage.put(
      key,
      streamPipeline(source, meter, () => {}),
    );
    return { size, etag: hash.digest('hex').slice(0, 32) };
  }
}

/** Each output's name and size (bytes in memory, or the file the operation wrote). */
async function outputSizes(outputs: OperationOutput[]): Promise<{ filename: string; size: number }[]> {
  return Promise.all(
    outputs.map(async (output) => ({
      filename: output.filename,
      size: output.data ? output.data.length : (await fs.promises.stat(output.path)).size,
    })),
  );
}
