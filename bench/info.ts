// info on a 12 MP JPEG (issue #25's target: ≤ 150 ms): what GET /api/files/{id}/info runs the first
// time it is asked — the preview's 320 px rendition (the real Previews class over local storage),
// the header, the EXIF and the pixel facts (src/imaging/info.ts) — in this process, timed per
// file on fresh copies (nothing kept between runs). The later asks are a database read.
//
//   import { infoScenario } from './info.js';   // from bench/run.ts
//   Standalone: node --import tsx bench/info.ts
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PLANS } from '../src/accounts/plans.js';
import type { FileRecord } from '../src/files/files.js';
import { imageInfo } from '../src/imaging/info.js';
import { Previews } from '../src/imaging/preview.js';
import { inspect } from '../src/imaging/source.js';
import { LocalStorage } from '../src/storage/local.js';

const THIS_REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PHOTO = path.join(THIS_REPO, '../shared/corpus/images/wikimedia/Carrie.jpg'); // 3000×4000, 2.8 MB
const RUNS = 7;

export async function infoScenario(): Promise<{ name: string; value: string }[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-bench-info-'));
  try {
    const storage = new LocalStorage(dir);
    const previews = new Previews({ storage, poppler: undefined as never, concurrency: 2, queueLength: 8 });
    const times: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const key = `bench/photo-${run}`;
      await storage.put(key, fs.readFileSync(PHOTO));
      const file = { id: `file_bench${run}`, storage_key: key, format: 'jpeg', width: 3000, height: 4000 } as FileRecord;
      const started = process.hrtime.bigint();
      const thumbnail = await previews.preview(file, DEFAULT_PLANS.pro, { width: 320, height: 320 });
      const source = await previews.localCopy(file, dir);
      const header = await inspect(source, 'jpeg', DEFAULT_PLANS.pro);
      await imageInfo(source, header, thumbnail.data);
      times.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
    const sorted = [...times].sort((a, b) => a - b);
    return [
      {
        name: 'info, 12 MP JPEG, first ask',
        value: `median ${sorted[Math.floor(RUNS / 2)]!.toFixed(0)} ms, best ${sorted[0]!.toFixed(0)} ms, worst ${sorted.at(-1)!.toFixed(0)} ms over ${RUNS} runs (target ≤ 150 ms)`,
      },
    ];
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const row of await infoScenario()) console.log(`${row.name}: ${row.value}`);
}
