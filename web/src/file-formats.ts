// Output formats as the dashboard names files: the server's format table (src/imaging/formats.ts)
// is the one source, and test/web/file-formats.test.ts holds this to it.

/** Where a format's file extension is not its name. */
const EXTENSIONS: Readonly<Record<string, string>> = { jpeg: 'jpg' };

/** The extension a file of `format` is given (`jpeg` → `jpg`). */
export const extensionOf = (format: string): string => EXTENSIONS[format] ?? format;
