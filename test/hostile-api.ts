// A fake imgapi service that lies in everything a client trusts: file names in Content-Disposition,
// a task's `result.format`, ids, error codes and messages, webhook fields. The boundary the CLI and
// SDK tests need (the real server never answers so): upload 201, process 202, the task completed
// (or as the test says), the download with the header the test gives. No database.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Content-Disposition headers a hostile server answers, each with the file name a client may write
 * (`null`: the file id, the fallback). A raw control byte in a header is refused by the client's
 * HTTP parser; percent-encoded in filename* it arrives, and so does a latin-1 byte such as 0x9B (CSI).
 */
export const HOSTILE_DISPOSITIONS: Array<{ header: string; name: string | null }> = [
  { header: 'attachment; filename=".bashrc"', name: 'bashrc' },
  { header: 'attachment; filename="../../x.png"', name: 'x.png' },
  { header: "attachment; filename*=UTF-8''..%2F..%2F..%2Fescaped.png", name: 'escaped.png' },
  { header: 'attachment; filename="..\\..\\windows.png"', name: 'windows.png' },
  { header: 'attachment; filename="/tmp/absolute.png"', name: 'absolute.png' },
  { header: "attachment; filename*=UTF-8''%1B%5D0%3Bpwn%07evil.png", name: 'evil.png' },
  { header: "attachment; filename*=UTF-8''%1B%5B2J.png", name: 'png' },
  { header: 'attachment; filename="\x9b2Jcsi.png"', name: 'csi.png' },
  { header: "attachment; filename*=UTF-8''nul%00byte.png", name: 'nulbyte.png' },
  { header: "attachment; filename*=UTF-8''photo%E2%80%AEgnp.exe", name: 'photognp.exe' },
  { header: "attachment; filename*=UTF-8''line%0Abreak%0D.png", name: 'linebreak.png' },
  { header: 'attachment; filename="NUL.png"', name: '_NUL.png' },
  { header: 'attachment; filename=".."', name: null },
  { header: "attachment; filename*=UTF-8''%2E%2E%2F", name: null },
  { header: `attachment; filename*=UTF-8''${'A'.repeat(5000)}.png`, name: `${'A'.repeat(196)}.png` },
  { header: `attachment; filename*=UTF-8''${'%C3%A9'.repeat(300)}.webp`, name: `${'é'.repeat(97)}.webp` },
];

/** What a task answers beyond the defaults (completed, an output named after the input). */
export type TaskAnswer = Record<string, unknown> & { result?: Record<string, unknown> };

export interface HostileApi {
  url: string;
  /** GET /api/download/{fileId}: the Content-Disposition (and the bytes) by file id. */
  downloads: Map<string, { disposition: string; body?: Buffer; stall?: boolean }>;
  /** GET /api/tasks/{taskId}: what it says, by the name the input was uploaded under. */
  tasks: Map<string, TaskAnswer>;
  /** Task ids whose first reading answers 503 (Retry-After 0) with this error envelope. */
  unavailableOnce: Map<string, { code: string; message: string }>;
  /** GET /api/webhooks, /api/webhooks/{id}/deliveries: the `data` answered. */
  webhooks: unknown;
  deliveries: unknown;
  /** GET /api/files/{id}/info: the `data` answered (for every id, with or without `?faces=1`). */
  info: unknown;
  /** POST /api/upload: the file id answered, by the uploaded name (default file_<n>). */
  uploadIds: Map<string, string>;
  close(): Promise<void>;
}

/** The one kind the fake document offers: convert, with `format`. */
const DOCUMENT = {
  openapi: '3.1.0',
  paths: {
    '/api/process/convert': {
      post: {
        requestBody: {
          content: {
            'application/json': { schema: { type: 'object', properties: { fileId: { type: 'string' }, format: { type: 'string' } } } },
          },
        },
      },
    },
  },
};

export async function startHostileApi(): Promise<HostileApi> {
  let counter = 0;
  const inputs = new Map<string, string>(); // fileId → uploaded name
  const taskInputs = new Map<string, string>(); // taskId → uploaded name
  const api: HostileApi = {
    url: '',
    close: async () => {},
    downloads: new Map(),
    tasks: new Map(),
    unavailableOnce: new Map(),
    webhooks: { webhooks: [], limit: 10 },
    deliveries: { deliveries: [] },
    info: {},
    uploadIds: new Map(),
  };
  const send = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('latin1');
      const url = new URL(req.url ?? '/', 'http://fake');
      const route = `${req.method} ${url.pathname}`;
      let match: RegExpExecArray | null;
      if (route === 'GET /openapi.json') return send(res, 200, DOCUMENT);
      if (route === 'POST /api/upload') {
        const name = /filename="([^"]*)"/.exec(body)?.[1] ?? 'upload';
        const fileId = api.uploadIds.get(name) ?? `file_${++counter}`;
        inputs.set(fileId, name);
        return send(res, 201, { success: true, data: { fileId, filename: name, format: 'jpeg', size: 3, createdAt: new Date().toISOString() } });
      }
      if ((match = /^POST \/api\/process\/([a-z-]+)$/.exec(route))) {
        const taskId = `task_${++counter}`;
        const { fileId } = JSON.parse(body) as { fileId: string };
        taskInputs.set(taskId, inputs.get(fileId) ?? fileId);
        return send(res, 202, { success: true, data: { taskId, type: match[1], status: 'queued', progress: 0 } });
      }
      if ((match = /^GET \/api\/tasks\/([^/]+)$/.exec(route))) {
        const taskId = decodeURIComponent(match[1]!);
        const unavailable = api.unavailableOnce.get(taskId);
        if (unavailable) {
          api.unavailableOnce.delete(taskId);
          return send(res, 503, { success: false, error: unavailable }, { 'retry-after': '0' });
        }
        const answer = api.tasks.get(taskInputs.get(taskId) ?? taskId) ?? {};
        const task = {
          taskId,
          type: 'convert',
          status: 'completed',
          progress: 100,
          outputFileId: `out_${taskId}`,
          ...answer,
          result: { format: 'png', size: 3, ...answer.result },
        };
        return send(res, 200, { success: true, data: task });
      }
      if ((match = /^GET \/api\/download\/([^/]+)$/.exec(route))) {
        const fileId = decodeURIComponent(match[1]!);
        const download = api.downloads.get(fileId) ?? { disposition: 'attachment; filename="output.png"' };
        const bytes = download.body ?? Buffer.from(`bytes of ${fileId}`);
        // Written by hand: Node's own response refuses bytes such as 0x9B in a header.
        const head = `HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: ${bytes.length}\r\ncontent-disposition: ${download.disposition}\r\nconnection: close\r\n\r\n`;
        // `stall`: half the bytes, then nothing (the client is caught mid-download).
        if (download.stall) return req.socket.write(Buffer.concat([Buffer.from(head, 'latin1'), bytes.subarray(0, bytes.length >> 1)]));
        return req.socket.end(Buffer.concat([Buffer.from(head, 'latin1'), bytes]));
      }
      if (/^GET \/api\/files\/[^/]+\/info$/.test(route)) return send(res, 200, { success: true, data: api.info });
      if (route === 'GET /api/webhooks') return send(res, 200, { success: true, data: api.webhooks });
      if (/^GET \/api\/webhooks\/[^/]+\/deliveries$/.test(route)) return send(res, 200, { success: true, data: api.deliveries });
      send(res, 404, { success: false, error: { code: 'NOT_FOUND', message: `${route} is not faked` } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  api.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  api.close = () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return api;
}

/** Control bytes (C0 but \n and \t, DEL, C1), bidi and other format characters, line separators. */
export const UNPRINTABLE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\p{Cf}\u2028\u2029]/u;
