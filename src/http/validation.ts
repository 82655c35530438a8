// Request validation: bodies are taken exactly as sent (unknown fields rejected, nothing
// coerced or stripped); query strings and path parameters are text, so they are coerced.
import Ajv from 'ajv';
import type { FastifyInstance } from 'fastify';

export function registerValidation(app: FastifyInstance): void {
  const common = { allErrors: true, removeAdditional: false as const, strict: false, allowUnionTypes: true };
  const strictAjv = new Ajv.default({ ...common, coerceTypes: false, useDefaults: false });
  const coercingAjv = new Ajv.default({ ...common, coerceTypes: true, useDefaults: true });
  for (const ajv of [strictAjv, coercingAjv]) ajv.addKeyword({ keyword: 'example' }).addKeyword({ keyword: 'x-exclusive' });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? strictAjv : coercingAjv).compile(schema));
  // Response schemas document the API; serialisation stays plain JSON.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
}
