// The reference of the kinds as people read it, generated from the registry: docs/kinds.md
// (`npm run docs:kinds`, scripts/kind-docs.ts) and the line on `result` in each process
// route's OpenAPI description. Nothing here knows a kind by name.
import { OPERATIONS } from './registry.js';
import type { AnyOperation, JsonSchema } from './types.js';

const code = (value: unknown) => `\`${typeof value === 'string' ? value : JSON.stringify(value)}\``;
/** Text for a Markdown table cell: no pipe or line break breaks the row. */
const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

/** `result` adds: …, as one paragraph (empty for a kind that adds nothing to the output's own fields). */
export function resultNote(op: AnyOperation): string {
  const fields = Object.entries(op.result?.properties ?? {});
  if (!fields.length) return '';
  return `\n\n\`result\` adds: ${fields.map(([name, schema]) => `\`${name}\` (${String(schema.description ?? '')})`).join('; ')}.`;
}

/** An option's values as a reader wants them: its type, its choices or its range. */
function valuesOf(schema: JsonSchema): string {
  if (schema.const !== undefined) return code(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map(code).join(', ');
  const types = Array.isArray(schema.type) ? schema.type.map(String) : [String(schema.type ?? 'object')];
  const min = schema.minimum ?? schema.minItems ?? schema.minLength;
  const max = schema.maximum ?? schema.maxItems ?? schema.maxLength;
  const range = min !== undefined && max !== undefined ? ` ${min}–${max}` : min !== undefined ? ` ≥ ${min}` : max !== undefined ? ` ≤ ${max}` : '';
  const unit = schema.type === 'array' ? ' items' : schema.type === 'string' && range ? ' characters' : '';
  const pattern = typeof schema.pattern === 'string' && schema.pattern === '^auto$' ? ' (the string `"auto"`)' : '';
  return `${types.join(' or ')}${range}${unit}${pattern}`;
}

function optionRows(op: AnyOperation): string[] {
  const required = new Set(op.options.required ?? []);
  const input = op.multiInput
    ? [`| \`fileIds\` | **required** (or \`fileId\` for one) | array of ${op.multiInput.min}–${op.multiInput.max} file ids | The inputs, in order. |`]
    : ['| `fileId` | **required** | file id | The input: an uploaded or output file of yours. |'];
  const rows = Object.entries(op.options.properties).map(([name, raw]) => {
    const schema = raw as JsonSchema;
    const description = typeof schema.description === 'string' ? schema.description : '';
    return `| \`${name}\` | ${required.has(name) ? '**required**' : 'optional'} | ${cell(valuesOf(schema))} | ${cell(description)} |`;
  });
  return ['| option | | values | what it does |', '|---|---|---|---|', ...input, ...rows];
}

/** What the output of the kind's example is named, from an input `photo.jpg`. */
function exampleName(op: AnyOperation): string {
  const tag = op.tag?.(op.example);
  return tag ? `\`photo.${tag}.<ext>\`` : '`photo.<ext>`';
}

function section(op: AnyOperation): string {
  const input = op.multiInput ? { fileIds: ['file_…', 'file_…'] } : { fileId: 'file_…' };
  const body = JSON.stringify({ ...input, ...op.example }, null, 2);
  const results = Object.entries(op.result?.properties ?? {});
  return [
    `## \`${op.kind}\` — ${op.summary}`,
    '',
    op.description,
    '',
    `- Batch: ${op.batch ? `yes, \`POST /api/process/batch/${op.kind}\` with \`fileIds\`` : 'no'}.`,
    `- Pipeline step: ${op.step ? `yes, \`{"kind": "${op.kind}", …}\` in \`steps\`` : 'no'}.`,
    `- Input: ${op.accepts === 'presentation' ? 'a presentation' : op.accepts === 'image' ? 'an image' : op.accepts}.`,
    `- Output name: ${exampleName(op)} for the example below (the rule is at the top of this page).`,
    '',
    ...optionRows(op),
    '',
    ...(results.length
      ? [
          '`result` adds, beyond `format`, `size`, `width`, `height` and `pages`:',
          '',
          '| field | values | meaning |',
          '|---|---|---|',
          ...results.map(([name, schema]) => `| \`${name}\` | ${cell(valuesOf(schema))} | ${cell(String(schema.description ?? ''))} |`),
          '',
        ]
      : []),
    'Example:',
    '',
    '```http',
    `POST /api/process/${op.kind}`,
    'x-api-key: <your key>',
    'content-type: application/json',
    '',
    body,
    '```',
  ].join('\n');
}

/** The generated part of docs/kinds.md: the table of kinds, then one section per kind, in the registry's order. */
export function kindsReference(operations: readonly AnyOperation[] = OPERATIONS): string {
  const table = [
    '| kind | what it does | batch | pipeline step |',
    '|---|---|---|---|',
    ...operations.map(
      (op) => `| [\`${op.kind}\`](#${op.kind}--${anchor(op.summary)}) | ${cell(op.summary)} | ${op.batch ? 'yes' : '—'} | ${op.step ? 'yes' : '—'} |`,
    ),
  ].join('\n');
  return [table, ...operations.map(section)].join('\n\n');
}

/** GitHub's anchor for a heading's text after the kind: lower case, spaces to dashes, punctuation dropped. */
const anchor = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, '')
    .replace(/ /g, '-');
