// What every job kind provides. Routes, validation, the OpenAPI document and the dashboard's
// forms are all derived from these modules (see registry.ts).
import type { PlanLimits } from '../accounts/plans.js';
import type { Config } from '../config.js';
import type { DocumentTools } from '../documents/tools.js';
import type { FileRecord } from '../files/files.js';

/** A JSON Schema fragment (Fastify/Ajv and OpenAPI read the same object). */
export type JsonSchema = Record<string, unknown>;

export interface FieldError {
  field: string;
  message: string;
}

export interface InputFile {
  file: FileRecord;
  /** A path on local disk holding the file's bytes for the duration of the run. */
  path: string;
}

export interface OperationContext<O> {
  taskId: string;
  options: O;
  inputs: InputFile[];
  limits: PlanLimits;
  /** Wall-clock deadline (ms since epoch) for the whole task. */
  deadline: number;
  /** Aborted when the task is canceled or its lease is lost. */
  signal: AbortSignal;
  tmpDir: string;
  progress(percent: number): void;
  /** LibreOffice and poppler, for the document kinds. */
  documents: DocumentTools;
}

/**
 * One output file: its bytes in memory (`data`), or a file under the task's tmpDir (`path`),
 * which is streamed to storage — large outputs (a deck's ZIP) are never held whole.
 */
export type OperationOutput = OutputMeta & ({ data: Buffer; path?: undefined } | { path: string; data?: undefined });

export interface OutputMeta {
  format: string;
  mimeType: string;
  filename: string;
  width?: number;
  height?: number;
  pages?: number;
}

export interface OperationResult {
  /** outputs[0] is the task's `outputFileId`; kinds with several outputs list the rest in order. */
  outputs: OperationOutput[];
  /** The task's `result`, beyond what the first output already says. */
  result?: Record<string, unknown>;
  /** For kinds whose first output bundles the others (a ZIP of slides): ids go to outputFileIds. */
  bundled?: boolean;
}

export type InputKind = 'image' | 'presentation';

export interface Operation<O = Record<string, unknown>> {
  kind: string;
  summary: string;
  description: string;
  /** What the input files must be. */
  accepts: InputKind;
  /** `fileIds` (several inputs, one task) instead of `fileId`. */
  multiInput?: { min: number; max: number };
  /** Whether `POST /api/process/batch/{kind}` exists for it. */
  batch: boolean;
  /** Options besides fileId/fileIds. */
  options: { properties: Record<string, JsonSchema>; required?: string[] };
  /**
   * Checks that need more than one field or the input files. Called first with `inputs` empty
   * (before the files are looked up, so a bad option outranks a missing file), then with them.
   */
  check?(options: O, inputs: FileRecord[], limits: PlanLimits): FieldError[];
  /** Further files the options name (a watermark's logo): checked like inputs, read by the task. */
  extraInputs?(options: O): string[];
  /** Output sides are capped at MAX_OUTPUT_SIDE (resize and upscale). */
  capsOutputSide?: boolean;
  /**
   * The output size (one frame) the options decide for an input of `source` size, so the
   * pixel limit is checked when the task is queued and again before decoding.
   */
  outputSize?(options: O, source: { width: number; height: number }): { width: number; height: number } | undefined;
  /** Time the kind may take beyond TASK_TIMEOUT_SECONDS (a LibreOffice conversion's own limit). */
  extraTimeMs?(config: Config): number;
  run(ctx: OperationContext<O>): Promise<OperationResult>;
}
