// The OpenAPI document: what each response of each operation carries (status, headers, body and
// the exact error codes), and the document itself (/openapi.json, /docs).
//
// A route declares its responses with `apiResponses`/`publicResponses`: its successes and the
// error codes it can answer, spelled from the groups below. Statuses, headers and per-status code
// lists all come from that one declaration and ERROR_STATUS; the test suites validate every
// response they receive against the document, so a code or header the document does not list
// fails a test.
import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { ERROR_STATUS, type ErrorCode } from '../errors.js';
import { COMPONENT_SCHEMAS, EXAMPLE_IDS, ref } from './schemas.js';
import { WEBHOOK_DOCUMENT } from './webhook-schemas.js';
import { VERSION } from '../version.js';

// Error codes ------------------------------------------------------------------------------

/** Codes only the dashboard's own routes (/auth, /dashboard-api) answer: never in this document. */
type DashboardErrorCode =
  | 'NOT_AUTHENTICATED'
  | 'INVALID_CREDENTIALS'
  | 'FORBIDDEN'
  | 'SIGNUP_CLOSED'
  | 'INVITE_INVALID'
  | 'SETUP_TOKEN_INVALID'
  | 'RESET_LINK_INVALID'
  | 'EMAIL_TAKEN'
  | 'SETUP_COMPLETED';
export type ApiErrorCode = Exclude<ErrorCode, DashboardErrorCode>;

/** What each code the API answers means: the document's descriptions and examples. */
const MEANING: Record<ApiErrorCode, string> = {
  VALIDATION_ERROR: 'A field, parameter or header is invalid; `details.fields` names each one.',
  BATCH_TOO_LARGE: "More files than the plan's batchSize.",
  UPLOAD_SIZE_MISMATCH: 'The body is not exactly the `size` bytes the upload was presigned for.',
  WEBHOOK_URL_NOT_ALLOWED:
    "The webhook URL's host is (or resolves to) a loopback, private, link-local, metadata or other non-public address; `details.address` names it.",
  WEBHOOK_LIMIT_EXCEEDED: 'The account has as many webhook endpoints as it may (`details.limit`); delete one first.',
  API_KEY_MISSING: 'No x-api-key header (and no dashboard session).',
  API_KEY_INVALID: 'The API key is unknown or has been revoked.',
  PLAN_NO_API_ACCESS: "The account's plan has no API access (Free reaches the API only through the dashboard).",
  ACCOUNT_DISABLED:
    'The operator has disabled the account: its keys are refused (within a second of the change) until it is enabled again. Its files and tasks are kept; tasks already queued still run.',
  CSRF_TOKEN_INVALID: "Only for the dashboard's own calls on its session cookie: the CSRF proof is missing or wrong.",
  STORAGE_LIMIT_EXCEEDED: "The account's storage is full, or this would take it past the plan's storageBytes.",
  UPLOAD_URL_EXPIRED: 'The upload URL has expired.',
  UPLOAD_SIGNATURE_INVALID: 'The upload URL or its signature was changed.',
  NOT_FOUND: "No such resource of yours (another account's answers the same).",
  METHOD_NOT_ALLOWED: 'The path exists, with other methods (listed in Allow).',
  REQUEST_TIMEOUT: 'The body stalled (BODY_STALL_SECONDS without a byte) or was still arriving after REQUEST_TIMEOUT_SECONDS.',
  IDEMPOTENCY_KEY_REUSED: 'This Idempotency-Key was used with another request within 24 hours.',
  INPUT_NOT_SUPPORTED:
    'This kind does not take that file (e.g. a presentation given to resize). 409, as the API contract fixes it and clients ' +
    'branch on it: the file and the kind do not go together; the request itself is well-formed.',
  TASK_NOT_CANCELABLE: 'The task has already finished.',
  BATCH_NOT_FINISHED: 'A task of the batch is still queued or processing.',
  FILE_IN_USE: 'An unfinished task reads the file: cancel it first.',
  UPLOAD_NOT_RECEIVED: 'The bytes have not been PUT yet.',
  UPLOAD_ALREADY_CONFIRMED: 'The upload was confirmed already.',
  FILE_EXPIRED: 'The file has expired and was deleted.',
  UPLOAD_EXPIRED: 'The upload expired before it was confirmed.',
  FILE_TOO_LARGE: "The file is larger than the plan's maxFileBytes.",
  PAYLOAD_TOO_LARGE: 'The JSON body is larger than 1 MiB.',
  UNSUPPORTED_MEDIA_TYPE: 'Not a type this service reads (an upload), or a body that is not JSON (a JSON endpoint).',
  PREVIEW_UNAVAILABLE: "No preview for this file: a presentation or ZIP, an image past the plan's pixel limits, or one that cannot be decoded.",
  INFO_UNAVAILABLE:
    "No info for this file: a document (PDF, presentation, ZIP), an image past the plan's pixel limits (`details.reason` IMAGE_TOO_LARGE), or one that cannot be decoded.",
  RANGE_NOT_SATISFIABLE: 'The Range starts past the end of the file (Content-Range says its size).',
  RATE_LIMITED: "More requests this second than the plan's requestsPerSecond; `details.resetsAt` and Retry-After say when to retry.",
  MONTHLY_QUOTA_EXCEEDED: "The plan's monthlyTasks are used up until `details.resetsAt`.",
  DAILY_BATCH_QUOTA_EXCEEDED: "The plan's dailyBatchFiles are used up until `details.resetsAt`.",
  TOO_MANY_QUEUED_TASKS: "As many tasks are queued or running as the plan's maxQueuedTasks.",
  INTERNAL_ERROR: 'A fault of the service; quote the request id.',
  SERVICE_UNAVAILABLE: 'Too busy right now; retry after Retry-After seconds.',
  INSUFFICIENT_STORAGE: "The service's own disk, database or object store is full; nothing was kept.",
  SIGNATURE_INVALID:
    "The delivery URL's signature is wrong or missing, its key is unknown or deleted, or `_` was used with anything but one public preset.",
  ORIGIN_LIMIT_EXCEEDED: "The account has as many origins as the plan's `origins` allows (`details.limit`); delete one first.",
  RENDER_QUOTA_EXCEEDED: "The plan's monthlyRenders (cache misses) are used up until `details.resetsAt`; stored renders are still served.",
  IMAGE_TOO_LARGE: "The source (from its header, before decoding) or the render passes the plan's maxPixels, maxFrames or maxTotalPixels.",
  ORIGIN_FAILED:
    'The origin could not be fetched: a redirect, an error answer, a connection failure, a non-public address, no complete answer within ORIGIN_TIMEOUT_SECONDS, or a body larger than maxFileBytes.',
  RENDER_BUSY: 'Every render slot of this process is taken and none came free within RENDER_QUEUE_SECONDS; retry after Retry-After seconds.',
  RENDER_TIMEOUT: 'The render took longer than RENDER_TIMEOUT_SECONDS and was abandoned (nothing stored, nothing charged).',
};

/** Every /api operation: authentication, the rate limit, and faults of the service itself. */
export const API_READ: readonly ApiErrorCode[] = [
  'API_KEY_MISSING',
  'API_KEY_INVALID',
  'PLAN_NO_API_ACCESS',
  'ACCOUNT_DISABLED',
  'RATE_LIMITED',
  'INTERNAL_ERROR',
  'INSUFFICIENT_STORAGE',
];
/** A state-changing /api operation: a dashboard session must also prove it comes from the dashboard. */
export const API_WRITE: readonly ApiErrorCode[] = [...API_READ, 'CSRF_TOKEN_INVALID'];
/** An operation with parameters, a body or headers the schema checks. */
export const VALIDATED: readonly ApiErrorCode[] = ['VALIDATION_ERROR'];
/** A JSON body: malformed, too large, of another type, or too slow to arrive. */
export const JSON_BODY: readonly ApiErrorCode[] = ['VALIDATION_ERROR', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', 'REQUEST_TIMEOUT'];
/** A POST that takes Idempotency-Key. */
export const IDEMPOTENT: readonly ApiErrorCode[] = ['VALIDATION_ERROR', 'IDEMPOTENCY_KEY_REUSED'];

// Headers ----------------------------------------------------------------------------------

const integer = { type: 'integer', minimum: 0 };
const header = (description: string, schema: object, required = true) => ({ description, required, schema });
/** Every response header the document names, as components: a response lists the ones it carries. */
const HEADERS = {
  'X-Request-Id': header("This request's id; an error's `requestId` repeats it. On every response.", {
    type: 'string',
    pattern: '^req_[A-Za-z0-9_-]+$',
  }),
  // Absent only where the key is not known yet (401, 403 PLAN_NO_API_ACCESS or ACCOUNT_DISABLED, a request refused before routing).
  'RateLimit-Limit': header("Requests allowed per second (the plan's requestsPerSecond). On every authenticated response.", integer, false),
  'RateLimit-Remaining': header('Requests left in the current one-second window. On every authenticated response.', integer, false),
  'RateLimit-Reset': header('Seconds until the window resets. On every authenticated response.', integer, false),
  'Retry-After': header('Seconds to wait before trying again (RATE_LIMITED, SERVICE_UNAVAILABLE, RENDER_BUSY).', integer, false),
  Location: header('Where to follow what was created.', { type: 'string', format: 'uri-reference' }),
  ETag: header("The bytes' strong validator: send it as If-None-Match.", { type: 'string', pattern: '^"[^"]+"$' }),
  'Content-Disposition': header('How a browser should treat the bytes, with a safe file name (and `filename*` for the UTF-8 one).', {
    type: 'string',
  }),
  'Content-Range': header('The bytes sent (`bytes first-last/size`), or the size on a 416 (`bytes */size`).', {
    type: 'string',
    pattern: '^bytes (\\d+-\\d+|\\*)/\\d+$',
  }),
  'Content-Length': header('Bytes in this response.', integer),
  'Accept-Ranges': header('Byte ranges are served.', { type: 'string', enum: ['bytes'] }),
  Vary: header('`Accept` when the format was chosen from it (`f:auto`).', { type: 'string' }, false),
  'Imgapi-Cache': header('`hit`: served from the stored render; `miss`: rendered for this request (and stored).', {
    type: 'string',
    enum: ['hit', 'miss'],
  }),
};
/**
 * Headers documented where they matter, not as components: other routes send them too (a
 * download's Cache-Control, nosniff), and a component header is one the contract tests expect
 * to be documented on every response that carries it.
 */
const LOCAL_HEADERS = {
  'Cache-Control': {
    type: 'string',
    description: 'A render: `public, max-age=31536000, immutable` (RENDER_CACHE_CONTROL changes it); an error of a delivery URL: `no-store`.',
  },
  'X-Content-Type-Options': { type: 'string', enum: ['nosniff'], description: '`nosniff`: the bytes are only what Content-Type says.' },
};
export type HeaderName = keyof typeof HEADERS | keyof typeof LOCAL_HEADERS;

const HEADER_REF = '#/components/headers/';
const EXAMPLE_REF = '#/components/examples/';
/** Response headers in a route's schema: @fastify/swagger wraps each, the finishing pass unwraps the reference. */
const headers = (names: readonly HeaderName[]) =>
  Object.fromEntries(
    [...new Set(names)].map((name) => [
      name,
      name in LOCAL_HEADERS ? LOCAL_HEADERS[name as keyof typeof LOCAL_HEADERS] : { $ref: `${HEADER_REF}${name}` },
    ]),
  );

const RATE_LIMIT: readonly HeaderName[] = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'];

// Responses --------------------------------------------------------------------------------

export interface Success {
  description: string;
  /** Media type → its schema and an example (none for raw bytes). */
  content?: Record<string, { schema: object; example?: unknown }>;
  headers?: readonly HeaderName[];
}

/** `{success: true, data: <schema>}`, the success envelope, with an example of `data` (by default the schema's own). */
export function jsonData(
  description: string,
  schemaName: string,
  example: unknown = (COMPONENT_SCHEMAS[schemaName]?.examples as unknown[] | undefined)?.[0],
  extra: Omit<Success, 'description' | 'content'> = {},
): Success {
  return {
    description,
    content: {
      'application/json': {
        schema: {
          type: 'object',
          required: ['success', 'data'],
          additionalProperties: false,
          properties: { success: { type: 'boolean', const: true }, data: ref(schemaName) },
        },
        example: { success: true, data: example },
      },
    },
    ...extra,
  };
}

/** Raw bytes of the given media types. */
export function bytes(description: string, mediaTypes: readonly string[], extra: Omit<Success, 'description' | 'content'> = {}): Success {
  const schema = { type: 'string', format: 'binary' };
  return { description, content: Object.fromEntries(mediaTypes.map((type) => [type, { schema }])), ...extra };
}

export const noContent = (description: string, extra: Omit<Success, 'description' | 'content'> = {}): Success => ({ description, ...extra });

function exampleError(code: ApiErrorCode) {
  const details: Record<string, unknown> | undefined =
    code === 'VALIDATION_ERROR'
      ? { fields: [{ field: 'quality', message: 'must be <= 100' }] }
      : code === 'RATE_LIMITED'
        ? { limit: 20, used: 20, resetsAt: '2026-05-04T09:30:01.000Z', retryAfterSeconds: 1 }
        : code === 'MONTHLY_QUOTA_EXCEEDED'
          ? { limit: 10_000, used: 10_000, resetsAt: '2026-06-01T00:00:00.000Z' }
          : undefined;
  return { success: false, error: { code, message: MEANING[code], ...(details ? { details } : {}), requestId: EXAMPLE_IDS.request } };
}

/**
 * Narrows ErrorResponse's `code` to `codes`. The other properties are named again (constraining
 * nothing) so that each branch of the allOf accounts for every property it sees.
 */
const codeEnum = (codes: readonly string[]) => ({
  type: 'object',
  properties: {
    success: {},
    error: { type: 'object', properties: { code: { type: 'string', enum: codes }, message: {}, details: {}, requestId: {} } },
  },
});

/**
 * What any request can be answered before it reaches an operation: Node's HTTP parser refuses
 * malformed HTTP (400) and headers past its limit (431), and a body that stalls times out (408).
 */
const MALFORMED_REQUEST = {
  description: 'The HTTP request itself was malformed (400), its headers too large (431), or its body too slow (408).',
  headers: { 'X-Request-Id': { $ref: `${HEADER_REF}X-Request-Id` } },
  content: {
    'application/json': {
      schema: {
        allOf: [ref('ErrorResponse'), codeEnum(['VALIDATION_ERROR', 'REQUEST_TIMEOUT'])],
      },
      examples: { VALIDATION_ERROR: { $ref: `${EXAMPLE_REF}VALIDATION_ERROR` }, REQUEST_TIMEOUT: { $ref: `${EXAMPLE_REF}REQUEST_TIMEOUT` } },
    },
  },
};

/** One response per status the codes map to, each naming exactly its codes. */
function errorResponses(codes: readonly ApiErrorCode[], authenticated: boolean, extraHeaders: readonly HeaderName[] = []) {
  const byStatus = new Map<number, ApiErrorCode[]>();
  for (const code of new Set(codes)) {
    const status = ERROR_STATUS[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return Object.fromEntries(
    [...byStatus.entries()]
      .sort(([a], [b]) => a - b)
      .map(([status, list]) => {
        // Rate-limit headers come once the key is known: never on a 401.
        const names: HeaderName[] = ['X-Request-Id', ...(authenticated && status !== 401 ? RATE_LIMIT : []), ...extraHeaders];
        if (list.includes('RATE_LIMITED') || list.includes('SERVICE_UNAVAILABLE') || list.includes('RENDER_BUSY')) names.push('Retry-After');
        if (list.includes('RANGE_NOT_SATISFIABLE')) names.push('Content-Range');
        return [
          status,
          {
            description: list.map((code) => `\`${code}\`: ${MEANING[code]}`).join('\n\n'),
            headers: headers(names),
            content: {
              'application/json': {
                schema: {
                  allOf: [ref('ErrorResponse'), codeEnum(list)],
                },
                examples: Object.fromEntries(list.map((code) => [code, { $ref: `${EXAMPLE_REF}${code}` }])),
              },
            },
          },
        ];
      }),
  );
}

function successResponses(successes: Record<number, Success>, authenticated: boolean) {
  return Object.fromEntries(
    Object.entries(successes).map(([status, { description, content, headers: names = [] }]) => [
      status,
      {
        description,
        headers: headers(['X-Request-Id', ...(authenticated ? RATE_LIMIT : []), ...names]),
        // `type: 'null'` tells @fastify/swagger there is no body.
        ...(content ? { content } : { type: 'null' }),
      },
    ]),
  );
}

/**
 * An /api operation's responses: authenticated by API key (or the dashboard's session) and
 * rate-limited; each can answer VALIDATION_ERROR, if only for a query parameter it does not take.
 */
export function apiResponses(successes: Record<number, Success>, codes: readonly ApiErrorCode[]) {
  return { ...successResponses(successes, true), ...errorResponses([...codes, ...VALIDATED], true) };
}

/** An operation outside /api: no key, no rate limit; `errorHeaders`: headers every error of it carries. */
export function publicResponses(successes: Record<number, Success>, codes: readonly ApiErrorCode[] = [], errorHeaders: readonly HeaderName[] = []) {
  return { ...successResponses(successes, false), ...errorResponses([...codes, 'INTERNAL_ERROR'], false, errorHeaders) };
}

/** Either header: `x-api-key`, or `Authorization: Bearer` (both present must name the same key). */
export const API_SECURITY: { [scheme: string]: string[] }[] = [{ apiKey: [] }, { bearer: [] }];
/** Outside /api: no key (the upload receiver is authorised by its URL's signature). */
export const NO_SECURITY = [];

/**
 * Route config documenting parts Fastify does not validate itself (a streamed body, a signed
 * query), or documenting a body as a named schema where Fastify validates a flat copy of it.
 */
export function documentAs(parts: { body?: object; querystring?: object }) {
  return { swaggerTransform: ({ schema, url }: { schema: object; url: string }) => ({ schema: { ...schema, ...parts }, url }) };
}

// The document -----------------------------------------------------------------------------

const DESCRIPTION = `Upload images and presentations, start asynchronous jobs, poll the task, download the output.

[← Back to the dashboard](/) — create an API key there (Keys), then **Authorize** here with it to try any operation from this page.

Every \`/api/*\` request carries \`x-api-key\` (the dashboard's own calls use its session cookie instead, and send its CSRF token in \`x-csrf-token\` on state-changing ones). Successes answer \`{"success": true, "data": …}\`; failures answer
\`{"success": false, "error": {"code", "message", "details?", "requestId"}}\` and every response carries \`x-request-id\`.
Each operation lists, per status, exactly the error codes it can answer.
JSON bodies are taken exactly as sent: unknown fields are rejected with 400 VALIDATION_ERROR naming each field.
Every POST accepts \`Idempotency-Key\`.

When several errors apply, the first in this order wins: authentication → rate limit → validation → not found / expired →
conflict (an \`Idempotency-Key\` reuse included) → storage → quota. Authentication comes first for every path under \`/api/\`,
known or not: an unknown path is 401 without a key and 404 \`NOT_FOUND\` with one; a known path with another method is
405 \`METHOD_NOT_ALLOWED\` (with \`Allow\`). Outside \`/api/\` the same holds without the key: a delivery URL
(\`/r/…\`), \`/healthz\` or \`/metrics\` asked with POST is 405 with \`Allow: GET, HEAD\`, an unknown path 404.

## Decisions where the contract is silent

- **Idempotency** stores successful responses only: a refused request (a validation error, a quota
  error) may be retried with the same key once its cause is fixed. A concurrent repeat waits for the
  first and replays it.
- **Limits known when queueing.** When the stored header already shows that the input, or the output
  the options decide (resize, upscale, crop, rotate), passes the plan's pixel, frame or total-pixel
  limit (\`maxTotalPixels\`: frames × canvas, for the input and for an animated output) or the 16,384 px
  side cap, the task is created already \`failed\` with \`IMAGE_TOO_LARGE\` (the 202 says so; it is charged nothing — neither the monthly nor the batch quota).
  Otherwise the worker checks the same limits from the whole file's header before decoding a pixel.
- **Deleting a file an unfinished task reads** is refused with 409 \`FILE_IN_USE\`; cancel the task first.
- **Crop rectangles** outside the image (by its stored header) are 400 \`VALIDATION_ERROR\` naming the field.
- **Uploads** report \`width\`/\`height\` as displayed (EXIF orientation applied) and \`pages\` for
  animations (an animated AVIF's frames from its movie header) and multi-page files. PDF, JPEG 2000
  extensions without JP2 compatibility, lossless JPEG other than process 14, and an AVIF image sequence
  whose header is damaged or whose frames lie past the end of the file are 415 \`UNSUPPORTED_MEDIA_TYPE\`.
- **Rate limits** count fixed one-second windows per API key (or dashboard session).
- **Output encoders**: JPEG uses mozjpeg; \`compress\` writes PNG as a quantised palette unless
  \`lossless\`; GIF has no quality, so \`quality\` scales its palette size; \`lossless\` with a JPEG output
  is a 400 naming \`lossless\`.
- **Animations** (GIF, WebP, animated AVIF) keep their frames, timing and loop count in GIF, WebP and
  AVIF outputs (an AV1 image sequence; the GIF and WebP encoders may merge identical consecutive frames,
  adding their delays; \`result.pages\` is the frames the output holds); other outputs take the first
  frame. Animated AVIF is decoded and written by ffmpeg: where it is not installed, an animated AVIF
  input fails \`CONVERSION_FAILED\` and an AVIF output is the first frame.
- **Delivery URLs** (\`/r/…\`): no per-key rate limit (a hit is a cached key, an HMAC, one indexed read and a
  stream; misses are bounded by \`RENDER_CONCURRENCY\` and \`monthlyRenders\`); a failed render is not
  counted; a source or render past the plan's pixel limits is 422 \`IMAGE_TOO_LARGE\` (the job API's task
  code, as an answer); a preset or origin name in use
  is 400 naming \`name\`; an unknown preset in \`p\` is 400 naming \`p\`; a query string is ignored; when an
  origin cannot be reached to revalidate a kept object, the kept copy is served; the renders of an
  account are shared by its signing keys (deleting a key stops its URLs, not the others').`;

const TAGS = [
  { name: 'Files', description: 'Upload, download, preview, list and delete files' },
  { name: 'Jobs', description: 'Start one task' },
  { name: 'Batches', description: 'One task per file, with shared options' },
  { name: 'Tasks', description: 'Follow and cancel tasks' },
  { name: 'Account', description: 'Plan, limits and usage' },
  { name: 'Webhooks', description: 'Be told when tasks and batches end, instead of polling' },
  {
    name: 'Delivery',
    description: 'Signed URLs that render an image on the first request and serve the stored render after: signing keys, presets, origins',
  },
  { name: 'Operations', description: 'Health, readiness and metrics' },
];

type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: Record<string, unknown>;
  [key: string]: unknown;
};
type Operation = {
  operationId?: string;
  responses: Record<string, { $ref?: string; content?: unknown; headers?: Record<string, { schema?: { $ref?: unknown }; $ref?: string }> }>;
  [key: string]: unknown;
};

/**
 * The finishing pass over what @fastify/swagger built: response headers become references to
 * their components, and a GET route that also answers HEAD gets a HEAD operation of its own
 * (its id, no bodies).
 */
function finish({ openapiObject }: { openapiObject: Partial<Document> }) {
  const document = structuredClone(openapiObject) as Document;
  const examples = new Set<ApiErrorCode>();
  for (const item of Object.values(document.paths)) {
    if (item.head && item.get && item.head.operationId === item.get.operationId) {
      const responses = Object.fromEntries(Object.entries(item.get.responses).map(([status, { content: _body, ...response }]) => [status, response]));
      item.head = { ...item.get, operationId: `${item.get.operationId}Head`, summary: `${String(item.get.summary)} (headers only)`, responses };
    }
    for (const operation of Object.values(item)) {
      operation.responses['4XX'] ??= { $ref: '#/components/responses/MalformedRequest' };
      for (const response of Object.values(operation.responses)) {
        for (const [name, wrapped] of Object.entries(response.headers ?? {})) {
          const target = wrapped.schema?.$ref;
          if (typeof target === 'string' && target.startsWith(HEADER_REF)) response.headers![name] = { $ref: target };
        }
      }
    }
  }
  // The error examples of the codes the document names (each once, referenced by code).
  const collect = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(collect);
    else if (value && typeof value === 'object') {
      for (const [key, inner] of Object.entries(value)) {
        if (key === '$ref' && typeof inner === 'string' && inner.startsWith(EXAMPLE_REF))
          examples.add(inner.slice(EXAMPLE_REF.length) as ApiErrorCode);
        else collect(inner);
      }
    }
  };
  collect(document);
  document.components.examples = Object.fromEntries([...examples].sort().map((code) => [code, { summary: code, value: exampleError(code) }]));
  // What the service POSTs to webhook endpoints (OpenAPI 3.1's `webhooks`).
  document.webhooks = structuredClone(WEBHOOK_DOCUMENT);
  return document;
}

/** /openapi.json, and /docs (Swagger UI) on a relative server URL, so it works from any host. */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'imgapi',
        version: VERSION,
        description: DESCRIPTION,
        license: { name: 'Proprietary (UNLICENSED)', identifier: 'LicenseRef-UNLICENSED' },
      },
      // Relative: the document and /docs work on whatever address the service was reached at.
      servers: [{ url: '/', description: 'This service, wherever it is reached' }],
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'An API key from the dashboard (Keys).' },
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description:
              'The same key as `Authorization: Bearer <key>`. Sent with x-api-key, both must name the same key (else 401 API_KEY_INVALID); ' +
              "either wins over the dashboard's session cookie.",
          },
        },
        schemas: COMPONENT_SCHEMAS,
        headers: HEADERS,
        // Our objects are plain JSON; openapi-types' unions would need a cast per literal.
        responses: { MalformedRequest: MALFORMED_REQUEST as never },
      },
      tags: TAGS,
    },
    transformObject: finish as never,
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    // The key typed into Authorize stays in the page (not persisted in the browser's storage).
    uiConfig: { deepLinking: true, displayOperationId: true },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  // Built once at start: a route whose documentation cannot be built fails the boot, not a reader.
  app.addHook('onReady', async () => {
    app.swagger();
  });
}
