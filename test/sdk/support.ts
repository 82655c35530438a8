// Shared by the SDK and CLI tests.
import { freePort } from '../e2e/processes.js';
import { startServer, type Dialect, type TestServer, type TestServerOptions } from '../helpers.js';
import { assertMatchesContract } from '../openapi-contract.js';

/** A server whose PUBLIC_URL is its real address, so the presigned URLs it answers work as given. */
export async function startPublicServer(dialect: Dialect, options: TestServerOptions = {}): Promise<TestServer> {
  const port = await freePort();
  return startServer({ dialect, ...options, env: { PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}`, ...options.env } });
}

export interface RecordedRequest {
  method: string;
  path: string;
  /** Its Idempotency-Key header. */
  key: string | null;
  status?: number;
}

/** fetch whose every response is held to the server's OpenAPI document, as the HTTP suites' are. */
export async function checkedFetch(request: Request): Promise<Response> {
  const response = await fetch(request);
  const body = Buffer.from(await response.clone().arrayBuffer());
  await assertMatchesContract({ method: request.method, url: request.url, status: response.status, headers: response.headers, body });
  return response;
}

/** checkedFetch that also records each request it sends. */
export function recordingFetch(): { fetch: (request: Request) => Promise<Response>; requests: RecordedRequest[] } {
  const requests: RecordedRequest[] = [];
  return {
    requests,
    fetch: async (request) => {
      const entry: RecordedRequest = { method: request.method, path: new URL(request.url).pathname, key: request.headers.get('idempotency-key') };
      requests.push(entry);
      const response = await checkedFetch(request);
      entry.status = response.status;
      return response;
    },
  };
}
