// Scenario: the face detector (src/imaging/faces.ts) on the labelled photos of
// test/fixtures/faces.json — real photos from npm packages and the corpus, each with its source
// and licence. For each mode (quick: what face gravity and info use; thorough: what redact uses)
// it reports recall (labelled faces found), false positives (detections matching no labelled
// face) and the CPU time of one detection on a 12 MP photo (decode of the downscaled copy and the
// network, this process and its threads). In-process, no service.
import { detectFacesInFile, closeFaceDetector } from '../../src/imaging/faces.js';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import { labelledPhotos, score } from '../../test/imaging/face-labels.js';
import type { BenchContext, Row, Scenario, ScenarioResult } from '../lib/types.js';

const SCENARIO = 'faces';
/** The 12 MP photo (3000 × 4000) the CPU time is measured on. */
const TWELVE_MP = 'Carrie.jpg';

const cpuMs = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
};

export const facesScenario: Scenario = {
  name: 'faces',
  title: 'Face detection: recall and false positives on labelled real photos; CPU time on a 12 MP photo',
  async run(ctx: BenchContext): Promise<ScenarioResult> {
    const photos = labelledPhotos(ctx.repoRoot);
    const rows: Row[] = [];
    const report: string[] = [];
    const details: Record<string, unknown> = {};
    try {
      // The model loads once per process: a first detection outside the measurements.
      const twelve = photos.find((p) => p.path.endsWith(TWELVE_MP))!;
      await detectFacesInFile(twelve.file, twelve.format, DEFAULT_PLANS.max);
      for (const mode of ['quick', 'thorough'] as const) {
        const thorough = mode === 'thorough';
        let found = 0;
        let falsePositives = 0;
        const perPhoto: unknown[] = [];
        let measured = 0;
        let labelledSeen = 0;
        for (const photo of photos) {
          // Within the run's budget: a partial measurement says how far it got.
          if (ctx.secondsLeft() < 20) {
            report.push(`${mode}: stopped by the time budget after ${measured} of ${photos.length} photos`);
            break;
          }
          measured++;
          labelledSeen += photo.faces.length;
          const boxes = await detectFacesInFile(photo.file, photo.format, DEFAULT_PLANS.max, { thorough });
          const s = score(photo.faces, boxes);
          found += s.found;
          falsePositives += s.falsePositives.length;
          perPhoto.push({ path: photo.path, faces: photo.faces.length, found: s.found, missed: s.missed, falsePositives: s.falsePositives });
          if (s.missed.length || s.falsePositives.length) {
            report.push(`${mode} ${photo.path}: missed ${s.missed.length} of ${photo.faces.length}, ${s.falsePositives.length} false positive(s)`);
          }
          ctx.log(`faces ${mode} ${photo.path}: ${s.found}/${photo.faces.length}, ${s.falsePositives.length} false`);
        }
        const times: number[] = [];
        for (let i = 0; i < 3; i++) {
          const since = process.cpuUsage();
          await detectFacesInFile(twelve.file, twelve.format, DEFAULT_PLANS.max, { thorough });
          times.push(cpuMs(since));
        }
        const cpu = Math.min(...times);
        details[mode] = { recall: found / labelledSeen, found, labelled: labelledSeen, falsePositives, photos: measured, cpuMs12MP: times, perPhoto };
        report.push(
          `${mode}: ${found} of ${labelledSeen} faces in ${measured} photos, ${falsePositives} false positives; ${cpu.toFixed(0)} ms CPU on 12 MP`,
        );
        rows.push(
          {
            scenario: SCENARIO,
            variant: mode,
            metric: 'recall',
            value: labelledSeen ? Number((found / labelledSeen).toFixed(3)) : null,
            unit: '',
            note: `${found}/${labelledSeen} faces, ${measured} of ${photos.length} photos`,
            ...(thorough ? { target: { on: 'value', op: '>=', threshold: 0.95 } } : {}),
          },
          {
            scenario: SCENARIO,
            variant: mode,
            metric: 'false positives',
            value: falsePositives,
            unit: 'boxes',
            note: `over ${measured} photos`,
          },
          {
            scenario: SCENARIO,
            variant: mode,
            metric: 'CPU per detection, 12 MP',
            value: Number(cpu.toFixed(0)),
            unit: 'ms',
            note: 'best of 3; decode of the copy and the network',
            ...(thorough ? {} : { target: { on: 'value', op: '<=', threshold: 300 } }),
          },
        );
      }
    } finally {
      await closeFaceDetector();
    }
    return { rows, report, details };
  },
};
