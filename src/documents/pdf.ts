// An uploaded PDF's page count, for the file's `pages`: pdfinfo (poppler, in the converter
// sandbox, with the preview's short timeout) reads the stored object. Upload does not decode
// what it stores: a PDF poppler cannot open (damaged, or password-protected) is kept without a
// page count, and its task fails with the reason (INVALID_IMAGE, DOCUMENT_ENCRYPTED).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { TaskError } from '../errors.js';
import type { Poppler } from '../programs/poppler.js';
import { SandboxUnavailable } from '../programs/sandbox.js';
import type { ObjectStorage } from '../storage/storage.js';
import { ownedTempPrefix } from '../temp-files.js';

/** Reads the page count of the PDF stored under `key`; undefined when poppler cannot tell. */
export type PdfPageCounter = (storage: ObjectStorage, key: string) => Promise<number | undefined>;

export const pdfPageCounter =
  (poppler: Poppler): PdfPageCounter =>
  async (storage, key) => {
    if (!poppler.available()) return undefined;
    const local = storage.localPath?.(key);
    const dir = local ? undefined : await fs.promises.mkdtemp(path.join(os.tmpdir(), ownedTempPrefix('imgapi-pdf-')));
    try {
      let file = local;
      if (!file) {
        file = path.join(dir!, 'source.pdf');
        await pipeline(await storage.get(key), fs.createWriteStream(file));
      }
      return (await poppler.info(file)).pages;
    } catch (err) {
      if (err instanceof TaskError || err instanceof SandboxUnavailable) return undefined;
      throw err;
    } finally {
      if (dir) await fs.promises.rm(dir, { recursive: true, force: true });
    }
  };
