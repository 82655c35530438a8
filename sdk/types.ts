// The SDK's types, all derived from the generated `paths` (sdk/openapi.ts): a kind, an option or
// a field exists here exactly when the server's OpenAPI document says so.
import type { operations, paths } from './openapi.js';

type JsonContent<T> = T extends { content: { 'application/json': infer Body } } ? Body : never;
type RequestJson<Operation> = Operation extends { requestBody?: infer Body } ? JsonContent<NonNullable<Body>> : never;
/** The `data` of an operation's success response with `status`. */
type ResponseData<Operation, Status extends number> = Operation extends { responses: { [S in Status]: infer Response } }
  ? JsonContent<Response> extends { data: infer Data }
    ? Data
    : never
  : never;
/** Omit that keeps a union a union (a kind whose body is "fileIds or fileId" stays two shapes). */
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

type ProcessPath = Extract<keyof paths, `/api/process/${string}`>;

/** Every kind: `POST /api/process/{kind}` exists. */
export type Kind = ProcessPath extends infer P
  ? P extends `/api/process/batch/${string}`
    ? never
    : P extends `/api/process/${infer K}`
      ? K
      : never
  : never;
/** The kinds with a batch route, `POST /api/process/batch/{kind}`. */
export type BatchKind = ProcessPath extends infer P ? (P extends `/api/process/batch/${infer K}` ? K : never) : never;

/** The body of `POST /api/process/{kind}`: the input (`fileId`, or `fileIds`) and the kind's options. */
export type JobRequest<K extends Kind> = RequestJson<paths[`/api/process/${K}`]['post']>;
/** A kind's options alone, without its input. */
export type JobOptions<K extends Kind> = DistributiveOmit<JobRequest<K>, 'fileId' | 'fileIds'>;
/** The shared options of `POST /api/process/batch/{kind}`, without `fileIds`. */
export type BatchOptions<K extends BatchKind> = DistributiveOmit<RequestJson<paths[`/api/process/batch/${K}`]['post']>, 'fileIds'>;

/**
 * One step of a pipeline: `{kind, ...that kind's options}` for each transform the server's
 * pipeline takes (resize, crop, rotate, flip, watermark, upscale, adjust, trim, extend), without `format`/`quality`.
 */
export type PipelineStep = JobOptions<'pipeline'>['steps'][number];
/** What a pipeline's one encode takes at its end: `format`, `quality`, `targetSize`, `lossless`, `keepMetadata`. */
export type PipelineOutput = Omit<JobOptions<'pipeline'>, 'steps'>;

/** A stored file: an upload or a task's output. */
export type ApiFile = ResponseData<paths['/api/upload']['post'], 201>;
/** An image's info: size, EXIF, GPS, palette, dominant colour, BlurHash, ThumbHash and perceptual hash. */
export type FileInfo = ResponseData<paths['/api/files/{fileId}/info']['get'], 200>;
export type Task = ResponseData<paths['/api/tasks/{taskId}']['get'], 200>;
export type TaskStatus = Task['status'];
/** The 202 of a job: the task just queued (or already `failed` when a limit is known to be passed). */
export type QueuedTask = ResponseData<paths['/api/process/convert']['post'], 202>;
/** The 202 of a batch: one task per file, in order. */
export type QueuedBatch = ResponseData<paths['/api/process/batch/convert']['post'], 202>;
export type Batch = ResponseData<paths['/api/batches/{batchId}']['get'], 200>;
export type Account = ResponseData<paths['/api/account']['get'], 200>;
export type PresignedUpload = ResponseData<paths['/api/upload/presign']['post'], 201>;
/** `POST /api/webhooks`: `url`, and optionally `events` and `description`. */
export type CreateWebhookRequest = RequestJson<paths['/api/webhooks']['post']>;
/** A new endpoint with its `secret`, shown this once. */
export type CreatedWebhook = ResponseData<paths['/api/webhooks']['post'], 201>;
export type WebhookList = ResponseData<paths['/api/webhooks']['get'], 200>;
export type Webhook = WebhookList['webhooks'][number];
export type WebhookDeliveryList = ResponseData<paths['/api/webhooks/{webhookId}/deliveries']['get'], 200>;
/** One event for one endpoint, with its attempts. */
export type WebhookDelivery = WebhookDeliveryList['deliveries'][number];

/** The statuses a task ends in. */
export const FINISHED_STATUSES: readonly TaskStatus[] = ['completed', 'failed', 'canceled'];
export const isFinished = (task: { status: TaskStatus }): boolean => FINISHED_STATUSES.includes(task.status);

/** The codes of an error response: its `error.code`. */
type ErrorCodeOf<Response> = Response extends { content: { 'application/json': { error?: { code?: infer Code } } } }
  ? Exclude<Code, undefined>
  : never;
type OperationErrorCode<Operation> = Operation extends { responses: infer Responses }
  ? { [S in keyof Responses]: ErrorCodeOf<Responses[S]> }[keyof Responses]
  : never;
/** Every code an API operation can answer (each operation's list is in its OpenAPI responses). */
export type ApiErrorCode = { [K in keyof operations]: OperationErrorCode<operations[K]> }[keyof operations];
/** Every code a failed task can carry. */
export type TaskErrorCode = NonNullable<Task['error']>['code'];
