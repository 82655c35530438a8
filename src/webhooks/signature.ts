// The signature of a delivery: `Imgapi-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
// "<t>.<raw body>")>`, the scheme Stripe uses. The key is the endpoint's secret as issued
// (`whsec_…`, UTF-8). Receivers verify with the SDK's verifyWebhook.
import crypto from 'node:crypto';

export const SIGNATURE_HEADER = 'Imgapi-Signature';
export const EVENT_ID_HEADER = 'Imgapi-Event-Id';

export function signatureHeader(secret: string, body: string, timestampSeconds: number): string {
  const digest = crypto.createHmac('sha256', secret).update(`${timestampSeconds}.${body}`).digest('hex');
  return `t=${timestampSeconds},v1=${digest}`;
}
