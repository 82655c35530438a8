// Webhook endpoints: create (the secret shown once), list, read, delete; their deliveries, a test
// event, and a resend. Events are queued where tasks end (src/tasks/ended.ts) and sent by the
// workers (src/worker/webhooks.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../services.js';
import type { Tx } from '../../db/database.js';
import { withIdempotency } from '../../db/idempotency.js';
import { checkDestination, parseWebhookUrl } from '../../webhooks/address.js';
import {
  MAX_WEBHOOKS_PER_ACCOUNT,
  WEBHOOK_EVENTS,
  createWebhook,
  deleteWebhook,
  enqueueTestEvent,
  getWebhook,
  listDeliveries,
  listWebhooks,
  resendDelivery,
  webhookToApi,
} from '../../webhooks/store.js';
import { fingerprint, readIdempotencyKey } from '../idempotency.js';
import { paginationQuery } from '../pagination.js';
import { API_READ, API_SECURITY, API_WRITE, IDEMPOTENT, JSON_BODY, VALIDATED, apiResponses, documentAs, jsonData, noContent } from '../openapi.js';
import { COMPONENT_SCHEMAS, idParam, idempotencyHeader, ref } from '../schemas.js';

const tags = ['Webhooks'];

interface CreateBody {
  url: string;
  events?: string[];
  description?: string;
}

const webhookParams = idParam('webhookId', 'whk');
const deliveryParams = {
  type: 'object',
  required: ['webhookId', 'deliveryId'],
  additionalProperties: false,
  properties: {
    webhookId: { type: 'string', maxLength: 100, description: 'An id starting whk_' },
    deliveryId: { type: 'string', maxLength: 100, description: 'An id starting dlv_' },
  },
};

export function webhookRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock, config } = services;

  /** An idempotent POST: `work` runs in the transaction that stores its response. */
  const idempotent = async (
    request: FastifyRequest,
    reply: FastifyReply,
    route: string,
    statusCode: 201 | 202,
    work: (tx: Tx, now: number) => Promise<unknown>,
  ) => {
    const now = clock.now();
    const response = await withIdempotency(
      database,
      {
        accountId: request.account.id,
        key: readIdempotencyKey(request.headers['idempotency-key']),
        fingerprint: fingerprint(route, request.body ?? {}),
        now,
      },
      async (tx) => ({ statusCode, body: { success: true, data: await work(tx, now) } }),
    );
    return reply.code(response.statusCode as 201 | 202).send(response.body);
  };

  app.post(
    '/webhooks',
    {
      schema: {
        operationId: 'createWebhook',
        tags,
        security: API_SECURITY,
        summary: 'Create a webhook endpoint',
        description:
          'Events (`task.completed`, `task.failed`, `task.canceled`, `batch.completed`; default all) are POSTed to `url` as JSON ' +
          '(the WebhookEvent schema), signed with the `secret` answered here, which is shown this once. A 2xx within 10 s is ' +
          'delivered; anything else is retried after about 10 s, 1 min, 5 min, 30 min, 2 h, then every 4 hours, for 24 hours. ' +
          `Delivery is at least once: dedupe on the event's \`id\`. At most ${MAX_WEBHOOKS_PER_ACCOUNT} endpoints per account ` +
          '(403 WEBHOOK_LIMIT_EXCEEDED). Loopback, private, link-local and metadata destinations are refused (400 ' +
          'WEBHOOK_URL_NOT_ALLOWED), and no redirect is followed.',
        headers: idempotencyHeader,
        body: COMPONENT_SCHEMAS.CreateWebhookRequest,
        response: apiResponses({ 201: jsonData('The endpoint, with its secret (shown once)', 'CreatedWebhook') }, [
          ...API_WRITE,
          ...JSON_BODY,
          ...IDEMPOTENT,
          'WEBHOOK_URL_NOT_ALLOWED',
          'WEBHOOK_LIMIT_EXCEEDED',
        ]),
      },
      config: documentAs({ body: ref('CreateWebhookRequest') }),
    },
    async (request: FastifyRequest<{ Body: CreateBody }>, reply) => {
      const { url: text, events = [...WEBHOOK_EVENTS], description } = request.body;
      const url = parseWebhookUrl(text);
      // Names are resolved before the transaction (which may run more than once and must not wait on DNS).
      await checkDestination(url, config.webhookAllowPrivateNetworks);
      return idempotent(request, reply, 'webhooks', 201, (tx, now) =>
        createWebhook(tx, { accountId: request.account.id, url: url.toString(), events, description }, now),
      );
    },
  );

  app.get(
    '/webhooks',
    {
      schema: {
        operationId: 'listWebhooks',
        tags,
        security: API_SECURITY,
        summary: 'List webhook endpoints',
        description: 'Newest first; the secrets are never shown again.',
        response: apiResponses({ 200: jsonData('The endpoints', 'WebhookList') }, API_READ),
      },
    },
    async (request) => ({ success: true, data: { webhooks: await listWebhooks(database, request.account.id), limit: MAX_WEBHOOKS_PER_ACCOUNT } }),
  );

  app.get(
    '/webhooks/:webhookId',
    {
      schema: {
        operationId: 'getWebhook',
        tags,
        security: API_SECURITY,
        summary: 'Get a webhook endpoint',
        params: webhookParams,
        response: apiResponses({ 200: jsonData('The endpoint', 'Webhook') }, [...API_READ, ...VALIDATED, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { webhookId: string } }>) => ({
      success: true,
      data: webhookToApi(await getWebhook(database, request.account.id, request.params.webhookId)),
    }),
  );

  app.delete(
    '/webhooks/:webhookId',
    {
      schema: {
        operationId: 'deleteWebhook',
        tags,
        security: API_SECURITY,
        summary: 'Delete a webhook endpoint',
        description: 'Its pending deliveries are not sent, and its delivery log goes with it.',
        params: webhookParams,
        response: apiResponses({ 204: noContent('Deleted') }, [...API_WRITE, ...VALIDATED, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { webhookId: string } }>, reply) => {
      await deleteWebhook(database, request.account.id, request.params.webhookId);
      return reply.code(204).send();
    },
  );

  app.get(
    '/webhooks/:webhookId/deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        tags,
        security: API_SECURITY,
        summary: "An endpoint's recent deliveries",
        description: 'Newest first, each with its attempts (status code, time, error); kept 30 days.',
        params: webhookParams,
        querystring: { type: 'object', additionalProperties: false, properties: { ...paginationQuery } },
        response: apiResponses({ 200: jsonData('A page of deliveries', 'WebhookDeliveryList') }, [...API_READ, ...VALIDATED, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { webhookId: string }; Querystring: { limit: number; cursor?: string } }>) => ({
      success: true,
      data: await listDeliveries(database, request.account.id, request.params.webhookId, request.query),
    }),
  );

  app.post(
    '/webhooks/:webhookId/test',
    {
      schema: {
        operationId: 'testWebhook',
        tags,
        security: API_SECURITY,
        summary: 'Send a test event',
        description: 'Queues a `webhook.test` event (`data: {webhook}`), delivered, signed and retried like any other; follow it in the deliveries.',
        params: webhookParams,
        headers: idempotencyHeader,
        response: apiResponses({ 202: jsonData('The queued delivery', 'WebhookDelivery') }, [...API_WRITE, ...IDEMPOTENT, ...JSON_BODY, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { webhookId: string } }>, reply) =>
      idempotent(request, reply, `webhooks/${request.params.webhookId}/test`, 202, (tx, now) =>
        enqueueTestEvent(tx, request.account.id, request.params.webhookId, now),
      ),
  );

  app.post(
    '/webhooks/:webhookId/deliveries/:deliveryId/resend',
    {
      schema: {
        operationId: 'resendWebhookDelivery',
        tags,
        security: API_SECURITY,
        summary: 'Resend one delivery',
        description:
          "Queues the delivery's event again for the endpoint as a new delivery: the same event id and body (signed anew), retried for 24 hours.",
        params: deliveryParams,
        headers: idempotencyHeader,
        response: apiResponses({ 202: jsonData('The new delivery', 'WebhookDelivery') }, [...API_WRITE, ...IDEMPOTENT, ...JSON_BODY, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { webhookId: string; deliveryId: string } }>, reply) =>
      idempotent(request, reply, `webhooks/${request.params.webhookId}/deliveries/${request.params.deliveryId}/resend`, 202, (tx, now) =>
        resendDelivery(tx, request.account.id, request.params.webhookId, request.params.deliveryId, now),
      ),
  );
}
