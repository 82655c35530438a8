// The resources the API answers with, as the OpenAPI document's named component schemas, each
// with an example. Responses reference them (`ref('FileMetadata')`); request bodies are documented as
// the per-kind schemas built from the operations registry. These schemas document: Fastify
// validates requests with the routes' own schemas and sends responses as plain JSON, and the
// test suites validate every response they receive against the document.
import { DEFAULT_PLANS, PLAN_LIMIT_DESCRIPTIONS, PLAN_NAMES, type PlanLimits } from '../accounts/plans.js';
import { TASK_STATUSES, type TaskStatus } from '../db/schema.js';
import { TASK_ERROR_CODES } from '../errors.js';
import { STORED_FORMATS } from '../imaging/formats.js';
import { OPERATIONS } from '../operations/registry.js';
import { PIXEL_BOX_PROPERTIES } from '../operations/common.js';
import { stepSchema } from '../operations/pipeline.js';
import type { AnyOperation, JsonSchema } from '../operations/types.js';
import { BATCH_STATUSES } from '../tasks/view.js';
import { WEBHOOK_SCHEMAS } from './webhook-schemas.js';
import { DELIVERY_SCHEMAS } from './delivery-schemas.js';

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

const id = (prefix: string, description: string) => ({ type: 'string', pattern: `^${prefix}_[A-Za-z0-9_-]+$`, description }) as const;
const timestamp = (description: string) => ({ type: 'string', format: 'date-time', description }) as const;
const count = (description: string) => ({ type: 'integer', minimum: 0, description }) as const;
/** A task as it is queued: `failed` at once when a limit is already known to be passed. */
const submittedStatus = { type: 'string', enum: ['queued', 'failed'] satisfies TaskStatus[] };

// Examples: realistic values, valid against their schemas (the lint checks them).
const EXAMPLE_IDS = {
  file: 'file_Q2x4bXcT6yq0bUj2m1q5rDkA',
  logo: 'file_b7Zq0W3cVf9LmXr2TnA4sE8u',
  output: 'file_u8Hc1nY5pQ0wZ3vR7kT2mL9d',
  task: 'task_9fJk2LmN4pQ6rS8tV0wX2yZa',
  batch: 'batch_3GhJ5kL7mN9pQ1rS3tV5wX7y',
  upload: 'upl_2b1x0cJ4o3c2Q4m8y7GkZ8pD',
  request: 'req_Vb8n2Qm4Zx6Lp0Rt3Yw5Kc7J',
};
const EXAMPLE_TIME = '2026-05-04T09:30:00.000Z';

const FILE_EXAMPLE = {
  fileId: EXAMPLE_IDS.file,
  filename: 'photo.jpg',
  mimeType: 'image/jpeg',
  format: 'jpeg',
  size: 2_481_337,
  width: 4032,
  height: 3024,
  origin: 'upload',
  createdAt: EXAMPLE_TIME,
  expiresAt: '2026-05-05T09:30:00.000Z',
};

const OUTPUT_EXAMPLE = {
  ...FILE_EXAMPLE,
  fileId: EXAMPLE_IDS.output,
  filename: 'photo.webp',
  mimeType: 'image/webp',
  format: 'webp',
  size: 391_220,
  width: 1600,
  height: 1200,
  origin: 'output',
  taskId: EXAMPLE_IDS.task,
  createdAt: '2026-05-04T09:30:02.310Z',
  expiresAt: '2026-05-05T09:30:02.310Z',
};

/** A task of the examples: a resize of one file, with what its `status` adds (in the order the API sends them). */
function resizeTask<Outcome extends object>(task: {
  taskId: string;
  status: string;
  progress: number;
  batchId?: string;
  fileId: string;
  outcome: Outcome;
  completedAt: string;
}) {
  return {
    taskId: task.taskId,
    type: 'resize',
    status: task.status,
    progress: task.progress,
    ...(task.batchId ? { batchId: task.batchId } : {}),
    input: { fileId: task.fileId },
    options: { width: 1600, format: 'webp', quality: 80 },
    ...task.outcome,
    attempts: 1,
    createdAt: EXAMPLE_TIME,
    startedAt: '2026-05-04T09:30:01.020Z',
    completedAt: task.completedAt,
  };
}

const TASK_EXAMPLE = resizeTask({
  taskId: EXAMPLE_IDS.task,
  status: 'completed',
  progress: 100,
  fileId: EXAMPLE_IDS.file,
  outcome: {
    outputFileId: EXAMPLE_IDS.output,
    result: { format: 'webp', size: 391_220, width: 1600, height: 1200 },
  },
  completedAt: '2026-05-04T09:30:02.310Z',
});

const FAILED_TASK_EXAMPLE = resizeTask({
  taskId: 'task_7dLk3MnP5qR7sT9vW1xY3zAb',
  status: 'failed',
  progress: 0,
  batchId: EXAMPLE_IDS.batch,
  fileId: 'file_k4Tz8Qp1Wm6Xr3Nc9Lb2Vd5H',
  outcome: { error: { code: 'INVALID_IMAGE', message: 'The JPEG image is invalid: premature end of data' } },
  completedAt: '2026-05-04T09:30:01.090Z',
});

export const CANCELED_TASK_EXAMPLE = resizeTask({
  taskId: EXAMPLE_IDS.task,
  status: 'canceled',
  progress: 40,
  fileId: EXAMPLE_IDS.file,
  outcome: {},
  completedAt: '2026-05-04T09:30:01.500Z',
});

export const QUEUED_TASK_EXAMPLE = { taskId: EXAMPLE_IDS.task, status: 'queued', type: 'resize', createdAt: EXAMPLE_TIME };

const usageExample = (limits: PlanLimits) => ({
  monthlyTasks: { used: 1234, limit: limits.monthlyTasks, resetsAt: '2026-06-01T00:00:00.000Z' },
  dailyBatchFiles: { used: 40, limit: limits.dailyBatchFiles, resetsAt: '2026-05-05T00:00:00.000Z' },
  monthlyRenders: { used: 5210, limit: limits.monthlyRenders, resetsAt: '2026-06-01T00:00:00.000Z' },
  storageBytes: { used: 734_003_200, limit: limits.storageBytes },
});

/** The component schemas every operation shares. */
/** A page of a newest-first list: its `items` (of the `resource` schema) and the next page's cursor. */
const listPage = (items: string, resource: string, example: unknown[]) => ({
  type: 'object',
  required: [items, 'nextCursor'],
  additionalProperties: false,
  properties: {
    [items]: { type: 'array', items: ref(resource), description: 'Newest first.' },
    nextCursor: { type: ['string', 'null'], description: 'Pass as `cursor` for the next page; null on the last page.' },
  },
  examples: [{ [items]: example, nextCursor: null }],
});

/** The file resource (fileToApi in resources.ts builds it; its type is read from this). */
export const FILE_SCHEMA = {
  type: 'object',
  required: ['fileId', 'filename', 'mimeType', 'format', 'size', 'origin', 'createdAt', 'expiresAt'],
  additionalProperties: false,
  properties: {
    fileId: id('file', "The file's id."),
    filename: { type: 'string', description: 'A safe version of the uploaded name (no path); outputs are named after their input.' },
    mimeType: { type: 'string', description: "From the bytes, never from the name or the upload's header." },
    format: { type: 'string', enum: [...STORED_FORMATS] },
    size: count('Bytes.'),
    width: {
      type: 'integer',
      minimum: 1,
      description: 'Pixels, as displayed (EXIF orientation applied); absent where the header does not say (presentations, PDFs, ZIPs).',
    },
    height: { type: 'integer', minimum: 1, description: 'Pixels, as displayed.' },
    pages: {
      type: 'integer',
      minimum: 1,
      description: 'Frames of an animation or pages of a document (an image says it only when it has more than one).',
    },
    origin: { type: 'string', enum: ['upload', 'output'] },
    taskId: id('task', 'For outputs: the task that made it.'),
    createdAt: timestamp('When it was stored.'),
    expiresAt: timestamp("When it is deleted (the plan's retention, fixed at creation)."),
  },
  examples: [FILE_EXAMPLE],
} as const;

/** What every completed task's `result` says of its output (`outputFileId`). */
const RESULT_BASE = {
  format: { type: 'string' },
  size: count('Bytes.'),
  width: { type: 'integer', minimum: 1 },
  height: { type: 'integer', minimum: 1 },
  pages: { type: 'integer', minimum: 1 },
} as const;

/**
 * The fields kinds add to `result` (Operation.result), each once: described with the kinds that
 * report it (`compress, pipeline: …`), each kind's own words where they differ.
 */
function kindResultProperties(): Record<string, JsonSchema> {
  const fields = new Map<string, { schema: JsonSchema; said: Map<string, string[]> }>();
  for (const op of OPERATIONS) {
    for (const [name, schema] of Object.entries(op.result?.properties ?? {})) {
      const field = fields.get(name) ?? { schema, said: new Map<string, string[]>() };
      const description = String(schema.description ?? '');
      field.said.set(description, [...(field.said.get(description) ?? []), op.kind]);
      fields.set(name, field);
    }
  }
  return Object.fromEntries(
    [...fields].map(([name, { schema, said }]) => [
      name,
      { ...schema, description: [...said].map(([description, kinds]) => `${kinds.join(', ')}: ${description}`).join(' ') },
    ]),
  );
}

const RESOURCES: Record<string, JsonSchema> = {
  // Not `Error` nor `File`: a generated TypeScript client declares a type per schema, and those
  // two would shadow the built-in Error and File (a download typed as its metadata).
  ErrorResponse: {
    type: 'object',
    description: 'Every failure. Each operation lists, per status, exactly the codes it can answer.',
    required: ['success', 'error'],
    additionalProperties: false,
    properties: {
      success: { type: 'boolean', const: false },
      error: {
        type: 'object',
        required: ['code', 'message', 'requestId'],
        additionalProperties: false,
        properties: {
          code: { type: 'string', pattern: '^[A-Z][A-Z0-9_]+$', description: 'Stable and machine-readable: branch on it.' },
          message: { type: 'string', description: 'For people; may change.' },
          details: {
            type: 'object',
            additionalProperties: true,
            description:
              'Depends on the code: `fields` (each bad field and why) for VALIDATION_ERROR; `limit`, `used` and `resetsAt` for quota ' +
              'and rate-limit errors (RATE_LIMITED also `retryAfterSeconds`).',
          },
          requestId: { type: 'string', description: "The response's x-request-id: quote it when reporting a problem." },
        },
      },
    },
    examples: [{ success: false, error: { code: 'NOT_FOUND', message: 'File not found', requestId: EXAMPLE_IDS.request } }],
  },

  FileMetadata: FILE_SCHEMA,

  FileList: listPage('files', 'FileMetadata', [OUTPUT_EXAMPLE, FILE_EXAMPLE]),

  FileInfo: {
    type: 'object',
    description:
      'What a client needs to show, place or deduplicate an image, computed once per file and kept while the file lives. ' +
      'Sizes are of the upright image (EXIF orientation applied); the colours and hashes are of its first frame.',
    required: [
      'format',
      'width',
      'height',
      'pages',
      'hasAlpha',
      'colorSpace',
      'orientation',
      'exif',
      'gps',
      'palette',
      'dominant',
      'blurhash',
      'thumbhash',
      'phash',
    ],
    additionalProperties: false,
    properties: {
      format: { type: 'string', description: 'The format sniffed at upload (`jpeg`, `png`, `webp`, `avif`, `heic`, …).' },
      width: { type: 'integer', minimum: 1, description: 'Width of the upright image (one frame), in pixels.' },
      height: { type: 'integer', minimum: 1, description: 'Height of the upright image (one frame), in pixels.' },
      pages: { type: 'integer', minimum: 1, description: 'Frames of an animation (1 for a still image).' },
      hasAlpha: { type: 'boolean', description: 'Whether the image has an alpha channel.' },
      colorSpace: { type: 'string', description: "libvips' name of the stored colour space: `srgb`, `cmyk`, `b-w`, `rgb16`, …" },
      orientation: {
        type: 'integer',
        minimum: 1,
        maximum: 8,
        description: 'The EXIF orientation tag as stored (1 when absent); width and height are already upright.',
      },
      exif: {
        type: ['object', 'null'],
        additionalProperties: true,
        description:
          'Named EXIF tags (IFD0, Exif and GPS IFDs) with plain values: text, numbers, short number lists, dates as ISO 8601. ' +
          'Thumbnails, maker notes and binary fields are left out. null when the file has none.',
      },
      gps: {
        type: ['object', 'null'],
        required: ['latitude', 'longitude'],
        additionalProperties: false,
        properties: {
          latitude: { type: 'number', minimum: -90, maximum: 90, description: 'Decimal degrees, north positive.' },
          longitude: { type: 'number', minimum: -180, maximum: 180, description: 'Decimal degrees, east positive.' },
        },
        description: 'Where the photo was taken, from its EXIF GPS tags; null when it has none.',
      },
      palette: {
        type: 'array',
        maxItems: 8,
        items: { type: 'string', pattern: '^#[0-9a-f]{6}$' },
        description: 'Up to 8 colours, most frequent first (transparent pixels are not counted).',
      },
      dominant: { type: 'string', pattern: '^#[0-9a-f]{6}$', description: 'The most frequent colour: the first of `palette`.' },
      blurhash: { type: 'string', minLength: 6, description: 'A BlurHash (4 × 3 components) to paint a placeholder while the image loads.' },
      thumbhash: { type: 'string', description: 'A ThumbHash, base64: a placeholder that keeps the aspect ratio and alpha.' },
      phash: {
        type: 'string',
        pattern: '^[0-9a-f]{16}$',
        description:
          'A 64-bit perceptual hash (DCT of a 32 × 32 grey copy), 16 hex digits. Compare two by the number of differing bits: ' +
          'a resized or recompressed copy differs in a few (≤ 10), unrelated photos in about 32.',
      },
      faces: {
        type: 'array',
        description: "Only with `?faces=1`: every face found, in the upright image's pixels, best score first (empty when there is none).",
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['left', 'top', 'width', 'height', 'score'],
          properties: {
            ...PIXEL_BOX_PROPERTIES,
            score: { type: 'number', minimum: 0, maximum: 1, description: "The detector's confidence." },
          },
        },
      },
    },
    examples: [
      {
        format: 'jpeg',
        width: 4000,
        height: 3000,
        pages: 1,
        hasAlpha: false,
        colorSpace: 'srgb',
        orientation: 6,
        exif: { Make: 'Canon', Model: 'Canon EOS 5D Mark III', DateTimeOriginal: '2016-07-02T07:34:02.000Z', FNumber: 1.2, ISO: 100 },
        gps: { latitude: 50.0614, longitude: 19.9366 },
        palette: ['#2d3a1f', '#8fa5c2', '#d9d2c0', '#5b4a36'],
        dominant: '#2d3a1f',
        blurhash: 'LEHV6nWB2yk8pyo0adR*.7kCMdnj',
        thumbhash: '3OcRJYB4d3h/iIeHeEh3eIhw+j2w',
        phash: 'c3a59c1e0f3b7186',
      },
    ],
  },

  PresignedUpload: {
    type: 'object',
    required: ['uploadId', 'url', 'method', 'headers', 'expiresAt'],
    additionalProperties: false,
    properties: {
      uploadId: id('upl', 'Confirm with it.'),
      url: { type: 'string', format: 'uri', description: 'PUT the bytes here, without your API key.' },
      method: { type: 'string', enum: ['PUT'] },
      headers: { type: 'object', additionalProperties: { type: 'string' }, description: 'Send these headers with the PUT, exactly.' },
      expiresAt: timestamp('The URL works until then.'),
    },
    examples: [
      {
        uploadId: EXAMPLE_IDS.upload,
        url: `https://imgapi.example.net/uploads/${EXAMPLE_IDS.upload}?expires=1777887900&size=412345678&signature=k8Vh3Qp0Zr6Tn2Lw9Xc4Bm7Jd1Fs5Gy3Ha8Ue0Pi2Ko`,
        method: 'PUT',
        headers: { 'content-length': '412345678' },
        expiresAt: '2026-05-04T09:45:00.000Z',
      },
    ],
  },

  ReceivedUpload: {
    type: 'object',
    required: ['uploadId', 'size'],
    additionalProperties: false,
    properties: { uploadId: id('upl', 'The upload.'), size: count('Bytes received.') },
    examples: [{ uploadId: EXAMPLE_IDS.upload, size: 412_345_678 }],
  },

  TaskError: {
    type: 'object',
    description: 'Why a task failed.',
    required: ['code', 'message'],
    additionalProperties: false,
    properties: {
      code: { type: 'string', enum: [...TASK_ERROR_CODES] },
      message: { type: 'string' },
      details: { type: 'object', additionalProperties: true, description: 'For INVALID_OPTIONS: `field`, the option that cannot be honoured.' },
    },
    examples: [FAILED_TASK_EXAMPLE.error],
  },

  TaskResult: {
    type: 'object',
    description:
      'The output `outputFileId` names: its format, size and dimensions, `pages` for the frames or pages it holds; then the fields ' +
      'its kind adds, each named with the kinds that report it (for presentation-to-images the first fields describe the ZIP: ' +
      '`format` "zip", its `size`, `pages` = images, and `width`, `height` those of the slide images).',
    required: ['format', 'size'],
    additionalProperties: false,
    properties: { ...RESULT_BASE, ...kindResultProperties() },
    examples: [TASK_EXAMPLE.result],
  },

  Task: {
    type: 'object',
    required: ['taskId', 'type', 'status', 'progress', 'input', 'options', 'attempts', 'createdAt'],
    additionalProperties: false,
    properties: {
      taskId: id('task', "The task's id."),
      type: {
        type: 'string',
        enum: OPERATIONS.map((op) => op.kind),
        description: "The task's kind: the `{kind}` of `POST /api/process/{kind}` that queued it (the contract names the field `type`).",
      },
      status: {
        type: 'string',
        enum: [...TASK_STATUSES],
        description:
          '`queued` → `processing` → `completed` | `failed`; `queued`/`processing` → `canceled`. A task waiting to be retried is `queued` again.',
      },
      progress: { type: 'integer', minimum: 0, maximum: 100 },
      batchId: id('batch', 'The batch it belongs to.'),
      input: {
        type: 'object',
        description: 'The input file, or the input files of a several-input kind.',
        additionalProperties: false,
        minProperties: 1,
        maxProperties: 1,
        properties: { fileId: id('file', 'The input.'), fileIds: { type: 'array', items: id('file', 'An input.'), minItems: 1 } },
      },
      options: { type: 'object', additionalProperties: true, description: 'The options the task was queued with.' },
      outputFileId: id('file', 'When completed: the output (for presentation-to-images and pdf-to-images, a ZIP of the images).'),
      outputFileIds: {
        type: 'array',
        items: id('file', 'A slide or page image.'),
        description: 'presentation-to-images, pdf-to-images: one image per slide or page, in order.',
      },
      result: ref('TaskResult'),
      error: ref('TaskError'),
      attempts: count('Runs started, retries included.'),
      createdAt: timestamp('When it was queued.'),
      startedAt: timestamp('When a worker first took it.'),
      completedAt: timestamp('When it finished.'),
    },
    examples: [TASK_EXAMPLE],
  },

  TaskList: listPage('tasks', 'Task', [TASK_EXAMPLE]),

  QueuedTask: {
    type: 'object',
    description: 'A task just queued. It is `failed` at once (with `error`, charged nothing) when the stored header already shows a limit is passed.',
    required: ['taskId', 'status', 'type', 'createdAt'],
    additionalProperties: false,
    properties: {
      taskId: id('task', 'Follow it with GET /api/tasks/{taskId} (the Location header).'),
      status: submittedStatus,
      type: { type: 'string', enum: OPERATIONS.map((op) => op.kind) },
      createdAt: timestamp('When it was queued.'),
      error: ref('TaskError'),
    },
    examples: [QUEUED_TASK_EXAMPLE],
  },

  QueuedBatch: {
    type: 'object',
    required: ['batchId', 'type', 'tasks'],
    additionalProperties: false,
    properties: {
      batchId: id('batch', 'Follow it with GET /api/batches/{batchId} (the Location header).'),
      type: { type: 'string', enum: OPERATIONS.filter((op) => op.batch).map((op) => op.kind) },
      tasks: {
        type: 'array',
        description: 'One task per file, in the order of `fileIds`.',
        items: {
          type: 'object',
          required: ['taskId', 'fileId', 'status'],
          additionalProperties: false,
          properties: { taskId: id('task', 'The task.'), fileId: id('file', 'Its input.'), status: submittedStatus },
        },
      },
    },
    examples: [
      {
        batchId: EXAMPLE_IDS.batch,
        type: 'resize',
        tasks: [
          { taskId: EXAMPLE_IDS.task, fileId: EXAMPLE_IDS.file, status: 'queued' },
          { taskId: FAILED_TASK_EXAMPLE.taskId, fileId: FAILED_TASK_EXAMPLE.input.fileId, status: 'queued' },
        ],
      },
    ],
  },

  Batch: {
    type: 'object',
    required: ['batchId', 'type', 'status', 'createdAt', 'completedAt', 'counts', 'tasks'],
    additionalProperties: false,
    properties: {
      batchId: id('batch', "The batch's id."),
      type: { type: 'string', enum: OPERATIONS.filter((op) => op.batch).map((op) => op.kind) },
      status: {
        type: 'string',
        enum: [...BATCH_STATUSES],
        description:
          'From its tasks: `queued` while every task is queued; `processing` while any is queued or processing and at least one has ' +
          'been taken by a worker (or finished); once every task has finished: `completed` when all completed, `failed` when all ' +
          'failed, `canceled` when all were canceled, `partial` for any other mix. The last four are final.',
      },
      createdAt: timestamp('When it was queued.'),
      completedAt: {
        type: ['string', 'null'],
        format: 'date-time',
        description: 'When its last task finished; null while any task is queued or processing.',
      },
      counts: {
        type: 'object',
        description: 'Tasks in each status.',
        required: [...TASK_STATUSES],
        additionalProperties: false,
        properties: Object.fromEntries(TASK_STATUSES.map((status) => [status, count(`Tasks ${status}.`)])),
      },
      tasks: { type: 'array', items: ref('Task'), description: 'In batch order.' },
    },
    examples: [
      {
        batchId: EXAMPLE_IDS.batch,
        type: 'resize',
        status: 'partial',
        createdAt: EXAMPLE_TIME,
        completedAt: TASK_EXAMPLE.completedAt,
        counts: { queued: 0, processing: 0, completed: 1, failed: 1, canceled: 0 },
        tasks: [{ ...TASK_EXAMPLE, batchId: EXAMPLE_IDS.batch }, FAILED_TASK_EXAMPLE],
      },
    ],
  },

  PlanLimits: {
    type: 'object',
    description: "The plan's limits (the defaults, or the operator's PLANS_FILE merged over them).",
    required: Object.keys(PLAN_LIMIT_DESCRIPTIONS),
    additionalProperties: false,
    properties: Object.fromEntries(
      Object.entries(PLAN_LIMIT_DESCRIPTIONS).map(([key, description]) => [
        key,
        typeof DEFAULT_PLANS.free[key as keyof PlanLimits] === 'boolean'
          ? { type: 'boolean', description }
          : { type: 'integer', minimum: 0, description },
      ]),
    ),
    examples: [DEFAULT_PLANS.pro],
  },

  UsageCounter: {
    type: 'object',
    required: ['used', 'limit'],
    additionalProperties: false,
    properties: { used: count('Used so far.'), limit: count("The plan's limit."), resetsAt: timestamp('When `used` starts again from 0.') },
    examples: [{ used: 1234, limit: 10_000, resetsAt: '2026-06-01T00:00:00.000Z' }],
  },

  Usage: {
    type: 'object',
    required: ['monthlyTasks', 'dailyBatchFiles', 'monthlyRenders', 'storageBytes'],
    additionalProperties: false,
    properties: {
      monthlyTasks: ref('UsageCounter'),
      dailyBatchFiles: ref('UsageCounter'),
      monthlyRenders: ref('UsageCounter'),
      storageBytes: ref('UsageCounter'),
    },
    examples: [usageExample(DEFAULT_PLANS.pro)],
  },

  Account: {
    type: 'object',
    required: ['email', 'plan', 'limits', 'usage'],
    additionalProperties: false,
    properties: {
      email: { type: 'string', format: 'email' },
      plan: { type: 'string', enum: [...PLAN_NAMES] },
      limits: ref('PlanLimits'),
      usage: ref('Usage'),
    },
    examples: [{ email: 'dev@example.com', plan: 'pro', limits: DEFAULT_PLANS.pro, usage: usageExample(DEFAULT_PLANS.pro) }],
  },

  DailyUsage: {
    type: 'object',
    required: ['days'],
    additionalProperties: false,
    properties: {
      days: {
        type: 'array',
        description: 'Oldest first, today last.',
        items: {
          type: 'object',
          required: ['date', 'tasks'],
          additionalProperties: false,
          properties: { date: { type: 'string', format: 'date', description: 'A UTC day.' }, tasks: count('Tasks queued that day.') },
        },
      },
    },
    examples: [
      {
        days: [
          { date: '2026-05-03', tasks: 120 },
          { date: '2026-05-04', tasks: 87 },
        ],
      },
    ],
  },

  FileUpload: {
    type: 'object',
    description: 'Exactly one part, named `file`.',
    required: ['file'],
    additionalProperties: false,
    properties: {
      file: { type: 'string', format: 'binary', contentMediaType: 'application/octet-stream', description: 'The image or presentation.' },
    },
  },

  PresignRequest: {
    type: 'object',
    required: ['filename', 'size'],
    additionalProperties: false,
    properties: {
      filename: { type: 'string', minLength: 1, maxLength: 1024, description: "Kept as the file's name (without any path)." },
      size: {
        type: 'integer',
        minimum: 1,
        description: 'The exact length of the file in bytes; it is reserved in your storage until confirmed or expired.',
      },
      contentType: {
        type: 'string',
        maxLength: 255,
        pattern: '^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$',
        description: 'Sent with the PUT (it is then one of `headers`); the type is still sniffed from the bytes at confirm.',
      },
    },
    examples: [{ filename: 'scan.tiff', size: 412_345_678, contentType: 'image/tiff' }],
  },

  ConfirmRequest: {
    type: 'object',
    required: ['uploadId'],
    additionalProperties: false,
    properties: { uploadId: { type: 'string', maxLength: 100, description: 'As presign answered it.' } },
    examples: [{ uploadId: EXAMPLE_IDS.upload }],
  },

  Health: {
    type: 'object',
    required: ['status', 'version'],
    additionalProperties: false,
    properties: {
      status: { type: 'string', const: 'ok' },
      version: { type: 'string', description: "The service's version (as `imgapi --version` says)", examples: ['0.1.0'] },
    },
    examples: [{ status: 'ok', version: '0.1.0' }],
  },

  Readiness: {
    type: 'object',
    required: ['status', 'checks'],
    additionalProperties: false,
    properties: {
      status: { type: 'string', enum: ['ready', 'unavailable'] },
      checks: {
        type: 'object',
        description:
          'database and storage are required; libreoffice, poppler, ffmpeg (animated AVIF) and sandbox (whether the converters run confined) are reported, not required.',
        additionalProperties: {
          type: 'object',
          required: ['ok', 'required'],
          additionalProperties: false,
          properties: { ok: { type: 'boolean' }, required: { type: 'boolean' }, detail: { type: 'string' } },
        },
      },
    },
    examples: [
      {
        status: 'ready',
        checks: {
          database: { ok: true, required: true },
          storage: { ok: true, required: true },
          libreoffice: { ok: true, required: false },
          poppler: { ok: true, required: false },
          ffmpeg: { ok: true, required: false },
          sandbox: { ok: true, required: false },
        },
      },
    ],
  },
};

// Kinds -------------------------------------------------------------------------------

/** `image-to-pdf` → `ImageToPdf`: the stem of a kind's schema names. */
export const kindName = (kind: string): string => kind.replace(/(^|-)([a-z])/g, (_m, _dash, c: string) => c.toUpperCase());

const fileIdSchema = { type: 'string', maxLength: 100, description: 'An uploaded or output file of yours.' };
const fileIdsSchema = (min: number, max?: number, description?: string) => ({
  type: 'array',
  items: fileIdSchema,
  minItems: min,
  ...(max ? { maxItems: max } : {}),
  ...(description ? { description } : {}),
});

/** The JSON Schema Fastify validates a single job's body with: the input(s) and the kind's options. */
export function singleBodySchema(op: AnyOperation) {
  const input = op.multiInput
    ? {
        fileIds: fileIdsSchema(op.multiInput.min, op.multiInput.max, 'The inputs, in order.'),
        fileId: { ...fileIdSchema, description: 'One input: the same as `fileIds` with one id.' },
      }
    : { fileId: fileIdSchema };
  return {
    type: 'object',
    additionalProperties: false,
    // A several-input kind takes `fileIds` or `fileId`: exactly one, checked with the options.
    required: [...(op.multiInput ? [] : ['fileId']), ...(op.options.required ?? [])],
    properties: { ...input, ...op.options.properties },
  };
}

export function batchBodySchema(op: AnyOperation) {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['fileIds', ...(op.options.required ?? [])],
    properties: {
      fileIds: fileIdsSchema(1, undefined, "One task per file, in order (at most the plan's batchSize)."),
      ...op.options.properties,
    },
  };
}

/**
 * Properties as the document shows them: a list of alternatives chosen by a field (a pipeline's
 * steps, each `{kind, ...}`, validated inline) names each alternative's schema, `<Kind>Step`,
 * so that the discriminator can map `kind` to it.
 */
function namedAlternatives(properties: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(properties).map(([name, schema]) => {
      const items = (schema as { items?: { oneOf?: JsonSchema[]; discriminator?: { propertyName: string } } }).items;
      if (!items?.oneOf || !items.discriminator) return [name, schema];
      const tag = items.discriminator.propertyName;
      const kinds = items.oneOf.map((branch) => (branch as { properties: Record<string, { const: string }> }).properties[tag]!.const);
      const mapping = Object.fromEntries(kinds.map((kind) => [kind, ref(`${kindName(kind)}Step`).$ref]));
      return [
        name,
        {
          ...(schema as JsonSchema),
          items: { ...items, oneOf: kinds.map((kind) => ref(`${kindName(kind)}Step`)), discriminator: { propertyName: tag, mapping } },
        },
      ];
    }),
  );
}

/**
 * Per kind: `<Kind>Options`, and the bodies `<Kind>Request` and `<Kind>BatchRequest` composed of
 * the options and the input(s). The same facts as singleBodySchema/batchBodySchema, named.
 */
function jobSchemas(op: AnyOperation): Record<string, JsonSchema> {
  const name = kindName(op.kind);
  const options = { allOf: [ref(`${name}Options`)] };
  const inputExample = op.multiInput ? { fileIds: [EXAMPLE_IDS.file, EXAMPLE_IDS.logo] } : { fileId: EXAMPLE_IDS.file };
  const schemas: Record<string, JsonSchema> = {
    [`${name}Options`]: {
      type: 'object',
      description: `The options of ${op.kind}.`,
      properties: namedAlternatives(op.options.properties),
      ...(op.options.required?.length ? { required: op.options.required } : {}),
      examples: [op.example],
    },
    [`${name}Request`]: {
      type: 'object',
      description: op.multiInput
        ? `The inputs (\`fileIds\`, or \`fileId\` for one) and the options of ${op.kind}.`
        : `The input and the options of ${op.kind}.`,
      ...options,
      ...(op.multiInput
        ? {
            properties: {
              fileIds: fileIdsSchema(op.multiInput.min, op.multiInput.max, 'The inputs, in order.'),
              fileId: { ...fileIdSchema, description: 'One input.' },
            },
            oneOf: [{ required: ['fileIds'] }, { required: ['fileId'] }],
          }
        : { properties: { fileId: fileIdSchema }, required: ['fileId'] }),
      unevaluatedProperties: false,
      examples: [{ ...inputExample, ...op.example }],
    },
  };
  if (op.step) {
    // As a pipeline step: `kind` and the options but the output's.
    const { format: _format, quality: _quality, ...stepExample } = op.example as Record<string, unknown>;
    schemas[`${name}Step`] = { ...stepSchema(op), examples: [{ kind: op.kind, ...stepExample }] };
  }
  if (op.batch) {
    schemas[`${name}BatchRequest`] = {
      type: 'object',
      description: `The inputs (one task each) and the shared options of ${op.kind}.`,
      ...options,
      properties: { fileIds: fileIdsSchema(1, undefined, "One task per file, in order (at most the plan's batchSize).") },
      required: ['fileIds'],
      unevaluatedProperties: false,
      examples: [{ fileIds: [EXAMPLE_IDS.file, FAILED_TASK_EXAMPLE.input.fileId], ...op.example }],
    };
  }
  return schemas;
}

/** Every named schema of the document. */
export const COMPONENT_SCHEMAS: Record<string, JsonSchema> = {
  ...RESOURCES,
  ...WEBHOOK_SCHEMAS,
  ...DELIVERY_SCHEMAS,
  ...Object.fromEntries(OPERATIONS.flatMap((op) => Object.entries(jobSchemas(op)))),
};

// Request parts ---------------------------------------------------------------------------

export const idParam = (name: string, prefix: string) => ({
  type: 'object',
  required: [name],
  additionalProperties: false,
  properties: { [name]: { type: 'string', maxLength: 100, description: `An id starting ${prefix}_` } },
});

export const idempotencyHeader = {
  type: 'object',
  properties: {
    'idempotency-key': {
      type: 'string',
      minLength: 1,
      maxLength: 255,
      description:
        'A repeat with the same key and body within 24 hours returns the first response and does nothing again; the same key with another body is 409 IDEMPOTENCY_KEY_REUSED.',
    },
  },
} as const;

export { EXAMPLE_IDS };
