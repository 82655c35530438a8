// `imgapi run <kind> … --width 800 --fit cover`: which kinds exist and what each option's value
// is (a number, a boolean, a list…) come from the service's own OpenAPI document, so the
// command line takes exactly what the service it talks to takes, with the right JSON types.

type Schema = { [key: string]: unknown };

export interface KindInfo {
  kind: string;
  /** Its options (fileId/fileIds excluded), by name. */
  options: Map<string, Schema>;
  /** Several inputs make one task (`fileIds`), as image-to-pdf. */
  multiInput: boolean;
  /** `POST /api/process/batch/{kind}` exists. */
  batch: boolean;
}

export class OptionError extends Error {}

const isSchema = (value: unknown): value is Schema => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The kinds a document describes, from its `POST /api/process/{kind}` bodies. */
export function kindsOf(document: unknown): Map<string, KindInfo> {
  const root = isSchema(document) ? document : {};
  const paths = isSchema(root.paths) ? root.paths : {};
  const kinds = new Map<string, KindInfo>();
  for (const [route, item] of Object.entries(paths)) {
    const kind = /^\/api\/process\/([a-z0-9-]+)$/.exec(route)?.[1];
    if (kind === undefined || !isSchema(item) || !isSchema(item.post)) continue;
    const body = pick(item.post, 'requestBody', 'content', 'application/json', 'schema');
    const properties = new Map<string, Schema>();
    collectProperties(root, body, properties, new Set());
    const multiInput = properties.has('fileIds');
    properties.delete('fileId');
    properties.delete('fileIds');
    kinds.set(kind, { kind, options: properties, multiInput, batch: isSchema(paths[`/api/process/batch/${kind}`]) });
  }
  return kinds;
}

function pick(value: unknown, ...keys: string[]): unknown {
  let current = value;
  for (const key of keys) current = isSchema(current) ? current[key] : undefined;
  return current;
}

/** Follows a local `$ref` (`#/components/schemas/X`). */
function resolve(root: Schema, schema: unknown): Schema | undefined {
  let current = schema;
  for (let depth = 0; isSchema(current) && typeof current.$ref === 'string' && depth < 20; depth++) {
    current = pick(root, ...current.$ref.replace(/^#\//, '').split('/'));
  }
  return isSchema(current) ? current : undefined;
}

/** The properties of an object schema, through $ref, allOf, oneOf and anyOf. */
function collectProperties(root: Schema, schema: unknown, into: Map<string, Schema>, seen: Set<Schema>): void {
  const resolved = resolve(root, schema);
  if (!resolved || seen.has(resolved)) return;
  seen.add(resolved);
  if (isSchema(resolved.properties)) {
    for (const [name, property] of Object.entries(resolved.properties)) if (isSchema(property) && !into.has(name)) into.set(name, property);
  }
  for (const key of ['allOf', 'oneOf', 'anyOf']) {
    const parts = resolved[key];
    if (Array.isArray(parts)) for (const part of parts) collectProperties(root, part, into, seen);
  }
}

/** The JSON types a schema allows: "string", "number", "integer", "boolean", "array", "object", "null". */
function typesOf(root: Schema, schema: unknown, seen = new Set<Schema>()): Set<string> {
  const types = new Set<string>();
  const resolved = resolve(root, schema);
  if (!resolved || seen.has(resolved)) return types;
  seen.add(resolved);
  if (typeof resolved.type === 'string') types.add(resolved.type);
  if (Array.isArray(resolved.type)) for (const type of resolved.type) types.add(String(type));
  const values = [...(Array.isArray(resolved.enum) ? resolved.enum : []), ...('const' in resolved ? [resolved.const] : [])];
  for (const value of values) types.add(typeof value === 'number' ? 'number' : typeof value);
  for (const key of ['allOf', 'oneOf', 'anyOf']) {
    const parts = resolved[key];
    if (Array.isArray(parts)) for (const part of parts) for (const type of typesOf(root, part, seen)) types.add(type);
  }
  return types;
}

/**
 * The step kinds a kind's `steps` option takes (a pipeline's), each with its options by name:
 * the alternatives of `steps.items`, told apart by their `kind`. Empty for other kinds.
 */
function stepKindsOf(document: unknown, info: KindInfo): Map<string, KindInfo> {
  const root = isSchema(document) ? document : {};
  const items = resolve(root, resolve(root, info.options.get('steps'))?.items);
  const kinds = new Map<string, KindInfo>();
  for (const branch of Array.isArray(items?.oneOf) ? items.oneOf : []) {
    const properties = new Map<string, Schema>();
    collectProperties(root, branch, properties, new Set());
    // `const`, which the document may spell as a one-value `enum`.
    const tag = properties.get('kind');
    const kind = tag?.const ?? (Array.isArray(tag?.enum) && tag.enum.length === 1 ? tag.enum[0] : undefined);
    if (typeof kind !== 'string') continue;
    properties.delete('kind');
    kinds.set(kind, { kind, options: properties, multiInput: false, batch: false });
  }
  return kinds;
}

/**
 * `--step resize:width=800,fit=cover` of a pipeline: the step `{kind: 'resize', width: 800, fit:
 * 'cover'}`, each value typed by its kind's schema. A comma starts a new option only before
 * `name=`, so a watermark's text may hold commas.
 */
export function stepValue(document: unknown, info: KindInfo, raw: string): Record<string, unknown> {
  const kinds = stepKindsOf(document, info);
  if (!kinds.size) throw new OptionError(`${info.kind} takes no --step`);
  const colon = raw.indexOf(':');
  const kind = colon < 0 ? raw : raw.slice(0, colon);
  const step = kinds.get(kind);
  if (!step) throw new OptionError(`--step ${raw}: unknown step kind "${kind}"; the steps are ${[...kinds.keys()].join(', ')}`);
  const values: Record<string, unknown> = { kind };
  const list = colon < 0 ? '' : raw.slice(colon + 1);
  for (const pair of list === '' ? [] : list.split(/,(?=[A-Za-z][A-Za-z-]*=)/)) {
    const equals = pair.indexOf('=');
    if (equals <= 0) throw new OptionError(`--step ${raw}: write the options as name=value, separated by commas`);
    const name = optionName(pair.slice(0, equals));
    try {
      values[name] = optionValue(document, step, name, pair.slice(equals + 1));
    } catch (err) {
      if (err instanceof OptionError) throw new OptionError(`--step ${raw}: ${err.message.replace(/--(\w)/, '$1')}`);
      throw err;
    }
  }
  return values;
}

/** `--target-size` and `--targetSize` name the option `targetSize`. */
export const optionName = (flag: string): string => flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());

/** Whether `--name` stands alone (a boolean) unless followed by true or false. */
export function isFlag(document: unknown, info: KindInfo, name: string): boolean {
  const schema = info.options.get(name);
  const types = schema ? typesOf(isSchema(document) ? document : {}, schema) : new Set<string>();
  return types.size === 1 && types.has('boolean');
}

/** The JSON value of `--name raw` for the kind, or an OptionError that says what is wrong. */
export function optionValue(document: unknown, info: KindInfo, name: string, raw: string | true): unknown {
  const schema = info.options.get(name);
  if (!schema) {
    const known = [...info.options.keys()].sort().join(', ');
    throw new OptionError(`${info.kind} has no option "${name}"${known ? `; its options: ${known}` : ''}`);
  }
  return coerce(isSchema(document) ? document : {}, schema, raw, name);
}

function coerce(root: Schema, schema: Schema, raw: string | true, name: string): unknown {
  const types = typesOf(root, schema);
  if (raw === true) {
    if (types.has('boolean')) return true;
    throw new OptionError(`--${name} needs a value`);
  }
  if (types.has('boolean') && (raw === 'true' || raw === 'false')) return raw === 'true';
  const numeric = types.has('number') || types.has('integer');
  if (numeric && raw.trim() !== '' && Number.isFinite(Number(raw))) return inRange(resolve(root, schema), Number(raw), name, types);
  // Caught here, before any request: a value of the wrong type is never sent.
  if (numeric && !types.has('string') && !types.has('array') && !types.has('object'))
    throw new OptionError(`--${name} takes a ${types.has('number') ? 'number' : 'whole number'}, not "${raw}"`);
  const choices = resolve(root, schema)?.enum;
  if (Array.isArray(choices) && choices.every((choice) => typeof choice === 'string') && !choices.includes(raw))
    throw new OptionError(`--${name} takes one of ${choices.join(', ')}, not "${raw}"`);
  if (types.has('array')) {
    const items = resolve(root, schema)?.items;
    return raw.split(',').map((item) => (isSchema(items) ? coerce(root, items, item.trim(), name) : item.trim()));
  }
  if (types.has('object')) {
    try {
      return JSON.parse(raw);
    } catch {
      throw new OptionError(`--${name} takes a JSON object`);
    }
  }
  // A string, or a value the service will refuse with a message naming the option.
  return raw;
}

/** `value` when the schema's bounds allow it (a whole number where only integers are), else an OptionError. */
function inRange(schema: Schema | undefined, value: number, name: string, types: Set<string>): number {
  if (types.has('integer') && !types.has('number') && !Number.isInteger(value)) throw new OptionError(`--${name} takes a whole number, not ${value}`);
  const min = typeof schema?.minimum === 'number' ? schema.minimum : undefined;
  const max = typeof schema?.maximum === 'number' ? schema.maximum : undefined;
  if ((min !== undefined && value < min) || (max !== undefined && value > max))
    throw new OptionError(
      `--${name} takes ${min !== undefined && max !== undefined ? `from ${min} to ${max}` : min !== undefined ? `at least ${min}` : `at most ${max}`}, not ${value}`,
    );
  return value;
}
