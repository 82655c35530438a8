// What HTTP/1.1's message framing leaves to the application once Node has parsed a request: the
// forms of the request target, and the Host line (RFC 9112 §3.2).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { newId } from '../ids.js';

/**
 * The path (and query) of a request target as sent: origin-form (`/r/…`) as it is, absolute-form
 * (`http://host/r/…`, which a server must accept, RFC 9112 §3.2.2) from the first slash after
 * its authority. Code that reads the raw target (signed paths, the log's redaction) reads this.
 */
export function targetPath(url: string): string {
  if (url.startsWith('/')) return url;
  const authority = url.indexOf('://');
  if (authority < 0) return url;
  const path = url.indexOf('/', authority + 3);
  const query = url.indexOf('?', authority + 3);
  if (path >= 0 && (query < 0 || path < query)) return url.slice(path);
  return query >= 0 ? `/${url.slice(query)}` : '/';
}

/** The error envelope of a request refused before any route saw it. */
export function envelope(code: string, message: string): { requestId: string; body: string } {
  const requestId = newId('req');
  return { requestId, body: JSON.stringify({ success: false, error: { code, message, requestId } }) };
}

/**
 * RFC 9112 §3.2: an HTTP/1.1 request without a Host line, and any request with more than one, is
 * 400. Node checks only the first (its requireHostHeader, answered without the envelope): the
 * server turns that off, and this answers both in the envelope and closes the connection. True
 * when it answered.
 */
export function refuseBadHost(req: IncomingMessage, res: ServerResponse): boolean {
  let hosts = 0;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') hosts++;
  const needsHost = req.httpVersionMajor > 1 || (req.httpVersionMajor === 1 && req.httpVersionMinor >= 1);
  if (hosts === 1 || (hosts === 0 && !needsHost)) return false;
  const { requestId, body } = envelope(
    'VALIDATION_ERROR',
    hosts === 0 ? 'An HTTP/1.1 request must carry a Host header' : 'A request must carry one Host header, not several',
  );
  res.writeHead(400, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'x-request-id': requestId,
    connection: 'close',
  });
  res.end(body);
  return true;
}
