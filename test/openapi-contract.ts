// Every response the HTTP test suites receive is held to the server's own OpenAPI document
// (/openapi.json): the status must be one the operation lists, the headers it lists must be
// there and well-formed, no header the document speaks of may appear where it is not listed, and
// the body must be of a listed media type and, when JSON, valid against the response's schema.
// So the document cannot drift from what the service does: a mismatch fails the test.
//
// Paths the document does not describe: under /api they must still be errors in the envelope
// (an unknown path, a method the path does not take); elsewhere (the dashboard, /docs) they are
// not part of the API and are not checked.
import crypto from 'node:crypto';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

interface HeaderObject {
  required?: boolean;
  schema: Record<string, unknown>;
}
interface ResponseObject {
  $ref?: string;
  headers?: Record<string, HeaderObject | { $ref: string }>;
  content?: Record<string, { schema?: unknown }>;
}
interface OpenApiDocument {
  paths: Record<string, Record<string, { operationId?: string; responses: Record<string, ResponseObject> }>>;
  components: { headers?: Record<string, HeaderObject>; responses?: Record<string, ResponseObject> };
}

export interface ReceivedResponse {
  method: string;
  /** The full URL requested. */
  url: string;
  status: number;
  headers: Headers;
  body: Buffer;
}

/** One document, its operations as path patterns, and the validators compiled from it so far. */
class Contract {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly operations: {
    pattern: RegExp;
    template: string;
    methods: Record<string, { operationId?: string; responses: Record<string, ResponseObject> }>;
  }[];
  private readonly contractHeaders: Set<string>;
  readonly id: string;

  constructor(
    readonly document: OpenApiDocument,
    text: string,
  ) {
    this.id = `openapi-${crypto.createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
    addFormats.default(this.ajv);
    this.ajv.addFormat('binary', true);
    this.ajv.addSchema({ ...document, $id: this.id });
    this.operations = Object.entries(document.paths).map(([template, methods]) => ({
      template,
      methods,
      pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}/g, '[^/]+')}$`),
    }));
    // The headers the document speaks of, less Content-Length (HTTP framing: on every response).
    this.contractHeaders = new Set(
      Object.keys(document.components.headers ?? {})
        .map((name) => name.toLowerCase())
        .filter((name) => name !== 'content-length'),
    );
  }

  /** The mismatches of one response with the document; empty when it conforms. */
  check(received: ReceivedResponse): string[] {
    const path = new URL(received.url).pathname;
    const method = received.method.toLowerCase();
    const match = this.operations.find((o) => o.pattern.test(path));
    if (!match) return path === '/api' || path.startsWith('/api/') ? this.checkUnrouted(received) : [];
    const operation = match.methods[method] ?? (method === 'head' ? match.methods.get : undefined);
    if (!operation) return this.checkUnrouted(received);
    const where = `${received.method} ${match.template} (${operation.operationId}) → ${received.status}`;
    const responses = operation.responses;
    const statusKey = [String(received.status), `${String(received.status)[0]}XX`, 'default'].find((key) => key in responses);
    if (!statusKey) return [`${where}: the document lists no ${received.status} for this operation (it lists ${Object.keys(responses).join(', ')})`];
    const pointer = `#/paths/${escape(match.template)}/${operation === match.methods[method] ? method : 'get'}/responses/${statusKey}`;
    const [response, responsePointer] = this.resolve(responses[statusKey]!, pointer);
    return [...this.checkHeaders(received, response, responsePointer, where), ...this.checkBody(received, response, responsePointer, where)];
  }

  /** No operation answers this method and path: it must be an error in the envelope (401, 404, 405, …). */
  private checkUnrouted(received: ReceivedResponse): string[] {
    const where = `${received.method} ${new URL(received.url).pathname} → ${received.status} (no operation)`;
    const problems: string[] = [];
    if (received.status < 400) problems.push(`${where}: a success from a path and method the document does not describe`);
    if (!received.headers.get('x-request-id')) problems.push(`${where}: no x-request-id`);
    if (received.status === 405 && !received.headers.get('allow')) problems.push(`${where}: 405 without Allow`);
    if (received.method !== 'HEAD') problems.push(...this.validate(json(received.body), '#/components/schemas/ErrorResponse', where));
    return problems;
  }

  private checkHeaders(received: ReceivedResponse, response: ResponseObject, pointer: string, where: string): string[] {
    const problems: string[] = [];
    const listed = new Set<string>();
    for (const [name, entry] of Object.entries(response.headers ?? {})) {
      const [header, headerPointer] = this.resolve(entry, `${pointer}/headers/${escape(name)}`);
      listed.add(name.toLowerCase());
      const value = received.headers.get(name);
      if (value === null) {
        if (header.required) problems.push(`${where}: the required header ${name} is missing`);
        continue;
      }
      const schema = header.schema as { type?: string };
      const typed = schema.type === 'integer' || schema.type === 'number' ? Number(value) : value;
      problems.push(...this.validate(typed, `${headerPointer}/schema`, `${where}: header ${name}`));
    }
    for (const name of this.contractHeaders) {
      if (!listed.has(name) && received.headers.get(name) !== null) {
        problems.push(`${where}: carries ${name} (${received.headers.get(name)}), which the document does not list for this response`);
      }
    }
    return problems;
  }

  private checkBody(received: ReceivedResponse, response: ResponseObject, pointer: string, where: string): string[] {
    if (received.method === 'HEAD') return [];
    if (!response.content)
      return received.body.length === 0 ? [] : [`${where}: a body (${received.body.length} bytes) where the document lists none`];
    const type = (received.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    const mediaType = Object.keys(response.content).find(
      (listed) => listed === type || listed === '*/*' || (listed.endsWith('/*') && type.startsWith(listed.slice(0, -1))),
    );
    if (!mediaType) return [`${where}: Content-Type ${type || '(none)'} is not one of ${Object.keys(response.content).join(', ')}`];
    if (mediaType !== 'application/json') return [];
    return this.validate(json(received.body), `${pointer}/content/${escape(mediaType)}/schema`, where);
  }

  private validate(value: unknown, pointer: string, where: string): string[] {
    let validate = this.validators.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `${this.id}${pointer}` });
      this.validators.set(pointer, validate);
    }
    if (validate(value)) return [];
    const errors = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
    return [`${where}: does not match the document: ${errors.join('; ')} — got ${JSON.stringify(value)?.slice(0, 600)}`];
  }

  /** Follows a local $ref (components/responses, components/headers), keeping a JSON pointer to what it found. */
  private resolve<T extends object>(value: T | { $ref: string }, pointer: string): [T, string] {
    const target = (value as { $ref?: string }).$ref;
    if (typeof target !== 'string') return [value as T, pointer];
    const found = target
      .slice(2)
      .split('/')
      .reduce<unknown>((node, part) => (node as Record<string, unknown>)[part.replace(/~1/g, '/').replace(/~0/g, '~')], this.document);
    return [found as T, target];
  }
}

const escape = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1');

function json(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return `<not JSON: ${body.toString('utf8', 0, 200)}>`;
  }
}

/** The documents by server origin (a test process talks to a few servers). */
const contracts = new Map<string, Promise<Contract | undefined>>();

/** The origin's document; undefined for a server that is not this service (an S3 store a presigned URL names). */
function contractOf(origin: string, refresh = false): Promise<Contract | undefined> {
  let contract = contracts.get(origin);
  if (!contract || refresh) {
    contract = (async () => {
      const response = await fetch(`${origin}/openapi.json`);
      const text = await response.text();
      if (response.status !== 200 || !(response.headers.get('content-type') ?? '').includes('application/json')) return undefined;
      const document = JSON.parse(text) as OpenApiDocument & { openapi?: string };
      return typeof document.openapi === 'string' ? new Contract(document, text) : undefined;
    })();
    contracts.set(origin, contract);
    contract.catch(() => contracts.delete(origin));
  }
  return contract;
}

/** Every mismatch seen in this process: reported at exit even if a test swallowed the error. */
const mismatches: string[] = [];
process.once('exit', () => {
  if (mismatches.length === 0) return;
  process.stderr.write(`\nResponses that did not match the OpenAPI document:\n${mismatches.map((m) => `  - ${m}`).join('\n')}\n`);
  process.exitCode = 1;
});

/**
 * Throws when the response does not match the server's document. A server started after another
 * on the same port may serve another document: an unknown operation re-reads it once.
 */
export async function assertMatchesContract(received: ReceivedResponse): Promise<void> {
  const origin = new URL(received.url).origin;
  const contract = await contractOf(origin);
  if (!contract) return;
  let problems = contract.check(received);
  if (problems.length) problems = (await contractOf(origin, true))?.check(received) ?? [];
  if (problems.length === 0) return;
  mismatches.push(...problems);
  throw new Error(`The response does not match the OpenAPI document:\n${problems.join('\n')}`);
}
