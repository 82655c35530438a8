// Checks the playground's form in the browser against the same JSON Schemas the server validates
// with (GET /dashboard-api/operations), before any request, and says what is wrong in plain
// words. Ajv cannot run here (it compiles with `new Function`, which the dashboard's CSP
// forbids), and the kinds' options use a small subset: type, enum, minimum/maximum,
// exclusiveMinimum, minLength/maxLength and pattern. The server still validates everything.
// Extensions written out here and in schema-form.tsx: test/web/form-rules.test.ts imports this
// module, and test/tsconfig.json resolves it as Node does (NodeNext), not as Vite does.
import { label } from './format.js';
import type { FormValues, JsonSchema } from './schema-form.js';

/** The rules between a kind's options (src/http/routes/dashboard/option-rules.ts). */
export interface OptionRules {
  exclusive: [string, string][];
  requires: [string, string][];
  /** [field, options]: one of the options must be given; the message goes at `field`. */
  oneOf?: [string, string[]][];
}

const orList = (words: string[]) => (words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} or ${words.at(-1)}`);

/** The schema's example value as text (`example`, or the first of `examples`). */
export const exampleOf = (schema: JsonSchema): string | undefined => {
  const example = schema.example ?? schema.examples?.[0];
  return example === undefined ? undefined : String(example);
};

const typesOf = (schema: JsonSchema): string[] => (Array.isArray(schema.type) ? schema.type : [schema.type ?? 'string']);

/** A pattern made only of literal alternatives (`^auto$`, `^(a|b)$`), as words: "auto". */
function literalChoices(pattern: string): string[] | undefined {
  const body = /^\^\(?([A-Za-z0-9 _|-]+)\)?\$$/.exec(pattern)?.[1];
  return body?.split('|');
}

function quoteList(words: string[]): string {
  const quoted = words.map((w) => `"${w}"`);
  return quoted.length <= 1 ? (quoted[0] ?? '') : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
}

/** "a whole number from 1 to 100", "a number above 0 and at most 1", "a number". */
function numberWords(schema: JsonSchema, integer: boolean): string {
  const noun = integer ? 'a whole number' : 'a number';
  const low =
    schema.minimum !== undefined ? `from ${schema.minimum}` : schema.exclusiveMinimum !== undefined ? `above ${schema.exclusiveMinimum}` : '';
  if (low && schema.maximum !== undefined)
    return schema.minimum !== undefined ? `${noun} ${low} to ${schema.maximum}` : `${noun} ${low} and at most ${schema.maximum}`;
  if (schema.minimum !== undefined) return `${noun} of at least ${schema.minimum}`;
  if (low) return `${noun} ${low}`;
  if (schema.maximum !== undefined) return `${noun} of at most ${schema.maximum}`;
  return noun;
}

function numberProblem(schema: JsonSchema, n: number, integer: boolean): boolean {
  if (integer && !Number.isInteger(n)) return true;
  if (schema.minimum !== undefined && n < schema.minimum) return true;
  if (schema.exclusiveMinimum !== undefined && n <= schema.exclusiveMinimum) return true;
  return schema.maximum !== undefined && n > schema.maximum;
}

/** The plain-language problem with one field's text, or undefined when it is fine. */
export function checkField(name: string, schema: JsonSchema, value: string | boolean | undefined, required: boolean): string | undefined {
  if (value === undefined || value === '' || value === false) return required ? `${label(name)} is required.` : undefined;
  if (typeof value === 'boolean') return undefined;
  const types = typesOf(schema);
  const text = value.trim();
  const numeric = types.includes('integer') || types.includes('number');
  const integer = types.includes('integer') && !types.includes('number');
  const asNumber = text !== '' && Number.isFinite(Number(text)) ? Number(text) : undefined;
  const choices = schema.pattern ? literalChoices(schema.pattern) : undefined;

  if (schema.enum) {
    return schema.enum.map(String).includes(text) ? undefined : `Choose one of ${quoteList(schema.enum.map(String))}.`;
  }
  if (numeric && types.includes('string')) {
    // A number or a word (compress's quality: 1–100 or "auto").
    if (asNumber !== undefined)
      return numberProblem(schema, asNumber, integer)
        ? `Enter ${numberWords(schema, integer)}${choices ? `, or ${quoteList(choices)}` : ''}.`
        : undefined;
    if (!schema.pattern || new RegExp(schema.pattern).test(text)) return undefined;
    return `Enter ${numberWords(schema, integer)}${choices ? ` or ${quoteList(choices)}` : ''}.`;
  }
  if (numeric) {
    if (asNumber === undefined || numberProblem(schema, asNumber, integer)) return `Enter ${numberWords(schema, integer)}.`;
    return undefined;
  }
  if (types.includes('array') || types.includes('object')) {
    try {
      JSON.parse(text);
      return undefined;
    } catch {
      return `Enter a JSON ${types.includes('array') ? 'list, like ["a", "b"]' : 'object, like {"key": "value"}'}.`;
    }
  }
  if (schema.minLength !== undefined && value.length < schema.minLength)
    return schema.minLength === 1 ? `${label(name)} cannot be empty.` : `Use at least ${schema.minLength} characters.`;
  if (schema.maxLength !== undefined && value.length > schema.maxLength) return `Use at most ${schema.maxLength} characters.`;
  if (schema.pattern && !new RegExp(schema.pattern).test(value)) {
    if (choices) return `Enter ${quoteList(choices)}.`;
    const example = exampleOf(schema);
    return example !== undefined ? `Write it like ${example}.` : 'This is not in the expected form.';
  }
  return undefined;
}

const filled = (value: string | boolean | undefined) => value !== undefined && value !== '' && value !== false;

/** Options a rule turns off given the current values: field → why. */
export function disabledFields(values: FormValues, rules: OptionRules | undefined): Map<string, string> {
  const off = new Map<string, string>();
  if (!rules) return off;
  for (const [a, b] of rules.exclusive) {
    if (filled(values[a]) && !filled(values[b])) off.set(b, `Not together with ${label(a)}.`);
    if (filled(values[b]) && !filled(values[a])) off.set(a, `Not together with ${label(b)}.`);
  }
  for (const [option, needs] of rules.requires) {
    if (!filled(values[needs]) && !filled(values[option])) off.set(option, `Only with ${label(needs)}.`);
  }
  return off;
}

/** Every field's problem (one message per field), rules between fields included. */
export function validateForm(
  properties: Record<string, JsonSchema>,
  required: string[],
  values: FormValues,
  rules: OptionRules | undefined,
): Record<string, string> {
  const problems: Record<string, string> = {};
  for (const [name, schema] of Object.entries(properties)) {
    const problem = checkField(name, schema, values[name], required.includes(name));
    if (problem) problems[name] = problem;
  }
  for (const [a, b] of rules?.exclusive ?? []) {
    if (filled(values[a]) && filled(values[b]) && !problems[b]) problems[b] = `Give either ${label(a)} or ${label(b)}, not both.`;
  }
  for (const [option, needs] of rules?.requires ?? []) {
    if (filled(values[option]) && !filled(values[needs]) && !problems[option])
      problems[option] = `${label(option)} applies only with ${label(needs)}.`;
  }
  for (const [field, options] of rules?.oneOf ?? []) {
    if (!options.some((option) => filled(values[option])) && !problems[field]) problems[field] = `Give ${orList(options.map(label))}.`;
  }
  return problems;
}
