// `imgapi url <source> [--w 720 --f auto … | --transform w:720,f:auto]`: prints a signed delivery
// URL, built offline by the SDK with the signing key from IMGAPI_SIGNING_KEY_ID and
// IMGAPI_SIGNING_SECRET (or --key-id/--secret). Nothing is sent to the service.
import { deliveryUrlSync, DeliveryUrlError, TRANSFORM_NAMES, type DeliverySource, type Transform } from '../../sdk/node.js';
import { UsageError, type ClientIo, type CommonOptions } from './common.js';

export const URL_USAGE = `  url <fileId | o/<origin>/<path>> [--w 720 --f auto …] [--transform w:720,f:auto] [--public]
                                  prints a signed delivery URL, offline (no request). Pairs:
                                  --${TRANSFORM_NAMES.join(' --')}
                                  (or one --transform; - for none). --public: the unsigned (_)
                                  URL of a public preset (--p name). The key: --key-id and
                                  --secret, or $IMGAPI_SIGNING_KEY_ID and $IMGAPI_SIGNING_SECRET
                                  (prefer the environment: arguments show in process lists)`;

const VALUE_OPTIONS = new Set(['transform', 'key-id', 'secret', ...TRANSFORM_NAMES]);

export function urlCommand(options: CommonOptions, io: ClientIo): number {
  const positionals: string[] = [];
  const values = new Map<string, string>();
  let publicPreset = false;
  for (let i = 0; i < options.rest.length; i++) {
    const arg = options.rest[i]!;
    if (arg === '--') {
      positionals.push(...options.rest.slice(i + 1));
      break;
    }
    if (!arg.startsWith('--')) {
      positionals.push(arg);
      continue;
    }
    const [name, inline] = arg.includes('=') ? [arg.slice(2, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg.slice(2), undefined];
    if (name === 'public' && inline === undefined) {
      publicPreset = true;
      continue;
    }
    if (!VALUE_OPTIONS.has(name)) throw new UsageError(`url: unknown option --${name}`);
    const value = inline ?? options.rest[++i];
    if (value === undefined) throw new UsageError(`url: --${name} needs a value`);
    if (values.has(name)) throw new UsageError(`url: --${name} is given twice`);
    values.set(name, value);
  }
  if (positionals.length !== 1) throw new UsageError('url: name one source: a fileId or o/<origin>/<path>');
  const pairs = TRANSFORM_NAMES.filter((name) => values.has(name));
  if (values.has('transform') && pairs.length) throw new UsageError('url: give the transform either as --transform or as pairs (--w …), not both');
  const transform: string | Transform = values.get('transform') ?? (Object.fromEntries(pairs.map((name) => [name, values.get(name)!])) as Transform);
  const keyId = values.get('key-id') ?? io.env.IMGAPI_SIGNING_KEY_ID;
  const secret = values.get('secret') ?? io.env.IMGAPI_SIGNING_SECRET;
  if (!keyId) throw new UsageError('url: no signing key: set IMGAPI_SIGNING_KEY_ID or pass --key-id');
  try {
    new URL(options.url);
  } catch {
    throw new UsageError(`url: --url (or IMGAPI_URL) is not a URL: "${options.url}"`);
  }
  let url: string;
  try {
    url = deliveryUrlSync(sourceOf(positionals[0]!), transform, { baseUrl: options.url, signingKey: { keyId, secret }, publicPreset });
  } catch (err) {
    if (err instanceof DeliveryUrlError)
      throw new UsageError(`url: ${err.message.replace("the key's secret", "the key's secret (IMGAPI_SIGNING_SECRET or --secret)")}`);
    throw err;
  }
  io.stdout.write(options.json ? `${JSON.stringify({ url })}\n` : `${url}\n`);
  return 0;
}

/** `o/<origin>/<path>` (the path as plain text; the SDK encodes it) or a fileId. */
function sourceOf(text: string): DeliverySource {
  if (!text.startsWith('o/')) return text;
  const slash = text.indexOf('/', 2);
  if (slash < 0) throw new UsageError(`url: "${text}" names no path: write o/<origin>/<path>`);
  return { origin: text.slice(2, slash), path: text.slice(slash + 1) };
}
