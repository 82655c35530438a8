// The pipeline kind: several image transforms over one decode, one encode at the end. It holds no
// option of its own: each step is its kind's options, validated by that kind's own schema and
// checks (the registry's), and the trailing output fields are compress's.
import type { Size } from '../imaging/geometry.js';
import { VISUALLY_LOSSLESS_SSIM } from '../imaging/similarity.js';
import type { FileRecord } from '../files/files.js';
import { runSingleImage, type StepCall } from './common.js';
import { COMPRESSION_RESULT, compress } from './compress.js';
import type { JSONSchema } from 'json-schema-to-ts';
import type { AnyOperation, FieldError, JsonSchema, Operation, PlannedSize } from './types.js';

const MAX_PIPELINE_STEPS = 10;

/** The fields a step does not take: the output's, which the pipeline takes once, at its end. */
const OUTPUT_FIELDS = new Set(['format', 'quality']);
/** The trailing fields: what compress and convert take to encode the output. */
const TRAILING = ['format', 'quality', 'targetSize', 'lossless', 'keepMetadata'] as const;

interface Step {
  kind: string;
  [option: string]: unknown;
}

interface PipelineOptions {
  steps: Step[];
  format?: string;
  quality?: number | string;
  targetSize?: number;
  lossless?: boolean;
  keepMetadata?: boolean;
}

/** The options as the schema validated them (a schema built at run time: its type is not read from it). */
const pipelineOptions = (options: Record<string, unknown>) => options as unknown as PipelineOptions;

/** A step's JSON Schema: `kind` and its kind's options but the output's (named `<Kind>Step` in the document). */
export function stepSchema(op: AnyOperation): JsonSchema {
  const properties = Object.fromEntries(Object.entries(op.options.properties).filter(([name]) => !OUTPUT_FIELDS.has(name)));
  return {
    type: 'object',
    description: `A ${op.kind} step: its options as \`POST /api/process/${op.kind}\` takes them, without \`format\` and \`quality\`.`,
    additionalProperties: false,
    required: ['kind', ...(op.options.required ?? [])],
    properties: { kind: { type: 'string', const: op.kind }, ...properties },
  };
}

/** The pipeline over the given transforms (the registry's kinds that have a step). */
export function pipelineOf(transforms: readonly AnyOperation[]): Operation {
  const byKind = new Map(transforms.map((op) => [op.kind, op]));
  const kinds = transforms.map((op) => op.kind);
  const opOf = (step: Step) => byKind.get(step.kind)!;
  const optionsOf = ({ kind: _kind, ...options }: Step): Record<string, unknown> => options;
  const trailing = (options: PipelineOptions) => Object.fromEntries(TRAILING.filter((f) => options[f] !== undefined).map((f) => [f, options[f]]));

  /** Each step's result size (one frame) for an input of `source` size, while the options decide it. */
  const sizes = (options: PipelineOptions, source: Size) => {
    const planned: PlannedSize[] = [];
    let size: Size = source;
    for (const step of options.steps) {
      const op = opOf(step);
      const next = op.sizes ? op.sizes(optionsOf(step), size).at(-1) : { ...size, capped: false };
      if (!next) break;
      planned.push(next);
      size = { width: next.width, height: next.height };
    }
    return planned;
  };

  const operation: Operation = {
    kind: 'pipeline',
    summary: 'Run several transforms in one task',
    description:
      `Applies 1–${MAX_PIPELINE_STEPS} \`steps\` in order — ${kinds.map((k) => `\`${k}\``).join(', ')}, each with the options of its kind ` +
      '(but `format` and `quality`) — to one decode of the input, and encodes once at the end with the trailing `format`, `quality`, ' +
      '`targetSize`, `lossless` and `keepMetadata` (as compress takes them). One task, charged once. Each step is validated by its ' +
      "kind's schema; errors name the step (`steps[1].width`). The plan's limits apply to every intermediate result; a size the options " +
      'decide is checked when the task is queued. Animations and EXIF orientation are handled as by a single job. `result` adds ' +
      '`inputSize` and `savedBytes`, as compress reports them.',
    accepts: 'image',
    batch: true,
    example: {
      steps: [
        { kind: 'resize', width: 1600 },
        { kind: 'rotate', angle: 90 },
        { kind: 'watermark', text: '© 2026 Example', opacity: 0.5 },
      ],
      format: 'webp',
      quality: 80,
    },
    options: {
      properties: {
        steps: {
          type: 'array',
          minItems: 1,
          maxItems: MAX_PIPELINE_STEPS,
          description: 'The transforms, in order. Each is `{kind, ...that kind’s options}`.',
          // One branch per kind, chosen by `kind`: a bad step gets its own kind's errors only.
          items: { type: 'object', required: ['kind'], discriminator: { propertyName: 'kind' }, oneOf: transforms.map(stepSchema) } as JSONSchema,
        },
        ...Object.fromEntries(TRAILING.map((field) => [field, compress.options.properties[field]!])),
      },
      required: ['steps'],
    },
    check(raw, inputs, limits) {
      const options = pipelineOptions(raw);
      const errors: FieldError[] = [];
      // Each step against its kind's own rules, on the size its input has there (where the options
      // say it) and with the format the pipeline writes (whether an animation's frames are kept).
      const output = options.format === undefined ? {} : { format: options.format };
      options.steps.forEach((step, index) => {
        const op = opOf(step);
        const before = inputs.map((file) => inputAt(file, options.steps.slice(0, index), opOf, optionsOf));
        for (const error of op.check?.({ ...optionsOf(step), ...output }, before, limits) ?? [])
          errors.push({ ...error, field: `steps[${index}].${error.field}` });
      });
      return [...errors, ...(compress.check?.(trailing(options), inputs, limits) ?? [])];
    },
    extraInputs: (options) => [...new Set(pipelineOptions(options).steps.flatMap((step) => opOf(step).extraInputs?.(optionsOf(step)) ?? []))],
    result: COMPRESSION_RESULT,
    // The steps' tags in order (`resize-800.watermark`), the first three and a count past four.
    tag(options) {
      const tags = pipelineOptions(options).steps.flatMap((step) => opOf(step).tag?.(optionsOf(step)) ?? []);
      if (tags.length === 0) return 'pipeline';
      return tags.length > 4 ? [...tags.slice(0, 3), `and-${tags.length - 3}-more`].join('.') : tags.join('.');
    },
    sizes: (options, source) => sizes(pipelineOptions(options), source),
    // A step of the AI lane (an esrgan upscale) puts the whole task there.
    lane: (options) => (pipelineOptions(options).steps.some((step) => opOf(step).lane?.(optionsOf(step)) === 'ai') ? 'ai' : 'image'),
    // Steps whose kinds set their own time limit (an AI upscale's) give the whole task the longest
    // of them, as a single job of that kind would have; without such a step, TASK_TIMEOUT_SECONDS.
    timeLimitMs(config, options) {
      const own = pipelineOptions(options).steps.flatMap((step) => opOf(step).timeLimitMs?.(config, optionsOf(step)) ?? []);
      return own.length ? Math.max(...own) : config.taskTimeoutMs;
    },
    async run(ctx) {
      const options = pipelineOptions(ctx.options);
      const calls: StepCall[] = options.steps.map((step, index) => ({ op: opOf(step), options: optionsOf(step), path: `steps[${index}]` }));
      const done = await runSingleImage(
        operation,
        ctx,
        {
          lossless: options.lossless,
          keepMetadata: options.keepMetadata,
          targetSize: options.targetSize,
          similarity: options.quality === 'auto' ? VISUALLY_LOSSLESS_SSIM : undefined,
        },
        calls,
      );
      // It changes the size as compress does: what it saved, as compress reports it.
      const inputSize = Number(ctx.inputs[0]!.file.size);
      const size = done.outputs[0]!.data?.length ?? 0;
      return { ...done, result: { ...done.result, inputSize, savedBytes: Math.max(0, inputSize - size) } };
    },
  };
  return operation;
}

/** The input as step `steps.length` sees it: its size after the steps before, or unknown when the pixels decide it. */
function inputAt(
  file: FileRecord,
  before: Step[],
  opOf: (step: Step) => AnyOperation,
  optionsOf: (step: Step) => Record<string, unknown>,
): FileRecord {
  if (file.width === null || file.height === null) return file;
  let size: Size | undefined = { width: file.width, height: file.height };
  for (const step of before) {
    const op = opOf(step);
    size = op.sizes ? op.sizes(optionsOf(step), size).at(-1) : size;
    if (!size) return { ...file, width: null, height: null };
  }
  return { ...file, width: size.width, height: size.height };
}
