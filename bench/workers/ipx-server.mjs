// @ts-check
// unjs/ipx (the sharp-based image server on npm) serving a folder from disk over HTTP, as its own
// process, for the delivery scenario: createIPX + ipxFSStorage + createIPXNodeServer, as its README
// shows. URLs: /s_512x512,fit_inside,f_webp,q_75/photo-0001.jpg.
//   argv: <dir>   → {"event":"ready","port":…} on stdout once it listens on 127.0.0.1
// ipx hands `sharpOptions` to sharp's constructor and assigns them onto the pipeline's options
// before it encodes with `toFormat(format, {quality})`: through them it gets the encoder settings
// the service and the bare loop use, so the three sides do the same work. Its own defaults differ
// in two: progressive JPEG (`jpegProgressive: true`) and AVIF at sharp's effort 4 (the service's
// renders use effort 2); the other settings (optimised Huffman tables, WebP effort 4, zlib level 6)
// are sharp's defaults already.
import http from 'node:http';
import { createIPX, createIPXNodeServer, ipxFSStorage } from 'ipx';
import sharp from 'sharp';

const [dir, threads] = process.argv.slice(2);
if (!dir || !threads) throw new Error("usage: ipx-server.mjs <dir> <libvips threads per image: the service's IMAGE_THREADS>");
// libvips is one per process: ipx's sharp works with the service's thread count too.
sharp.concurrency(Number(threads));

const ipx = createIPX({
  storage: ipxFSStorage({ dir }),
  sharpOptions: /** @type {any} */ ({ jpegProgressive: false, heifEffort: 2 }),
});
const server = http.createServer(createIPXNodeServer(ipx));
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ event: 'ready', port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
