// SVG parts of ZIP decks, found while every entry is inflated before conversion and re-written
// by safeSvg (src/documents/svg-parts.ts): which parts count as SVG (as LibreOffice would read
// them, and no ODF or OOXML part that merely mentions the SVG namespace), and that the
// re-written package is the same package but for those parts.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { verifyZipExpansion } from '../../src/documents/container.js';
import { rewriteSvgParts, SvgPartDetector } from '../../src/documents/svg-parts.js';
import { corpusFile, tempDir } from '../helpers.js';
import { svgNaming } from './attack-decks.js';

/** Whether a part of this name and these bytes (fed in `chunkSize` pieces) is taken for SVG. */
function detects(name: string, bytes: Buffer | string, chunkSize = 1 << 16): boolean {
  const detector = new SvgPartDetector(name);
  const data = Buffer.from(bytes);
  for (let at = 0; at < data.length; at += chunkSize) detector.push(data.subarray(at, at + chunkSize));
  return detector.isSvg();
}

interface Part {
  name: string;
  bytes: Buffer;
  compressionMethod: number;
}

async function partsOf(file: string): Promise<Part[]> {
  const zip = await yauzl.openPromise(file, { lazyEntries: true });
  const parts: Part[] = [];
  for await (const entry of zip.eachEntry()) {
    const chunks: Buffer[] = [];
    for await (const chunk of await zip.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
    parts.push({ name: entry.fileName, bytes: Buffer.concat(chunks), compressionMethod: entry.compressionMethod });
  }
  zip.close();
  return parts;
}

/** The corpus ODP with `extra` parts after its own. */
async function odpWith(extra: { name: string; bytes: Buffer }[]): Promise<Buffer> {
  const out = new yazl.ZipFile();
  for (const part of await partsOf(corpusFile('presentations/tika/LibreOfficeImpress_odp_1.3.odp'))) {
    if (part.name.endsWith('/')) out.addEmptyDirectory(part.name);
    else out.addBuffer(part.bytes, part.name, { compress: part.compressionMethod !== 0 });
  }
  for (const part of extra) out.addBuffer(part.bytes, part.name);
  out.end();
  const chunks: Buffer[] = [];
  for await (const chunk of out.outputStream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('SVG parts of decks', () => {
  let dir: string;
  before(() => {
    dir = tempDir('imgapi-svgparts-');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('takes for SVG what LibreOffice could read as SVG, whatever the part is named', () => {
    const svg = '<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>';
    assert.equal(detects('ppt/media/image1.png', svg), true, 'told by its bytes');
    assert.equal(detects('ppt/media/image1.emf', zlib.gzipSync(svg)), true, 'gzipped (svgz)');
    assert.equal(
      detects('Pictures/a.bin', `<?xml version="1.0"?>\n<!-- ${'x'.repeat(100_000)} -->\n<svg:svg xmlns:svg="http://www.w3.org/2000/svg"/>`),
      true,
      'prefixed, far in',
    );
    assert.equal(detects('Pictures/a.bin', `${'<p/>'.repeat(30_000)}<svg\n/>`, 7), true, 'across chunk boundaries');
    assert.equal(detects('Pictures/drawing.svg', 'not xml at all'), true, 'named .svg');
    assert.equal(detects('Pictures/drawing.svgz', Buffer.from([0x1f, 0x8b, 8, 0, 1, 2, 3])), true, 'a damaged svgz');
    assert.equal(
      detects('ppt/media/image2.emf', Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.alloc(64, 0xaa)])),
      true,
      'a gzip part that does not inflate',
    );
  });

  it("does not take the package's own XML for SVG", async () => {
    assert.equal(
      detects(
        'content.xml',
        '<office:document-content xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"><svg:title>t</svg:title><svg:desc/><svg:font-face-uri/></office:document-content>',
      ),
      false,
    );
    assert.equal(
      detects(
        'ppt/slides/slide1.xml',
        '<a:blip r:embed="rId2"><a:extLst><a:ext><asvg:svgBlip xmlns:asvg="http://schemas.microsoft.com/office/drawing/2016/SVG/main" r:embed="rId3"/></a:ext></a:extLst></a:blip>',
      ),
      false,
    );
    assert.equal(detects('[Content_Types].xml', '<Default Extension="svg" ContentType="image/svg+xml"/>'), false);
    assert.equal(detects('ppt/media/image1.png', zlib.gzipSync('<svgfoo/>')), false);
    // No part of the corpus's decks is an SVG.
    for (const deck of ['presentations/poi/themes.pptx', 'presentations/tika/testODP_NPE.odp', 'presentations/python-pptx/cht-chart-type.pptx']) {
      assert.deepEqual([...(await verifyZipExpansion(corpusFile(deck))).svgParts], [], deck);
    }
  });

  it('re-writes the SVG parts alone: the rest of the package is the same, in the same order, mimetype first and stored', async () => {
    const svg = svgNaming('/srv/imgapi/data/objects/uploads/file_victim');
    const deck = path.join(dir, 'deck.odp');
    fs.writeFileSync(
      deck,
      await odpWith([
        { name: 'Pictures/evil.svg', bytes: Buffer.from(svg) },
        { name: 'Pictures/sneaky.png', bytes: zlib.gzipSync(svg) },
      ]),
    );
    const { svgParts } = await verifyZipExpansion(deck);
    assert.deepEqual([...svgParts].sort(), ['Pictures/evil.svg', 'Pictures/sneaky.png']);

    const safe = path.join(dir, 'safe.odp');
    await rewriteSvgParts(deck, svgParts, safe, 50_000_000);
    const before = await partsOf(deck);
    const after = await partsOf(safe);
    assert.deepEqual(
      after.map((p) => p.name),
      before.map((p) => p.name),
    );
    assert.equal(after[0]!.name, 'mimetype');
    assert.equal(after[0]!.compressionMethod, 0, 'mimetype is stored');
    for (const [i, part] of after.entries()) {
      if (svgParts.has(part.name)) {
        const text = part.bytes.toString('utf8');
        assert.match(text, /^<svg[\s>]/, `${part.name} is a plain SVG`);
        assert.doesNotMatch(text, /file_victim|href=/, `${part.name} names nothing outside itself`);
        assert.match(text, /fill="#0000ff"/, `${part.name} keeps its own drawing`);
      } else {
        assert.ok(part.bytes.equals(before[i]!.bytes), `${part.name} is unchanged`);
      }
    }
  });
});
