/**
 * Content sniffing for uploaded files.
 *
 * The format of an upload is decided from its leading bytes only. File names
 * and client-supplied Content-Type headers are attacker-controlled and often
 * simply wrong (a PNG saved as .jpg is common), so they are never consulted.
 *
 * Each row of the format table carries its signature (formats.ts, signatures.ts); sniffing
 * asks the rows in turn, those with magic bytes first. It answers one of three things:
 *   - a `Sniffed` format we hand to the decoder;
 *   - a `SniffRefusal` for inputs we recognise but deliberately do not accept,
 *     so the caller can give a precise error instead of a vague "unknown format";
 *   - `null` for bytes we do not recognise at all.
 *
 * Sniffing is a cheap gate, not validation: a file that sniffs as PNG may
 * still be corrupt, and the decoder remains responsible for rejecting it.
 */
import { SIGNATURES, type ImageFormat } from './formats.js';
import { matches } from './signatures.js';

/** Sniffing tells the images and PDF apart; a ZIP or OLE2 container is told apart by documents/container.ts. */
type SniffedFormat = ImageFormat | 'pdf';

export interface Sniffed {
  format: SniffedFormat;
  mimeType: string;
}

/** Recognised but not accepted (differential or arithmetic-coded lossless JPEG, JPX, ...). */
export type SniffRefusal = { refused: true; reason: string };

/**
 * How many leading bytes callers must supply (or the whole file if shorter).
 * 64 KiB covers the metadata segments most JPEGs put before their frame header
 * and any realistic SVG prolog, while staying cheap to buffer per upload.
 */
export const SNIFF_HEAD_BYTES = 64 * 1024;

export function sniff(head: Buffer): Sniffed | SniffRefusal | null {
  // Look at exactly the window callers promise to supply, so the answer does
  // not depend on whether a caller happened to pass the whole file.
  const b = head.subarray(0, SNIFF_HEAD_BYTES);
  for (const { format, signature, input, title, mimes } of SIGNATURES) {
    if (signature.magic && !signature.magic.some((pattern) => matches(b, pattern))) continue;
    const verdict = signature.check ? signature.check(b) : true;
    if (verdict === false) continue;
    if (typeof verdict === 'object') return { refused: true, reason: verdict.reason };
    // Recognised, and read by no kind (an output-only format): refused by name.
    if (input === null) return { refused: true, reason: `${title} input is not supported` };
    return { format: format as SniffedFormat, mimeType: (verdict === 'other' && mimes[1]) || mimes[0]! };
  }
  return null;
}
