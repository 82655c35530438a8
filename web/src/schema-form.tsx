// A form generated from a kind's JSON Schema (GET /dashboard-api/operations, built from the
// operations registry): one field per option, typed by the schema; nothing restated by hand.
// Values are kept as text and converted to the schema's types when the job is sent. Each field
// shows at most one message, beside it: the browser's own check (validation.ts) or the server's.
// Options that exclude each other (the kind's rules) are disabled while the other is given;
// descriptions are the schema's Markdown, rendered (markdown.tsx).
import type { ReactNode } from 'react';
import { label } from './format.js';
import { Markdown } from './markdown.js';
import { exampleOf } from './validation.js';

export interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  description?: string;
  example?: unknown;
  examples?: unknown[];
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  /** A pipeline's steps: one alternative per step kind, told apart by `kind`'s const. */
  oneOf?: JsonSchema[];
  const?: unknown;
  minItems?: number;
  maxItems?: number;
}

export type FormValues = Record<string, string | boolean>;

/** A field that names a further file (a watermark's logo): the page renders its own picker. */
const isFileField = (name: string) => /FileId$/.test(name);

const typeOf = (schema: JsonSchema): string =>
  Array.isArray(schema.type) ? (schema.type.find((t) => t !== 'null') ?? 'string') : (schema.type ?? 'string');

/**
 * A text field that also takes a number (compress's `quality`: 1–100 or "auto", typed
 * ["string", "number"]): its text is sent as a number when it reads as one.
 */
const takesNumber = (schema: JsonSchema): boolean => Array.isArray(schema.type) && schema.type.some((t) => t === 'number' || t === 'integer');

/**
 * The request body's options from the form's values: empty fields are left out (the defaults
 * apply), and so are fields a rule has disabled.
 */
export function toBody(
  properties: Record<string, JsonSchema>,
  values: FormValues,
  disabled: ReadonlySet<string> = new Set(),
): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(properties)) {
    if (disabled.has(name)) continue;
    const value = values[name];
    if (value === undefined || value === '' || value === false) continue;
    const type = typeOf(schema);
    if (type === 'boolean') body[name] = value === true;
    else if ((type === 'integer' || type === 'number' || takesNumber(schema)) && typeof value === 'string') {
      const n = Number(value);
      body[name] = value.trim() !== '' && Number.isFinite(n) ? n : value; // the server names what is wrong
    } else if ((type === 'array' || type === 'object') && typeof value === 'string') {
      try {
        body[name] = JSON.parse(value);
      } catch {
        body[name] = value;
      }
    } else body[name] = value;
  }
  return body;
}

function rangeText(schema: JsonSchema): string {
  const low = schema.minimum ?? schema.exclusiveMinimum;
  if (low !== undefined && schema.maximum !== undefined)
    return `${schema.exclusiveMinimum !== undefined ? 'Above' : 'From'} ${low} to ${schema.maximum}.`;
  if (low !== undefined) return schema.exclusiveMinimum !== undefined ? `Above ${low}.` : `At least ${low}.`;
  if (schema.maximum !== undefined) return `At most ${schema.maximum}.`;
  return '';
}

function Field(props: {
  name: string;
  schema: JsonSchema;
  required: boolean;
  value: string | boolean | undefined;
  onChange: (value: string | boolean) => void;
  problem?: string;
  disabledReason?: string;
  idPrefix: string;
  renderFileField?: (field: { id: string; name: string; value: string; onChange: (value: string) => void; disabled: boolean }) => ReactNode;
}) {
  const { name, schema, value, onChange, problem, disabledReason } = props;
  const type = typeOf(schema);
  const id = `${props.idPrefix}${name}`;
  const disabled = disabledReason !== undefined;
  const range = rangeText(schema);
  const describedBy = [`${id}-help`, problem ? `${id}-problem` : ''].filter(Boolean).join(' ');
  const common = { id, name, disabled, 'aria-invalid': problem ? true : undefined, 'aria-describedby': describedBy };
  let input;
  if (isFileField(name) && props.renderFileField) {
    input = props.renderFileField({ id, name, value: String(value ?? ''), onChange, disabled });
  } else if (schema.enum) {
    input = (
      <select {...common} value={String(value ?? '')} onChange={(e) => onChange(e.target.value)}>
        <option value="">{props.required ? '(choose)' : '(default)'}</option>
        {schema.enum.map((option) => (
          <option key={String(option)} value={String(option)}>
            {String(option)}
          </option>
        ))}
      </select>
    );
  } else if (type === 'boolean') {
    input = <input {...common} type="checkbox" checked={value === true} onChange={(e) => onChange(e.target.checked)} />;
  } else if ((type === 'integer' || type === 'number') && !takesNumber(schema)) {
    // type="text" with a numeric keyboard: the browser's own number checks would stop the
    // form before ours and say it in its words.
    input = (
      <input
        {...common}
        type="text"
        inputMode={type === 'integer' ? 'numeric' : 'decimal'}
        value={String(value ?? '')}
        onChange={(e) => onChange(e.target.value)}
      />
    );
  } else {
    input = (
      <input
        {...common}
        type="text"
        maxLength={schema.maxLength}
        placeholder={exampleOf(schema) ?? (type === 'array' || type === 'object' ? 'JSON' : '')}
        value={String(value ?? '')}
        onChange={(e) => onChange(e.target.value)}
      />
    );
  }
  return (
    <div
      className={`field ${type === 'boolean' ? 'field-check' : ''} ${problem ? 'field-invalid' : ''} ${disabled ? 'field-disabled' : ''}`}
      data-field={name}
    >
      <label htmlFor={id}>
        {label(name)}
        {props.required && (
          <span className="required" title="required">
            {' '}
            *
          </span>
        )}{' '}
        <code className="muted small">{name}</code>
      </label>
      {input}
      <div className="muted small help" id={`${id}-help`}>
        {disabledReason && <strong className="field-off">{disabledReason} </strong>}
        {schema.description && <Markdown text={schema.description} />}
        {range && ` ${range}`}
      </div>
      {problem && (
        <div className="error-text small" id={`${id}-problem`} data-testid={`problem-${name}`}>
          {problem}
        </div>
      )}
    </div>
  );
}

export function SchemaForm(props: {
  properties: Record<string, JsonSchema>;
  required: string[];
  values: FormValues;
  onChange: (values: FormValues) => void;
  /** One message per field, shown beside it. */
  problems: Record<string, string>;
  /** Fields turned off by a rule, with why. */
  disabled: ReadonlyMap<string, string>;
  /** Prefix of the fields' ids (several forms on a page: a pipeline's steps). */
  idPrefix?: string;
  renderFileField?: (field: { id: string; name: string; value: string; onChange: (value: string) => void; disabled: boolean }) => ReactNode;
}) {
  const entries = Object.entries(props.properties);
  if (entries.length === 0) return <p className="muted">This kind has no options.</p>;
  return (
    <div className="schema-form">
      {entries.map(([name, schema]) => (
        <Field
          key={name}
          name={name}
          schema={schema}
          required={props.required.includes(name)}
          value={props.values[name]}
          onChange={(value) => props.onChange({ ...props.values, [name]: value })}
          problem={props.problems[name]}
          disabledReason={props.disabled.get(name)}
          idPrefix={props.idPrefix ?? 'option-'}
          renderFileField={props.renderFileField}
        />
      ))}
    </div>
  );
}
