// Recognising presentations from their containers, and the bounds on a ZIP's expansion — at
// upload from what the central directory declares, before conversion from what actually
// inflates. Hand-made ZIPs, so that sizes can lie.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { fileSource } from '../../src/bytes/sources.js';
import { identifyPresentation, MAX_EXPANDED_BYTES, NotAPresentation, verifyZipExpansion } from '../../src/documents/container.js';
import { parsePages, selectPages } from '../../src/documents/pages.js';
import { corpusFile, tempDir } from '../helpers.js';

interface ZipPart {
  name: string;
  data: Buffer;
  /** What the headers claim the part inflates to (default: the truth). */
  declaredSize?: number;
}

/** A deflated ZIP written by hand, so the declared sizes can be anything. */
function handMadeZip(parts: ZipPart[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const part of parts) {
    const name = Buffer.from(part.name);
    const deflated = zlib.deflateRawSync(part.data);
    const crc = zlib.crc32 ? zlib.crc32(part.data) : 0;
    const size = part.declaredSize ?? part.data.length;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(8, 8); // deflate
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(deflated.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    locals.push(local, name, deflated);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(8, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(deflated.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    centrals.push(central, name);
    offset += local.length + name.length + deflated.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(parts.length, 8);
  end.writeUInt16LE(parts.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

const CONTENT_TYPES = Buffer.from(
  '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">' +
    '<Override PartName="/ppt/presentation.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/></Types>',
);

describe('presentation containers', () => {
  let dir: string;
  before(() => {
    dir = tempDir('imgapi-containers-');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  async function identify(bytes: Buffer | string) {
    const file = typeof bytes === 'string' ? bytes : path.join(dir, `z-${Math.random().toString(36).slice(2)}`);
    if (typeof bytes !== 'string') fs.writeFileSync(file, bytes);
    const source = await fileSource(file);
    try {
      return await identifyPresentation(source);
    } finally {
      await source.close();
    }
  }

  it('tells the corpus decks apart by their contents', async () => {
    assert.deepEqual(await identify(corpusFile('presentations/poi/SampleShow.pptx')), {
      format: 'pptx',
      mimeType: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
      encrypted: false,
    });
    assert.equal((await identify(corpusFile('presentations/poi/SampleShow.ppt'))).format, 'ppt');
    assert.equal((await identify(corpusFile('presentations/tika/testPPT_2imgs.ppt'))).encrypted, false);
    assert.equal((await identify(corpusFile('presentations/tika/testODP_NPE.odp'))).format, 'odp');
    assert.deepEqual(await identify(corpusFile('presentations/poi/ppt_with_png_encrypted.ppt')), {
      format: 'ppt',
      mimeType: 'application/vnd.ms-powerpoint',
      encrypted: true,
    });
    assert.equal((await identify(corpusFile('presentations/tika/testPPT_protected_passtika.pptx'))).encrypted, true);
    await assert.rejects(identify(corpusFile('presentations/poi/clusterfuzz-POIXSLFFuzzer-6254434927378432.pptx')), NotAPresentation);
  });

  it('macros: decks in the accepted formats are accepted with their macros (never run); the macro-enabled formats are refused', async () => {
    // The corpus's ODP with a Basic macro is a deck to render (MANIFEST: decodable); the
    // converter runs with macros disabled (presentations.test.ts proves one never runs).
    assert.equal((await identify(corpusFile('presentations/tika/testODPMacro.odp'))).format, 'odp');
    // A PPTX package that also carries a VBA project is still a PPTX.
    const withVba = handMadeZip([
      { name: '[Content_Types].xml', data: CONTENT_TYPES },
      { name: 'ppt/presentation.xml', data: Buffer.from('<p/>') },
      { name: 'ppt/vbaProject.bin', data: Buffer.alloc(512, 1) },
    ]);
    assert.equal((await identify(withVba)).format, 'pptx');
    // PPTM, PPSM and POTM are formats of their own, outside the accepted list: refused, saying why.
    for (const kind of ['presentation', 'slideshow', 'template']) {
      const types = CONTENT_TYPES.toString().replace(
        'application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml',
        `application/vnd.ms-powerpoint.${kind}.macroEnabled.main+xml`,
      );
      const macroEnabled = handMadeZip([
        { name: '[Content_Types].xml', data: Buffer.from(types) },
        { name: 'ppt/presentation.xml', data: Buffer.from('<p/>') },
      ]);
      await assert.rejects(
        identify(macroEnabled),
        (err: unknown) => err instanceof NotAPresentation && /Macro-enabled presentations .* save the deck as PPTX/.test(err.message),
      );
    }
  });

  it('refuses damaged OLE2 files without reading past their end', async () => {
    const ppt = fs.readFileSync(corpusFile('presentations/poi/SampleShow.ppt'));
    await assert.rejects(identify(ppt.subarray(0, 600)), /damaged/);
    const scrambled = Buffer.from(ppt);
    scrambled.writeUInt32LE(0x7fffffff, 0x30); // the first directory sector, far outside the file
    await assert.rejects(identify(scrambled), /damaged/);
  });

  it('refuses at upload a package whose declared expansion is past the bound', async () => {
    const small = handMadeZip([
      { name: '[Content_Types].xml', data: CONTENT_TYPES },
      { name: 'ppt/presentation.xml', data: Buffer.from('<p/>') },
    ]);
    assert.equal((await identify(small)).format, 'pptx');
    const perPart = 0xffff0000;
    const parts = Math.ceil(MAX_EXPANDED_BYTES / perPart) + 1;
    const bomb = handMadeZip([
      { name: '[Content_Types].xml', data: CONTENT_TYPES },
      ...Array.from({ length: parts }, (_, i) => ({ name: `ppt/media/zeros${i}.bin`, data: Buffer.alloc(16), declaredSize: perPart })),
    ]);
    await assert.rejects(identify(bomb), /expands to more than 1024 MiB/);
  });

  it('before conversion, inflates every entry: one that expands past what it declares is refused', async () => {
    const honest = path.join(dir, 'honest.pptx');
    fs.writeFileSync(
      honest,
      handMadeZip([
        { name: '[Content_Types].xml', data: CONTENT_TYPES },
        { name: 'ppt/media/a.bin', data: Buffer.alloc(1 << 20) },
      ]),
    );
    await verifyZipExpansion(honest);
    const liar = path.join(dir, 'liar.pptx');
    fs.writeFileSync(
      liar,
      handMadeZip([
        { name: '[Content_Types].xml', data: CONTENT_TYPES },
        { name: 'ppt/media/a.bin', data: Buffer.alloc(1 << 20), declaredSize: 100 },
      ]),
    );
    // Its declarations pass the upload check…
    assert.equal((await identify(liar)).format, 'pptx');
    // …its contents do not.
    await assert.rejects(
      verifyZipExpansion(liar),
      (err: unknown) => err instanceof NotAPresentation && /ppt\/media\/a\.bin is damaged/.test(err.message),
    );
  });

  it('refuses a package holding two entries of one name: which one a reader takes is its own choice', async () => {
    const twice = handMadeZip([
      { name: '[Content_Types].xml', data: CONTENT_TYPES },
      { name: 'ppt/media/image1.png', data: Buffer.from('one') },
      { name: 'ppt/media/image1.png', data: Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>') },
    ]);
    await assert.rejects(
      identify(twice),
      (err: unknown) => err instanceof NotAPresentation && /two entries named ppt\/media\/image1\.png/.test(err.message),
    );
  });

  it('parses page selections', () => {
    assert.deepEqual(parsePages('1-3,5'), {
      ranges: [
        [1, 3],
        [5, 5],
      ],
    });
    assert.deepEqual(parsePages(' 2 , 4 - 6 '), {
      ranges: [
        [2, 2],
        [4, 6],
      ],
    });
    for (const bad of ['', '0', '3-1', '1,,2', 'a', '1-', '-2', '1.5', '2-100001']) assert.ok('error' in parsePages(bad), bad);
    assert.deepEqual(selectPages(undefined, 3), { pages: [1, 2, 3] });
    assert.deepEqual(selectPages('3,1-2,2', 5), { pages: [1, 2, 3] });
    assert.match((selectPages('4', 3) as { error: string }).error, /slide 4.*shows 3 slides/);
  });
});
