// @ts-check
// The ceiling of a cached hit on this machine: plain node:http answering every request with the
// same bytes from memory (no routing, no lookup, no file), as its own process, so wrk measures
// it like the service. The delivery scenario's hit baseline, in the same run.
//   argv: <file> <content-type>   → {"event":"ready","port":…} on stdout once it listens on 127.0.0.1
import fs from 'node:fs';
import http from 'node:http';

const [file, type] = process.argv.slice(2);
if (!file || !type) throw new Error('usage: static-server.mjs <file> <content-type>');
const body = fs.readFileSync(file);
const server = http.createServer((_request, response) => {
  response.writeHead(200, { 'content-type': type, 'content-length': body.length, 'cache-control': 'public, max-age=31536000, immutable' });
  response.end(body);
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ event: 'ready', port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
