// Request validation: bodies are taken exactly as sent (unknown fields rejected, nothing
// coerced or stripped); query strings and path parameters are text, so they are coerced.
import Ajv from 'ajv';
import type { FastifyInstance } from 'fastify';

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
