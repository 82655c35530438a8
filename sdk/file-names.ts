// What a client does with text a server sent before it names a file or reaches a terminal: a
// server (or anything between) may answer "../../.bashrc" for a file name, or terminal escape
// sequences that retitle the window, clear the screen or hide what follows. Browser-safe (no
// node: imports): the Node client confines the name to its folder (./save-file.ts), the CLI shows
// text through withoutControlCharacters (src/cli/terminal.ts).

/**
 * Terminal escape sequences, whole: CSI (ESC [ … or U+009B), OSC (ESC ] … or U+009D, up to
 * BEL or ST; unterminated, to the end, as a terminal would swallow it), DCS/SOS/PM/APC (ESC P,
 * X, ^, _ … ST) and the short ESC forms (ESC ( B, ESC 7…). Only removing the ESC would leave
 * their printable remainder ("[2J") behind.
 */
const ESCAPE_SEQUENCES =
  /(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[ -/]*[0-~]?/g;
/**
 * Control characters (C0, DEL, C1), Unicode format characters (the bidi overrides and isolates
 * U+202A–U+202E and U+2066–U+2069 that make "gpj.exe" read "exe.jpg", zero-width characters,
 * U+FEFF…), line and paragraph separators and lone surrogates.
 */
const CONTROL_CHARACTERS = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/** `text` without escape sequences and control or format characters, but those in `keep` (e.g. "\n\t"). */
export function withoutControlCharacters(text: string, keep = ''): string {
  return text.replace(ESCAPE_SEQUENCES, '').replace(CONTROL_CHARACTERS, (character) => (keep.includes(character) ? character : ''));
}

/** Characters Windows does not allow in a name (a path separator is cut off before). */
const RESERVED_CHARACTERS = /[<>:"|?*]/g;
/** Device names Windows opens instead of a file, with any extension: "NUL.png", "com1.txt". */
const DEVICE_NAMES = /^(?:con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$)(?:\.|$)/i;
/** Bytes of UTF-8 a name may take: ext4 and most others allow 255, and a name needs room for a suffix. */
const MAX_NAME_BYTES = 200;
/** An extension longer than this is cut with the rest of the name. */
const MAX_EXTENSION_LENGTH = 16;

/**
 * One safe file name from a name a server gave (Content-Disposition, a format): its last path
 * component only, without escape sequences, control, format or Windows-reserved characters,
 * without leading dots (no hidden file, no "." or "..") or trailing dots and spaces, never a
 * Windows device name, at most 200 bytes (the extension kept). `fallback` (made safe the same
 * way, else "download") when nothing is left.
 */
export function safeFileName(name: string | null | undefined, fallback = 'download'): string {
  const cleaned = reduce(name ?? '');
  if (cleaned) return cleaned;
  return (fallback === 'download' ? '' : reduce(fallback)) || 'download';
}

function reduce(name: string): string {
  const base = withoutControlCharacters(name).split(/[\\/]/).pop()!;
  const cleaned = base
    .replace(RESERVED_CHARACTERS, '_')
    .trim()
    .replace(/^[.\s]+/, '')
    .replace(/[.\s]+$/, '');
  if (!cleaned) return '';
  return bounded(DEVICE_NAMES.test(cleaned) ? `_${cleaned}` : cleaned);
}

/** `name` cut to MAX_NAME_BYTES of UTF-8, keeping its extension; by code point, never half a character. */
function bounded(name: string): string {
  const encoder = new TextEncoder();
  if (encoder.encode(name).length <= MAX_NAME_BYTES) return name;
  const dot = name.lastIndexOf('.');
  const extension = dot > 0 && name.length - dot <= MAX_EXTENSION_LENGTH + 1 ? name.slice(dot) : '';
  let budget = MAX_NAME_BYTES - encoder.encode(extension).length;
  let stem = '';
  for (const character of name.slice(0, name.length - extension.length)) {
    budget -= encoder.encode(character).length;
    if (budget < 0) break;
    stem += character;
  }
  return `${stem.replace(/[.\s]+$/, '')}${extension}`;
}
