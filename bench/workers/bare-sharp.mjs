// @ts-check
// The "bare sharp" baseline as its own process (plain Node, no tsx), so its memory is measured
// like the service's. Protocol, one JSON object per line:
//   argv: <input.jpg> <warmup>
//   → {"event":"ready"}                      after the warm-up jobs (each workload once per job)
//   ← "run <jobs> <inFlight> <width> <webp|jpeg>"
//                                           → {"event":"done","wallMs":…,"sizes":[…],"widths":[…]}
//   ← "exit"                                 the process exits
// The encoders are the service's defaults for resize (src/imaging/formats.ts): WebP quality 80
// effort 4, JPEG quality 80 with libjpeg-turbo's optimised Huffman tables (mozjpeg is compress's).
import fs from 'node:fs';
import readline from 'node:readline';
import sharp from 'sharp';

const [input, warmupArg] = process.argv.slice(2);
if (!input) throw new Error('usage: bare-sharp.mjs <input> <warmup>');
const buffer = fs.readFileSync(input);

/** @param {number} width @param {string} format */
const one = async (width, format) => {
  const resized = sharp(buffer).autoOrient().resize({ width });
  const encoded = format === 'jpeg' ? resized.jpeg({ quality: 80, optimiseCoding: true }) : resized.webp({ quality: 80, effort: 4 });
  const { data, info } = await encoded.toBuffer({ resolveWithObject: true });
  return { size: data.length, width: info.width };
};

/** @param {number} count @param {number} inFlight @param {number} width @param {string} format */
async function batch(count, inFlight, width, format) {
  /** @type {{size: number, width: number}[]} */
  const results = [];
  let next = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < count) {
      next++;
      results.push(await one(width, format));
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, lane));
  return { wallMs: performance.now() - started, results };
}

const send = (/** @type {object} */ message) => process.stdout.write(`${JSON.stringify(message)}\n`);

await batch(Number(warmupArg), 4, 1600, 'webp');
await batch(Number(warmupArg), 4, 720, 'jpeg');
send({ event: 'ready', sharp: sharp.versions.sharp, vips: sharp.versions.vips, concurrency: sharp.concurrency() });
for await (const line of readline.createInterface({ input: process.stdin })) {
  const [command, jobs, inFlight, width, format] = line.trim().split(/\s+/);
  if (command === 'run') {
    const { wallMs, results } = await batch(Number(jobs), Number(inFlight), Number(width), format ?? 'webp');
    send({ event: 'done', wallMs, sizes: results.map((r) => r.size), widths: results.map((r) => r.width) });
  } else if (command === 'exit') {
    break;
  }
}
process.exit(0);
