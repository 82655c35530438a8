// What every kind provides. Routes, validation, the OpenAPI document and the dashboard's
// forms are all derived from these modules (see registry.ts).
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { PlanLimits } from '../accounts/plans.js';
import type { Config } from '../config.js';
import type { TaskLane } from '../db/schema.js';
import type { DocumentTools } from '../programs/tools.js';
import type { FileRecord } from '../files/files.js';
import type { InputKind } from '../files/kinds.js';
import type { Transform } from '../imaging/pipeline.js';

/** A JSON Schema fragment (Fastify/Ajv and OpenAPI read the same object). */
export type JsonSchema = Record<string, unknown>;

/**
 * A kind's options besides its input(s): JSON Schema properties, written `as const` so that
 * `OptionsOf` can read the TypeScript type from them (the schema is the only definition).
 */
interface OptionsSchema {
  readonly properties: { readonly [name: string]: JSONSchema };
  readonly required?: readonly string[];
}

/**
 * The options an `OptionsSchema` accepts, as a type: the body has no other field. Of a kind
 * not known statically (`Operation` alone, as the registry lists them): any object.
 */
export type OptionsOf<S extends OptionsSchema> = OptionsSchema extends S
  ? Record<string, unknown>
  : FromSchema<{
      type: 'object';
      additionalProperties: false;
      properties: S['properties'];
      required: S['required'] extends readonly string[] ? S['required'] : [];
    }>;

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
  /**
   * The task's scratch directory, made on the first call (most image jobs never need one: their
   * bytes stay in memory) and removed with what it holds when the task ends.
   */
  scratchDir(): Promise<string>;
  progress(percent: number): void;
  /** LibreOffice and poppler, for the document kinds. */
  documents: DocumentTools;
}

/**
 * One output file: its bytes in memory (`data`), or a file under the task's scratchDir (`path`),
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

/** What an image transform needs besides its options: its task's files and limits, and the output's format. */
export interface StepEnv {
  limits: PlanLimits;
  /** The format the job writes (its `format`, else the input's where it can be written). */
  format: string;
  /** A file the options name (a watermark's logo), as the task holds it. */
  file(fileId: string): InputFile;
  /** The task's scratch directory, its cancel signal, deadline and progress: for long steps (an AI upscale, adjust's chain). */
  task: Pick<OperationContext<unknown>, 'signal' | 'progress' | 'deadline' | 'scratchDir'>;
}

/**
 * An image transform: what a single job of its kind runs, and what a pipeline step runs — a
 * single job is a pipeline of one step. The image it takes and returns is libvips' (sharp), with
 * its size; `sizes` of the operation says what size it makes.
 */
interface ImageStep<O> {
  /** The transform over an upright image (or one frame of it, when `perFrame`). */
  transform(options: O, env: StepEnv): Transform;
  /** Applied to each frame of an animation on its own (rotation, a vertical flip, overlays). */
  perFrame?(options: O): boolean;
  /** Colour used where alpha must be flattened (JPEG output): the step's own background. */
  background?(options: O): string | undefined;
}

/** A size (one frame) the options decide; `capped`: the kind holds it to MAX_OUTPUT_SIDE per side (resize, upscale). */
export interface PlannedSize {
  width: number;
  height: number;
  capped: boolean;
}

/** The fields a kind adds to the task's `result` (beyond format, size, width, height, pages): JSON Schema properties. */
export interface ResultSchema {
  readonly properties: { readonly [name: string]: JsonSchema };
}

/**
 * A kind whose options are described by the schema `S`; their type is read from it. One
 * module per kind (src/operations/<kind>.ts) and one line in registry.ts: routes, validation,
 * the OpenAPI document, SDK types, CLI options, dashboard forms, output names and docs/kinds.md
 * are derived from these members.
 */
export interface Operation<S extends OptionsSchema = OptionsSchema> {
  /** The kind's name: its route (`/api/process/{kind}`), the task's `type`, the pipeline step's `kind`. */
  kind: string;
  /** One line: the OpenAPI operation's summary and the title of its section in docs/kinds.md. */
  summary: string;
  /** What it does, its defaults and its errors, in Markdown: the OpenAPI description and docs/kinds.md. */
  description: string;
  /** What the input files must be. */
  accepts: InputKind;
  /** `fileIds` (several inputs, one task) instead of `fileId`. */
  multiInput?: { min: number; max: number };
  /** Whether `POST /api/process/batch/{kind}` exists for it. */
  batch: boolean;
  /** Options besides fileId/fileIds: what Ajv validates and the OpenAPI document shows. */
  options: S;
  /** Valid options, as the OpenAPI document and docs/kinds.md show them (in `<Kind>Options` and the request examples). */
  example: OptionsOf<S>;
  /** The fields it adds to the task's `result` (`<Kind>Result` in the OpenAPI document); absent: none. */
  result?: ResultSchema;
  /**
   * Its part of the output file's name, `<input stem>.<tag>.<ext>` (`resize-800`, `rotate-90`);
   * undefined (or absent) when the extension already says what was done (convert) or the kind
   * names its outputs itself (image-to-pdf, presentation-to-images).
   */
  tag?(options: OptionsOf<S>): string | undefined;
  /**
   * Checks that need more than one field or the input files. Called first with `inputs` empty
   * (before the files are looked up, so a bad option outranks a missing file), then with them.
   */
  check?(options: OptionsOf<S>, inputs: FileRecord[], limits: PlanLimits): FieldError[];
  /** Further files the options name (a watermark's logo): checked like inputs, read by the task. */
  extraInputs?(options: OptionsOf<S>): string[];
  /**
   * The sizes these options make of an input of `source` size, in order, the output's last (one
   * for a single transform, one per step for a pipeline): checked against the plan's limits when
   * the task is queued and again before decoding. Absent: the size is kept; the list stops early
   * where the pixels decide the rest.
   */
  sizes?(options: OptionsOf<S>, source: { width: number; height: number }): PlannedSize[];
  /**
   * For image transforms (resize, crop, rotate, flip, watermark, upscale): the transform itself.
   * Its kind's `run` applies it as a pipeline of one step; `POST /api/process/pipeline` chains them.
   */
  step?: ImageStep<OptionsOf<S>>;
  /**
   * The workers' slots the task takes, decided when it is queued and stored with it: `ai` for a
   * network's work (an esrgan upscale), which runs in AI_CONCURRENCY's slots, apart from image
   * tasks; `image` (the default) for the rest.
   */
  lane?(options: OptionsOf<S>): TaskLane;
  /** The task's whole time limit; absent: TASK_TIMEOUT_SECONDS (a deck adds LibreOffice's own, an AI upscale has its own). */
  timeLimitMs?(config: Config, options: OptionsOf<S>): number;
  /** Does the work: reads `ctx.inputs`, returns the outputs (named `<input stem>.<ext>`) and the result's own fields. */
  run(ctx: OperationContext<OptionsOf<S>>): Promise<OperationResult>;
}

/**
 * Any one of the kinds, as the registry and the code that serves every kind hold them. `any`
 * because each kind's methods take its own options type: no single options type accepts them all.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyOperation = Operation<any>;
