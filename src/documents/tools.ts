// The document tools one process holds: the LibreOffice supervisor (its pool is per process)
// and the poppler runners, configured from the environment, both in the process's sandbox.
import type { Config } from '../config.js';
import { LibreOffice, type ConversionEvent } from './libreoffice.js';
import { Poppler } from './pdf.js';
import type { Sandbox } from './sandbox.js';

export interface DocumentTools {
  libreoffice: LibreOffice;
  poppler: Poppler;
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
  };
}
