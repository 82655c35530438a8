// Request validation: bodies are taken exactly as sent (unknown fields rejected, nothing
// coerced or stripped); query strings and path parameters are text, so they are coerced.
import Ajv from 'ajv';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { fieldsInvalid } from '../errors.js';

const NO_QUERY = { type: 'object', additionalProperties: false, properties: {} } as const;

/**
 * Within `app` (the API, the dashboard's JSON routes), a query string naming a parameter the
 * route does not take is refused with 400, naming it: every querystring schema says
 * additionalProperties: false, and a route without one takes none. A typo such as `?wiat=30`
 * fails loudly instead of being ignored. (Pages and the document keep theirs: a browser adds what it likes.)
 */
export function refuseUnknownQueries(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    if (route.schema) route.schema.querystring ??= NO_QUERY;
  });
}

/**
 * Within `app` (the API), an operation that takes no body (creating a signing key, a webhook's
 * test, a resend) refuses one that says something, as bodies with unknown fields are refused
 * everywhere else: 400 naming each field. No body, an empty one, `null` and `{}` pass.
 */
export function refuseUnexpectedBodies(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    if (!route.schema || route.schema.body !== undefined || route.schema.consumes !== undefined) return;
    if (!methods.some((method) => method === 'POST' || method === 'PUT' || method === 'PATCH')) return;
    route.preValidation = [...[route.preValidation ?? []].flat(), refuseBody];
  });
}

async function refuseBody(request: FastifyRequest): Promise<void> {
  const body: unknown = request.body;
  if (body === undefined || body === null) return;
  const names = typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : undefined;
  if (names?.length === 0) return;
  throw fieldsInvalid(
    names ? names.map((field) => ({ field, message: 'unknown field' })) : [{ field: 'body', message: 'this operation takes no body' }],
  );
}

export function registerValidation(app: FastifyInstance): void {
  // strictNumbers: a JSON number too large for a double (1e400) parses as Infinity, which is no number.
  // discriminator: a list of alternatives chosen by a field (a pipeline's steps, by `kind`) is
  // validated against the chosen one only, so its errors are that one's.
  const common = {
    allErrors: true,
    removeAdditional: false as const,
    strict: false,
    strictNumbers: true,
    allowUnionTypes: true,
    discriminator: true,
  };
  const strictAjv = new Ajv.default({ ...common, coerceTypes: false, useDefaults: false });
  const coercingAjv = new Ajv.default({ ...common, coerceTypes: true, useDefaults: true });
  for (const ajv of [strictAjv, coercingAjv]) ajv.addKeyword({ keyword: 'example' }).addKeyword({ keyword: 'x-exclusive' });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? strictAjv : coercingAjv).compile(schema));
  // Response schemas document the API; serialisation stays plain JSON.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
}
