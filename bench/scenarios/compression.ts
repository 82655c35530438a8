// Compression against the specialists, on the corpus photos and graphics: per output format, the
// bytes of compress with its defaults and with quality "auto", of pngquant --quality 65-80,
// jpegoptim, cjpeg (libjpeg-turbo's: Debian has no mozjpeg) and cwebp at their defaults, and
// the SSIM of every output to its source, measured by the service's own metric
// (src/imaging/similarity.ts) for every variant alike.
//
//   JPEG  the corpus JPEGs, compressed in place          ours · jpegoptim (lossless) · cjpeg
//   PNG   the corpus PNGs (not PngSuite's 32×32 tests)  ours · pngquant
//   WebP  the same JPEGs and PNGs, converted to WebP     ours · cwebp
//
// "ours at the specialist's SSIM" is the same search as "auto" with the threshold set, file by
// file, to the SSIM of the best specialist's output (the one with the fewest bytes on the median
// file): the target — at equal or better SSIM, our bytes ≤ the best specialist's on the median
// file of each format — is read on it (the ratio is the median of ours / theirs, file by file).
//
// Sources are the files a specialist reads as the service does: upright (EXIF orientation 1 or
// none), sRGB or grey with no other ICC profile, one frame, at most BENCH_COMPRESSION_MAX_MP
// megapixels (8). CPU seconds per variant: this process's (libvips threads) and the tools'.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import type { FileRecord } from '../../src/files/files.js';
import { VISUALLY_LOSSLESS_SSIM, reference, similarity } from '../../src/imaging/similarity.js';
import { runImageJob } from '../../src/imaging/pipeline.js';
import { median } from '../lib/pool.js';
import { reapedChildrenCpuSeconds } from '../lib/proc.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';
import { formatOf, runCompress } from '../../test/imaging/compress-helpers.js';

const SCENARIO = 'compression';
const MAX_PIXELS = (Number(process.env.BENCH_COMPRESSION_MAX_MP) > 0 ? Number(process.env.BENCH_COMPRESSION_MAX_MP) : 8) * 1_000_000;

type Group = 'JPEG' | 'PNG' | 'WebP';

interface Source {
  path: string;
  name: string;
  format: 'jpeg' | 'png';
  size: number;
  width: number;
  height: number;
}

interface Measured {
  bytes: number;
  ssim: number;
  cpuSeconds: number;
  /** The specialist declined (pngquant below its quality floor): the input is kept. */
  keptInput?: boolean;
}

const SPECIALISTS: Record<Group, string[]> = { JPEG: ['jpegoptim', 'cjpeg'], PNG: ['pngquant'], WebP: ['cwebp'] };
const OURS_DEFAULT = 'ours, default';
const OURS_AUTO = 'ours, "auto"';
const OURS_MATCHED = "ours at the specialist's SSIM";

/** This process's CPU seconds (libvips threads included) and its finished children's (the tools). */
const cpuSeconds = (): number => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6 + reapedChildrenCpuSeconds();
};

const hasCommand = (command: string): boolean => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;

/** An embedded profile that is sRGB's own (or none): the pixels mean the same to every tool. */
function isSrgbProfile(icc: Buffer | undefined): boolean {
  if (!icc) return true;
  return /sRGB/.test(icc.toString('latin1')) || /s\0R\0G\0B/.test(icc.toString('latin1'));
}

async function selectSources(ctx: BenchContext): Promise<Source[]> {
  const corpus = path.resolve(ctx.repoRoot, '../shared/corpus');
  const manifest = JSON.parse(fs.readFileSync(path.join(corpus, 'MANIFEST.json'), 'utf8')) as {
    path: string;
    kind: string;
    format: string;
    expect: string;
  }[];
  const sources: Source[] = [];
  for (const entry of manifest) {
    if (entry.kind !== 'image' || entry.expect !== 'decodable' || (entry.format !== 'jpeg' && entry.format !== 'png')) continue;
    if (entry.path.startsWith('pngsuite/')) continue;
    const file = path.join(corpus, entry.path);
    if (!fs.existsSync(file) || formatOf(file) !== entry.format) continue;
    const meta = await sharp(file, { limitInputPixels: false })
      .metadata()
      .catch(() => undefined);
    if (!meta?.width || !meta.height || meta.width * meta.height > MAX_PIXELS) continue;
    if ((meta.orientation ?? 1) > 1 || (meta.pages ?? 1) > 1) continue;
    if ((meta.space !== 'srgb' && meta.space !== 'b-w') || !isSrgbProfile(meta.icc)) continue;
    sources.push({
      path: file,
      name: entry.path,
      format: entry.format,
      size: fs.statSync(file).size,
      width: meta.width,
      height: meta.height,
    });
  }
  return sources;
}

/** compress on the source, as the worker runs it (runCompress), its output's bytes. */
async function oursCompress(source: Source, options: Record<string, unknown>, tmpDir: string): Promise<Buffer> {
  const record = {
    id: 'file_bench',
    filename: path.basename(source.path),
    format: source.format,
    size: source.size,
    width: source.width,
    height: source.height,
    pages: null,
  } as FileRecord;
  const result = await runCompress(record, source.path, options, tmpDir);
  return result.outputs[0]!.data!;
}

/** The search behind "auto", with another threshold (the pipeline compress runs, format as given). */
async function oursAtSimilarity(source: Source, format: 'jpeg' | 'png' | 'webp', threshold: number): Promise<Buffer> {
  const encoded = await runImageJob({
    inputPath: source.path,
    inputFormat: source.format,
    limits: DEFAULT_PLANS.max,
    deadline: Date.now() + 600_000,
    format,
    favourSize: true,
    similarity: threshold,
  });
  return encoded.data;
}

/** A specialist's output for the source, or undefined when it wrote none (pngquant's exit 99). */
function specialist(tool: string, source: Source, dir: string): Buffer | undefined {
  const out = path.join(dir, `out-${tool}`);
  fs.rmSync(out, { force: true });
  const run = (command: string, args: string[], input?: Buffer) => {
    const child = spawnSync(command, args, { input, maxBuffer: 1 << 30 });
    if (child.error) throw child.error;
    return child;
  };
  switch (tool) {
    case 'jpegoptim': {
      // In place on a copy, as it is used: it keeps the file as it was when it cannot make it smaller.
      fs.copyFileSync(source.path, out);
      fs.chmodSync(out, 0o644);
      const child = run('jpegoptim', ['--quiet', out]);
      if (child.status !== 0) throw new Error(`jpegoptim exited ${child.status}: ${child.stderr.toString()}`);
      return fs.readFileSync(out);
    }
    case 'cjpeg': {
      // cjpeg reads PPM: djpeg decodes the source first (grey stays grey).
      const ppm = run('djpeg', [source.path]);
      if (ppm.status !== 0) throw new Error(`djpeg: ${ppm.stderr.toString()}`);
      const child = run('cjpeg', [], ppm.stdout);
      if (child.status !== 0) throw new Error(`cjpeg: ${child.stderr.toString()}`);
      return child.stdout;
    }
    case 'pngquant': {
      const child = run('pngquant', ['--quality', '65-80', '--output', out, '--', source.path]);
      if (child.status === 99) return undefined; // could not reach --quality's minimum: writes nothing
      if (child.status !== 0) throw new Error(`pngquant exited ${child.status}: ${child.stderr.toString()}`);
      return fs.readFileSync(out);
    }
    case 'cwebp': {
      const child = run('cwebp', ['-quiet', source.path, '-o', out]);
      if (child.status !== 0) throw new Error(`cwebp exited ${child.status}: ${child.stderr.toString()}`);
      return fs.readFileSync(out);
    }
    default:
      throw new Error(`unknown tool ${tool}`);
  }
}

export const compressionScenario: Scenario = {
  name: SCENARIO,
  title: 'compress (default and "auto") against pngquant, jpegoptim, cjpeg and cwebp: bytes and SSIM on the corpus photos and graphics',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const missing = ['pngquant', 'jpegoptim', 'cjpeg', 'djpeg', 'cwebp'].filter((command) => !hasCommand(command));
    const sources = await selectSources(ctx);
    ctx.log(`${sources.length} sources; missing tools: ${missing.join(', ') || 'none'}`);
    const groups: { group: Group; format: 'jpeg' | 'png' | 'webp'; sources: Source[] }[] = [
      { group: 'JPEG', format: 'jpeg', sources: sources.filter((s) => s.format === 'jpeg') },
      { group: 'PNG', format: 'png', sources: sources.filter((s) => s.format === 'png') },
      { group: 'WebP', format: 'webp', sources },
    ];
    const rows: Row[] = [];
    const table: string[] = [
      '| format (files) | variant | median bytes | median ours ÷ best specialist | median SSIM | lowest SSIM | total bytes | CPU s |',
      '|---|---|---:|---:|---:|---:|---:|---:|',
    ];
    const details: Record<string, unknown> = {};
    const skipped: string[] = [];

    for (const { group, format, sources: files } of groups) {
      const tools = SPECIALISTS[group].filter((tool) => !missing.includes(tool) && !(tool === 'cjpeg' && missing.includes('djpeg')));
      const results = new Map<string, Measured[]>();
      const add = (variant: string, measured: Measured) => results.set(variant, [...(results.get(variant) ?? []), measured]);
      const done: { source: Source; file: Record<string, Measured> }[] = [];
      for (const source of files) {
        const ref = await reference(sharp(source.path).autoOrient(), { width: source.width, height: source.height });
        const measure = async (bytes: Buffer | undefined, cpu: number): Promise<Measured> =>
          bytes === undefined
            ? { bytes: source.size, ssim: 1, cpuSeconds: cpu, keptInput: true }
            : { bytes: bytes.length, ssim: await similarity(ref, bytes), cpuSeconds: cpu };
        const timed = async <T>(work: () => Promise<T> | T): Promise<[T, number]> => {
          const before = cpuSeconds();
          const value = await work();
          return [value, cpuSeconds() - before];
        };
        const file: Record<string, Measured> = {};
        try {
          for (const tool of tools) file[tool] = await measure(...(await timed(() => specialist(tool, source, ctx.tmpDir))));
        } catch (err) {
          // A file a specialist cannot read (cjpeg and jpegoptim: a lossless JPEG) is left out of its format.
          skipped.push(`${group}: ${source.name} (${(err as Error).message.split('\n')[0]})`);
          continue;
        }
        const options = format === source.format ? {} : { format };
        file[OURS_DEFAULT] = await measure(...(await timed(() => oursCompress(source, options, ctx.tmpDir))));
        file[OURS_AUTO] = await measure(...(await timed(() => oursCompress(source, { ...options, quality: 'auto' }, ctx.tmpDir))));
        done.push({ source, file });
        for (const [variant, measured] of Object.entries(file)) add(variant, measured);
      }
      // The best specialist: the fewest bytes on the median file; ours is then searched at its SSIM, file by file.
      const best = tools.reduce<string | undefined>(
        (a, b) => (a === undefined || median(results.get(b)!.map((m) => m.bytes)) < median(results.get(a)!.map((m) => m.bytes)) ? b : a),
        undefined,
      );
      if (best) {
        for (const { source, file: entry } of done) {
          const ref = await reference(sharp(source.path).autoOrient(), { width: source.width, height: source.height });
          const before = cpuSeconds();
          const encoded = await oursAtSimilarity(source, format, Math.min(entry[best]!.ssim, 0.9999));
          // compress's own rule: never larger than the input in its format (then the input's bytes, SSIM 1).
          const bytes = format === source.format && encoded.length >= source.size ? fs.readFileSync(source.path) : encoded;
          const measured = { bytes: bytes.length, ssim: await similarity(ref, bytes), cpuSeconds: cpuSeconds() - before };
          entry[OURS_MATCHED] = measured;
          add(OURS_MATCHED, measured);
        }
      }
      details[group] = Object.fromEntries(done.map(({ source, file }) => [source.name, file]));

      const bestBytes = best ? done.map(({ file }) => file[best]!.bytes) : [];
      for (const variant of [OURS_DEFAULT, OURS_AUTO, ...(best ? [OURS_MATCHED] : []), ...tools]) {
        const measured = results.get(variant) ?? [];
        if (!measured.length) continue;
        const bytes = measured.map((m) => m.bytes);
        const ssims = measured.map((m) => m.ssim);
        const ratio = best ? median(measured.map((m, i) => m.bytes / bestBytes[i]!)) : null;
        const kept = measured.filter((m) => m.keptInput).length;
        const matched = variant === OURS_MATCHED;
        const bestSsim = best ? median(results.get(best)!.map((m) => m.ssim)) : undefined;
        const note = [
          `SSIM median ${median(ssims).toFixed(4)}, lowest ${Math.min(...ssims).toFixed(4)}`,
          kept ? `${kept} kept the input (below --quality's floor)` : '',
          matched && bestSsim !== undefined ? `vs ${best}'s median SSIM ${bestSsim.toFixed(4)}` : '',
        ]
          .filter(Boolean)
          .join('; ');
        rows.push({
          scenario: SCENARIO,
          variant: `${group} · ${variant}${variant === best ? ' (best specialist)' : ''}`,
          metric: 'median bytes',
          value: median(bytes),
          unit: 'B',
          ratio,
          baseline: best,
          ...(matched ? { target: { on: 'ratio' as const, op: '<=' as const, threshold: 1 } } : {}),
          extra: { files: measured.length, totalBytes: bytes.reduce((a, b) => a + b, 0), medianSsim: median(ssims), cpuSeconds: sum(measured) },
          note,
        });
        table.push(
          `| ${group} (${measured.length}) | ${variant}${variant === best ? ' (best specialist)' : ''} | ${median(bytes).toFixed(0)} | ` +
            `${ratio === null ? '—' : ratio.toFixed(2)} | ${median(ssims).toFixed(4)} | ${Math.min(...ssims).toFixed(4)} | ` +
            `${bytes.reduce((a, b) => a + b, 0)} | ${sum(measured).toFixed(1)} |`,
        );
      }
    }
    const report = [
      `${sources.length} sources (${groups[0]!.sources.length} JPEG, ${groups[1]!.sources.length} PNG; all of them to WebP); ` +
        `SSIM: src/imaging/similarity.ts (luma, ≤ 2 MP), "auto" keeps ≥ ${VISUALLY_LOSSLESS_SSIM}`,
      ...(missing.length ? [`missing: ${missing.join(', ')} (node scripts/setup.mjs --bench installs them, as root)`] : []),
      ...skipped.map((line) => `left out: ${line}`),
      '',
      ...table,
    ];
    return { rows, report, details };
  },
};

const sum = (measured: Measured[]): number => measured.reduce((a, m) => a + m.cpuSeconds, 0);
