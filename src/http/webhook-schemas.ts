// The OpenAPI schemas of webhook endpoints, their deliveries and the events they carry (merged
// into COMPONENT_SCHEMAS by schemas.ts). The objects are built by src/webhooks/store.ts.
import { MAX_WEBHOOKS_PER_ACCOUNT, TEST_EVENT, WEBHOOK_EVENTS } from '../webhooks/store.js';

type JsonSchema = Record<string, unknown>;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const id = (prefix: string, description: string) => ({ type: 'string', pattern: `^${prefix}_[A-Za-z0-9_-]+$`, description }) as const;
const timestamp = (description: string) => ({ type: 'string', format: 'date-time', description }) as const;

const EXAMPLE_WEBHOOK = {
  webhookId: 'whk_4Tn8Qz1Lp6Vb3Xc9Rm2Kd7Hs',
  url: 'https://hooks.example.net/imgapi',
  events: [...WEBHOOK_EVENTS],
  description: 'Production receiver',
  createdAt: '2026-05-04T09:30:00.000Z',
};
const EXAMPLE_DELIVERY = {
  deliveryId: 'dlv_7Kq2Wm9Xr4Tb1Zn6Pc3Lv8Hd',
  eventId: 'evt_2Hs5Kd8Lp1Qz4Tn7Vb0Xc3Rm',
  event: 'task.completed',
  status: 'pending',
  attempts: 2,
  statusCode: 500,
  durationMs: 84,
  error: 'answered 500',
  nextAttemptAt: '2026-05-04T09:31:10.000Z',
  createdAt: '2026-05-04T09:30:00.000Z',
  attemptLog: [
    { at: '2026-05-04T09:30:00.120Z', statusCode: 500, durationMs: 91, error: 'answered 500', responseBody: 'upstream down' },
    { at: '2026-05-04T09:30:10.130Z', statusCode: 500, durationMs: 84, error: 'answered 500', responseBody: 'upstream down' },
  ],
};

const eventsSchema = {
  type: 'array',
  items: { type: 'string', enum: [...WEBHOOK_EVENTS] },
  minItems: 1,
  uniqueItems: true,
  description: 'The events sent to the endpoint.',
} as const;

const webhookProperties = {
  webhookId: id('whk', 'The endpoint.'),
  url: { type: 'string', format: 'uri', description: 'Where events are POSTed.' },
  events: eventsSchema,
  description: { type: 'string', description: 'Your note.' },
  createdAt: timestamp('When it was created.'),
} as const;

export const WEBHOOK_SCHEMAS: Record<string, JsonSchema> = {
  CreateWebhookRequest: {
    type: 'object',
    required: ['url'],
    additionalProperties: false,
    properties: {
      url: {
        type: 'string',
        minLength: 1,
        maxLength: 2048,
        description:
          'An http or https URL on a public address. Loopback, private, link-local and metadata addresses are refused (400 ' +
          'WEBHOOK_URL_NOT_ALLOWED) here and again at each delivery, on the address connected to, unless the operator sets ' +
          'WEBHOOK_ALLOW_PRIVATE_NETWORKS=1.',
      },
      events: { ...eventsSchema, description: 'The events to send (default: all of them).' },
      description: { type: 'string', maxLength: 200, description: 'A note for you (shown in lists).' },
    },
    examples: [{ url: 'https://hooks.example.net/imgapi', events: ['task.completed', 'task.failed'], description: 'Production receiver' }],
  },

  Webhook: {
    type: 'object',
    required: ['webhookId', 'url', 'events', 'createdAt'],
    additionalProperties: false,
    properties: webhookProperties,
    examples: [EXAMPLE_WEBHOOK],
  },

  CreatedWebhook: {
    type: 'object',
    required: ['webhookId', 'url', 'events', 'secret', 'createdAt'],
    additionalProperties: false,
    properties: {
      ...webhookProperties,
      secret: {
        type: 'string',
        pattern: '^whsec_[A-Za-z0-9_-]+$',
        description:
          'Signs every delivery (HMAC-SHA256, see the Webhooks section). Shown this once: keep it. It is never returned again; to replace it, ' +
          'create a new endpoint and delete this one.',
      },
    },
    examples: [{ ...EXAMPLE_WEBHOOK, secret: 'whsec_Jd83kLq0Zp5Xv2Mn7Tb4Rc9Wy1Hs6Gf8Ke3Ua0Pi5Q' }],
  },

  WebhookList: {
    type: 'object',
    required: ['webhooks', 'limit'],
    additionalProperties: false,
    properties: {
      webhooks: { type: 'array', items: ref('Webhook'), description: 'Newest first.' },
      limit: { type: 'integer', description: `How many endpoints an account may have (${MAX_WEBHOOKS_PER_ACCOUNT}).` },
    },
    examples: [{ webhooks: [EXAMPLE_WEBHOOK], limit: MAX_WEBHOOKS_PER_ACCOUNT }],
  },

  WebhookDelivery: {
    type: 'object',
    description: 'One event for one endpoint, and its attempts.',
    required: ['deliveryId', 'eventId', 'event', 'status', 'attempts', 'createdAt', 'attemptLog'],
    additionalProperties: false,
    properties: {
      deliveryId: id('dlv', 'The delivery (resend it with POST …/deliveries/{deliveryId}/resend).'),
      eventId: id('evt', "The event (the body's `id` and the Imgapi-Event-Id header): the same in every attempt and every resend."),
      event: { type: 'string', enum: [...WEBHOOK_EVENTS, TEST_EVENT] },
      status: {
        type: 'string',
        enum: ['pending', 'delivered', 'failed'],
        description: '`pending`: waiting for its next attempt or being sent; `delivered`: answered 2xx; `failed`: not delivered in 24 hours.',
      },
      attempts: { type: 'integer', minimum: 0, description: 'Attempts made.' },
      statusCode: { type: 'integer', description: "The last attempt's HTTP status (absent when it got no answer)." },
      durationMs: { type: 'integer', minimum: 0, description: "The last attempt's time, in milliseconds." },
      error: { type: 'string', description: 'Why the last attempt failed.' },
      nextAttemptAt: timestamp('When a pending delivery is tried next.'),
      createdAt: timestamp('When the event was queued for the endpoint.'),
      finishedAt: timestamp('When it was delivered or given up.'),
      attemptLog: {
        type: 'array',
        description: 'Every attempt, oldest first.',
        items: {
          type: 'object',
          required: ['at', 'durationMs'],
          additionalProperties: false,
          properties: {
            at: timestamp('When the attempt ended.'),
            statusCode: { type: 'integer', description: 'The HTTP status answered.' },
            durationMs: { type: 'integer', minimum: 0 },
            error: { type: 'string', description: 'Why it failed (a status, a timeout, a refused address, a redirect not followed…).' },
            responseBody: { type: 'string', description: "The start of the receiver's answer (the first 4 KiB are read, 1 KiB is kept)." },
          },
        },
      },
    },
    examples: [EXAMPLE_DELIVERY],
  },

  WebhookDeliveryList: {
    type: 'object',
    required: ['deliveries', 'nextCursor'],
    additionalProperties: false,
    properties: {
      deliveries: { type: 'array', items: ref('WebhookDelivery'), description: 'Newest first; kept 30 days.' },
      nextCursor: { type: ['string', 'null'], description: 'Pass as `cursor` for the next page; null on the last page.' },
    },
    examples: [{ deliveries: [EXAMPLE_DELIVERY], nextCursor: null }],
  },

  WebhookEvent: {
    type: 'object',
    description:
      'The JSON body POSTed to an endpoint, with headers `Imgapi-Event-Id` (its `id`) and `Imgapi-Signature: t=<unix seconds>,v1=<hex ' +
      'HMAC-SHA256(secret, "<t>.<raw body>")>`. `data` holds the task (`task.*`) or the batch (`batch.completed`) exactly as ' +
      'GET /api/tasks/{taskId} and GET /api/batches/{batchId} show them; `webhook.test` carries `{webhook}`.',
    required: ['id', 'type', 'createdAt', 'data'],
    additionalProperties: false,
    properties: {
      id: id('evt', 'Unique per event: dedupe on it (delivery is at least once).'),
      type: { type: 'string', enum: [...WEBHOOK_EVENTS, TEST_EVENT] },
      createdAt: timestamp('When the event happened.'),
      data: {
        oneOf: [
          { type: 'object', required: ['task'], additionalProperties: false, properties: { task: ref('Task') } },
          { type: 'object', required: ['batch'], additionalProperties: false, properties: { batch: ref('Batch') } },
          { type: 'object', required: ['webhook'], additionalProperties: false, properties: { webhook: ref('Webhook') } },
        ],
      },
    },
    examples: [{ id: 'evt_2Hs5Kd8Lp1Qz4Tn7Vb0Xc3Rm', type: TEST_EVENT, createdAt: '2026-05-04T09:30:00.000Z', data: { webhook: EXAMPLE_WEBHOOK } }],
  },
};

/** The document's `webhooks` (OpenAPI 3.1): what this service POSTs to an endpoint. */
export const WEBHOOK_DOCUMENT = {
  event: {
    post: {
      operationId: 'webhookEvent',
      tags: ['Webhooks'],
      summary: 'An event POSTed to your endpoint',
      description:
        'Verify `Imgapi-Signature` (`t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`) on the raw body before ' +
        "parsing it (the SDK's `verifyWebhook` does, in constant time, refusing timestamps more than 5 minutes off), then answer " +
        '2xx within 10 s. Anything else is retried (about 10 s, 1 min, 5 min, 30 min, 2 h, then every 4 hours, for 24 hours) with ' +
        'the same event id: dedupe on it. Redirects are not followed.',
      security: [],
      parameters: [
        {
          name: 'Imgapi-Event-Id',
          in: 'header',
          required: true,
          description: "The event's `id`.",
          schema: { type: 'string', pattern: '^evt_[A-Za-z0-9_-]+$' },
        },
        {
          name: 'Imgapi-Signature',
          in: 'header',
          required: true,
          description: '`t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`',
          schema: { type: 'string', pattern: '^t=\\d+,v1=[0-9a-f]{64}$' },
        },
      ],
      requestBody: { required: true, content: { 'application/json': { schema: ref('WebhookEvent') } } },
      responses: {
        '2XX': { description: 'Delivered: no further attempt.' },
        default: { description: 'Not delivered: tried again later, for 24 hours.' },
      },
    },
  },
};
