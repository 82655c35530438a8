// `npm run docs:config`: writes the table of environment variables in docs/configuration.md from
// their one definition, VARIABLES in src/config.ts. test/config-docs.test.ts fails while the two differ.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { environmentTable } from '../src/config.js';

const START = '<!-- environment variables: generated from src/config.ts by `npm run docs:config` -->';
const END = '<!-- end of environment variables -->';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The page that holds the generated table of environment variables. */
export const CONFIGURATION_DOC = path.join(ROOT, 'docs', 'configuration.md');

/** `page` with `body` between the markers `start` and `end` (a page's generated section). */
export function withGeneratedSection(page: string, startMarker: string, endMarker: string, body: string): string {
  const start = page.indexOf(startMarker);
  const end = page.indexOf(endMarker);
  if (start < 0 || end < start) throw new Error(`no section between "${startMarker}" and "${endMarker}"`);
  return `${page.slice(0, start + startMarker.length)}\n${body}\n${page.slice(end)}`;
}

/** `page` with the generated table between the two markers. */
export function withEnvironmentTable(page: string): string {
  return withGeneratedSection(page, START, END, environmentTable());
}

/** Rewrites `file`'s generated section with `rewrite`, saying whether anything changed. */
export function regenerate(file: string, rewrite: (page: string) => string, what: string): void {
  const name = path.relative(ROOT, file);
  const before = fs.readFileSync(file, 'utf8');
  const after = rewrite(before);
  if (after === before) {
    console.log(`${name}: the table of ${what} is up to date`);
  } else {
    fs.writeFileSync(file, after);
    console.log(`${name}: table of ${what} rewritten`);
  }
}

if (path.resolve(process.argv[1] ?? '') === fileURLToPath(import.meta.url)) {
  regenerate(CONFIGURATION_DOC, withEnvironmentTable, 'environment variables');
}
