// @ts-check
// The delivery scenario's HTTP client, as its own small process: plain node:http with one
// keep-alive agent (`inFlight` sockets) asking for a batch of URLs. It runs apart from the bench
// because a client's cost grows with the heap of the process it runs in: each 468 KB PNG answer
// is external memory that starts a major collection, and in the bench's process (tsx, every
// module of the bench) those collections cost ~5 ms per answer, CPU taken from the side it
// drives. Here a PNG answer costs under a millisecond. Only each answer's first HEAD_BYTES are
// kept; the width check (sharp's header read) runs after the batch is timed.
//   → {"event":"ready"}
//   ← {"urls":[…],"inFlight":4,"mime":"image/png","expectCache":"miss"|null}
//   → {"event":"done","wallMs":…,"latencies":[…],"lengths":[…],"widths":[…],"errors":[…]}
//   ← "exit"                                     the process exits
import http from 'node:http';
import readline from 'node:readline';
import sharp from 'sharp';

/** Bytes of an answer kept for its width check: an image's header is in them. */
const HEAD_BYTES = 64 * 1024;

/**
 * One GET: its length, first bytes and Imgapi-Cache header (a 200 of type `mime`, else thrown).
 * @param {string} url @param {string} mime @param {http.Agent} agent
 * @returns {Promise<{ head: Buffer, length: number, cache: string | undefined }>}
 */
function get(url, mime, agent) {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { agent }, (response) => {
      /** @type {Buffer[]} */
      const kept = [];
      let length = 0;
      response.on('data', (/** @type {Buffer} */ chunk) => {
        if (length < HEAD_BYTES) kept.push(Buffer.from(chunk.subarray(0, HEAD_BYTES - length)));
        length += chunk.length;
      });
      response.on('error', reject);
      response.on('end', () => {
        const head = Buffer.concat(kept);
        const type = response.headers['content-type'];
        if (response.statusCode !== 200) reject(new Error(`${response.statusCode}: ${head.toString('utf8', 0, 300)}`));
        else if (type !== mime) reject(new Error(`content-type ${type} ≠ ${mime}`));
        else resolve({ head, length, cache: /** @type {string | undefined} */ (response.headers['imgapi-cache']) });
      });
    });
    request.on('error', reject);
  });
}

/** @param {{ urls: string[], inFlight: number, mime: string, expectCache: string | null }} batch */
async function run({ urls, inFlight, mime, expectCache }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: inFlight });
  /** @type {string[]} */
  const errors = [];
  /** @type {number[]} */
  const latencies = [];
  /** @type {number[]} */
  const lengths = [];
  /** @type {Buffer[]} */
  const heads = [];
  let next = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < urls.length) {
      const url = /** @type {string} */ (urls[next++]);
      try {
        const t0 = performance.now();
        const { head, length, cache } = await get(url, mime, agent);
        latencies.push(performance.now() - t0);
        lengths.push(length);
        heads.push(head);
        if (expectCache && cache !== expectCache) errors.push(`Imgapi-Cache: ${cache} (expected ${expectCache})`);
      } catch (err) {
        errors.push(/** @type {Error} */ (err).message);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, urls.length) }, lane));
  const wallMs = performance.now() - started;
  agent.destroy();
  /** @type {number[]} */
  const widths = [];
  for (const head of heads) widths.push((await sharp(head).metadata()).width ?? 0);
  return { wallMs, latencies, lengths, widths, errors };
}

const send = (/** @type {object} */ message) => process.stdout.write(`${JSON.stringify(message)}\n`);

send({ event: 'ready' });
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (line.trim() === 'exit') break;
  send({ event: 'done', ...(await run(JSON.parse(line))) });
}
process.exit(0);
