// Runs one job kind's Operation directly on a real file, as a worker runs it: no HTTP, no
// database, no queue — milliseconds for an image kind. test/operations/<kind>.test.ts test a
// kind's own logic (options, sizes, frames, edge pixels) here; the HTTP suites keep the contract.
//
//   const h = operationHarness();               // in a describe(); removes its files after()
//   const { output, meta, result } = await h.run('rotate', corpusFile('images/sharp/test-pattern.png'), { angle: 90 });
//   h.check('rotate', { angle: 90, background: 'nope' })   → the kind's FieldError[] (its `check`)
//
// - `input`: a corpus path, bytes (an earlier output), or several of them for a multi-input kind.
//   Each is identified exactly as an upload is (src/files/upload.ts: sniffed, header probed), so
//   the Operation sees the FileRecord the worker would hand it.
// - `options`: the kind's options, as the request body has them (without fileId/fileIds).
// - `plan` (default 'max'): whose limits apply; `extraFiles`: files the options name by id (a
//   watermark's logoFileId), as { fileId: path or bytes }; `progress`: hears the progress the
//   task reports.
// - Answers the Operation's own result, every output's bytes (`outputs`; `output` is the first)
//   and sharp's metadata of the first (`meta`, every frame read). A task failure throws the
//   Operation's TaskError: `await assert.rejects(h.run(…), { code: 'INVALID_OPTIONS' })`.
// - Document kinds get the real LibreOffice, poppler and ffmpeg, started on first use and
//   closed after(); ffmpeg also decodes animated AVIF for the image kinds.
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after } from 'node:test';
import pino from 'pino';
import sharp, { type Metadata } from 'sharp';
import { DEFAULT_PLANS, type PlanName } from '../../src/accounts/plans.js';
import { loadConfig } from '../../src/config.js';
import type { FileRecord } from '../../src/files/files.js';
import { storeUpload } from '../../src/files/upload.js';
import { Sandbox } from '../../src/programs/sandbox.js';
import { createDocumentTools, type DocumentTools } from '../../src/programs/tools.js';
import { getOperation } from '../../src/operations/registry.js';
import type { FieldError, InputFile, OperationOutput, OperationResult } from '../../src/operations/types.js';
import { LocalStorage } from '../../src/storage/local.js';
import { tempDir } from '../helpers.js';

export type Input = string | Buffer;

export interface RunOptions {
  plan?: PlanName;
  extraFiles?: Record<string, Input>;
  /** Aborts the run as a cancel or a lost lease does. */
  signal?: AbortSignal;
  /** Hears the progress the task reports, as the worker's heartbeat would. */
  progress?: (percent: number) => void;
}

export interface Ran {
  result: OperationResult;
  outputs: Buffer[];
  output: Buffer;
  meta: Metadata;
  /** The first output as a record says it (format, size, pages) besides its bytes. */
  first: OperationOutput;
}

export interface OperationHarness {
  run(kind: string, input: Input | Input[], options?: Record<string, unknown>, more?: RunOptions): Promise<Ran>;
  /** The FileRecord an upload of `input` makes (its format, size and frames). */
  identify(input: Input): Promise<InputFile>;
  /** The kind's own checks (`Operation.check`) with the inputs identified as uploads: [] when valid. */
  check(kind: string, options: Record<string, unknown>, inputs?: Input[], plan?: PlanName): Promise<FieldError[]>;
}

export function operationHarness(): OperationHarness {
  const dir = tempDir('imgapi-op-');
  const storage = new LocalStorage(path.join(dir, 'objects'));
  let documents: DocumentTools | undefined;
  let ids = 0;
  after(async () => {
    await documents?.libreoffice.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const tools = () => {
    if (!documents) {
      const config = loadConfig({ DATA_DIR: path.join(dir, 'data'), DATABASE_URL: `sqlite:${path.join(dir, 'unused.db')}`, LOG_LEVEL: 'silent' });
      const sandbox = new Sandbox({ mode: config.converterSandbox, command: config.bwrapCommand, hidden: [], logger: pino({ level: 'silent' }) });
      documents = createDocumentTools(config, sandbox);
    }
    return documents;
  };

  async function identify(input: Input, plan: PlanName = 'max'): Promise<InputFile> {
    const limits = DEFAULT_PLANS[plan];
    const name = typeof input === 'string' ? path.basename(input) : `output-${ids + 1}`;
    const body = typeof input === 'string' ? fs.createReadStream(input) : Readable.from([input]);
    const stored = await storeUpload(storage, body, name, limits, undefined, { sha256: false });
    const now = Date.now();
    const file: FileRecord = {
      id: `file_op${++ids}`,
      account_id: 'acct_op',
      origin: 'upload',
      storage_key: stored.key,
      filename: stored.filename,
      mime_type: stored.sniffed.mimeType,
      format: stored.sniffed.format,
      size: stored.size,
      width: stored.header.width ?? null,
      height: stored.header.height ?? null,
      pages: stored.header.pages ?? null,
      etag: stored.etag,
      task_id: null,
      output_index: null,
      created_at: now,
      expires_at: now + limits.retentionSeconds * 1000,
      deleted_at: null,
    };
    return { file, path: storage.localPath!(stored.key) };
  }

  const operation = (kind: string) => {
    const op = getOperation(kind);
    if (!op) throw new Error(`no kind "${kind}" in the registry`);
    return op;
  };

  return {
    identify: (input) => identify(input),

    async check(kind, options, inputs = [], plan = 'max') {
      const op = operation(kind);
      const limits = DEFAULT_PLANS[plan];
      const first = op.check?.(options, [], limits) ?? [];
      if (first.length || inputs.length === 0) return first;
      const files = await Promise.all(inputs.map((input) => identify(input, plan)));
      return (
        op.check?.(
          options,
          files.map((f) => f.file),
          limits,
        ) ?? []
      );
    },

    async run(kind, input, options = {}, more = {}) {
      const op = operation(kind);
      const plan = more.plan ?? 'max';
      const inputs = await Promise.all((Array.isArray(input) ? input : [input]).map((i) => identify(i, plan)));
      const extra = await Promise.all(
        Object.entries(more.extraFiles ?? {}).map(async ([fileId, i]) => {
          const identified = await identify(i, plan);
          return { ...identified, file: { ...identified.file, id: fileId } };
        }),
      );
      const tmpDir = fs.mkdtempSync(path.join(dir, 'task-'));
      try {
        const result = await op.run({
          taskId: `task_op${ids}`,
          options,
          inputs: [...inputs, ...extra],
          limits: DEFAULT_PLANS[plan],
          deadline: Date.now() + 600_000,
          signal: more.signal ?? new AbortController().signal,
          scratchDir: async () => tmpDir,
          progress: more.progress ?? (() => {}),
          get documents() {
            return tools();
          },
        });
        const outputs = result.outputs.map((o) => o.data ?? fs.readFileSync(o.path!));
        const meta = await sharp(outputs[0]!, { pages: -1 })
          .metadata()
          .catch(() => ({}) as Metadata);
        return { result, outputs, output: outputs[0]!, meta, first: result.outputs[0]! };
      } finally {
        fs.rmSync(tmpDir, { recursive: true, force: true });
      }
    },
  };
}
