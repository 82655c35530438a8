// Previews of PDF files (image-to-pdf outputs): the first page rendered by pdftoppm, then
// fitted into the asked box like any image preview.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { AppError, TaskError } from '../errors.js';
import { decodeForPreview, type Preview } from '../imaging/preview.js';
import type { ObjectStorage } from '../storage/storage.js';
import { Poppler, PopplerMissing } from './pdf.js';

/** A preview render may take this long before it is killed. */
const PREVIEW_TIMEOUT_MS = 20_000;

export function previewPoppler(commands: { pdftoppmCommand: string; pdfinfoCommand: string }): Poppler {
  return new Poppler({ pdftoppm: commands.pdftoppmCommand, pdfinfo: commands.pdfinfoCommand, timeoutMs: PREVIEW_TIMEOUT_MS });
}

export async function previewPdf(
  poppler: Poppler,
  storage: ObjectStorage,
  storageKey: string,
  maxPixels: number,
  box: { width?: number; height?: number },
): Promise<Preview> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'imgapi-preview-'));
  try {
    let pdf: string;
    if (storage.localPath) {
      pdf = storage.localPath(storageKey);
    } else {
      pdf = path.join(dir, 'input.pdf');
      await pipeline(await storage.get(storageKey), fs.createWriteStream(pdf));
    }
    const page = await poppler.firstPage(pdf, box, dir);
    return await decodeForPreview(page, 'png', maxPixels, box);
  } catch (err) {
    if (err instanceof PopplerMissing) throw new AppError('PREVIEW_UNAVAILABLE', 'PDF previews need poppler (pdftoppm), which is not installed on this server');
    if (err instanceof TaskError) throw new AppError('PREVIEW_UNAVAILABLE', 'This PDF cannot be previewed: its first page could not be rendered');
    throw err;
  } finally {
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}
