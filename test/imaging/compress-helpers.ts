// Runs the compress operation itself on a file, without a server: what the worker hands it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import type { FileRecord } from '../../src/files/files.js';
import { compress } from '../../src/operations/compress.js';
import type { OperationResult } from '../../src/operations/types.js';
import { SNIFF_HEAD_BYTES, sniff } from '../../src/imaging/sniff.js';

/** The format the upload would record for `file`, or undefined when it would be refused. */
export function formatOf(file: string): string | undefined {
  const handle = fs.openSync(file, 'r');
  try {
    const head = Buffer.alloc(SNIFF_HEAD_BYTES);
    const sniffed = sniff(head.subarray(0, fs.readSync(handle, head, 0, head.length, 0)));
    return sniffed && !('refused' in sniffed) ? sniffed.format : undefined;
  } finally {
    fs.closeSync(handle);
  }
}

/** compress.run on `file` with `options`, on the Max plan's limits; `progress` hears what the task would report. */
export async function compressFile(
  file: string,
  options: Record<string, unknown> = {},
  progress?: (percent: number) => void,
): Promise<OperationResult> {
  const format = formatOf(file);
  if (!format) throw new Error(`${file} is not an accepted format`);
  const meta = await sharp(file, { limitInputPixels: false })
    .metadata()
    .catch(() => ({ width: undefined, height: undefined, pages: undefined }));
  const record = {
    id: 'file_test',
    filename: path.basename(file),
    format,
    size: fs.statSync(file).size,
    width: meta.width ?? null,
    height: meta.height ?? null,
    pages: meta.pages ?? null,
  } as FileRecord;
  const tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-compress-'));
  try {
    return await runCompress(record, file, options, tmpDir, progress);
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true });
  }
}

/** compress.run on the stored file `record` at `file`, as the worker calls it, on the Max plan's limits. */
export function runCompress(
  record: FileRecord,
  file: string,
  options: Record<string, unknown>,
  tmpDir: string,
  progress: (percent: number) => void = () => {},
): Promise<OperationResult> {
  return compress.run({
    taskId: 'task_test',
    options: options as never,
    inputs: [{ file: record, path: file }],
    limits: DEFAULT_PLANS.max,
    deadline: Date.now() + 600_000,
    signal: new AbortController().signal,
    scratchDir: async () => tmpDir,
    progress,
    // No LibreOffice, poppler or ffmpeg: an image job reads `ffmpeg` only for AVIF image sequences.
    documents: { ffmpeg: undefined } as never,
  });
}
