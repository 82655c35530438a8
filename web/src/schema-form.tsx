// A form generated from a job kind's JSON Schema (GET /dashboard-api/operations, built from the
// operations registry): one field per option, typed by the schema; nothing restated by hand.
// Values are kept as text and converted to the schema's types when the job is sent; the server
// validates everything and its field errors are shown next to the fields they name.
import type { FieldError } from './api';
import { label } from './format';

export interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  maxLength?: number;
  description?: string;
  example?: unknown;
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: string[];
}

export type FormValues = Record<string, string | boolean>;

/** A field the form offers a choice of uploaded files for (a watermark's logo). */
const isFileField = (name: string) => /FileId$/.test(name);

const typeOf = (schema: JsonSchema): string =>
  Array.isArray(schema.type) ? (schema.type.find((t) => t !== 'null') ?? 'string') : (schema.type ?? 'string');

/**
 * A text field that also takes a number (compress's `quality`: 1–100 or "auto", typed
 * ["string", "number"]): its text is sent as a number when it reads as one.
 */
const takesNumber = (schema: JsonSchema): boolean => Array.isArray(schema.type) && schema.type.some((t) => t === 'number' || t === 'integer');

/** The request body's options from the form's values: empty fields are left out (the defaults apply). */
export function toBody(properties: Record<string, JsonSchema>, values: FormValues): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(properties)) {
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
  errors: FieldError[];
  files: { fileId: string; filename: string }[];
}) {
  const { name, schema, value, onChange } = props;
  const type = typeOf(schema);
  const id = `option-${name}`;
  const help = [schema.description, rangeText(schema)].filter(Boolean).join(' ');
  let input;
  if (isFileField(name)) {
    input = (
      <select id={id} name={name} value={String(value ?? '')} onChange={(e) => onChange(e.target.value)}>
        <option value="">(none)</option>
        {props.files.map((f) => (
          <option key={f.fileId} value={f.fileId}>
            {f.filename}
          </option>
        ))}
      </select>
    );
  } else if (schema.enum) {
    input = (
      <select id={id} name={name} value={String(value ?? '')} onChange={(e) => onChange(e.target.value)}>
        <option value="">{props.required ? '(choose)' : '(default)'}</option>
        {schema.enum.map((option) => (
          <option key={String(option)} value={String(option)}>
            {String(option)}
          </option>
        ))}
      </select>
    );
  } else if (type === 'boolean') {
    input = <input id={id} name={name} type="checkbox" checked={value === true} onChange={(e) => onChange(e.target.checked)} />;
  } else if (type === 'integer' || type === 'number') {
    input = (
      <input
        id={id}
        name={name}
        type="number"
        inputMode={type === 'integer' ? 'numeric' : 'decimal'}
        step={type === 'integer' ? 1 : 'any'}
        min={schema.minimum}
        max={schema.maximum}
        value={String(value ?? '')}
        onChange={(e) => onChange(e.target.value)}
      />
    );
  } else {
    input = (
      <input
        id={id}
        name={name}
        type="text"
        maxLength={schema.maxLength}
        placeholder={schema.example !== undefined ? String(schema.example) : type === 'array' || type === 'object' ? 'JSON' : ''}
        value={String(value ?? '')}
        onChange={(e) => onChange(e.target.value)}
      />
    );
  }
  return (
    <div className={`field ${type === 'boolean' ? 'field-check' : ''} ${props.errors.length ? 'field-invalid' : ''}`} data-field={name}>
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
      {help && <div className="muted small help">{help}</div>}
      {props.errors.map((e) => (
        <div key={e.message} className="error-text small">
          {e.message}
        </div>
      ))}
    </div>
  );
}

export function SchemaForm(props: {
  properties: Record<string, JsonSchema>;
  required: string[];
  values: FormValues;
  onChange: (values: FormValues) => void;
  errors: FieldError[];
  files: { fileId: string; filename: string }[];
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
          errors={props.errors.filter((e) => e.field === name || e.field.startsWith(`${name}.`) || e.field.startsWith(`${name}[`))}
          files={props.files}
        />
      ))}
    </div>
  );
}
