// Verifying imgapi's webhook deliveries (Node ≥ 20): the signature is
// `Imgapi-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`.
//
//   const event = verifyWebhook(rawBody, req.headers['imgapi-signature'], process.env.IMGAPI_WEBHOOK_SECRET!);
import crypto from 'node:crypto';
import type { components } from './openapi.js';

/** The JSON body of a delivery: `task.*` events carry `data.task`, `batch.completed` `data.batch`. */
export type WebhookEvent = components['schemas']['WebhookEvent'];

export interface VerifyWebhookOptions {
  /** How far the signature's timestamp may be from now, in seconds (default 300): older deliveries are refused as replays. */
  toleranceSeconds?: number;
  /** The time to check against, in milliseconds since the epoch (default: now). */
  now?: number;
}

export class WebhookSignatureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookSignatureError';
  }
}

/**
 * Checks a delivery's signature against the endpoint's secret and answers the parsed event;
 * throws WebhookSignatureError when the header is missing or malformed, no `v1` signature
 * matches (compared in constant time), or the timestamp is outside the tolerance. Pass the body
 * exactly as received (a Buffer or string), before any JSON parsing.
 */
export function verifyWebhook(
  rawBody: string | Uint8Array,
  signatureHeader: string | string[] | null | undefined,
  secret: string,
  options: VerifyWebhookOptions = {},
): WebhookEvent {
  const header = Array.isArray(signatureHeader) ? signatureHeader[0] : signatureHeader;
  if (!header) throw new WebhookSignatureError('No Imgapi-Signature header');
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const [key, value] = part.trim().split('=', 2);
    if (key === 't' && value && /^\d+$/.test(value)) timestamp = Number(value);
    else if (key === 'v1' && value) signatures.push(value);
  }
  if (timestamp === undefined || signatures.length === 0) throw new WebhookSignatureError('Malformed Imgapi-Signature header');
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  const expected = crypto.createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest();
  const matches = signatures.some((candidate) => {
    const given = /^[0-9a-f]{64}$/i.test(candidate) ? Buffer.from(candidate, 'hex') : undefined;
    return given !== undefined && crypto.timingSafeEqual(given, expected);
  });
  if (!matches) throw new WebhookSignatureError('The signature does not match: wrong secret, or the body was changed');
  const tolerance = options.toleranceSeconds ?? 300;
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(now - timestamp) > tolerance) throw new WebhookSignatureError(`The signature's timestamp is more than ${tolerance} s from now`);
  return JSON.parse(body.toString('utf8')) as WebhookEvent;
}
