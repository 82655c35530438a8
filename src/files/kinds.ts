// Which stored formats each kind of job reads.
import type { InputKind } from '../operations/types.js';

export const IMAGE_FORMATS: ReadonlySet<string> = new Set(['jpeg', 'png', 'webp', 'gif', 'avif', 'heic', 'tiff', 'bmp', 'svg']);
export const PRESENTATION_FORMATS: ReadonlySet<string> = new Set(['pptx', 'ppsx', 'ppt', 'odp']);

export function acceptsFormat(kind: InputKind, format: string): boolean {
  return (kind === 'image' ? IMAGE_FORMATS : PRESENTATION_FORMATS).has(format);
}
