// Everything the client commands print goes through here. Much of it comes from the server — an
// error message, a file name, a webhook receiver's answer, the kinds of its document — and a
// server (or anything between) could put escape sequences in it that retitle the window, clear
// the screen or rewrite what was printed, or bidi overrides that make a name read backwards.
import { withoutControlCharacters } from '../../sdk/node.js';

/** What the commands are given to write to: process.stdout and process.stderr, or a test's. */
export interface OutputStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
  rows?: number;
}

/** One line safe to show: no escape sequence, no control or format character; line breaks and tabs become spaces. */
export const printable = (text: string): string => withoutControlCharacters(text.replace(/[\r\n\t\v\f]+/g, ' '));

/**
 * A stream whose every write loses its escape sequences and control characters (line breaks and
 * tabs stay). Only `control` writes as it is: for the progress board's own cursor movements,
 * around text it has made printable().
 */
export class Terminal {
  constructor(private readonly stream: OutputStream) {}

  get isTTY(): boolean {
    return this.stream.isTTY === true;
  }
  get columns(): number | undefined {
    return this.stream.columns;
  }
  get rows(): number | undefined {
    return this.stream.rows;
  }

  write(text: string): void {
    this.stream.write(withoutControlCharacters(text, '\n\t'));
  }

  control(text: string): void {
    this.stream.write(text);
  }
}

/**
 * A value as JSON for a script. JSON.stringify escapes C0 controls; the C1 controls, format
 * characters (bidi) and line separators it leaves raw are escaped too, so the data stays whole
 * and a terminal sees none of them.
 */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(
    /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]/gu,
    // Each UTF-16 unit (a tag character beyond U+FFFF is two).
    (character) => Array.from({ length: character.length }, (_, i) => `\\u${character.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''),
  );
}
