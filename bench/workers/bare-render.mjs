// @ts-check
// The "bare sharp" baseline of the delivery scenario, as its own process (plain Node, no tsx), so
// its CPU is measured from outside like the service's and ipx's. Each render reads a file from
// disk, resizes it to fit inside 512×512 and encodes it with the encoder settings the service's
// delivery renders use (src/imaging/formats.ts). Protocol, one JSON object per line:
//   argv: <dir of photo-NNNN.jpg> <warm-up file index> <libvips threads per image: the service's IMAGE_THREADS>
//   → {"event":"ready"}                          after one render of that file in every format
//   ← "run <format> <inFlight> <first> <count>"  renders files first … first+count-1
//                                               → {"event":"done","wallMs":…,"latencies":[…],"sizes":[…],"widths":[…]}
//   ← "exit"                                     the process exits
import fs from 'node:fs/promises';
import path from 'node:path';
import readline from 'node:readline';
import sharp from 'sharp';

const [dir, warmupArg, threadsArg] = process.argv.slice(2);
if (!dir || !threadsArg) throw new Error('usage: bare-render.mjs <dir> <warm-up file index> <threads>');
sharp.concurrency(Number(threadsArg));

const BOX = 512;
/** The service's encoders for a delivery render with these `q` values (the PNG has none: zlib level 6). */
const ENCODERS = {
  jpeg: (/** @type {sharp.Sharp} */ s) => s.jpeg({ quality: 80, optimiseCoding: true }),
  webp: (/** @type {sharp.Sharp} */ s) => s.webp({ quality: 75, effort: 4 }),
  avif: (/** @type {sharp.Sharp} */ s) => s.avif({ quality: 65, effort: 2 }),
  png: (/** @type {sharp.Sharp} */ s) => s.png({ compressionLevel: 6 }),
};

const file = (/** @type {number} */ index) => path.join(dir, `photo-${String(index).padStart(4, '0')}.jpg`);

/** @param {number} index @param {keyof typeof ENCODERS} format */
async function render(index, format) {
  const input = await fs.readFile(file(index));
  const resized = sharp(input).autoOrient().resize({ width: BOX, height: BOX, fit: 'inside', withoutEnlargement: true });
  const { data, info } = await ENCODERS[format](resized).toBuffer({ resolveWithObject: true });
  return { size: data.length, width: info.width };
}

/** @param {keyof typeof ENCODERS} format @param {number} inFlight @param {number} first @param {number} count */
async function batch(format, inFlight, first, count) {
  /** @type {{size: number, width: number, ms: number}[]} */
  const results = [];
  let next = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < count) {
      const index = first + next++;
      const t0 = performance.now();
      const r = await render(index, format);
      results.push({ ...r, ms: performance.now() - t0 });
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, lane));
  return { wallMs: performance.now() - started, results };
}

const send = (/** @type {object} */ message) => process.stdout.write(`${JSON.stringify(message)}\n`);

for (const format of /** @type {(keyof typeof ENCODERS)[]} */ (Object.keys(ENCODERS))) await batch(format, 1, Number(warmupArg), 1);
send({ event: 'ready', sharp: sharp.versions.sharp, vips: sharp.versions.vips, concurrency: sharp.concurrency() });
for await (const line of readline.createInterface({ input: process.stdin })) {
  const [command, format, inFlight, first, count] = line.trim().split(/\s+/);
  if (command === 'run') {
    const { wallMs, results } = await batch(/** @type {keyof typeof ENCODERS} */ (format), Number(inFlight), Number(first), Number(count));
    send({
      event: 'done',
      wallMs,
      latencies: results.map((r) => r.ms),
      sizes: results.map((r) => r.size),
      widths: results.map((r) => r.width),
    });
  } else if (command === 'exit') {
    break;
  }
}
process.exit(0);
