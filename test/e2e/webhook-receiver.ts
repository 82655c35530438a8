// A webhook receiver for the tests: an HTTP server on 127.0.0.1 that records every request
// (its headers and raw body) and answers with what the test's `respond` decides.
import http from 'node:http';
import { sleep } from '../helpers.js';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** Answers a request: a status (and headers), or 'hang' to leave it unanswered until the receiver closes. */
export type Respond = (request: Received, index: number) => { status: number; headers?: Record<string, string>; body?: string } | 'hang';

export interface Receiver {
  url: string;
  received: Received[];
  respond: Respond;
  /** Requests that arrived and were not answered yet. */
  hanging: number;
  /** Waits until `count` requests have arrived (polling; generous by default). */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(respond: Respond = () => ({ status: 200 })): Promise<Receiver> {
  const hung = new Set<http.ServerResponse>();
  const receiver: Receiver = {
    url: '',
    received: [],
    respond,
    hanging: 0,
    async waitFor(count, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      while (receiver.received.length < count) {
        if (Date.now() > deadline) throw new Error(`the receiver got ${receiver.received.length} of ${count} requests in ${timeoutMs} ms`);
        await sleep(25);
      }
      return receiver.received;
    },
    close: async () => {
      for (const response of hung) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = { path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks) };
      const index = receiver.received.push(request) - 1;
      const answer = receiver.respond(request, index);
      if (answer === 'hang') {
        hung.add(res);
        receiver.hanging++;
        res.on('close', () => {
          if (hung.delete(res)) receiver.hanging--;
        });
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
      res.end(answer.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.address();
  receiver.url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return receiver;
}
