// Where a webhook may be delivered: http(s) URLs whose every address is public. Loopback,
// private (RFC 1918, IPv6 unique-local), link-local (with the cloud metadata address
// 169.254.169.254), carrier-grade NAT, unspecified, multicast, reserved and documentation ranges
// are refused, in IPv4, IPv6, and the IPv6 forms that carry an IPv4 address (mapped, compatible,
// NAT64, 6to4). Checked when an endpoint is created (its name resolved) and again on the address
// each delivery actually connects to (src/webhooks/send.ts), so a name that resolves elsewhere
// later (DNS rebinding) cannot pass.
import dns from 'node:dns';
import type http from 'node:http';
import net from 'node:net';
import { AppError } from '../errors.js';

type Range = [bytes: number[], prefix: number];

const V4_FORBIDDEN: Range[] = [
  [[0, 0, 0, 0], 8], // "this network", unspecified
  [[10, 0, 0, 0], 8], // private
  [[100, 64, 0, 0], 10], // carrier-grade NAT
  [[127, 0, 0, 0], 8], // loopback
  [[169, 254, 0, 0], 16], // link-local, cloud metadata
  [[172, 16, 0, 0], 12], // private
  [[192, 0, 0, 0], 24], // IETF protocol assignments
  [[192, 0, 2, 0], 24], // documentation
  [[192, 88, 99, 0], 24], // 6to4 relay anycast
  [[192, 168, 0, 0], 16], // private
  [[198, 18, 0, 0], 15], // benchmarking
  [[198, 51, 100, 0], 24], // documentation
  [[203, 0, 113, 0], 24], // documentation
  [[224, 0, 0, 0], 4], // multicast
  [[240, 0, 0, 0], 4], // reserved, broadcast
];

const V6_FORBIDDEN: Range[] = [
  [[0x01, 0, 0, 0, 0, 0, 0, 0], 64], // discard-only 100::/64
  [[0x20, 0x01, 0x0d, 0xb8], 32], // documentation 2001:db8::/32
  [[0x20, 0x01, 0, 0], 23], // IETF protocol assignments 2001::/23 (Teredo included)
  [[0xfc], 7], // unique local
  [[0xfe, 0x80], 10], // link-local
  [[0xfe, 0xc0], 10], // site-local (deprecated)
  [[0xff], 8], // multicast
];

const inRange = (bytes: number[], [range, prefix]: Range): boolean => {
  for (let bit = 0; bit < prefix; bit++) {
    const byte = bit >> 3;
    const mask = 0x80 >> (bit & 7);
    if ((bytes[byte]! & mask) !== ((range[byte] ?? 0) & mask)) return false;
  }
  return true;
};

function parseV4(text: string): number[] | undefined {
  if (net.isIPv4(text)) return text.split('.').map(Number);
  return undefined;
}

/** The 16 bytes of an IPv6 address (with an embedded dotted IPv4 tail, or a zone, too). */
function parseV6(text: string): number[] | undefined {
  let address = text.replace(/%.*$/, '');
  if (!net.isIPv6(address)) return undefined;
  const lastColon = address.lastIndexOf(':');
  const v4 = parseV4(address.slice(lastColon + 1));
  if (v4) address = `${address.slice(0, lastColon + 1)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  const [left, right] = address.includes('::') ? address.split('::') : [address, undefined];
  const leftGroups = left ? left.split(':') : [];
  const rightGroups = right ? right.split(':') : [];
  const zeros = right === undefined ? 0 : 8 - leftGroups.length - rightGroups.length;
  const groups = [...leftGroups, ...Array<string>(Math.max(0, zeros)).fill('0'), ...rightGroups].map((g) => parseInt(g, 16));
  if (groups.length !== 8 || groups.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff)) return undefined;
  return groups.flatMap((g) => [g >> 8, g & 0xff]);
}

const v4Forbidden = (bytes: number[]): boolean => V4_FORBIDDEN.some((range) => inRange(bytes, range));

function v6Forbidden(bytes: number[]): boolean {
  const zero = (from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);
  // ::, ::1, and the IPv4-compatible ::a.b.c.d
  if (zero(0, 12)) return zero(12, 15) ? true : v4Forbidden(bytes.slice(12));
  // IPv4-mapped ::ffff:a.b.c.d
  if (zero(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return v4Forbidden(bytes.slice(12));
  // IPv4-translated ::ffff:0:a.b.c.d, NAT64 64:ff9b::/96 and 64:ff9b:1::/48
  if (zero(0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zero(10, 12)) return v4Forbidden(bytes.slice(12));
  if (bytes[0] === 0 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b) return v4Forbidden(bytes.slice(12)) || !zero(4, 12);
  // 6to4 2002:a.b.c.d::/48
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return v4Forbidden(bytes.slice(2, 6));
  return V6_FORBIDDEN.some((range) => inRange(bytes, range));
}

/**
 * True when `address` (an IPv4 or IPv6 literal) is not a public unicast address. Anything that
 * does not parse as an address counts as forbidden.
 */
export function isForbiddenAddress(address: string): boolean {
  const text = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const v4 = parseV4(text);
  if (v4) return v4Forbidden(v4);
  const v6 = parseV6(text);
  if (v6) return v6Forbidden(v6);
  return true;
}

/** The URL's host as an address or a name (IPv6 brackets removed). */
const hostOf = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1');

/**
 * Reads and checks the form of a URL this service will fetch or post to: absolute http(s), no
 * credentials, no fragment (and no query where `query: false`); 400 VALIDATION_ERROR naming `field`.
 * Webhook endpoints and origins' base URLs both go through it.
 */
export function parseOutboundUrl(text: string, field: string, rules: { query: boolean; credentialsHint: string }): URL {
  const invalid = (message: string) => new AppError('VALIDATION_ERROR', `${field}: ${message}`, { fields: [{ field, message }] });
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw invalid('must be an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid('must be an http or https URL');
  if (url.username || url.password) throw invalid(`must not carry credentials${rules.credentialsHint}`);
  if (!rules.query && url.search) throw invalid('must not have a ?query or #fragment');
  if (url.hash) throw invalid(rules.query ? 'must not have a #fragment' : 'must not have a ?query or #fragment');
  return url;
}

/** Reads and checks an endpoint URL's form (400 VALIDATION_ERROR naming `url`). */
export function parseWebhookUrl(text: string): URL {
  return parseOutboundUrl(text, 'url', { query: true, credentialsHint: '; authenticate deliveries by their signature' });
}

const notAllowed = (url: URL, address: string) =>
  new AppError(
    'WEBHOOK_URL_NOT_ALLOWED',
    `${address === hostOf(url) ? `${address} is` : `${url.hostname} resolves to ${address},`} not a public address: webhooks are not ` +
      'delivered to loopback, private, link-local or metadata addresses (the operator can allow them with WEBHOOK_ALLOW_PRIVATE_NETWORKS=1)',
    { url: url.toString(), address },
  );

/**
 * Refuses (400) a destination whose host is, or resolves to, a forbidden address, unless
 * `allowPrivate`. A name that does not resolve is refused too (VALIDATION_ERROR naming `field`).
 * `refuse` makes the error for a forbidden address (a webhook's WEBHOOK_URL_NOT_ALLOWED by default).
 */
export async function checkDestination(
  url: URL,
  allowPrivate: boolean,
  { field = 'url', refuse = notAllowed }: { field?: string; refuse?: (url: URL, address: string) => AppError } = {},
): Promise<void> {
  if (allowPrivate) return;
  const host = hostOf(url);
  if (net.isIP(host)) {
    if (isForbiddenAddress(host)) throw refuse(url, host);
    return;
  }
  let addresses: dns.LookupAddress[];
  try {
    addresses = await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch {
    throw new AppError('VALIDATION_ERROR', `${field}: the host ${host} does not resolve`, {
      fields: [{ field, message: `the host ${host} does not resolve` }],
    });
  }
  const forbidden = addresses.find((a) => isForbiddenAddress(a.address));
  if (forbidden) throw refuse(url, forbidden.address);
}

/**
 * Confines an outgoing http(s) request to public addresses, unless `allowPrivate`: a literal
 * forbidden host is refused before connecting (the error is returned), a name is resolved by
 * safeLookup (pass `requestOptions` to the request), and the address actually connected to is
 * checked again (`fail` is called), whatever resolved it (a literal, a happy-eyeballs pick).
 */
export const publicOnly = {
  /** A ForbiddenAddressError when the URL's host is a forbidden literal address, else undefined. */
  literal(url: URL, allowPrivate: boolean): ForbiddenAddressError | undefined {
    const host = hostOf(url);
    return !allowPrivate && net.isIP(host) && isForbiddenAddress(host) ? new ForbiddenAddressError(host) : undefined;
  },
  requestOptions: (allowPrivate: boolean): { lookup?: never } => (allowPrivate ? {} : { lookup: safeLookup as never }),
  watch(request: http.ClientRequest, allowPrivate: boolean, fail: (err: ForbiddenAddressError) => void): void {
    if (allowPrivate) return;
    request.on('socket', (socket) => {
      socket.once('connect', () => {
        const remote = socket.remoteAddress;
        if (remote === undefined || isForbiddenAddress(remote)) fail(new ForbiddenAddressError(remote ?? 'an unknown address'));
      });
    });
  },
};

/** Thrown (as a connection error) when a delivery would connect to a forbidden address. */
export class ForbiddenAddressError extends Error {
  readonly code = 'EWEBHOOKADDRESS';
  constructor(readonly address: string) {
    super(`refused to connect to ${address}: not a public address`);
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/http that resolves as usual and refuses when any address is forbidden: the
 * connection is then made only to the addresses checked here.
 */
function safeLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const forbidden = addresses.find((a) => isForbiddenAddress(a.address));
    if (forbidden) return callback(new ForbiddenAddressError(forbidden.address), []);
    if (!addresses.length) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
    if (options.all) return callback(null, addresses);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  });
}
