// Shared by the delivery-URL tests: an account with a signing key, signed URLs, small images,
// and a hostile origin server on a loopback port.
import crypto from 'node:crypto';
import http from 'node:http';
import sharp from 'sharp';
import { apiFetch, Client, parseBody, type TestServer } from '../helpers.js';

export interface Signer {
  client: Client;
  keyId: string;
  secret: string;
  /** The signed URL of `{transform}/{source}`. */
  url(transform: string, source: string): string;
  /** GET (or another method) of a delivery URL, held to the OpenAPI document. */
  get(url: string, headers?: Record<string, string>, method?: string): Promise<{ status: number; headers: Headers; body: any }>;
}

export const sign = (secret: string, rest: string): string => crypto.createHmac('sha256', secret).update(rest).digest('base64url');

export async function fetchDelivery(url: string, headers: Record<string, string> = {}, method = 'GET') {
  const { response, body } = await apiFetch(url, { method, headers });
  return { status: response.status, headers: response.headers, body: parseBody(response, body) as any };
}

/** A new account on `plan`, with one signing key (on a TestServer, or a service in a child process). */
export async function signer(server: Pick<TestServer, 'url' | 'newKey'>, plan: 'free' | 'pro' | 'max' = 'pro'): Promise<Signer> {
  const client = new Client(server.url, await server.newKey(plan));
  const created = await client.post('/api/signing-keys', {});
  if (created.status !== 201) throw new Error(`signing key: ${created.status} ${JSON.stringify(created.body)}`);
  const { keyId, secret } = created.body.data as { keyId: string; secret: string };
  return {
    client,
    keyId,
    secret,
    url: (transform, source) => `${server.url}/r/${keyId}/${sign(secret, `${transform}/${source}`)}/${transform}/${source}`,
    get: fetchDelivery,
  };
}

export const png = (width: number, height: number, alpha = false) =>
  sharp({ create: { width, height, channels: alpha ? 4 : 3, background: alpha ? { r: 200, g: 30, b: 30, alpha: 0.5 } : { r: 30, g: 120, b: 200 } } })
    .png()
    .toBuffer();

export const sizeOf = async (bytes: Buffer) => {
  const meta = await sharp(bytes).metadata();
  return { width: meta.width, height: meta.height, format: meta.format };
};

/** A GET sent with its path exactly as written (fetch and URL resolve `.` and `..` segments). */
export function rawGet(url: string): Promise<{ status: number; body: string }> {
  const { host, pathname } = new URL(url);
  const path = url.slice(url.indexOf(pathname.slice(0, 3), url.indexOf(host)));
  return new Promise((resolve, reject) => {
    const [hostname, port] = host.split(':');
    http
      .get({ hostname, port: Number(port), path }, (response) => {
        let body = '';
        response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

export interface Origin {
  url: string;
  /** Requests seen, by path, with their conditional headers. */
  seen: { path: string; ifNoneMatch?: string }[];
  close(): Promise<void>;
}

/**
 * An origin with one behaviour per path: /ok.png (an image, with an ETag; 304 when it matches),
 * /missing (404), /broken (500), /moved (302), /hang (headers, then nothing), /page.html (HTML),
 * /huge (a body larger than `hugeBytes`, chunked), /declared-2gb (a Content-Length of 2 GiB).
 */
export async function startOrigin(image: Buffer, hugeBytes: number): Promise<Origin> {
  const seen: Origin['seen'] = [];
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((request, response) => {
    const path = request.url ?? '/';
    seen.push({ path, ifNoneMatch: request.headers['if-none-match'] });
    if (path === '/ok.png' || path === '/dir/a%20b.png') {
      if (request.headers['if-none-match'] === '"v1"') return response.writeHead(304).end();
      return response.writeHead(200, { 'content-type': 'image/png', etag: '"v1"' }).end(image);
    }
    if (path === '/missing') return response.writeHead(404).end('no');
    if (path === '/broken') return response.writeHead(500).end('down');
    if (path === '/moved') return response.writeHead(302, { location: 'http://169.254.169.254/' }).end();
    if (path === '/hang') {
      hanging.add(response);
      response.writeHead(200, { 'content-type': 'image/png' });
      response.write(image.subarray(0, 16));
      return;
    }
    if (path === '/declared-2gb') {
      hanging.add(response);
      response.writeHead(200, { 'content-type': 'image/png', 'content-length': String(2 * 1024 ** 3) });
      response.write(image.subarray(0, 16));
      return;
    }
    if (path === '/page.html')
      return response.writeHead(200, { 'content-type': 'image/png' }).end(`<!doctype html><html><body>${'x'.repeat(70_000)}</body></html>`);
    if (path === '/huge') {
      response.writeHead(200, { 'content-type': 'image/png' });
      response.write(image);
      const chunk = Buffer.alloc(64 * 1024);
      let sent = image.length;
      const more = () => {
        while (sent <= hugeBytes + chunk.length) {
          sent += chunk.length;
          if (!response.write(chunk)) return void response.once('drain', more);
        }
        response.end();
      };
      response.on('error', () => {});
      return more();
    }
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}`,
    seen,
    async close() {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
