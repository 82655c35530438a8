// An SVG never draws anything outside itself (issue 10, defect 4). librsvg, given an SVG's path,
// loads what its hrefs, url()s and XIncludes name in that directory and below — with local
// storage, every account's uploads. A victim stores a magenta PNG (and an SVG with magenta paint
// servers); an attacker's SVGs name those objects by relative href, absolute path, file:// URL,
// and through <use>, CSS url(), xml:base and XInclude. Through the preview, every image job kind,
// a watermark logo and image-to-pdf, no output holds a magenta pixel, while the attacker's own
// blue mark proves each SVG was rendered.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { OPERATIONS } from '../../src/operations/registry.js';
import { MAX_EMBEDDED_PIXELS, neutraliseCss, safeSvg } from '../../src/imaging/svg.js';
import { uploadKey } from '../../src/storage/storage.js';
import { Client, DIALECTS, startServer, tempDir, type TestServer } from '../helpers.js';

interface Colour {
  r: number;
  g: number;
  b: number;
}
/** The victim's colour: no blend of the attacker's white, black and blue comes near it. */
const VICTIM: Colour = { r: 224, g: 0, b: 224 };
const VICTIM_HEX = '#e000e0';
/** The attacker's own mark, drawn by every attack SVG. */
const MARK: Colour = { r: 0, g: 0, b: 255 };

/** Pixels of an image (any format sharp reads; transparency over white) within `tolerance` of `colour`. */
async function pixelsNear(image: Buffer, colour: Colour, tolerance = 48): Promise<number> {
  const { data, info } = await sharp(image).flatten({ background: '#ffffff' }).toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  let count = 0;
  for (let i = 0; i < data.length; i += info.channels) {
    if (Math.abs(data[i]! - colour.r) < tolerance && Math.abs(data[i + 1]! - colour.g) < tolerance && Math.abs(data[i + 2]! - colour.b) < tolerance)
      count++;
  }
  return count;
}

async function assertAttackerOnly(image: Buffer, what: string): Promise<void> {
  assert.equal(await pixelsNear(image, VICTIM), 0, `${what}: holds the victim's pixels`);
  assert.ok((await pixelsNear(image, MARK)) > 0, `${what}: the SVG's own mark is missing, so it was not rendered`);
}

const victimPng = () =>
  sharp({ create: { width: 64, height: 64, channels: 3, background: VICTIM_HEX } })
    .png()
    .toBuffer();
const VICTIM_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64">
  <linearGradient id="v"><stop offset="0" stop-color="${VICTIM_HEX}"/><stop offset="1" stop-color="${VICTIM_HEX}"/></linearGradient>
  <rect id="r" width="64" height="64" fill="${VICTIM_HEX}"/></svg>`;

const svgDocument = (body: string, attributes = '') =>
  `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:xi="http://www.w3.org/2001/XInclude" width="64" height="64" ${attributes}>
  <rect width="64" height="64" fill="#ffffff"/>${body}<rect width="16" height="16" fill="#0000ff"/></svg>`;

/** Every way an SVG draws a raster it names. */
const drawRaster = (ref: string) =>
  svgDocument(`<image href="${ref}" width="64" height="64"/><image xlink:href="${ref}" x="0" y="0" width="64" height="64"/>
  <filter id="f" x="0" y="0" width="1" height="1"><feImage href="${ref}" width="64" height="64"/></filter>
  <rect width="64" height="64" filter="url(#f)"/>`);

/** Every way an SVG uses another SVG document's elements or paint. */
const useDocument = (ref: string) =>
  svgDocument(`<use href="${ref}#r"/><rect width="64" height="64" fill="url(${ref}#v)"/>
  <rect width="64" height="64" style="fill: url('${ref}#v')"/><xi:include href="${ref}" parse="xml"/>`);

/** The attack SVGs naming the victim's PNG and SVG as an attacker can (storage keys: src/storage/storage.ts). */
function attacks(storageRoot: string, victimPngId: string, victimSvgId: string): Record<string, string> {
  const stored = (id: string) => path.join(storageRoot, uploadKey(id));
  return {
    'relative href, same directory': drawRaster(victimPngId),
    'relative href, ../uploads/': drawRaster(`../uploads/${victimPngId}`),
    'absolute path under the storage directory': drawRaster(stored(victimPngId)),
    'file:// URL': drawRaster(`file://${stored(victimPngId)}`),
    '<use>, url() and XInclude of a file:// SVG': useDocument(`file://${stored(victimSvgId)}`),
    '<use> and url() relative to xml:base': svgDocument(
      `<g xml:base="file://${path.join(storageRoot, 'uploads')}/"><use href="${victimSvgId}#r"/><rect width="64" height="64" fill="url(${victimSvgId}#v)"/></g>`,
    ),
    'an internal entity naming the file': `<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY victim "file://${stored(victimPngId)}">]>${drawRaster('&victim;')}`,
    'a stylesheet processing instruction': `<?xml-stylesheet type="text/css" href="file://${stored(victimSvgId)}"?>${svgDocument('')}`,
  };
}

/** Options that run each image kind on the SVG (a test fails when a new image kind is missing). */
const JOB_OPTIONS: Record<string, (svgId: string) => Record<string, unknown>> = {
  compress: (fileId) => ({ fileId }),
  resize: (fileId) => ({ fileId, width: 48 }),
  crop: (fileId) => ({ fileId, left: 0, top: 0, width: 48, height: 48 }),
  convert: (fileId) => ({ fileId, format: 'png' }),
  rotate: (fileId) => ({ fileId, angle: 90 }),
  flip: (fileId) => ({ fileId, direction: 'horizontal' }),
  watermark: (fileId) => ({ fileId, text: 'x', fontSize: 8, position: 'bottom-right' }),
  upscale: (fileId) => ({ fileId, factor: 2 }),
  redact: (fileId) => ({ fileId, faces: false, regions: [{ left: 0, top: 0, width: 8, height: 8 }] }),
  adjust: (fileId) => ({ fileId, brightness: 1.1 }),
  trim: (fileId) => ({ fileId }),
  extend: (fileId) => ({ fileId, all: 4 }),
  'image-to-pdf': (fileId) => ({ fileIds: [fileId] }),
  pipeline: (fileId) => ({
    fileId,
    steps: [
      { kind: 'resize', width: 48 },
      { kind: 'flip', direction: 'horizontal' },
    ],
  }),
};

describe('librsvg: what it loads from a path and from bytes (the premise of src/imaging/svg.ts)', () => {
  it('draws a file next to the SVG when given its path, nothing when given its bytes, nothing after safeSvg', async () => {
    const dir = tempDir('imgapi-svgref-');
    try {
      fs.writeFileSync(path.join(dir, 'victim'), await victimPng());
      const attack = drawRaster('victim');
      fs.writeFileSync(path.join(dir, 'attack.svg'), attack);
      const render = (input: string | Buffer) => sharp(input).png().toBuffer();
      assert.ok((await pixelsNear(await render(path.join(dir, 'attack.svg')), VICTIM)) > 0, 'from a path librsvg loads the neighbour');
      assert.equal(await pixelsNear(await render(Buffer.from(attack)), VICTIM), 0);
      await assertAttackerOnly(await render(await safeSvg(Buffer.from(attack), 1e8)), 'safeSvg');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps data: PNG/JPEG/SVG images within the caps and drops bigger ones, whatever type they claim', async () => {
    const png = await victimPng();
    const small = svgDocument(`<image href="data:text/plain;base64,${png.toString('base64')}" width="64" height="64"/>`);
    assert.ok(
      (await pixelsNear(
        await sharp(await safeSvg(Buffer.from(small), 1e8))
          .png()
          .toBuffer(),
        VICTIM,
      )) > 0,
      'an embedded image is drawn',
    );
    const nested = svgDocument(`<image href="data:image/svg+xml,${encodeURIComponent(VICTIM_SVG)}" width="64" height="64"/>`);
    assert.ok(
      (await pixelsNear(
        await sharp(await safeSvg(Buffer.from(nested), 1e8))
          .png()
          .toBuffer(),
        VICTIM,
      )) > 0,
      'an embedded SVG is drawn',
    );

    // Over the embedded-pixel cap: a few KB of PNG that would decode to 36 MP.
    const side = Math.ceil(Math.sqrt(MAX_EMBEDDED_PIXELS)) + 100;
    const bomb = await sharp({ create: { width: side, height: side, channels: 3, background: VICTIM_HEX }, limitInputPixels: false })
      .png({ compressionLevel: 9 })
      .toBuffer();
    const bombed = await safeSvg(
      Buffer.from(svgDocument(`<image href="data:image/png;base64,${bomb.toString('base64')}" width="64" height="64"/>`)),
      1e9,
    );
    assert.ok(!bombed.toString().includes('data:'), 'the bomb is dropped');
    await assertAttackerOnly(await sharp(bombed).png().toBuffer(), 'bomb');
    // The plan's own pixel limit is the cap when it is lower.
    const planned = await safeSvg(Buffer.from(small), 64 * 64 - 1);
    assert.ok(!planned.toString().includes('data:'));
  });

  it('refuses malformed XML, external entities and entity expansion past its budget with INVALID_IMAGE, not undeclared prefixes', async () => {
    const refused = async (svg: string) => assert.rejects(safeSvg(Buffer.from(svg), 1e8), (err: { code?: string }) => err.code === 'INVALID_IMAGE');
    await refused('<svg xmlns="http://www.w3.org/2000/svg"><g></svg>');
    await refused(
      '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]><svg xmlns="http://www.w3.org/2000/svg"><text>&x;</text></svg>',
    );
    const big = 'x'.repeat(10_000);
    await refused(`<!DOCTYPE svg [<!ENTITY a "${big}">]><svg xmlns="http://www.w3.org/2000/svg"><text>${'&a;'.repeat(200)}</text></svg>`);
    // An undeclared prefix is not refused: libxml2 only warns about it, and such files are common.
    const sloppy = await safeSvg(
      Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><use xlink:href="#a"/><use xlink:href="x.svg#a"/></svg>'),
      1e8,
    );
    assert.equal(sloppy.toString(), '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><use xlink:href="#a"/><use/></svg>');
  });

  it('neutralises CSS url() and @import, escaped or not, and keeps #fragments', () => {
    assert.equal(neutraliseCss('fill: url(#g); stroke: url( "#h" )'), 'fill: url(#g); stroke: url( "#h" )');
    assert.equal(neutraliseCss('fill: url(file:///x.svg#g)'), 'fill: none');
    assert.equal(neutraliseCss('fill: \\75 rl(x.svg#g); fill: U\\52L("data:image/svg+xml,<svg/>")'), 'fill: none; fill: none');
    assert.equal(neutraliseCss('@\\69mport "x.css"; @IMPORT url(y.css);'), '@blocked-import "x.css"; @blocked-import none;');
    assert.equal(neutraliseCss('font-family: "\\5FAE\\8F6F"'), 'font-family: "微软"');
  });
});

for (const dialect of DIALECTS) {
  describe(`SVG references to another account's files (${dialect})`, () => {
    let server: TestServer;
    let attacker: Client;
    let attackIds: Record<string, string>;

    before(async () => {
      server = await startServer({ dialect });
      const victim = new Client(server.url, await server.newKey('pro'));
      const victimPngId = await victim.uploadOk(await victimPng(), 'secret.png');
      const victimSvgId = await victim.uploadOk(Buffer.from(VICTIM_SVG), 'secret.svg');
      const config = server.config.storage;
      assert.equal(config.kind, 'local');
      attacker = new Client(server.url, await server.newKey('pro'));
      attackIds = {};
      for (const [name, svg] of Object.entries(attacks(config.root, victimPngId, victimSvgId)))
        attackIds[name] = await attacker.uploadOk(Buffer.from(svg), 'attack.svg');
    });
    after(() => server.close());

    it("the preview draws none of the victim's pixels", async () => {
      for (const [name, fileId] of Object.entries(attackIds)) {
        const preview = await attacker.get(`/api/preview/${fileId}`);
        assert.equal(preview.status, 200, `${name}: ${JSON.stringify(preview.body)}`);
        await assertAttackerOnly(preview.body as Buffer, `preview, ${name}`);
      }
    });

    it("no image job kind, watermark logo or image-to-pdf draws the victim's pixels", async () => {
      const imageKinds = OPERATIONS.filter((op) => op.accepts === 'image').map((op) => op.kind);
      assert.deepEqual(
        imageKinds.filter((kind) => !JOB_OPTIONS[kind]),
        [],
        'every image kind is exercised here',
      );
      const base = await attacker.uploadOk(
        await sharp({ create: { width: 128, height: 128, channels: 3, background: '#808080' } })
          .png()
          .toBuffer(),
        'base.png',
      );
      const jobs: { what: string; kind: string; options: Record<string, unknown> }[] = [];
      for (const [name, fileId] of Object.entries(attackIds)) {
        for (const kind of imageKinds) jobs.push({ what: `${kind}, ${name}`, kind, options: JOB_OPTIONS[kind]!(fileId) });
        jobs.push({
          what: `watermark logo, ${name}`,
          kind: 'watermark',
          options: { fileId: base, logoFileId: fileId, scale: 1, margin: 0, opacity: 1 },
        });
        jobs.push({
          what: `pipeline watermark logo, ${name}`,
          kind: 'pipeline',
          options: { fileId: base, steps: [{ kind: 'watermark', logoFileId: fileId, scale: 1, margin: 0, opacity: 1 }] },
        });
      }
      const queued = await Promise.all(
        jobs.map(async (job) => {
          const response = await attacker.post(`/api/process/${job.kind}`, job.options);
          assert.equal(response.status, 202, `${job.what}: ${JSON.stringify(response.body)}`);
          return { ...job, taskId: response.body.data.taskId as string };
        }),
      );
      for (const job of queued) {
        const task = await attacker.waitForTask(job.taskId);
        assert.equal(task.status, 'completed', `${job.what}: ${JSON.stringify(task.error)}`);
        // A PDF is looked at through its preview (poppler renders the page).
        const output =
          job.kind === 'image-to-pdf' ? (await attacker.get(`/api/preview/${task.outputFileId}`)).body : await attacker.download(task.outputFileId);
        await assertAttackerOnly(output as Buffer, job.what);
      }
    });
  });
}
