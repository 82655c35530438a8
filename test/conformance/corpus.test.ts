// Conformance on real-world files: every image of ../shared/corpus through upload and every
// batch kind on a Max account (SQLite only, to keep CI short). Accepted outcomes:
// - a decodable file of an accepted format: each output decodes with the expected format,
//   dimensions and frame count — or the task fails IMAGE_TOO_LARGE where the file or the
//   computed output passes the plan's pixel limits (per frame, frames, all frames together);
// - a `reject` file: a 4xx at upload or a failed task with an error code;
// - compress: never a larger file than the input in the same format, and savedBytes says so.
// Never a 5xx. Prints a table of counts per kind and outcome.
//
// In `npm test`: a sample of the corpus — every file of a format-and-expectation group of up to
// six, else six spread across the group (its first, its last, four between), 54 of 289 files —
// all uploaded, and each accepted file run through a rotating third of the kinds: within a group,
// its files take turns (a group of one runs every kind), so every kind still meets every group.
// The whole corpus (IMGAPI_CONFORMANCE=full) is `npm run bench conformance` (bench/scenarios/
// conformance.ts): the same checks, more than ten minutes on a 2-core machine.
import assert from 'node:assert/strict';
import { canonicalFormat, isAnimation, OUTPUT_FORMATS } from '../../src/imaging/formats.js';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import { bufferReader, isSequenceHead, readSequenceHeader } from '../../src/bytes/avif-sequence.js';
import { OPERATIONS } from '../../src/operations/registry.js';
import type { PlannedSize } from '../../src/operations/types.js';
import { CORPUS, Client, startServer, type TestServer } from '../helpers.js';

interface Entry {
  path: string;
  kind: string;
  format: string;
  expect: 'decodable' | 'reject';
  exercises: string;
}

const corpus = (JSON.parse(fs.readFileSync(path.join(CORPUS, 'MANIFEST.json'), 'utf8')) as Entry[]).filter((e) => e.kind === 'image');
const FULL = process.env.IMGAPI_CONFORMANCE === 'full';
const SAMPLE_PER_GROUP = 6;

/** Up to SAMPLE_PER_GROUP files of each format and expectation, spread across the group in manifest order. */
function sample(entries: Entry[]): Entry[] {
  const groups = new Map<string, Entry[]>();
  for (const e of entries) groups.set(`${e.format}/${e.expect}`, [...(groups.get(`${e.format}/${e.expect}`) ?? []), e]);
  const kept = new Set<Entry>();
  for (const group of groups.values()) {
    const n = Math.min(group.length, SAMPLE_PER_GROUP);
    for (let i = 0; i < n; i++) kept.add(group[n === 1 ? 0 : Math.round((i * (group.length - 1)) / (n - 1))]!);
  }
  return entries.filter((e) => kept.has(e));
}

const manifest = FULL ? corpus : sample(corpus);
/** In the sample, each accepted file runs every ROTATION-th kind (see `rotation`); the full run, every kind. */
const ROTATION = FULL ? 1 : 3;
const groupOf = (entry: Entry): string => `${entry.format}/${entry.expect}`;

/**
 * Which kinds each file runs: in a group of n accepted files, the i-th runs the kinds k with
 * (k + the group's ordinal) % r == i % r, r = min(n, ROTATION). Every kind meets every group; a
 * group's offset varies so the same kinds do not always meet the first file of a group.
 */
function rotation<T extends { entry: Entry }>(files: T[], kinds: number): T[][] {
  const groups = new Map<string, T[]>();
  for (const f of files) groups.set(groupOf(f.entry), [...(groups.get(groupOf(f.entry)) ?? []), f]);
  const runs = new Set<string>();
  [...groups.values()].forEach((group, ordinal) => {
    const r = Math.min(group.length, ROTATION);
    group.forEach((_, i) => {
      for (let k = 0; k < kinds; k++) if ((k + ordinal) % r === i % r) runs.add(`${k}:${group[i]!.entry.path}`);
    });
  });
  return Array.from({ length: kinds }, (_, k) => files.filter((f) => runs.has(`${k}:${f.entry.path}`)));
}
const MAX = DEFAULT_PLANS.max;
// The format table's facts (src/imaging/formats.ts), not a copy of them.
const WRITABLE: ReadonlySet<string> = new Set(OUTPUT_FORMATS);
const ANIMATABLE = { has: isAnimation };

interface Uploaded {
  entry: Entry;
  fileId: string;
  format: string;
  width?: number;
  height?: number;
  pages?: number;
}

type Size = { width: number; height: number };

/**
 * What the corpus run asks a kind instead of its own example (Operation.example, the options the
 * OpenAPI document shows): compress in the input's own format (never larger than the input),
 * small outputs where the example's are large, and redact's regions without the face detector
 * (its thorough pass over every image is test/imaging/faces.test.ts's business).
 */
const OPTIONS: Record<string, Record<string, unknown>> = {
  compress: {},
  resize: { width: 64 },
  convert: { format: 'png' },
  watermark: { text: 'imgapi', position: 'bottom-right' },
  crop: { aspectRatio: '1:1' },
  redact: { faces: false, regions: [{ left: 0, top: 0, width: 16, height: 16 }] },
  pipeline: {
    steps: [
      { kind: 'resize', width: 64 },
      { kind: 'rotate', angle: 90 },
    ],
  },
};

/**
 * Kinds whose output size their pixels decide (they have no `sizes`): trim cuts the borders it
 * finds, never past the source's size. Any other kind without `sizes` must keep the size exactly.
 */
const PIXELS_DECIDE: ReadonlySet<string> = new Set(['trim']);

interface KindSpec {
  kind: string;
  options: Record<string, unknown>;
  /** The frame sizes its steps make of an upright source, the output's last (Operation.sizes); undefined where the pixels decide (trim). */
  sizes: (source: Size) => PlannedSize[] | undefined;
  format?: string;
}

/** Every batch kind of the registry: a new kind is run over the corpus without a line here. */
const KINDS: KindSpec[] = OPERATIONS.filter((op) => op.batch).map((op) => {
  const options = OPTIONS[op.kind] ?? (op.example as Record<string, unknown>);
  const steps = Array.isArray(options.steps) ? options.steps.length : 1;
  return {
    kind: op.kind,
    options,
    sizes: (source) => {
      if (PIXELS_DECIDE.has(op.kind)) return undefined;
      if (!op.sizes) return [{ ...source, capped: false }];
      const planned = op.sizes(options, source);
      // A list cut short: a step whose pixels decide its size.
      return planned.length === steps ? planned : undefined;
    },
    format: typeof options.format === 'string' ? canonicalFormat(options.format) : undefined,
  };
});

const outcomes = new Map<string, Map<string, number>>();
const timings: { what: string; ms: number }[] = [];
function count(kind: string, outcome: string) {
  const row = outcomes.get(kind) ?? new Map<string, number>();
  row.set(outcome, (row.get(outcome) ?? 0) + 1);
  outcomes.set(kind, row);
}

describe(`corpus conformance (sqlite, max plan, ${FULL ? 'every image' : `${manifest.length} of ${corpus.length} images, each through a third of the kinds`})`, () => {
  let server: TestServer;
  let client: Client;
  const uploaded: Uploaded[] = [];
  /** The accepted files each kind runs, by the kind's index in KINDS. */
  const filesOf: Uploaded[][] = [];
  const problems: string[] = [];

  before(async () => {
    server = await startServer({
      dialect: 'sqlite',
      plans: { max: { requestsPerSecond: 100_000, monthlyTasks: 1_000_000, dailyBatchFiles: 1_000_000, maxQueuedTasks: 100_000 } },
    });
    client = new Client(server.url, await server.newKey('max'));
  });

  after(async () => {
    const kinds = ['upload', ...KINDS.map((k) => k.kind)];
    const columns = [...new Set(kinds.flatMap((k) => [...(outcomes.get(k)?.keys() ?? [])]))].sort();
    console.log(`\n${'kind'.padEnd(10)} ${columns.map((c) => c.padStart(22)).join(' ')}`);
    for (const kind of kinds) console.log(`${kind.padEnd(10)} ${columns.map((c) => String(outcomes.get(kind)?.get(c) ?? 0).padStart(22)).join(' ')}`);
    console.log('\nslowest tasks:');
    for (const t of timings.sort((a, b) => b.ms - a.ms).slice(0, 12)) console.log(`  ${String(t.ms).padStart(6)} ms  ${t.what}`);
    await server.close();
  });

  it('names only registered batch kinds (a renamed or removed kind fails here, not silently)', () => {
    const batchKinds = KINDS.map((k) => k.kind);
    assert.deepEqual(
      [...Object.keys(OPTIONS), ...PIXELS_DECIDE].filter((kind) => !batchKinds.includes(kind)),
      [],
    );
  });

  it('uploads every image: decodable ones are accepted, nothing is a 5xx', async () => {
    for (const entry of manifest) {
      const response = await client.upload(path.join(CORPUS, entry.path));
      assert.ok(response.status < 500, `${entry.path}: upload answered ${response.status}`);
      if (response.status === 201) {
        const data = response.body.data;
        uploaded.push({ entry, fileId: data.fileId, format: data.format, width: data.width, height: data.height, pages: data.pages });
        count('upload', entry.expect === 'reject' ? 'reject:accepted' : 'accepted');
        continue;
      }
      // Every decodable file is accepted: JPEG 2000, lossless JPEG and AVIF image sequences too.
      if (entry.expect === 'decodable') problems.push(`${entry.path}: decodable but upload answered ${response.status} ${response.body.error?.code}`);
      count('upload', `${entry.expect}:${response.status}`);
    }
    assert.deepEqual(problems, []);
    filesOf.push(...rotation(uploaded, KINDS.length));
    // Every kind meets every format-and-expectation group that has an accepted file.
    const groups = new Set(uploaded.map((f) => groupOf(f.entry)));
    for (const [k, files] of filesOf.entries()) assert.deepEqual(new Set(files.map((f) => groupOf(f.entry))), groups, KINDS[k]!.kind);
  });

  for (const [k, spec] of KINDS.entries()) {
    it(`batch ${spec.kind}: every output decodes with the expected format and size, or fails with a code`, async () => {
      const files = filesOf[k] ?? [];
      assert.ok(files.length > 0, 'no accepted file to run');
      const failures: string[] = [];
      for (let start = 0; start < files.length; start += MAX.batchSize) {
        const chunk = files.slice(start, start + MAX.batchSize);
        const response = await client.post(`/api/process/batch/${spec.kind}`, { fileIds: chunk.map((f) => f.fileId), ...spec.options });
        assert.equal(response.status, 202, JSON.stringify(response.body));
        const tasks = response.body.data.tasks as { taskId: string; fileId: string }[];
        assert.deepEqual(
          tasks.map((t) => t.fileId),
          chunk.map((f) => f.fileId),
          'one task per file, in order',
        );
        for (const [index, queued] of tasks.entries()) {
          const file = chunk[index]!;
          const task = await client.waitForTask(queued.taskId, 180_000);
          if (task.startedAt && task.completedAt)
            timings.push({ what: `${spec.kind} ${file.entry.path}`, ms: Date.parse(task.completedAt) - Date.parse(task.startedAt) });
          const problem = await judge(client, spec, file, task);
          count(spec.kind, problem === undefined ? outcomeOf(file, task) : 'WRONG');
          if (problem) failures.push(`${file.entry.path}: ${problem}`);
        }
      }
      assert.deepEqual(failures, []);
    });
  }
});

/**
 * What an image's header says, as sharp's metadata: an AVIF image sequence's from its movie
 * header (libvips reads only a sequence's still image), every other image's from libvips (a
 * TIFF's first page, a HEIF file's primary item, every frame of an animation).
 */
async function metadataOf(bytes: Buffer): Promise<sharp.Metadata> {
  if (isSequenceHead(bytes)) {
    const sequence = await readSequenceHeader(bufferReader(bytes));
    const { width, height, frames: pages, delay } = sequence;
    return {
      format: 'heif',
      width,
      height: height * pages,
      pageHeight: height,
      pages,
      delay,
      hasAlpha: sequence.alphaStream !== undefined,
    } as sharp.Metadata;
  }
  const firstPage = await sharp(bytes, { limitInputPixels: false }).metadata();
  // A TIFF's pages may differ in size (a compress may return a multi-page input's own bytes); a
  // HEIF file's image is its primary item, whatever its other top-level items (a grid's tiles).
  if (firstPage.format === 'tiff') return firstPage;
  if (firstPage.format === 'heif')
    return { ...(await sharp(bytes, { limitInputPixels: false, page: firstPage.pagePrimary ?? 0 }).metadata()), pages: 1 };
  return sharp(bytes, { limitInputPixels: false, pages: -1 }).metadata();
}

/** Whether every frame of an animation has the same pixels (then one frame is the animation). */
async function framesIdentical(file: string, frames: number): Promise<boolean> {
  const first = await sharp(file, { page: 0 }).raw().toBuffer();
  for (let page = 1; page < frames; page++) if (!first.equals(await sharp(file, { page }).raw().toBuffer())) return false;
  return true;
}

function outcomeOf(file: Uploaded, task: any): string {
  if (task.status === 'completed') return file.entry.expect === 'reject' ? 'reject:completed' : 'completed';
  return `${file.entry.expect === 'reject' ? 'reject' : 'failed'}:${task.error.code}`;
}

/** Why this task's outcome is wrong, or undefined when it is acceptable. */
async function judge(client: Client, spec: (typeof KINDS)[number], file: Uploaded, task: any): Promise<string | undefined> {
  const { entry } = file;
  if (task.status === 'failed') {
    if (!task.error?.code) return 'failed without an error code';
    if (entry.expect === 'reject') return undefined;
    if (task.error.code !== 'IMAGE_TOO_LARGE') return `decodable file failed: ${task.error.code} ${task.error.message}`;
    if (file.width === undefined || file.height === undefined) return undefined;
    const source = { width: file.width, height: file.height };
    const planned = spec.sizes(source) ?? [];
    const frames = ANIMATABLE.has(file.format) ? (file.pages ?? 1) : 1;
    const tooLarge =
      file.width * file.height > MAX.maxPixels ||
      frames > MAX.maxFrames ||
      frames * file.width * file.height > MAX.maxTotalPixels ||
      planned.some(
        (size) =>
          size.width * size.height > MAX.maxPixels ||
          (size.capped && Math.max(size.width, size.height) > 16_384) ||
          frames * size.width * size.height > MAX.maxTotalPixels,
      );
    const output = planned.at(-1) ?? source;
    return tooLarge ? undefined : `IMAGE_TOO_LARGE although ${file.width}×${file.height} → ${output.width}×${output.height} is within the plan`;
  }
  if (task.status !== 'completed') return `ended ${task.status}`;
  if (entry.expect === 'reject') {
    // Some reject files (a PNG with only a bad checksum) decode in libvips; that is allowed.
    if (!/checksum/i.test(entry.exercises)) return 'a reject file completed';
  }
  const bytes = await client.download(task.outputFileId);
  const meta = await metadataOf(bytes);
  const expectedFormat = spec.format ?? (WRITABLE.has(file.format) ? file.format : meta.hasAlpha ? 'png' : 'jpeg');
  const decodedFormat = meta.format === 'heif' ? 'avif' : meta.format;
  if (decodedFormat !== expectedFormat) return `output is ${meta.format}, expected ${expectedFormat}`;
  if (file.width === undefined || file.height === undefined) return undefined;
  const expected = spec.sizes({ width: file.width, height: file.height })?.at(-1);
  const height = meta.pageHeight ?? meta.height;
  // Rounding in resize may differ by a pixel; where the pixels decide (trim), never larger than the source.
  if (
    expected
      ? Math.abs(meta.width! - expected.width) > 1 || Math.abs(height! - expected.height) > 1
      : meta.width! > file.width || height! > file.height
  ) {
    return `output ${meta.width}×${height}, expected ${expected ? `${expected.width}×${expected.height}` : `at most ${file.width}×${file.height}`}`;
  }
  const inputFrames = ANIMATABLE.has(file.format) ? (file.pages ?? 1) : 1;
  const outputFrames = meta.pages ?? 1;
  if (ANIMATABLE.has(expectedFormat) && inputFrames > 1) {
    // Encoders merge identical consecutive frames (adding their delays): compare play time.
    const source = await metadataOf(fs.readFileSync(path.join(CORPUS, entry.path)));
    const duration = (delays: number[] | undefined, frames: number) => (delays ?? []).slice(0, frames).reduce((a, b) => a + b, 0);
    if (outputFrames > inputFrames) return `${outputFrames} frames from ${inputFrames}`;
    if (outputFrames > 1 && Math.abs(duration(meta.delay, outputFrames) - duration(source.delay, inputFrames)) > 10 * inputFrames) {
      return `plays ${duration(meta.delay, outputFrames)} ms, the source ${duration(source.delay, inputFrames)} ms`;
    }
    if (outputFrames === 1 && !(await framesIdentical(path.join(CORPUS, entry.path), inputFrames))) return 'the animation was lost';
  } else if (outputFrames !== 1 && !ANIMATABLE.has(expectedFormat) && meta.format !== 'tiff') {
    return `${outputFrames} frames in a ${expectedFormat}`;
  }
  if (task.result.width !== meta.width) return `result says width ${task.result.width}, output is ${meta.width}`;
  if (spec.kind === 'compress' && decodedFormat === file.format) {
    const size = fs.statSync(path.join(CORPUS, entry.path)).size;
    if (bytes.length > size) return `compress wrote ${bytes.length} bytes from ${size}`;
    if (task.result.inputSize !== size || task.result.savedBytes !== size - bytes.length) return `compress result ${JSON.stringify(task.result)}`;
  }
  return undefined;
}
