// Which stored formats each kind of job reads: the format table says (imaging/formats.ts).
import { inputOf } from '../imaging/formats.js';

/** What a kind's input files must be (an operation's `accepts`). */
export type InputKind = 'image' | 'presentation' | 'pdf';

export function acceptsFormat(kind: InputKind, format: string): boolean {
  return inputOf(format) === kind;
}
