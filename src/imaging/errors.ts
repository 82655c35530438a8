// libvips reports every fault as a plain Error with a message: which TaskError it is to the
// client, or a system fault (disk, memory) that the worker retries.
import { TaskError } from '../errors.js';

/** libvips reports decode faults as plain errors: those are the input's fault. */
export function asTaskError(err: unknown): Error {
  if (err instanceof TaskError) return err;
  const e = err as NodeJS.ErrnoException;
  if (e?.code && /^E[A-Z]+$/.test(e.code)) return e; // a system fault (disk, memory): retried
  const message = String(e?.message ?? err);
  if (/timeout/i.test(message)) return new TaskError('PROCESSING_TIMEOUT', 'The task ran past its time limit');
  if (/pixel limit/i.test(message)) return new TaskError('IMAGE_TOO_LARGE', "The image exceeds the plan's pixel limit");
  if (/unsupported image format|compression format has not been built/i.test(message)) {
    return new TaskError('UNSUPPORTED_FORMAT', "This image's encoding is not supported");
  }
  return new TaskError('INVALID_IMAGE', `The image could not be decoded: ${firstLine(message)}`);
}

/**
 * A header libvips cannot read although the upload recognised the format from its magic bytes:
 * the file is damaged (a TIFF cut before its directory), not of a format we lack.
 */
export function asHeaderError(err: unknown, format: string): Error {
  if (/unsupported image format/i.test(String((err as Error)?.message))) {
    return new TaskError('INVALID_IMAGE', `The ${format} file could not be decoded: its header is damaged or the file is cut short`);
  }
  return asTaskError(err);
}

const firstLine = (text: string): string => text.split('\n')[0]!.slice(0, 200);
