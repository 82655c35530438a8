// `npm run docs:formats`: writes docs/formats.md's table of formats from their one definition, the
// format table FORMATS in src/imaging/formats.ts. test/imaging/formats.test.ts fails while the two differ.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatTable } from '../src/imaging/formats.js';
import { regenerate, withGeneratedSection } from './config-docs.js';

const START = '<!-- formats: generated from src/imaging/formats.ts by `npm run docs:formats` -->';
const END = '<!-- end of formats -->';

/** The page that holds the generated table of formats. */
export const FORMATS_DOC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'formats.md');

/** `page` with the generated table of formats between its two markers. */
export function withFormatTable(page: string): string {
  return withGeneratedSection(page, START, END, formatTable());
}

if (path.resolve(process.argv[1] ?? '') === fileURLToPath(import.meta.url)) {
  regenerate(FORMATS_DOC, withFormatTable, 'formats');
}
