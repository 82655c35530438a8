// `npm run docs:kinds`: writes docs/kinds.md's reference of the kinds from their one definition,
// the modules of src/operations listed in registry.ts. test/operations/kinds.test.ts fails while
// the page and the registry differ.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { kindsReference } from '../src/operations/reference.js';
import { withGeneratedSection } from './config-docs.js';

export const KINDS_PAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'kinds.md');
const START = '<!-- kinds: generated from src/operations/registry.ts by `npm run docs:kinds` -->';
const END = '<!-- end of kinds -->';

/** `page` with the generated reference of the kinds between its two markers. */
export function withKindsReference(page: string): string {
  return withGeneratedSection(page, START, END, kindsReference());
}

if (path.resolve(process.argv[1] ?? '') === fileURLToPath(import.meta.url)) {
  const before = fs.readFileSync(KINDS_PAGE, 'utf8');
  const after = withKindsReference(before);
  if (after === before) {
    console.log('docs/kinds.md: the reference of the kinds is up to date');
  } else {
    fs.writeFileSync(KINDS_PAGE, after);
    console.log('docs/kinds.md: reference of the kinds rewritten from src/operations/registry.ts');
  }
}
