// Which options of a kind exclude or need each other, for the playground's forms. The JSON
// Schemas say what one field may be; the rules between fields live in each kind's `check`
// (compress: targetSize is exclusive with quality; watermark: exactly one of text or logoFileId,
// fontSize for text only…). Rather than restate them, they are read from `check` itself: each
// pair of options is given valid sample values, and a message that appears only when both are
// set is an exclusion; a message about `b` that goes away once `a` is set is a need; a message
// with no option set that any one of some options cures makes those a choice. Required
// options always carry a valid sample (from the kind's example where it has one).
import type { PlanLimits } from '../../../accounts/plans.js';
import type { AnyOperation, FieldError } from '../../../operations/types.js';

type Schema = { type?: string | string[]; enum?: unknown[]; minimum?: number; maximum?: number; exclusiveMinimum?: number; example?: unknown };

export interface OptionRules {
  /** Pairs of options that cannot be given together. */
  exclusive: [string, string][];
  /** [option, what it needs]: the first applies only when the second is given. */
  requires: [string, string][];
  /** [field, options]: without any of the options the kind is refused at `field` (watermark: text or logoFileId). */
  oneOf: [string, string[]][];
}

const INPUT_FIELDS = new Set(['fileId', 'fileIds']);

function sample(schema: Schema, example: unknown): unknown {
  if (example !== undefined) return example;
  if (schema.enum?.length) return schema.enum[0];
  const types = Array.isArray(schema.type) ? schema.type : [schema.type ?? 'string'];
  if (types.includes('boolean')) return true;
  if (types.includes('integer') || types.includes('number')) {
    if (schema.minimum !== undefined) return schema.minimum;
    if (schema.exclusiveMinimum !== undefined)
      return schema.maximum !== undefined ? (schema.exclusiveMinimum + schema.maximum) / 2 : schema.exclusiveMinimum + 1;
    return schema.maximum ?? 1;
  }
  if (schema.example !== undefined) return schema.example;
  return 'file_sample';
}

function messages(op: AnyOperation, options: Record<string, unknown>, limits: PlanLimits): FieldError[] {
  try {
    return op.check?.(options, [], limits) ?? [];
  } catch {
    return [];
  }
}

const keyOf = (e: FieldError) => `${e.field}\u0000${e.message}`;

export function optionRules(op: AnyOperation, limits: PlanLimits): OptionRules {
  const rules: OptionRules = { exclusive: [], requires: [], oneOf: [] };
  if (!op.check) return rules;
  const properties = ((op.options as { properties?: Record<string, Schema> }).properties ?? {}) as Record<string, Schema>;
  const required = new Set((op.options as { required?: string[] }).required ?? []);
  const examples = (op.example ?? {}) as Record<string, unknown>;
  // Required options are always given (a pipeline's steps, convert's format); the others are paired.
  const base = Object.fromEntries(
    Object.keys(properties)
      .filter((name) => required.has(name) && !INPUT_FIELDS.has(name))
      .map((name) => [name, sample(properties[name]!, examples[name])]),
  );
  const names = Object.keys(properties).filter((name) => !INPUT_FIELDS.has(name) && !required.has(name));
  const values = Object.fromEntries(names.map((name) => [name, sample(properties[name]!, examples[name])]));
  const alone = new Map(names.map((name) => [name, messages(op, { ...base, [name]: values[name] }, limits)]));
  // What the kind refuses with no optional option given, and which single options make it go away.
  for (const error of messages(op, base, limits)) {
    const cures = names.filter((name) => !alone.get(name)!.some((e) => keyOf(e) === keyOf(error)));
    if (cures.length > 0 && !rules.oneOf.some(([field]) => field === error.field)) rules.oneOf.push([error.field, cures]);
  }
  for (let i = 0; i < names.length; i++) {
    for (let j = 0; j < names.length; j++) {
      if (i === j) continue;
      const a = names[i]!;
      const b = names[j]!;
      const both = messages(op, { ...base, [a]: values[a], [b]: values[b] }, limits);
      const before = new Set([...alone.get(a)!, ...alone.get(b)!].map((e) => e.message));
      if (i < j && both.some((e) => !before.has(e.message))) rules.exclusive.push([a, b]);
      const withA = new Set(both.map(keyOf));
      if (alone.get(b)!.some((e) => e.field === b && !withA.has(keyOf(e)))) rules.requires.push([b, a]);
    }
  }
  return rules;
}
