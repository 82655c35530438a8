// Where and how the Node client writes a download: a name the server gave stays inside the
// folder asked for, and an existing file is never replaced unless the caller says so.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ImgapiError } from './errors.js';
import { safeFileName } from './file-names.js';

/** `folder/<name made safe>`, checked to be directly inside `folder` once resolved. */
export function pathInFolder(folder: string, name: string): string {
  const resolvedFolder = path.resolve(folder);
  const target = path.resolve(resolvedFolder, safeFileName(name));
  // safeFileName leaves one path component; this keeps it so should that ever change.
  if (path.dirname(target) !== resolvedFolder) throw new Error(`refusing to write outside ${resolvedFolder}`);
  return target;
}

/**
 * Writes `body` to `target` and answers its size. The bytes go to a new temporary file beside it
 * first (a failed download leaves no half file), which then takes the target's name: by a hard
 * link, which fails when the name exists (no check-then-write race), unless `overwrite`, when it
 * is renamed over it. An existing target without `overwrite` is ImgapiError FILE_EXISTS.
 */
export async function writeFile(body: Readable, target: string, options: { overwrite?: boolean } = {}): Promise<number> {
  await fs.promises.mkdir(path.dirname(target), { recursive: true });
  const partial = path.join(path.dirname(target), `.imgapi-${crypto.randomBytes(8).toString('hex')}.part`);
  try {
    // wx: a file (or a link planted) under that name is never written through.
    await pipeline(body, fs.createWriteStream(partial, { flags: 'wx' }));
    const { size } = await fs.promises.stat(partial);
    if (options.overwrite) await fs.promises.rename(partial, target);
    else await linkNew(partial, target);
    return size;
  } finally {
    await fs.promises.rm(partial, { force: true });
  }
}

/** Gives `file` the name `target` unless it exists; `file` is removed by the caller. */
async function linkNew(file: string, target: string): Promise<void> {
  try {
    await fs.promises.link(file, target);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw exists(target, err);
    // A file system without hard links (FAT, some network shares): an exclusive copy instead.
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS' && code !== 'EXDEV') throw err;
    try {
      await fs.promises.copyFile(file, target, fs.constants.COPYFILE_EXCL);
    } catch (copyErr) {
      if ((copyErr as NodeJS.ErrnoException).code === 'EEXIST') throw exists(target, copyErr);
      throw copyErr;
    }
  }
}

const exists = (target: string, cause: unknown) =>
  new ImgapiError({ code: 'FILE_EXISTS', status: 0, message: `${target} exists and was not replaced`, details: { path: target }, cause });
