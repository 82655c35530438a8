// `npm run docs:formats`: writes README.md's table of formats from their one definition, the
// format table FORMATS in src/imaging/formats.ts. test/format-docs.test.ts fails while the two differ.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatTable } from '../src/imaging/formats.js';
import { README, withGeneratedSection } from './config-docs.js';

const START = '<!-- formats: generated from src/imaging/formats.ts by `npm run docs:formats` -->';
const END = '<!-- end of formats -->';

/** `readme` with the generated table of formats between its two markers. */
export function withFormatTable(readme: string): string {
  return withGeneratedSection(readme, START, END, formatTable());
}

if (path.resolve(process.argv[1] ?? '') === fileURLToPath(import.meta.url)) {
  const before = fs.readFileSync(README, 'utf8');
  const after = withFormatTable(before);
  if (after === before) {
    console.log('README.md: the table of formats is up to date');
  } else {
    fs.writeFileSync(README, after);
    console.log('README.md: table of formats rewritten from src/imaging/formats.ts');
  }
}
