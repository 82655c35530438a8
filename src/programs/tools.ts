// The document tools one process holds: the LibreOffice supervisor (its pool is per process),
// the poppler runners and ffmpeg (animated AVIF), configured from the environment, all in the process's sandbox.
import type { Config } from '../config.js';
import { Ffmpeg } from './ffmpeg.js';
import { LibreOffice, type ConversionEvent } from './libreoffice.js';
import { Poppler } from './poppler.js';
import type { Sandbox } from './sandbox.js';

export interface DocumentTools {
  libreoffice: LibreOffice;
  poppler: Poppler;
  /** Animated AVIF: decodes and writes AV1 image sequences. */
  ffmpeg: Ffmpeg;
}

export function createDocumentTools(config: Config, sandbox: Sandbox, onConversion?: (event: ConversionEvent) => void): DocumentTools {
  return {
    libreoffice: new LibreOffice({
      command: config.sofficeCommand,
      timeoutMs: config.conversionTimeoutMs,
      concurrency: config.converterConcurrency,
      restartAfter: config.converterRestartAfter,
      sandbox,
      onConversion,
    }),
    poppler: new Poppler({ pdftoppm: config.pdftoppmCommand, pdfinfo: config.pdfinfoCommand, timeoutMs: config.conversionTimeoutMs, sandbox }),
    ffmpeg: new Ffmpeg({ command: config.ffmpegCommand, timeoutMs: config.conversionTimeoutMs, sandbox }),
  };
}
