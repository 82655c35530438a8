// The labelled photos of test/fixtures/faces.json and how a detector's answer is scored against
// them: recall (labelled faces found) and false positives (detections that match no face). Used
// by the fast test (test/imaging/faces.test.ts) and the bench (bench/scenarios/faces.ts).
import fs from 'node:fs';
import path from 'node:path';
import { formatOf } from './compress-helpers.js';

export interface Box {
  left: number;
  top: number;
  width: number;
  height: number;
}

export interface LabelledPhoto {
  /** Relative to the repository's root (corpus photos through ../shared/corpus). */
  path: string;
  source: string;
  license: string;
  faces: Box[];
  note?: string;
}

export function labelledPhotos(repoRoot: string): (LabelledPhoto & { file: string; format: string })[] {
  const doc = JSON.parse(fs.readFileSync(path.join(repoRoot, 'test/fixtures/faces.json'), 'utf8')) as { photos: LabelledPhoto[] };
  return doc.photos.map((photo) => {
    const file = path.resolve(repoRoot, photo.path);
    return { ...photo, file, format: formatOf(file)! };
  });
}

const centre = (box: Box) => ({ x: box.left + box.width / 2, y: box.top + box.height / 2 });
const inside = (point: { x: number; y: number }, box: Box) =>
  point.x >= box.left && point.x <= box.left + box.width && point.y >= box.top && point.y <= box.top + box.height;

/** The two boxes are one face: either's centre lies inside the other (the detector's and a person's boxes are drawn differently). */
export const sameFace = (a: Box, b: Box): boolean => inside(centre(a), b) || inside(centre(b), a);

/** Labelled faces found, labelled faces missed, and detections matching no labelled face. */
export function score(labels: Box[], found: Box[]): { found: number; missed: Box[]; falsePositives: Box[] } {
  const missed = labels.filter((label) => !found.some((box) => sameFace(label, box)));
  const falsePositives = found.filter((box) => !labels.some((label) => sameFace(label, box)));
  return { found: labels.length - missed.length, missed, falsePositives };
}
