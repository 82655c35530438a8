// The one list of kinds. A kind exists in the API exactly when it is listed here.
import { adjust } from './adjust.js';
import { compress } from './compress.js';
import { convert } from './convert.js';
import { crop } from './crop.js';
import { extend } from './extend.js';
import { flip } from './flip.js';
import { imageToPdf } from './image-to-pdf.js';
import { pipelineOf } from './pipeline.js';
import { pdfToImages } from './pdf-to-images.js';
import { presentationToImages } from './presentation-to-images.js';
import { redact } from './redact.js';
import { resize } from './resize.js';
import { rotate } from './rotate.js';
import { trim } from './trim.js';
import type { AnyOperation } from './types.js';
import { upscale } from './upscale.js';
import { watermark } from './watermark.js';

const KINDS: readonly AnyOperation[] = [
  compress,
  resize,
  crop,
  convert,
  rotate,
  flip,
  watermark,
  upscale,
  redact,
  adjust,
  trim,
  extend,
  imageToPdf,
  presentationToImages,
  pdfToImages,
];

/** Every kind, and the pipeline of the image transforms among them (those with a step). */
export const OPERATIONS: readonly AnyOperation[] = [...KINDS, pipelineOf(KINDS.filter((op) => op.step))];

const byKind = new Map(OPERATIONS.map((op) => [op.kind, op]));

export function getOperation(kind: string): AnyOperation | undefined {
  return byKind.get(kind);
}
