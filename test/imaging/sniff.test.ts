import assert from 'node:assert/strict';
import { open, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

import { FORMATS } from '../../src/imaging/formats.js';
import { SNIFF_HEAD_BYTES, sniff, type SniffRefusal, type Sniffed } from '../../src/imaging/sniff.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const corpusDir = path.resolve(repoRoot, '../shared/corpus');

interface ManifestEntry {
  path: string;
  kind: 'image' | 'presentation';
  format: string;
  expect: 'decodable' | 'reject';
  exercises: string;
}

const manifest = JSON.parse(await readFile(path.join(corpusDir, 'MANIFEST.json'), 'utf8')) as ManifestEntry[];

/** Read what a real caller would hand to sniff(): the first SNIFF_HEAD_BYTES, or the whole file. */
async function readHead(relPath: string): Promise<Buffer> {
  const fh = await open(path.join(corpusDir, relPath), 'r');
  try {
    const buf = Buffer.alloc(SNIFF_HEAD_BYTES);
    const { bytesRead } = await fh.read(buf, 0, SNIFF_HEAD_BYTES, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

function isRefusal(r: Sniffed | SniffRefusal | null): r is SniffRefusal {
  return r !== null && 'refused' in r;
}

const images = manifest.filter((e) => e.kind === 'image');
const presentations = manifest.filter((e) => e.kind === 'presentation');
// Only the JPEG entry: other formats (e.g. lossless WebP) also mention "lossless".
const isLosslessJpeg = (e: ManifestEntry) => e.format === 'jpeg' && /lossless/i.test(e.exercises);

describe('sniff: corpus', () => {
  it('manifest is non-empty and has the expected special cases', () => {
    assert.ok(images.length > 100, `only ${images.length} images in manifest`);
    assert.ok(presentations.length > 0);
    assert.equal(images.filter(isLosslessJpeg).length, 1, 'expected exactly one lossless JPEG');
    assert.ok(images.some((e) => e.format === 'jp2'));
  });

  describe('decodable images sniff to their manifest format', () => {
    for (const e of images.filter((x) => x.expect === 'decodable')) {
      it(e.path, async () => {
        const r = sniff(await readHead(e.path));
        assert.ok(r !== null && !isRefusal(r), `expected ${e.format}, got ${JSON.stringify(r)}`);
        assert.equal(r.format, e.format);
        assert.match(r.mimeType, /^image\//);
      });
    }
  });

  describe('formats this service decodes itself', () => {
    for (const e of images.filter(isLosslessJpeg)) {
      it(`${e.path} (lossless JPEG, process 14) is jpeg`, async () => {
        assert.deepEqual(sniff(await readHead(e.path)), { format: 'jpeg', mimeType: 'image/jpeg' });
      });
    }
    for (const e of images.filter((x) => x.format === 'jp2')) {
      it(`${e.path} (a raw JPEG 2000 codestream) is jp2, image/j2c`, async () => {
        assert.deepEqual(sniff(await readHead(e.path)), { format: 'jp2', mimeType: 'image/j2c' });
      });
    }
  });

  describe('reject images do not throw', () => {
    for (const e of images.filter((x) => x.expect === 'reject')) {
      it(e.path, async () => {
        const head = await readHead(e.path);
        assert.doesNotThrow(() => sniff(head));
      });
    }
  });

  describe('presentations are not images', () => {
    for (const e of presentations) {
      it(e.path, async () => {
        const r = sniff(await readHead(e.path));
        assert.ok(r === null || isRefusal(r), `sniffed as ${JSON.stringify(r)}`);
      });
    }
  });
});

/** Deterministic pseudo-random bytes (so a failure is reproducible). */
function pseudoRandomBytes(n: number, seed = 0x9e3779b9): Buffer {
  const out = Buffer.alloc(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    // xorshift32
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

const text = (s: string) => Buffer.from(s, 'utf8');
const jpegSegment = (marker: number, payload: number[]) => [0xff, marker, (payload.length + 2) >> 8, (payload.length + 2) & 0xff, ...payload];

describe('sniff: unit cases', () => {
  it('empty buffer is unknown', () => {
    assert.equal(sniff(Buffer.alloc(0)), null);
  });

  it('random bytes are unknown', () => {
    assert.equal(sniff(pseudoRandomBytes(4096)), null);
  });

  it('an HTML document is unknown', () => {
    const html = '<!DOCTYPE html>\n<html lang="en">\n<head><title>x</title></head>\n<body><p>hello</p></body>\n</html>\n';
    assert.equal(sniff(text(html)), null);
  });

  it('SVG with XML declaration, comment and DOCTYPE is svg', () => {
    const svg = [
      '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
      '<!-- Created with Inkscape > a "quoted" comment -->',
      '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">',
      '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>',
    ].join('\n');
    assert.deepEqual(sniff(text(svg)), { format: 'svg', mimeType: 'image/svg+xml' });
  });

  it('a document whose root is <html> is unknown even if it contains <svg later', () => {
    const doc = '<html>\n<body>\n<p>Inline: <svg xmlns="http://www.w3.org/2000/svg"></svg></p>\n</body>\n</html>\n';
    assert.equal(sniff(text(doc)), null);
  });

  it('a truncated JPEG head is jpeg', () => {
    assert.deepEqual(sniff(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46])), {
      format: 'jpeg',
      mimeType: 'image/jpeg',
    });
  });

  it('lossless JPEG: process 14 (SOF3) is jpeg even after fill bytes, RST markers and an APP segment containing FF C0; SOF7 is refused', () => {
    const lossless = (sof: number) =>
      Buffer.from([
        0xff,
        0xd8,
        ...jpegSegment(0xe1, [0x45, 0x78, 0x69, 0x66, 0x00, 0x00, 0xff, 0xc0, 0x00, 0x11]), // decoy SOF0 inside APP1
        0xff,
        0xd0, // standalone marker, no length
        0xff,
        0xff,
        0xff, // fill bytes
        ...jpegSegment(sof, [0x08, 0x00, 0x10, 0x00, 0x10, 0x01, 0x01, 0x11, 0x00]),
      ]);
    assert.deepEqual(sniff(lossless(0xc3)), { format: 'jpeg', mimeType: 'image/jpeg' });
    const r = sniff(lossless(0xc7));
    assert.ok(isRefusal(r));
    assert.match(r.reason, /lossless JPEG other than process 14/);
  });

  it('arithmetic-coded and progressive JPEGs are accepted', () => {
    for (const sof of [0xc0, 0xc1, 0xc2, 0xc9, 0xca]) {
      const bytes = Buffer.from([0xff, 0xd8, ...jpegSegment(0xdb, [0, 1, 2]), ...jpegSegment(sof, [0x08, 0, 1, 0, 1, 1, 1, 0x11, 0])]);
      assert.equal((sniff(bytes) as Sniffed).format, 'jpeg', `SOF ${sof.toString(16)}`);
    }
  });

  it('JPEG 2000: a JP2 file (or a JPX compatible with it) and a raw codestream are jp2; JPX alone is refused; PDF is pdf', () => {
    const jp2 = (major: string, ...compatible: string[]) =>
      Buffer.concat([
        Buffer.from([0x00, 0x00, 0x00, 0x0c, 0x6a, 0x50, 0x20, 0x20, 0x0d, 0x0a, 0x87, 0x0a]),
        Buffer.from([0, 0, 0, 16 + 4 * compatible.length]),
        Buffer.from(`ftyp${major}\0\0\0\0${compatible.join('')}`, 'latin1'),
      ]);
    assert.deepEqual(sniff(jp2('jp2 ', 'jp2 ')), { format: 'jp2', mimeType: 'image/jp2' });
    assert.deepEqual(sniff(jp2('jpx ', 'jpx ', 'jp2 ')), { format: 'jp2', mimeType: 'image/jp2' });
    assert.ok(isRefusal(sniff(jp2('jpx ', 'jpx '))));
    assert.deepEqual(sniff(Buffer.from([0xff, 0x4f, 0xff, 0x51, 0, 0x2f])), { format: 'jp2', mimeType: 'image/j2c' });
    assert.deepEqual(sniff(text('%PDF-1.7\n%\xe2\xe3\n')), { format: 'pdf', mimeType: 'application/pdf' });
  });

  it('ISO-BMFF brands: avif beats heif brands, mif1-only is image/heif, mp4 is unknown', () => {
    const ftyp = (major: string, ...compat: string[]) => {
      const body = text(major + '\0\0\0\0' + compat.join(''));
      const header = Buffer.alloc(8);
      header.writeUInt32BE(8 + body.length, 0);
      header.write('ftyp', 4, 'latin1');
      return Buffer.concat([header, body, Buffer.alloc(16)]);
    };
    assert.deepEqual(sniff(ftyp('mif1', 'mif1', 'miaf', 'avif')), { format: 'avif', mimeType: 'image/avif' });
    assert.deepEqual(sniff(ftyp('mif1', 'mif1', 'heic')), { format: 'heic', mimeType: 'image/heic' });
    assert.deepEqual(sniff(ftyp('mif1', 'mif1', 'miaf')), { format: 'heic', mimeType: 'image/heif' });
    assert.equal(sniff(ftyp('isom', 'isom', 'iso2', 'mp41')), null);
    assert.equal(sniff(ftyp('qt  ', 'qt  ')), null);
  });

  it('BMP needs a known DIB header size', () => {
    const bmp = (dibSize: number) => {
      const b = Buffer.alloc(64);
      b.write('BM', 0, 'latin1');
      b.writeUInt32LE(64, 2);
      b.writeUInt32LE(54, 10);
      b.writeUInt32LE(dibSize, 14);
      return b;
    };
    assert.deepEqual(sniff(bmp(40)), { format: 'bmp', mimeType: 'image/bmp' });
    assert.equal(sniff(bmp(41)), null);
    assert.equal(sniff(text('BM is not a bitmap, it is some text of a reasonable length')), null);
  });

  it('SVG: BOM, namespace prefix and a DOCTYPE internal subset with ">" and "]" inside', () => {
    const svg = '\ufeff<!DOCTYPE svg:svg [\n  <!ENTITY a "x > y ] z">\n  <!-- ] > -->\n]>\n' + '<svg:svg xmlns:svg="http://www.w3.org/2000/svg"/>';
    assert.equal((sniff(text(svg)) as Sniffed).format, 'svg');
    assert.equal(sniff(text('<svgfoo/>')), null);
    assert.equal(sniff(text('hello <svg/>')), null);
    assert.equal(sniff(Buffer.from('<svg>\0</svg>', 'latin1')), null);
  });

  it('TIFF and BigTIFF byte orders', () => {
    for (const sig of ['II*\0', 'MM\0*', 'II+\0', 'MM\0+']) {
      assert.equal((sniff(Buffer.from(sig + '\0\0\0\x08', 'latin1')) as Sniffed).format, 'tiff', JSON.stringify(sig));
    }
  });

  it('the format table gives every format its media type', () => {
    assert.equal(FORMATS.svg.mime, 'image/svg+xml');
    assert.equal(FORMATS.pdf.mime, 'application/pdf');
    assert.equal(FORMATS.zip.mime, 'application/zip');
  });
});
