// The resources behind delivery URLs, under /api like the rest: signing keys (the secret shown
// once), presets and origins. The /r/ route itself is in delivery.ts.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../services.js';
import type { Tx } from '../../db/database.js';
import { withIdempotency } from '../../db/idempotency.js';
import { AppError } from '../../errors.js';
import { createSigningKey, listSigningKeys } from '../../delivery/signing-keys.js';
import { createPreset, deletePreset, listPresets, updatePreset } from '../../delivery/presets.js';
import { createOrigin, deleteOrigin, listOrigins } from '../../delivery/origins.js';
import { parsePresetTransform } from '../../delivery/transform.js';
import { checkDestination, parseOutboundUrl } from '../../webhooks/address.js';
import { fingerprint, readIdempotencyKey } from '../idempotency.js';
import { API_READ, API_SECURITY, API_WRITE, IDEMPOTENT, JSON_BODY, VALIDATED, apiResponses, documentAs, jsonData, noContent } from '../openapi.js';
import { COMPONENT_SCHEMAS, idempotencyHeader, ref } from '../schemas.js';

const tags = ['Delivery'];

const nameParam = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: { name: { type: 'string', maxLength: 100, description: 'The name it was created with.' } },
};
const keyParam = {
  type: 'object',
  required: ['keyId'],
  additionalProperties: false,
  properties: { keyId: { type: 'string', maxLength: 100, description: 'An id starting sk_' } },
};

/** An origin's base URL: http(s), no credentials, query or fragment; 400 naming `baseUrl`. */
const parseBaseUrl = (text: string): URL => parseOutboundUrl(text, 'baseUrl', { query: false, credentialsHint: '' });

export function deliveryApiRoutes(app: FastifyInstance, services: Services): void {
  const { database, clock, config, delivery } = services;

  const idempotent = async (request: FastifyRequest, reply: FastifyReply, route: string, work: (tx: Tx, now: number) => Promise<unknown>) => {
    const now = clock.now();
    const response = await withIdempotency(
      database,
      {
        accountId: request.account.id,
        key: readIdempotencyKey(request.headers['idempotency-key']),
        fingerprint: fingerprint(route, request.body ?? {}),
        now,
      },
      async (tx) => ({ statusCode: 201, body: { success: true, data: await work(tx, now) } }),
    );
    return reply.code(response.statusCode as 201).send(response.body);
  };

  // Signing keys -------------------------------------------------------------------------------

  app.post(
    '/signing-keys',
    {
      schema: {
        operationId: 'createSigningKey',
        tags,
        security: API_SECURITY,
        summary: 'Create a signing key for delivery URLs',
        description:
          'The `secret` is shown this once: 32 random bytes, base64url. A delivery URL `/r/{keyId}/{signature}/{transform}/{source}` is signed with ' +
          'base64url (no padding) of HMAC-SHA256 keyed by the secret text over `{transform}/{source}` exactly as sent. Keep several keys to rotate.',
        headers: idempotencyHeader,
        response: apiResponses({ 201: jsonData('The key, with its secret (shown once)', 'CreatedSigningKey') }, [
          ...API_WRITE,
          ...IDEMPOTENT,
          ...JSON_BODY,
        ]),
      },
    },
    async (request, reply) => idempotent(request, reply, 'signing-keys', (tx, now) => createSigningKey(tx, request.account.id, now)),
  );

  app.get(
    '/signing-keys',
    {
      schema: {
        operationId: 'listSigningKeys',
        tags,
        security: API_SECURITY,
        summary: 'List signing keys',
        description: 'Newest first; the secrets are never shown again.',
        response: apiResponses({ 200: jsonData('The keys', 'SigningKeyList') }, API_READ),
      },
    },
    async (request) => ({ success: true, data: { signingKeys: await listSigningKeys(database, request.account.id) } }),
  );

  app.delete(
    '/signing-keys/:keyId',
    {
      schema: {
        operationId: 'deleteSigningKey',
        tags,
        security: API_SECURITY,
        summary: 'Delete a signing key',
        description:
          'Its URLs answer 403 SIGNATURE_INVALID at once in the process that deleted it, at once in the other API processes on PostgreSQL ' +
          '(told by NOTIFY), and in any case within a second (keys are cached for at most 0.9 s). Renders are shared by the keys of an ' +
          'account, so they stay for its other keys.',
        params: keyParam,
        response: apiResponses({ 204: noContent('Deleted') }, [...API_WRITE, ...VALIDATED, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { keyId: string } }>, reply) => {
      await delivery.deleteSigningKey(request.account.id, request.params.keyId);
      return reply.code(204).send();
    },
  );

  // Presets ------------------------------------------------------------------------------------

  app.post(
    '/presets',
    {
      schema: {
        operationId: 'createPreset',
        tags,
        security: API_SECURITY,
        summary: 'Create a preset',
        description:
          'A named transform, used in delivery URLs as `p:{name}`. A `public` one may be used unsigned (signature `_`) when it is the whole transform. ' +
          'A name in use is 400 VALIDATION_ERROR naming `name` (change it with PUT).',
        headers: idempotencyHeader,
        body: COMPONENT_SCHEMAS.CreatePresetRequest,
        response: apiResponses({ 201: jsonData('The preset', 'Preset') }, [...API_WRITE, ...JSON_BODY, ...IDEMPOTENT]),
      },
      config: documentAs({ body: ref('CreatePresetRequest') }),
    },
    async (request: FastifyRequest<{ Body: { name: string; transform: string; public?: boolean } }>, reply) => {
      const text = parsePresetTransform(request.body.transform);
      return idempotent(request, reply, 'presets', (tx, now) =>
        createPreset(tx, request.account.id, { name: request.body.name, transform: text, public: request.body.public ?? false }, now),
      );
    },
  );

  app.get(
    '/presets',
    {
      schema: {
        operationId: 'listPresets',
        tags,
        security: API_SECURITY,
        summary: 'List presets',
        response: apiResponses({ 200: jsonData('The presets', 'PresetList') }, API_READ),
      },
    },
    async (request) => ({ success: true, data: { presets: await listPresets(database, request.account.id) } }),
  );

  app.put(
    '/presets/:name',
    {
      schema: {
        operationId: 'updatePreset',
        tags,
        security: API_SECURITY,
        summary: 'Change a preset',
        description: 'Renders made with the old transform are no longer served (their cache keys held it) and are deleted.',
        params: nameParam,
        body: COMPONENT_SCHEMAS.UpdatePresetRequest,
        response: apiResponses({ 200: jsonData('The preset', 'Preset') }, [...API_WRITE, ...JSON_BODY, 'NOT_FOUND']),
      },
      config: documentAs({ body: ref('UpdatePresetRequest') }),
    },
    async (request: FastifyRequest<{ Params: { name: string }; Body: { transform: string; public?: boolean } }>) => {
      const text = parsePresetTransform(request.body.transform);
      const preset = await updatePreset(
        database,
        request.account.id,
        request.params.name,
        { transform: text, public: request.body.public },
        clock.now(),
      );
      await delivery.cache.purgePreset(request.account.id, request.params.name);
      return { success: true, data: preset };
    },
  );

  app.delete(
    '/presets/:name',
    {
      schema: {
        operationId: 'deletePreset',
        tags,
        security: API_SECURITY,
        summary: 'Delete a preset',
        description: 'Its renders are deleted; URLs naming it answer 400 (no such preset).',
        params: nameParam,
        response: apiResponses({ 204: noContent('Deleted') }, [...API_WRITE, ...VALIDATED, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { name: string } }>, reply) => {
      await deletePreset(database, request.account.id, request.params.name);
      await delivery.cache.purgePreset(request.account.id, request.params.name);
      return reply.code(204).send();
    },
  );

  // Origins ------------------------------------------------------------------------------------

  app.post(
    '/origins',
    {
      schema: {
        operationId: 'createOrigin',
        tags,
        security: API_SECURITY,
        summary: 'Register an origin',
        description:
          "A place delivery URLs fetch sources from: `o/{name}/{path}` renders `baseUrl/path`. At most the plan's `origins` " +
          '(403 ORIGIN_LIMIT_EXCEEDED). A name in use is 400 VALIDATION_ERROR naming `name`.',
        headers: idempotencyHeader,
        body: COMPONENT_SCHEMAS.CreateOriginRequest,
        response: apiResponses({ 201: jsonData('The origin', 'Origin') }, [...API_WRITE, ...JSON_BODY, ...IDEMPOTENT, 'ORIGIN_LIMIT_EXCEEDED']),
      },
      config: documentAs({ body: ref('CreateOriginRequest') }),
    },
    async (request: FastifyRequest<{ Body: { name: string; baseUrl: string } }>, reply) => {
      const url = parseBaseUrl(request.body.baseUrl);
      // Names are resolved before the transaction (which may run more than once and must not wait on DNS).
      await checkDestination(url, config.originAllowPrivateNetworks, {
        field: 'baseUrl',
        refuse: (_url, address) =>
          new AppError(
            'VALIDATION_ERROR',
            `baseUrl: ${address} is not a public address; origins on loopback, private, link-local or metadata addresses are refused (the operator can allow them with ORIGIN_ALLOW_PRIVATE_NETWORKS=1)`,
            { fields: [{ field: 'baseUrl', message: `${address} is not a public address` }] },
          ),
      });
      const baseUrl = url.toString().replace(/\/+$/, '');
      return idempotent(request, reply, 'origins', (tx, now) =>
        createOrigin(database, tx, request.account.id, { name: request.body.name, baseUrl }, request.limits.origins, now),
      );
    },
  );

  app.get(
    '/origins',
    {
      schema: {
        operationId: 'listOrigins',
        tags,
        security: API_SECURITY,
        summary: 'List origins',
        response: apiResponses({ 200: jsonData('The origins', 'OriginList') }, API_READ),
      },
    },
    async (request) => ({ success: true, data: { origins: await listOrigins(database, request.account.id), limit: request.limits.origins } }),
  );

  app.delete(
    '/origins/:name',
    {
      schema: {
        operationId: 'deleteOrigin',
        tags,
        security: API_SECURITY,
        summary: 'Delete an origin',
        description: 'Its fetched objects and its renders are deleted at once; its URLs answer 404.',
        params: nameParam,
        response: apiResponses({ 204: noContent('Deleted') }, [...API_WRITE, ...VALIDATED, 'NOT_FOUND']),
      },
    },
    async (request: FastifyRequest<{ Params: { name: string } }>, reply) => {
      const { id, objectKeys } = await deleteOrigin(database, request.account.id, request.params.name);
      await delivery.cache.purgeSource(request.account.id, `origin:${id}`);
      for (const key of objectKeys) await services.storage.delete(key).catch(() => undefined);
      return reply.code(204).send();
    },
  );
}
