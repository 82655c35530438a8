// Scenario: AI upscaling's quality on whole photos, against Lanczos. Each corpus photo, upright in
// sRGB and fitted to BENCH_SR_SIDE (1024) px on its long side (the whole scene, not a crop), is
// the original; it is reduced by the factor (Lanczos), then upscaled back by the factor with
// esrgan (superResolve, as the upscale kind runs it) and with the upscale kind's Lanczos step. Both
// are compared with the original with the project's similarity metric (SSIM on luma,
// src/imaging/similarity.ts) and with PSNR over RGB. In-process, no service: the network's
// quality, not the queue's. ×2 and ×4.
//
// Environment: BENCH_SR_SIDE=1024 (the original's long side), BENCH_SR_PHOTOS=10 (how many).
import fs from 'node:fs';
import path from 'node:path';
import sharp, { type Sharp } from 'sharp';
import { reference, similarity } from '../../src/imaging/similarity.js';
import { superResolutionEngine, superResolve } from '../../src/imaging/super-resolution/engine.js';
import { upscale } from '../../src/operations/upscale.js';
import type { StepEnv } from '../../src/operations/types.js';
import { CAMERA_PHOTOS } from '../../test/imaging/camera-photos.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';

const SCENARIO = 'ai quality';

const envInt = (name: string, fallback: number): number => {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
};

type Raw = { data: Buffer; width: number; height: number };

async function rawOf(image: Sharp): Promise<Raw> {
  const { data, info } = await image.removeAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

const open = (image: Raw) => sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } });

function psnr(a: Buffer, b: Buffer): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += (a[i]! - b[i]!) ** 2;
  return sum === 0 ? Infinity : 10 * Math.log10((255 * 255) / (sum / a.length));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export const aiQuality: Scenario = {
  name: 'ai-quality',
  title: 'AI upscale quality on whole photos: esrgan against Lanczos, SSIM and PSNR to the original, ×2 and ×4',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const side = envInt('BENCH_SR_SIDE', 1024);
    const photos = CAMERA_PHOTOS.slice(0, envInt('BENCH_SR_PHOTOS', CAMERA_PHOTOS.length));
    const scratch = path.join(ctx.tmpDir, 'ai-quality');
    fs.mkdirSync(scratch, { recursive: true });
    const rows: Row[] = [];
    const report: string[] = [];
    const details: Record<string, unknown[]> = {};
    try {
      for (const factor of [2, 4] as const) {
        const lanczosStep = upscale.step!.transform({ factor }, {} as StepEnv);
        const results: { file: string; size: string; ssim: [number, number]; psnr: [number, number]; seconds: number }[] = [];
        for (const file of photos) {
          const fitted = await rawOf(
            sharp(path.join(ctx.repoRoot, '../shared/corpus', file))
              .rotate()
              .resize({ width: side, height: side, fit: 'inside' })
              .toColourspace('srgb'),
          );
          // Sides that divide by the factor, so the upscaled images are the original's size.
          const original = await rawOf(
            open(fitted).extract({
              left: 0,
              top: 0,
              width: fitted.width - (fitted.width % factor),
              height: fitted.height - (fitted.height % factor),
            }),
          );
          const small = await rawOf(open(original).resize(original.width / factor, original.height / factor, { kernel: 'lanczos3' }));
          const target = { width: original.width, height: original.height };
          const started = performance.now();
          const esrgan = await rawOf((await superResolve(open(small), target, { tmpDir: scratch })).open());
          const seconds = (performance.now() - started) / 1000;
          const info = { format: 'raw', width: small.width, height: small.height, frames: 1, hasAlpha: false };
          const lanczos = await rawOf(await lanczosStep(open(small), info));
          const ref = await reference(open(original), target);
          const png = (image: Raw) => open(image).png({ compressionLevel: 1 }).toBuffer();
          const ssims: [number, number] = [await similarity(ref, await png(esrgan)), await similarity(ref, await png(lanczos))];
          const psnrs: [number, number] = [psnr(original.data, esrgan.data), psnr(original.data, lanczos.data)];
          results.push({ file, size: `${small.width}×${small.height} → ${target.width}×${target.height}`, ssim: ssims, psnr: psnrs, seconds });
          ctx.log(
            `ai-quality ×${factor} ${file}: SSIM ${ssims.map((s) => s.toFixed(4)).join(' / ')}, PSNR ${psnrs.map((p) => p.toFixed(2)).join(' / ')}`,
          );
        }
        details[`x${factor}`] = results;
        for (const r of results) {
          report.push(
            `×${factor} ${r.file} (${r.size}, esrgan ${r.seconds.toFixed(1)} s): SSIM esrgan ${r.ssim[0].toFixed(4)} · Lanczos ${r.ssim[1].toFixed(4)}; ` +
              `PSNR ${r.psnr[0].toFixed(2)} · ${r.psnr[1].toFixed(2)} dB`,
          );
        }
        const ssimWins = results.filter((r) => r.ssim[0] > r.ssim[1]).length;
        const psnrWins = results.filter((r) => r.psnr[0] > r.psnr[1]).length;
        const ssimGain = median(results.map((r) => r.ssim[0] - r.ssim[1]));
        const psnrGain = median(results.map((r) => r.psnr[0] - r.psnr[1]));
        report.push(
          `×${factor}: esrgan's SSIM higher on ${ssimWins} of ${results.length} (median gain ${ssimGain.toFixed(4)}), ` +
            `PSNR higher on ${psnrWins} of ${results.length} (median gain ${psnrGain.toFixed(2)} dB)`,
        );
        rows.push(
          {
            scenario: SCENARIO,
            variant: `esrgan ×${factor} − Lanczos`,
            metric: 'median SSIM gain',
            value: Number(ssimGain.toFixed(4)),
            unit: '',
            note: `higher on ${ssimWins} of ${results.length} whole photos (${side} px long side)`,
          },
          {
            scenario: SCENARIO,
            variant: `esrgan ×${factor} − Lanczos`,
            metric: 'median PSNR gain',
            value: Number(psnrGain.toFixed(2)),
            unit: 'dB',
            note: `higher on ${psnrWins} of ${results.length}`,
          },
        );
      }
    } finally {
      await superResolutionEngine().close();
    }
    return { rows, report, details };
  },
};
