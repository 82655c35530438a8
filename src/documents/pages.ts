// The `pages` option of presentation-to-images: "1-3,5" — slide numbers and inclusive ranges,
// counting the slides the presentation shows (hidden ones are not exported, so not counted).

const MAX_PAGE_NUMBER = 100_000;

export type PageRanges = [number, number][];

/** The ranges of a selection, or a message saying what is wrong with it. */
export function parsePages(spec: string): { ranges: PageRanges } | { error: string } {
  const parts = spec.split(',').map((part) => part.trim());
  const ranges: PageRanges = [];
  for (const part of parts) {
    const match = /^(\d+)(?:\s*-\s*(\d+))?$/.exec(part);
    if (!match) {
      return { error: `"${spec}" is not a page selection: use slide numbers and ranges separated by commas, such as "1-3,5"` };
    }
    const first = Number(match[1]);
    const last = match[2] === undefined ? first : Number(match[2]);
    if (first < 1) return { error: 'slides are numbered from 1' };
    if (last > MAX_PAGE_NUMBER) return { error: `slide numbers go up to ${MAX_PAGE_NUMBER}` };
    if (last < first) return { error: `the range "${part}" ends before it starts` };
    ranges.push([first, last]);
  }
  return { ranges };
}

/**
 * The slides a selection names, ascending and each once, for a presentation of `count` slides.
 * Without a selection: all of them. A selection naming a slide past the end is an error, so a
 * caller never silently gets fewer images than asked for.
 */
export function selectPages(spec: string | undefined, count: number): { pages: number[] } | { error: string } {
  if (spec === undefined) return { pages: Array.from({ length: count }, (_, i) => i + 1) };
  const parsed = parsePages(spec);
  if ('error' in parsed) return parsed;
  const wanted = new Set<number>();
  for (const [first, last] of parsed.ranges) {
    if (last > count) {
      return { error: `pages "${spec}" names slide ${last}, but the presentation shows ${count} slide${count === 1 ? '' : 's'}` };
    }
    for (let page = first; page <= last; page++) wanted.add(page);
  }
  return { pages: [...wanted].sort((a, b) => a - b) };
}

/** Consecutive runs of sorted page numbers, for one rasteriser run each. */
export function runsOf(pages: number[]): { first: number; last: number }[] {
  const runs: { first: number; last: number }[] = [];
  for (const page of pages) {
    const last = runs[runs.length - 1];
    if (last && page === last.last + 1) last.last = page;
    else runs.push({ first: page, last: page });
  }
  return runs;
}
