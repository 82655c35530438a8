// Previews of PDF files (uploads and image-to-pdf outputs): pdftoppm renders the first page fitted into the
// box; src/imaging/preview.ts encodes, caches and bounds it like any other preview. And the
// ffmpeg of AVIF image sequences' previews, run as the jobs run it.
import { AppError, TaskError } from '../errors.js';
import { Ffmpeg } from './ffmpeg.js';
import { Poppler, PopplerMissing } from './poppler.js';
import { SandboxUnavailable, type Sandbox } from './sandbox.js';

/** A preview render may take this long before it is killed. */
const PREVIEW_TIMEOUT_MS = 20_000;

export function previewPoppler(commands: { pdftoppmCommand: string; pdfinfoCommand: string }, sandbox: Sandbox): Poppler {
  return new Poppler({ pdftoppm: commands.pdftoppmCommand, pdfinfo: commands.pdfinfoCommand, timeoutMs: PREVIEW_TIMEOUT_MS, sandbox });
}

/** The ffmpeg that previews an AVIF image sequence without a usable still image (its first frame). */
export function previewFfmpeg(config: { ffmpegCommand: string }, sandbox: Sandbox): Ffmpeg {
  return new Ffmpeg({ command: config.ffmpegCommand, timeoutMs: PREVIEW_TIMEOUT_MS, sandbox });
}

/** The first page of the PDF at `pdf` as a PNG file in `dir`, fitted inside `box`. */
export async function pdfFirstPage(poppler: Poppler, pdf: string, box: { width: number; height: number }, dir: string): Promise<string> {
  try {
    return await poppler.firstPage(pdf, box, dir);
  } catch (err) {
    if (err instanceof PopplerMissing)
      throw new AppError('PREVIEW_UNAVAILABLE', 'PDF previews need poppler (pdftoppm), which is not installed on this server');
    if (err instanceof SandboxUnavailable)
      throw new AppError('PREVIEW_UNAVAILABLE', 'PDF previews need the converter sandbox, which cannot be set up on this server');
    if (err instanceof TaskError) throw new AppError('PREVIEW_UNAVAILABLE', 'This PDF cannot be previewed: its first page could not be rendered');
    throw err;
  }
}
