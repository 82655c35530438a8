// Idempotency-Key on POSTs, the HTTP side: the header read and checked, and the fingerprint of
// what the request asks for. The responses are stored by src/db/idempotency.ts.
import { AppError } from '../errors.js';
import { sha256Hex } from '../ids.js';

export function readIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const key = Array.isArray(header) ? header[0]! : header;
  if (key.length === 0 || key.length > 255) {
    throw new AppError('VALIDATION_ERROR', 'Idempotency-Key must be 1 to 255 characters', {
      fields: [{ field: 'Idempotency-Key', message: 'must be 1 to 255 characters' }],
    });
  }
  return key;
}

/** A stable hash of what the request asks for: route and body with keys in sorted order. */
export function fingerprint(route: string, body: unknown): string {
  return sha256Hex(`${route}\n${canonicalJson(body)}`);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}
