// Runs an Operation itself on a real file, as the worker hands it one — no server, no database:
// a kind's own logic in milliseconds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import type { FileRecord } from '../../src/files/files.js';
import type { AnyOperation, OperationResult } from '../../src/operations/types.js';
import { formatOf } from '../imaging/compress-helpers.js';

/** The file record an upload of `file` would make (its header's size; EXIF orientation not applied). */
export async function recordOf(file: string): Promise<FileRecord> {
  const format = formatOf(file);
  if (!format) throw new Error(`${file} is not an accepted format`);
  const meta = await sharp(file, { limitInputPixels: false }).metadata();
  return {
    id: 'file_test',
    filename: path.basename(file),
    format,
    size: fs.statSync(file).size,
    width: meta.width ?? null,
    height: meta.height ?? null,
    pages: meta.pages ?? null,
  } as FileRecord;
}

/** `op.run` on `file` with `options`, on the Max plan's limits, in a scratch directory removed afterwards. */
export async function runOperation(op: AnyOperation, file: string, options: Record<string, unknown>): Promise<OperationResult> {
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), `imgapi-${op.kind}-`));
  try {
    return await op.run({
      taskId: 'task_test',
      options,
      inputs: [{ file: await recordOf(file), path: file }],
      limits: DEFAULT_PLANS.max,
      deadline: Date.now() + 120_000,
      signal: new AbortController().signal,
      tmpDir,
      progress: () => {},
      // No LibreOffice or poppler: image kinds read `ffmpeg` only for AVIF image sequences.
      documents: { ffmpeg: undefined } as never,
    });
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
}
