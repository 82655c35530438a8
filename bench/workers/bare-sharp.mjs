// @ts-check
// The "bare sharp" baseline as its own process (plain Node, no tsx), so its memory is measured
// like the service's. Protocol, one JSON object per line:
//   argv: <input.jpg> <width> <inFlight> <warmup>
//   → {"event":"ready"}                      after the warm-up jobs
//   ← "run <jobs>"                           → {"event":"done","wallMs":…,"sizes":[…],"widths":[…]}
//   ← "exit"                                 the process exits
import fs from 'node:fs';
import readline from 'node:readline';
import sharp from 'sharp';

const [input, widthArg, inFlightArg, warmupArg] = process.argv.slice(2);
if (!input) throw new Error('usage: bare-sharp.mjs <input> <width> <inFlight> <warmup>');
const width = Number(widthArg);
const inFlight = Number(inFlightArg);
const buffer = fs.readFileSync(input);

const one = async () => {
  const { data, info } = await sharp(buffer).autoOrient().resize({ width }).webp({ quality: 80, effort: 4 }).toBuffer({ resolveWithObject: true });
  return { size: data.length, width: info.width };
};

/** @param {number} count */
async function batch(count) {
  /** @type {{size: number, width: number}[]} */
  const results = [];
  let next = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < count) {
      next++;
      results.push(await one());
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, lane));
  return { wallMs: performance.now() - started, results };
}

const send = (/** @type {object} */ message) => process.stdout.write(`${JSON.stringify(message)}\n`);

await batch(Number(warmupArg));
send({ event: 'ready', sharp: sharp.versions.sharp, vips: sharp.versions.vips, concurrency: sharp.concurrency() });
for await (const line of readline.createInterface({ input: process.stdin })) {
  const [command, arg] = line.trim().split(/\s+/);
  if (command === 'run') {
    const { wallMs, results } = await batch(Number(arg));
    send({ event: 'done', wallMs, sizes: results.map((r) => r.size), widths: results.map((r) => r.width) });
  } else if (command === 'exit') {
    break;
  }
}
process.exit(0);
