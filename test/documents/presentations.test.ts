// presentation-to-images over real HTTP with the real LibreOffice and poppler: every decodable
// deck of the corpus, the reject decks, a deck whose macro would write a file, page selection,
// the ZIP, and which endpoints take which inputs. One server; conversions run concurrently up
// to the converter pool's cap.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { Client, CORPUS, corpusFile, sleep, startServer, tempDir, type TestServer } from '../helpers.js';
import { editZip } from './attack-decks.js';

interface ManifestEntry {
  path: string;
  kind: string;
  format: string;
  expect: 'decodable' | 'reject';
}

const manifest: ManifestEntry[] = JSON.parse(fs.readFileSync(path.join(CORPUS, 'MANIFEST.json'), 'utf8'));
const decks = manifest.filter((e) => e.kind === 'presentation');

/**
 * Pages LibreOffice 7.4 exports for each decodable deck (pdfinfo on `soffice --convert-to pdf`;
 * the corpus README's verification agrees): hidden slides are not exported (2411 has 48 slides,
 * 2 hidden), and the deck without slides gives one blank page.
 */
const EXPECTED_PAGES: Record<string, number> = {
  'presentations/poi/SampleShow.pptx': 2,
  'presentations/poi/SampleShow.ppt': 2,
  'presentations/tika/testPPT_2imgs.ppt': 1,
  'presentations/poi/backgrounds.pptx': 4,
  'presentations/python-pptx/cht-chart-type.pptx': 8,
  'presentations/python-pptx/tbl-cell.pptx': 3,
  'presentations/poi/themes.pptx': 10,
  'presentations/poi/2411-Performance_Up.pptx': 46,
  'presentations/poi/with_japanese.pptx': 1,
  'presentations/tika/LibreOfficeImpress_odp_1.3.odp': 2,
  'presentations/tika/testODP_NPE.odp': 37,
  'presentations/tika/testODPMacro.odp': 1,
  'presentations/python-pptx/no-slides.pptx': 1,
};
const NO_SLIDES = 'presentations/python-pptx/no-slides.pptx';
const FORMATS = ['png', 'jpeg', 'webp'] as const;
const WIDTHS = [480, 400, 320];
const SHARP_FORMAT: Record<string, string> = { png: 'png', jpeg: 'jpeg', webp: 'webp' };

async function zipEntries(bytes: Buffer): Promise<Map<string, Buffer>> {
  const zip = await yauzl.fromBufferPromise(bytes, { lazyEntries: true });
  const out = new Map<string, Buffer>();
  for await (const entry of zip.eachEntry()) {
    const chunks: Buffer[] = [];
    for await (const chunk of await zip.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
    out.set(entry.fileName, Buffer.concat(chunks));
  }
  return out;
}

/** SampleShow.pptx with its main part declared as `contentType` (a PPSX, a PPTM, …). */
const sampleShowAs = (contentType: string) =>
  editZip('presentations/poi/SampleShow.pptx', (name, data) =>
    name === '[Content_Types].xml'
      ? Buffer.from(data.toString('utf8').replace('application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml', contentType))
      : data,
  );
const PPSX_MAIN = 'application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml';

/**
 * The corpus ODP with a Basic macro, changed so that the macro runs when the document loads
 * (a document-level "load" event) and writes `marker`. Its original macro is bound to a click.
 */
function macroDeck(marker: string): Promise<Buffer> {
  return editZip('presentations/tika/testODPMacro.odp', (name, data) => {
    if (name === 'content.xml') {
      const xml = data.toString('utf8');
      assert.ok(xml.includes('<office:scripts/>'));
      return Buffer.from(
        xml.replace(
          '<office:scripts/>',
          '<office:scripts><office:event-listeners><script:event-listener script:language="ooo:script" script:event-name="dom:load" ' +
            'xlink:href="vnd.sun.star.script:Standard.testmodule.Main?language=Basic&amp;location=document" xlink:type="simple"/>' +
            '</office:event-listeners></office:scripts>',
        ),
      );
    }
    if (name === 'Basic/Standard/testmodule.xml') {
      const body = `Sub Main\n  Dim n As Integer\n  n = FreeFile\n  Open &quot;${marker}&quot; For Output As #n\n  Print #n, &quot;the macro ran&quot;\n  Close #n\nEnd Sub\n`;
      const module = data.toString('utf8').replace(/Sub Main[\s\S]*End Sub\n/, body);
      assert.ok(module.includes(marker));
      return Buffer.from(module);
    }
    return data;
  });
}

describe('presentation-to-images', () => {
  let server: TestServer;
  let client: Client;
  let scratch: string;
  const runs = new Map<string, Promise<{ task: any; format: string; width: number }>>();

  before(async () => {
    // Generous time limits: the 46-slide deck on a busy 2-core machine must not time out here.
    server = await startServer({ dialect: 'sqlite', workers: 3, env: { CONVERTER_CONCURRENCY: '2', TASK_TIMEOUT_SECONDS: '300' } });
    client = new Client(server.url, await server.newKey('pro'));
    scratch = tempDir('imgapi-decks-');
    // Every decodable deck, queued at once: the pool runs two at a time, the tests below await theirs.
    for (const [i, deck] of decks.filter((d) => d.expect === 'decodable').entries()) {
      const format = FORMATS[i % FORMATS.length]!;
      const width = WIDTHS[i % WIDTHS.length]!;
      runs.set(
        deck.path,
        (async () => {
          const fileId = await client.uploadOk(corpusFile(deck.path));
          const job = await client.post('/api/process/presentation-to-images', { fileId, format, width });
          assert.equal(job.status, 202, JSON.stringify(job.body));
          return { task: await client.waitForTask(job.body.data.taskId, 400_000), format, width };
        })(),
      );
    }
    runs.set(
      'ppsx',
      (async () => {
        const fileId = await client.uploadOk(await sampleShowAs(PPSX_MAIN), 'show.ppsx');
        const job = await client.post('/api/process/presentation-to-images', { fileId, format: 'png', width: 320 });
        return { task: await client.waitForTask(job.body.data.taskId, 400_000), format: 'png', width: 320 };
      })(),
    );
    // Unhandled until awaited by its test; keep node from reporting early rejections.
    for (const run of runs.values()) run.catch(() => {});
  });

  after(async () => {
    await server?.close();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  it('the corpus has the decks this suite expects', () => {
    assert.deepEqual(
      decks
        .filter((d) => d.expect === 'decodable')
        .map((d) => d.path)
        .sort(),
      Object.keys(EXPECTED_PAGES).sort(),
    );
    assert.equal(decks.filter((d) => d.expect === 'reject').length, 3);
  });

  it('uploads are recognised by their contents, not their names', async () => {
    const renamed = await client.upload(corpusFile('presentations/poi/SampleShow.pptx'), 'photo.jpg');
    assert.equal(renamed.status, 201);
    assert.equal(renamed.body.data.format, 'pptx');
    assert.equal(renamed.body.data.mimeType, 'application/vnd.openxmlformats-officedocument.presentationml.presentation');
    const ppt = await client.upload(corpusFile('presentations/poi/SampleShow.ppt'), 'deck.odp');
    assert.equal(ppt.body.data.format, 'ppt');
    assert.equal(ppt.body.data.mimeType, 'application/vnd.ms-powerpoint');
    const odp = await client.upload(corpusFile('presentations/tika/LibreOfficeImpress_odp_1.3.odp'), 'deck.pptx');
    assert.equal(odp.body.data.format, 'odp');
    assert.equal(odp.body.data.mimeType, 'application/vnd.oasis.opendocument.presentation');

    const ppsx = await client.upload(await sampleShowAs(PPSX_MAIN), 'show.pptx');
    assert.equal(ppsx.body.data.format, 'ppsx');
    assert.equal(ppsx.body.data.mimeType, 'application/vnd.openxmlformats-officedocument.presentationml.slideshow');

    // Packages that are not presentations we read: 415 at upload, saying what they are.
    for (const [contentType, message] of [
      ['application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml', /Macro-enabled/],
      ['application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml', /Word document/],
    ] as const) {
      const refused = await client.upload(await sampleShowAs(contentType), 'deck.pptx');
      assert.equal(refused.status, 415);
      assert.equal(refused.body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
      assert.match(refused.body.error.message, message);
    }
    const odt = await client.upload(
      await editZip('presentations/tika/LibreOfficeImpress_odp_1.3.odp', (name, data) =>
        name === 'mimetype' ? Buffer.from('application/vnd.oasis.opendocument.text') : data,
      ),
      'deck.odp',
    );
    assert.equal(odt.status, 415);
    assert.match(odt.body.error.message, /OpenDocument text document/);
    const plainZip = new yazl.ZipFile();
    plainZip.addBuffer(Buffer.from('hello'), 'hello.txt');
    plainZip.end();
    const chunks: Buffer[] = [];
    for await (const chunk of plainZip.outputStream) chunks.push(chunk as Buffer);
    const refused = await client.upload(Buffer.concat(chunks), 'deck.pptx');
    assert.equal(refused.status, 415);
    assert.equal(refused.body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
    assert.match(refused.body.error.message, /ZIP archive, not a presentation/);
  });

  for (const deck of Object.keys(EXPECTED_PAGES)) {
    it(`converts ${deck}`, async () => {
      const { task, format, width } = await runs.get(deck)!;
      assert.equal(task.status, 'completed', JSON.stringify(task.error));
      const pages = EXPECTED_PAGES[deck]!;
      assert.equal(task.outputFileIds.length, pages, 'one image per page LibreOffice exports');
      assert.equal(task.result.pages, pages);
      // result describes outputFileId (the ZIP) and names the slides' own format.
      assert.equal(task.result.format, 'zip');
      assert.equal(task.result.imageFormat, format);
      assert.equal(task.result.size, (await client.download(task.outputFileId)).length);
      assert.deepEqual(
        task.result.slides,
        Array.from({ length: pages }, (_, i) => i + 1),
      );
      let blank = 0;
      for (const fileId of task.outputFileIds) {
        const bytes = await client.download(fileId);
        const meta = await sharp(bytes).metadata();
        assert.equal(meta.format, SHARP_FORMAT[format]);
        assert.equal(meta.width, width, 'the asked width');
        const stats = await sharp(bytes).stats();
        if (Math.max(...stats.channels.map((c) => c.stdev)) < 1) blank++;
      }
      assert.equal(blank, deck === NO_SLIDES ? pages : 0, deck === NO_SLIDES ? 'the deck without slides renders blank' : 'no slide image is blank');
    });
  }

  it('converts a PPSX (a slide show) like a PPTX', async () => {
    const { task } = await runs.get('ppsx')!;
    assert.equal(task.status, 'completed', JSON.stringify(task.error));
    assert.equal(task.outputFileIds.length, 2);
  });

  it('outputFileId is a ZIP of exactly the slide images, in order', async () => {
    const { task } = await runs.get('presentations/poi/backgrounds.pptx')!;
    assert.equal(task.status, 'completed');
    const zipFile = await client.get(`/api/files/${task.outputFileId}`);
    assert.equal(zipFile.body.data.format, 'zip');
    assert.equal(zipFile.body.data.mimeType, 'application/zip');
    const entries = await zipEntries(await client.download(task.outputFileId));
    assert.equal(entries.size, task.outputFileIds.length);
    const names = [...entries.keys()];
    assert.deepEqual(names, [...names].sort(), 'entries in slide order');
    for (const [i, fileId] of task.outputFileIds.entries()) {
      assert.deepEqual(entries.get(names[i]!), await client.download(fileId), `entry ${names[i]} is image ${i + 1}`);
      const meta = (await client.get(`/api/files/${fileId}`)).body.data;
      assert.equal(meta.taskId, task.taskId);
      assert.match(meta.filename, /^backgrounds\.slide-\d+\.\w+$/, 'named by the one rule: <deck>.slide-<n>.<ext>');
    }
    assert.equal(zipFile.body.data.filename, 'backgrounds.slides.zip');
    assert.equal(task.result.size, zipFile.body.data.size);
    // The deck's slide count, beside the slides rendered (all of them here).
    assert.equal(task.result.slideCount, task.outputFileIds.length);
    assert.deepEqual(
      task.result.slides,
      Array.from({ length: task.outputFileIds.length }, (_, i) => i + 1),
    );
  });

  it('pages selects slides, numbered as shown; a slide past the end fails the task clearly', async () => {
    const full = await runs.get('presentations/poi/SampleShow.pptx')!;
    assert.equal(full.task.status, 'completed');
    const fileId = await client.uploadOk(corpusFile('presentations/poi/SampleShow.pptx'));
    const [second, beyond] = await Promise.all(
      [{ pages: '2' }, { pages: '1,3-4' }].map(async (selection) => {
        const job = await client.post('/api/process/presentation-to-images', { fileId, format: full.format, width: full.width, ...selection });
        assert.equal(job.status, 202, JSON.stringify(job.body));
        return client.waitForTask(job.body.data.taskId, 120_000);
      }),
    );
    assert.equal(second.status, 'completed', JSON.stringify(second.error));
    assert.deepEqual(second.result.slides, [2]);
    // One slide rendered of a deck that shows more: the count is the deck's, not the selection's.
    assert.equal(second.result.slideCount, full.task.outputFileIds.length);
    assert.equal(second.outputFileIds.length, 1);
    // The same rendering as slide 2 of the whole deck.
    assert.deepEqual(await client.download(second.outputFileIds[0]), await client.download(full.task.outputFileIds[1]));
    assert.equal(beyond.status, 'failed');
    assert.equal(beyond.error.code, 'CONVERSION_FAILED');
    assert.match(beyond.error.message, /slide 4.*shows 2 slides/);
  });

  it('refuses a bad page selection, width or format when queueing (400), naming the field', async () => {
    const fileId = await client.uploadOk(corpusFile('presentations/poi/SampleShow.pptx'));
    for (const [body, field] of [
      [{ pages: '3-1' }, 'pages'],
      [{ pages: 'first' }, 'pages'],
      [{ pages: '0' }, 'pages'],
      [{ pages: '1,,2' }, 'pages'],
      [{ width: 8 }, 'width'],
      [{ width: 100_000 }, 'width'],
      [{ format: 'gif' }, 'format'],
      [{ quality: 80 }, 'quality'],
    ] as const) {
      const response = await client.post('/api/process/presentation-to-images', { fileId, ...body });
      assert.equal(response.status, 400, JSON.stringify(body));
      assert.equal(response.body.error.code, 'VALIDATION_ERROR');
      assert.ok(JSON.stringify(response.body.error.details).includes(field), `${JSON.stringify(body)}: ${JSON.stringify(response.body.error)}`);
    }
    // No batch variant.
    assert.equal((await client.post('/api/process/batch/presentation-to-images', { fileIds: [fileId] })).status, 404);
  });

  it('image endpoints refuse presentations and presentation-to-images refuses images (409 INPUT_NOT_SUPPORTED)', async () => {
    const deck = await client.uploadOk(corpusFile('presentations/poi/SampleShow.pptx'));
    const image = await client.uploadOk(corpusFile('images/sharp/Landscape_1.jpg'));
    const refusals = [
      await client.post('/api/process/resize', { fileId: deck, width: 100 }),
      await client.post('/api/process/compress', { fileId: deck }),
      await client.post('/api/process/convert', { fileId: deck, format: 'png' }),
      await client.post('/api/process/batch/compress', { fileIds: [image, deck] }),
      await client.post('/api/process/image-to-pdf', { fileIds: [image, deck] }),
      await client.post('/api/process/watermark', { fileId: image, logoFileId: deck }),
      await client.post('/api/process/presentation-to-images', { fileId: image }),
    ];
    for (const response of refusals) {
      assert.equal(response.status, 409, JSON.stringify(response.body));
      assert.equal(response.body.error.code, 'INPUT_NOT_SUPPORTED');
    }
    const preview = await client.get(`/api/preview/${deck}`);
    assert.equal(preview.status, 415);
    assert.equal(preview.body.error.code, 'PREVIEW_UNAVAILABLE');
  });

  it('each reject deck gets a 415 at upload or a failed task with its error code', async () => {
    const expected: Record<string, { status: number; code: string }> = {
      'presentations/poi/clusterfuzz-POIXSLFFuzzer-6254434927378432.pptx': { status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' },
      'presentations/tika/testPPT_protected_passtika.pptx': { status: 201, code: 'DOCUMENT_ENCRYPTED' },
      'presentations/poi/ppt_with_png_encrypted.ppt': { status: 201, code: 'DOCUMENT_ENCRYPTED' },
    };
    for (const deck of decks.filter((d) => d.expect === 'reject')) {
      const want = expected[deck.path];
      assert.ok(want, `no expectation for ${deck.path}`);
      const upload = await client.upload(corpusFile(deck.path));
      assert.equal(upload.status, want.status, JSON.stringify(upload.body));
      if (upload.status === 415) {
        assert.equal(upload.body.error.code, want.code);
        continue;
      }
      const job = await client.post('/api/process/presentation-to-images', { fileId: upload.body.data.fileId });
      const task = await client.waitForTask(job.body.data.taskId);
      assert.equal(task.status, 'failed');
      assert.equal(task.error.code, want.code);
      assert.match(task.error.message, /password/);
    }
  });

  it('a deck whose macro runs on load converts without running it', async () => {
    // The control: opened (not converted) by a LibreOffice that allows macros, this deck's
    // macro does run and writes its file — so its absence below means something.
    const controlMarker = path.join(scratch, 'control-ran.txt');
    const controlDeck = path.join(scratch, 'control.odp');
    fs.writeFileSync(controlDeck, await macroDeck(controlMarker));
    const profile = path.join(scratch, 'permissive-profile');
    fs.mkdirSync(path.join(profile, 'user'), { recursive: true });
    fs.writeFileSync(
      path.join(profile, 'user', 'registrymodifications.xcu'),
      '<?xml version="1.0" encoding="UTF-8"?><oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">' +
        '<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>0</value></prop></item>' +
        '<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>false</value></prop></item></oor:items>',
    );
    const control = (async () => {
      const child = spawn(
        'soffice',
        [`-env:UserInstallation=${pathToFileURL(profile).href}`, '--headless', '--norestore', '--nologo', '--nolockcheck', controlDeck],
        {
          detached: true,
          stdio: 'ignore',
        },
      );
      try {
        const deadline = Date.now() + 90_000;
        while (!fs.existsSync(controlMarker) && Date.now() < deadline) await sleep(200);
        return fs.existsSync(controlMarker);
      } finally {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // gone already
        }
      }
    })();

    const marker = path.join(scratch, 'service-ran.txt');
    const fileId = await client.uploadOk(await macroDeck(marker), 'macro.odp');
    const job = await client.post('/api/process/presentation-to-images', { fileId, width: 320 });
    const task = await client.waitForTask(job.body.data.taskId, 150_000);
    assert.equal(task.status, 'completed', JSON.stringify(task.error));
    assert.equal(task.outputFileIds.length, 1);
    assert.equal(fs.existsSync(marker), false, 'the macro did not run in the service');
    assert.equal(await control, true, 'the macro runs where macros are allowed (the control)');
    // The unchanged corpus deck (macro bound to a click) converted above as well.
    assert.equal((await runs.get('presentations/tika/testODPMacro.odp')!).task.status, 'completed');
  });

  it('/readyz reports LibreOffice and poppler', async () => {
    const ready = await client.get('/readyz');
    assert.equal(ready.status, 200);
    assert.equal(ready.body.checks.libreoffice.ok, true);
    assert.equal(ready.body.checks.poppler.ok, true);
  });
});
