// `npm run docs:config`: writes README.md's table of environment variables from their one
// definition, VARIABLES in src/config.ts. test/config-docs.test.ts fails while the two differ.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { environmentTable } from '../src/config.js';

const START = '<!-- environment variables: generated from src/config.ts by `npm run docs:config` -->';
const END = '<!-- end of environment variables -->';

export const README = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'README.md');

/** `readme` with `body` between the markers `start` and `end` (the README's generated sections). */
export function withGeneratedSection(readme: string, startMarker: string, endMarker: string, body: string): string {
  const start = readme.indexOf(startMarker);
  const end = readme.indexOf(endMarker);
  if (start < 0 || end < start) throw new Error(`README.md has no section between "${startMarker}" and "${endMarker}"`);
  return `${readme.slice(0, start + startMarker.length)}\n${body}\n${readme.slice(end)}`;
}

/** `readme` with the generated table between the two markers. */
export function withEnvironmentTable(readme: string): string {
  return withGeneratedSection(readme, START, END, environmentTable());
}

if (path.resolve(process.argv[1] ?? '') === fileURLToPath(import.meta.url)) {
  const before = fs.readFileSync(README, 'utf8');
  const after = withEnvironmentTable(before);
  if (after === before) {
    console.log('README.md: the table of environment variables is up to date');
  } else {
    fs.writeFileSync(README, after);
    console.log('README.md: table of environment variables rewritten from src/config.ts');
  }
}
