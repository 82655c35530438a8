// GET/HEAD /r/{keyId}/{signature}/{transform}/{source}: a delivery URL, outside /api and
// without an API key — the URL's signature is its authority (src/delivery/delivery.ts). The
// path is read as sent (the signature covers its text, percent-encoding included); a query
// string is ignored. No per-key rate limit: a hit is a key lookup (cached), an HMAC, one indexed
// read and a stream from storage; a miss is bounded by RENDER_CONCURRENCY and monthlyRenders.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Delivered } from '../../delivery/delivery.js';
import { newId } from '../../ids.js';
import { targetPath } from '../framing.js';
import { noneMatch } from '../conditional.js';
import type { Services } from '../../services.js';
import { AppError } from '../../errors.js';
import { mimeOf, OUTPUT_FORMATS } from '../../imaging/formats.js';
import { TRANSFORM_GRAMMAR } from '../delivery-schemas.js';
import { NO_SECURITY, bytes, noContent, publicResponses } from '../openapi.js';

/** What a render may be: any format jobs write (the format table's). */
const MEDIA_TYPES = OUTPUT_FORMATS.map((format) => mimeOf(format));

const DESCRIPTION =
  'Renders the source on the first request and serves the stored render after (the way imgproxy, Cloudinary and imgix do); no API key travels, ' +
  'so the URL can sit in an `<img src>`. Unauthenticated: the signature is checked before anything but the key lookup.\n\n' +
  "- `keyId`: one of the account's signing keys (POST /api/signing-keys).\n" +
  '- `signature`: base64url without padding of HMAC-SHA256(secret, `{transform}/{source}`), the rest of the path exactly as sent, compared in ' +
  'constant time; `_` only when `transform` is exactly `p:{name}` of a public preset. Wrong, missing, unknown or deleted key: 403 SIGNATURE_INVALID.\n' +
  `- \`transform\`: ${TRANSFORM_GRAMMAR}\n` +
  '- `f:auto` picks AVIF when Accept names image/avif, else WebP when it names image/webp, else JPEG (PNG when the source has alpha), and the answer ' +
  "carries `Vary: Accept`. Without `f` the source's format is kept where it can be written (else PNG with alpha, JPEG without).\n" +
  '- `source`: a fileId of the signing account (expired or deleted: 404; a presentation or other non-image: 415), or `o/{origin}/{path}`: ' +
  '`baseUrl/path` of one of its origins, fetched under the webhook address rules (ORIGIN_ALLOW_PRIVATE_NETWORKS lifts them), without ' +
  "following redirects, at most the plan's maxFileBytes, within ORIGIN_TIMEOUT_SECONDS (10): a `.` or `..` segment is 400, an unknown origin " +
  'or an origin 404 is 404, any other failure 502 ORIGIN_FAILED, a body that is no image 415. Fetched objects are kept and revalidated with ' +
  'their ETag/Last-Modified after ORIGIN_CACHE_SECONDS; when a revalidation fails the kept copy is served.\n\n' +
  'The answer: the image with `Content-Type`, `Content-Length`, a strong `ETag`, `Cache-Control` (RENDER_CACHE_CONTROL, default `public, ' +
  'max-age=31536000, immutable`), `X-Content-Type-Options: nosniff` and `Imgapi-Cache: hit|miss`; `If-None-Match` with its ETag → 304. Errors ' +
  'are the JSON envelope with `Cache-Control: no-store`.\n\n' +
  "Renders are stored (local disk or S3, under `renders/`; never counted in storageBytes), shared by every process and by the account's keys, " +
  'capped by RENDER_CACHE_MAX_BYTES with least-recently-used eviction, and deleted with their file, origin or preset. A miss counts one against ' +
  'monthlyRenders (429 RENDER_QUOTA_EXCEEDED past it; a failed render is not counted); hits are free. Concurrent misses of one render in one ' +
  'process make it once (and charge once); across API processes it may be made once per process. Each process renders RENDER_CONCURRENCY at ' +
  'once; a miss that would wait for a slot longer than RENDER_QUEUE_SECONDS is 503 RENDER_BUSY with Retry-After, and a render longer than ' +
  'RENDER_TIMEOUT_SECONDS is 504 RENDER_TIMEOUT.';

const ROUTE = '/r/:keyId/:signature/*';

const IMAGE_HEADERS = ['ETag', 'Content-Length', 'Cache-Control', 'Imgapi-Cache', 'X-Content-Type-Options', 'Vary'] as const;

/** The parts of a /r/ path as sent: key id, signature, and what follows (the signed text). */
function splitPath(url: string): { keyId: string; signature: string; signed: string } {
  const path = url.replace(/[?#].*$/, '').slice('/r/'.length);
  const first = path.indexOf('/');
  const second = path.indexOf('/', first + 1);
  return { keyId: path.slice(0, first), signature: path.slice(first + 1, second), signed: path.slice(second + 1) };
}

export function deliveryRoutes(app: FastifyInstance, services: Services): void {
  const { delivery, metrics, config } = services;

  // GET and HEAD as one route: Fastify's generated HEAD route would overwrite Content-Length with 0.
  app.route({
    method: ['GET', 'HEAD'],
    url: ROUTE,
    exposeHeadRoute: false,
    schema: {
      operationId: 'deliver',
      tags: ['Delivery'],
      security: NO_SECURITY,
      summary: 'A delivery URL: the source, rendered',
      description: DESCRIPTION,
      headers: {
        type: 'object',
        properties: {
          accept: { type: 'string', description: 'With `f:auto`: image/avif and image/webp choose the format.' },
          'if-none-match': { type: 'string', description: 'The ETag you hold: 304 when the render is the same.' },
        },
      },
      response: publicResponses(
        {
          200: bytes('The render', MEDIA_TYPES, { headers: IMAGE_HEADERS }),
          304: noContent('Not modified: the ETag matches', { headers: ['ETag', 'Cache-Control', 'Imgapi-Cache', 'X-Content-Type-Options', 'Vary'] }),
        },
        [
          'VALIDATION_ERROR',
          'SIGNATURE_INVALID',
          'ACCOUNT_DISABLED',
          'NOT_FOUND',
          'UNSUPPORTED_MEDIA_TYPE',
          'IMAGE_TOO_LARGE',
          'RENDER_QUOTA_EXCEEDED',
          'ORIGIN_FAILED',
          'RENDER_BUSY',
          'RENDER_TIMEOUT',
          'INSUFFICIENT_STORAGE',
        ],
        ['Cache-Control'],
      ),
    },
    config: {
      swaggerTransform: ({ schema }: { schema: object }) => ({
        schema: {
          ...schema,
          params: {
            type: 'object',
            required: ['keyId', 'signature', 'transform', 'source'],
            properties: {
              keyId: { type: 'string', description: 'A signing key id (sk_…).' },
              signature: { type: 'string', description: 'base64url HMAC-SHA256 of `{transform}/{source}`, or `_` for a public preset.' },
              transform: { type: 'string', description: '`-` or `name:value` pairs joined by `,` (see above).' },
              source: { type: 'string', description: 'A fileId, or `o/{origin}/{path}` (this segment then holds slashes).' },
            },
          },
        },
        url: '/r/:keyId/:signature/:transform/:source',
      }),
    },
    handler: async (request: FastifyRequest, reply: FastifyReply) => {
      // Until the render is sent, whatever answers is an error: never stored by a cache.
      reply.header('cache-control', 'no-store');
      try {
        const delivered = await delivery.deliver({ ...splitPath(targetPath(request.raw.url ?? '')), accept: request.headers.accept });
        const answer = imageAnswer(delivered, request.method, request.headers['if-none-match'], config.renderCacheControl);
        metrics.renders.inc({ outcome: delivered.hit ? 'hit' : 'miss' });
        reply.code(answer.status).headers(answer.headers);
        return answer.body === undefined ? reply.send() : reply.send(answer.body);
      } catch (err) {
        metrics.renders.inc({ outcome: err instanceof AppError ? err.code : 'INTERNAL_ERROR' });
        throw err;
      }
    },
  });
}

/** The answer to a delivered render — status, headers, body — for both paths (the route above, the memory path below). */
function imageAnswer(
  delivered: Delivered,
  method: string,
  ifNoneMatch: string | undefined,
  cacheControl: string,
): { status: 200 | 304; headers: Record<string, string | number>; body: Buffer | Readable | undefined } {
  const { render } = delivered;
  const etag = `"${render.etag}"`;
  const headers: Record<string, string | number> = {
    'cache-control': cacheControl,
    etag,
    'imgapi-cache': delivered.hit ? 'hit' : 'miss',
    'x-content-type-options': 'nosniff',
  };
  if (delivered.negotiated) headers.vary = 'Accept';
  const notModified = noneMatch(ifNoneMatch, etag);
  if (notModified || method === 'HEAD') {
    if (!Buffer.isBuffer(delivered.body)) delivered.body.destroy();
    if (notModified) return { status: 304, headers, body: undefined };
  }
  headers['content-type'] = render.contentType;
  headers['content-length'] = render.bytes;
  return { status: 200, headers, body: method === 'HEAD' ? undefined : delivered.body };
}

/**
 * Hits held in this process's memory, answered before Fastify's request handling (its hooks,
 * request and reply objects cost most of a hit's CPU): app.ts calls the handler this returns
 * in front of Fastify, which gets the request when it answers false. It answers only what
 * Delivery.deliverFromMemory answers — a GET or HEAD of a /r/ URL without a body whose key,
 * transform and render are all in memory — with what the route would send: the same headers
 * (imageAnswer), the request id, the access-log line, the HTTP and render metrics. Everything
 * else goes on to Fastify untouched. Behind a trusted proxy, requests that name a forwarded
 * client or host go to Fastify too (its request reads them for the access log).
 */
export function memoryHits(services: Services): (req: IncomingMessage, res: ServerResponse) => boolean {
  const { delivery, metrics, config, logger } = services;
  return function answered(req: IncomingMessage, res: ServerResponse): boolean {
    const started = performance.now();
    const url = targetPath(req.url ?? '');
    const { method, headers } = req;
    if (!url.startsWith('/r/') || (method !== 'GET' && method !== 'HEAD')) return false;
    if ((headers['content-length'] !== undefined && headers['content-length'] !== '0') || headers['transfer-encoding'] !== undefined) return false;
    if (config.trustProxy && (headers['x-forwarded-for'] !== undefined || headers['x-forwarded-host'] !== undefined)) return false;
    let delivered: Delivered | undefined;
    try {
      delivered = delivery.deliverFromMemory({ ...splitPath(url), accept: headers.accept });
    } catch {
      // Whatever it is, the full path answers it (and logs it).
      return false;
    }
    if (!delivered) return false;
    const answer = imageAnswer(delivered, method, headers['if-none-match'], config.renderCacheControl);
    const reqId = newId('req');
    res.writeHead(answer.status, { 'x-request-id': reqId, ...answer.headers });
    res.end(answer.body);
    const elapsed = performance.now() - started;
    metrics.renders.inc({ outcome: 'hit' });
    metrics.httpRequests.inc({ method, route: ROUTE, status: String(answer.status) });
    metrics.httpDuration.observe({ method, route: ROUTE }, elapsed / 1000);
    // Fastify's line (app.ts OneLineAccessLog), through the same `req` serializer.
    const host = headers.host ?? '';
    const hostname = host[0] === '[' ? host.slice(0, host.indexOf(']') + 1) : host.split(':', 1)[0];
    logger.info(
      { reqId, req: { method, url, hostname, ip: req.socket.remoteAddress }, res: { statusCode: answer.status }, responseTime: elapsed },
      'request completed',
    );
    return true;
  };
}
