// Poppler: pdfinfo for page counts and sizes, pdftoppm to rasterise pages. Each run is a child
// process group with a timeout, killed whole on timeout or cancel (see processes.ts), in the
// converter sandbox (sandbox.ts), seeing the PDF (read-only) and its output directory alone.
import fs from 'node:fs';
import path from 'node:path';
import { TaskError } from '../errors.js';
import { findExecutable, lastLines, ProgramMissing } from './processes.js';
import type { Access, Sandbox } from './sandbox.js';

export interface PopplerOptions {
  pdftoppm: string;
  pdfinfo: string;
  /** The longest one pdftoppm or pdfinfo run may take. */
  timeoutMs: number;
  sandbox: Sandbox;
}

export interface PdfInfo {
  pages: number;
  /** Page 1's displayed size in points (its rotation applied). */
  width: number;
  height: number;
}

export interface RunLimits {
  signal?: AbortSignal;
  deadline?: number;
}

/** The program is missing: the message names it and the package that provides it. */
export class PopplerMissing extends TaskError {
  constructor(readonly program: string) {
    super('CONVERSION_FAILED', `${program} (poppler-utils) is not installed on this server, so PDF pages cannot be rasterised`);
  }
}

export class Poppler {
  constructor(private readonly options: PopplerOptions) {}

  available(): boolean {
    return findExecutable(this.options.pdftoppm) !== undefined && findExecutable(this.options.pdfinfo) !== undefined;
  }

  /**
   * The page count and page 1's size. A PDF that needs a password to open fails
   * DOCUMENT_ENCRYPTED; one poppler cannot read, CONVERSION_FAILED.
   */
  async info(pdf: string, limits: RunLimits = {}): Promise<PdfInfo> {
    const run = await this.run(this.options.pdfinfo, [pdf], { readOnly: [pdf] }, limits);
    encrypted(run.stderr);
    const pages = Number(/^Pages:\s+(\d+)/m.exec(run.stdout)?.[1] ?? NaN);
    const size = /^Page size:\s+([\d.]+) x ([\d.]+) pts/m.exec(run.stdout);
    const rotation = Number(/^Page rot:\s+(\d+)/m.exec(run.stdout)?.[1] ?? 0);
    if (run.code !== 0 || !Number.isInteger(pages) || !size) {
      throw new TaskError('CONVERSION_FAILED', `The converted PDF cannot be read${lastLines(run.stderr) ? `: ${lastLines(run.stderr)}` : ''}`);
    }
    const [w, h] = [Number(size[1]), Number(size[2])];
    return rotation % 180 === 90 ? { pages, width: h, height: w } : { pages, width: w, height: h };
  }

  /**
   * The displayed size in points (rotation applied) of pages `first`..`last`, by page number:
   * what their images will measure is known before any is rendered.
   */
  async pageSizes(
    pdf: string,
    range: { first: number; last: number },
    limits: RunLimits = {},
  ): Promise<Map<number, { width: number; height: number }>> {
    const run = await this.run(this.options.pdfinfo, ['-f', String(range.first), '-l', String(range.last), pdf], { readOnly: [pdf] }, limits);
    encrypted(run.stderr);
    const sizes = new Map<number, { width: number; height: number }>();
    const rotations = new Map<number, number>();
    for (const match of run.stdout.matchAll(/^Page\s+(\d+) size:\s+([\d.]+) x ([\d.]+) pts/gm))
      sizes.set(Number(match[1]), { width: Number(match[2]), height: Number(match[3]) });
    for (const match of run.stdout.matchAll(/^Page\s+(\d+) rot:\s+(\d+)/gm)) rotations.set(Number(match[1]), Number(match[2]));
    for (let page = range.first; page <= range.last; page++) {
      const size = sizes.get(page);
      if (run.code !== 0 || !size)
        throw new TaskError(
          'CONVERSION_FAILED',
          `The size of page ${page} cannot be read${lastLines(run.stderr) ? `: ${lastLines(run.stderr)}` : ''}`,
        );
      if ((rotations.get(page) ?? 0) % 180 === 90) sizes.set(page, { width: size.height, height: size.width });
    }
    return sizes;
  }

  /**
   * Rasterises pages `first`..`last` at exactly `width` pixels wide (height by the page's
   * aspect), or at `dpi`, into `outDir`; returns each page's file, by page number. `tiff` is
   * uncompressed (fast to write, for re-encoding); `png` is final.
   */
  async rasterise(
    pdf: string,
    range: { first: number; last: number },
    scale: number | { dpi: number },
    format: 'png' | 'tiff',
    outDir: string,
    limits: RunLimits = {},
  ): Promise<Map<number, string>> {
    await fs.promises.mkdir(outDir, { recursive: true });
    const prefix = path.join(outDir, 'page');
    const run = await this.run(
      this.options.pdftoppm,
      [
        '-f',
        String(range.first),
        '-l',
        String(range.last),
        ...(typeof scale === 'number' ? ['-scale-to-x', String(scale), '-scale-to-y', '-1'] : ['-r', String(scale.dpi)]),
        ...(format === 'png' ? ['-png'] : ['-tiff', '-tiffcompression', 'none']),
        pdf,
        prefix,
      ],
      { readOnly: [pdf], writable: [outDir] },
      limits,
    );
    if (run.code !== 0) encrypted(run.stderr);
    if (run.code !== 0)
      throw new TaskError('CONVERSION_FAILED', `pdftoppm could not rasterise the pages${lastLines(run.stderr) ? `: ${lastLines(run.stderr)}` : ''}`);
    const pages = new Map<number, string>();
    for (const name of await fs.promises.readdir(outDir)) {
      const match = /^page-0*(\d+)\.(png|tif)$/.exec(name);
      if (match) pages.set(Number(match[1]), path.join(outDir, name));
    }
    for (let page = range.first; page <= range.last; page++) {
      if (!pages.has(page)) throw new TaskError('CONVERSION_FAILED', `pdftoppm produced no image for page ${page}`);
    }
    return pages;
  }

  /**
   * Page 1 as a PNG fitted inside `box` (a missing side is unbounded), under `dir`; for previews.
   * Throws PopplerMissing when poppler is not installed, TaskError when the PDF is unreadable.
   */
  async firstPage(pdf: string, box: { width?: number; height?: number }, dir: string, limits: RunLimits = {}): Promise<string> {
    const page = await this.info(pdf, limits);
    const scale = Math.min((box.width ?? Infinity) / page.width, (box.height ?? Infinity) / page.height);
    const width = Math.max(1, Math.round(page.width * (Number.isFinite(scale) ? scale : 1)));
    const prefix = path.join(dir, 'preview');
    const run = await this.run(
      this.options.pdftoppm,
      ['-f', '1', '-l', '1', '-singlefile', '-scale-to-x', String(width), '-scale-to-y', '-1', '-png', pdf, prefix],
      { readOnly: [pdf], writable: [dir] },
      limits,
    );
    if (run.code !== 0)
      throw new TaskError(
        'CONVERSION_FAILED',
        `pdftoppm could not render the first page${lastLines(run.stderr) ? `: ${lastLines(run.stderr)}` : ''}`,
      );
    return `${prefix}.png`;
  }

  private async run(command: string, args: string[], access: Access, { signal, deadline }: RunLimits) {
    if (!findExecutable(command)) throw new PopplerMissing(command);
    const timeoutMs = Math.max(1, Math.min(this.options.timeoutMs, deadline === undefined ? Infinity : deadline - Date.now()));
    const run = await this.options.sandbox.run(command, args, access, { timeoutMs, signal }).catch((err) => {
      if (err instanceof ProgramMissing) throw new PopplerMissing(command);
      throw err;
    });
    if (run.aborted) throw signal?.reason instanceof Error ? signal.reason : new Error('canceled');
    if (run.timedOut)
      throw new TaskError('CONVERSION_TIMEOUT', `${path.basename(command)} did not finish within ${Math.round(timeoutMs / 1000)} s and was stopped`);
    return run;
  }
}

/** pdfinfo and pdftoppm say this of a PDF that needs a password to open. */
function encrypted(stderr: string): void {
  if (/Incorrect password/i.test(stderr))
    throw new TaskError('DOCUMENT_ENCRYPTED', 'The PDF is password-protected; remove the password and upload it again');
}
