// The format table (src/imaging/formats.ts) is the one place format facts live. What it says is
// held to what really happens: each output's encoder writes that format with the alpha,
// animation and losslessness the table claims; libvips decodes exactly the formats the table
// says it does (the others have a raw decoder); sniffing recognises every image format; and the
// docs/formats.md's table, the OpenAPI document and the upload's refusal say what the table says.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { FORMATS_DOC, withFormatTable } from '../../scripts/format-docs.js';
import { decodeRaw, readHeader } from '../../src/imaging/decoders/raw.js';
import { Sandbox } from '../../src/programs/sandbox.js';
import { encode } from '../../src/imaging/encode.js';
import { Ffmpeg } from '../../src/programs/ffmpeg.js';
import {
  canBeLossless,
  canHoldAlpha,
  FORMATS,
  IMAGE_FORMATS,
  isAnimation,
  isRawDecoded,
  libvipsReadsHeader,
  MEDIA_TYPES,
  OUTPUT_FORMAT_NAMES,
  OUTPUT_FORMATS,
  STORED_FORMATS,
  UPLOAD_FORMATS,
} from '../../src/imaging/formats.js';
import { sniff, type Sniffed } from '../../src/imaging/sniff.js';
import { Client, DIALECTS, corpusFile, startServer, type TestServer } from '../helpers.js';
import { cjxl, djxl } from './jxl-files.js';

/** One corpus file of each image format. */
const SAMPLES: Record<string, string> = {
  jpeg: 'images/sharp/2569067123_aca715a2ee_o.jpg',
  png: 'images/sharp/test-pattern.png',
  webp: 'images/sharp/5_webp_a.webp',
  avif: 'images/libheif/example.avif',
  gif: 'images/sharp/rotating-squares.gif',
  tiff: 'images/sharp/uncompressed_tiff.tiff',
  heic: 'images/libheif/example.heic',
  jp2: 'images/sharp/relax.jp2',
  bmp: 'images/image-rs/rgb24.bmp',
  svg: 'images/sharp/check.svg',
  jxl: 'made by cjxl from images/sharp/Portrait_1.jpg',
};
/** A sample's bytes: the corpus file, or (JPEG XL, which the corpus lacks) one made by libjxl's cjxl. */
const sampleBytes = (format: string): Buffer =>
  format === 'jxl' ? cjxl('images/sharp/Portrait_1.jpg', ['--container=1']) : fs.readFileSync(corpusFile(SAMPLES[format]!));
/** An encoder's output as sharp reads it: JPEG XL (which libvips does not read) through libjxl's djxl. */
const readable = (format: string, data: Buffer): Buffer => (format === 'jxl' ? djxl(data) : data);

/** 16 × 16: opaque colours on the left half, fully transparent on the right. Few colours, so a GIF holds them exactly. */
async function pattern(): Promise<{ rgba: Buffer; opaque: Buffer }> {
  const rgba = Buffer.alloc(16 * 16 * 4);
  for (let y = 0; y < 16; y++) {
    for (let x = 0; x < 16; x++) {
      const at = (y * 16 + x) * 4;
      rgba.set(x < 8 ? [x < 4 ? 255 : 0, y < 8 ? 255 : 0, 64, 255] : [0, 0, 0, 0], at);
    }
  }
  const opaque = Buffer.alloc(16 * 16 * 3);
  for (let i = 0; i < 16 * 16; i++) opaque.set([rgba[i * 4]!, rgba[i * 4 + 1]!, rgba[i * 4 + 2]!], i * 3);
  return { rgba, opaque };
}
const raw = (data: Buffer, channels: 3 | 4) => sharp(data, { raw: { width: 16, height: 16, channels } });

describe('format table: the encoders', () => {
  for (const format of OUTPUT_FORMATS) {
    it(`${format}: writes ${FORMATS[format].mime}, alpha ${canHoldAlpha(format) ? 'kept' : 'dropped'}`, async () => {
      const { rgba } = await pattern();
      const encoded = await encode(raw(rgba, 4), { format });
      const sniffed = sniff(encoded.data) as Sniffed;
      assert.deepEqual(sniffed, { format, mimeType: FORMATS[format].mime });
      assert.equal((await sharp(readable(format, encoded.data)).metadata()).hasAlpha, canHoldAlpha(format));
    });

    if (canBeLossless(format)) {
      it(`${format}: lossless output decodes to the very pixels`, async () => {
        const { opaque } = await pattern();
        const encoded = await encode(raw(opaque, 3), { format, lossless: true });
        const decoded = await sharp(readable(format, encoded.data)).removeAlpha().toColourspace('srgb').raw().toBuffer();
        assert.ok(decoded.equals(opaque), 'the pixels changed');
      });
    }

    if (isAnimation(format)) {
      it(`${format}: keeps every frame of an animation, with its timing`, async () => {
        const { opaque } = await pattern();
        const frames = await Promise.all(
          [0, 1, 2].map((turn) =>
            raw(opaque, 3)
              .rotate(turn * 90)
              .png()
              .toBuffer(),
          ),
        );
        const animation = sharp(frames, { join: { animated: true } });
        if (format === 'avif') {
          // Animated AVIF is written by ffmpeg (src/programs/ffmpeg.ts), an AV1 image sequence.
          const { data, info } = await animation.ensureAlpha().raw().toBuffer({ resolveWithObject: true });
          const ffmpeg = new Ffmpeg({ command: 'ffmpeg', timeoutMs: 60_000, sandbox: new Sandbox({ mode: 'auto', command: 'bwrap', hidden: [] }) });
          const frames = { data, width: info.width, height: info.pageHeight!, frames: 3 };
          const { header } = await ffmpeg.encode(frames, { delay: [100, 200, 300], loop: 2, alpha: false }, {});
          assert.deepEqual([header.frames, header.delay, header.loop], [3, [100, 200, 300], 2]);
          return;
        }
        const encoded = await encode(animation, { format, delay: [100, 200, 300], loop: 2 });
        const meta = await sharp(encoded.data).metadata();
        assert.deepEqual([meta.pages, meta.delay, meta.loop], [3, [100, 200, 300], 2]);
      });
    }
  }
});

describe('format table: reading', () => {
  it('has a corpus sample of every image format, and sniffing tells each apart', async () => {
    assert.deepEqual(Object.keys(SAMPLES).sort(), [...IMAGE_FORMATS].sort());
    for (const [format, file] of Object.entries(SAMPLES)) {
      const sniffed = sniff(sampleBytes(format)) as Sniffed;
      assert.equal(sniffed?.format, format, file);
      const definition = FORMATS[format as keyof typeof FORMATS] as { mime: string; otherMimes?: readonly string[] };
      assert.ok([definition.mime, ...(definition.otherMimes ?? [])].includes(sniffed.mimeType), `${file}: ${sniffed.mimeType}`);
    }
  });

  for (const format of Object.keys(SAMPLES)) {
    const libvips = FORMATS[format as keyof typeof FORMATS] as { libvips?: string };
    it(`${format}: libvips ${libvips.libvips === 'decode' ? 'decodes it' : libvips.libvips === 'header' ? 'reads only its header' : 'cannot read it'}`, async () => {
      const bytes = sampleBytes(format);
      const header = () => sharp(bytes).metadata();
      // Made when awaited: a rejection nobody waits for yet is an unhandled one (Node 26 fails the test).
      const pixels = () => sharp(bytes).raw().toBuffer();
      if (libvipsReadsHeader(format)) assert.ok((await header()).width! > 0);
      else await assert.rejects(header());
      if (!isRawDecoded(format)) {
        assert.ok((await pixels()).length > 0);
        return;
      }
      await assert.rejects(pixels(), 'libvips decodes it: the table should say so');
      const own = await decodeRaw(bytes, format, 50_000_000);
      const ownHeader = await readHeader(bytes, format);
      assert.deepEqual([own.width, own.height], [ownHeader.width, ownHeader.height]);
    });
  }
});

describe('format table: what the docs say', () => {
  it("docs/formats.md's table of formats is the one generated from the table (npm run docs:formats rewrites it)", () => {
    const page = fs.readFileSync(FORMATS_DOC, 'utf8');
    assert.equal(page, withFormatTable(page), 'run `npm run docs:formats` and commit docs/formats.md');
    for (const format of STORED_FORMATS) assert.ok(page.includes(`| \`${format}\` |`), `${format} has a row`);
  });

  it('media types, extensions and formats are each distinct', () => {
    const distinct = (values: readonly string[]) => assert.equal(new Set(values).size, values.length, values.join(', '));
    distinct(MEDIA_TYPES);
    distinct(STORED_FORMATS.map((format) => FORMATS[format].extension));
    distinct(STORED_FORMATS);
  });
});

for (const dialect of DIALECTS) {
  describe(`format table: the API (${dialect})`, () => {
    let server: TestServer;
    let doc: any;
    before(async () => {
      server = await startServer({ dialect, workers: 0 });
      doc = await (await fetch(`${server.url}/openapi.json`)).json();
    });
    after(async () => {
      await server?.close();
    });

    it("the OpenAPI document's enums of `format` and the download's media types are the table's", () => {
      assert.deepEqual(doc.components.schemas.FileMetadata.properties.format.enum, STORED_FORMATS);
      const kindsWithFormat = Object.entries(doc.components.schemas as Record<string, any>).filter(
        ([name, schema]) => name.endsWith('Options') && schema.properties?.format,
      );
      assert.ok(kindsWithFormat.length >= 8, 'every image kind takes `format`');
      for (const [name, schema] of kindsWithFormat) {
        const formats: string[] = schema.properties.format.enum;
        // The document kinds write their pages in a few of the output formats.
        if (name === 'PresentationToImagesOptions' || name === 'PdfToImagesOptions')
          assert.ok(
            formats.every((f) => OUTPUT_FORMAT_NAMES.includes(f)),
            name,
          );
        else assert.deepEqual(formats, OUTPUT_FORMAT_NAMES, name);
      }
      assert.deepEqual(Object.keys(doc.paths['/api/download/{fileId}'].get.responses['200'].content), MEDIA_TYPES);
    });

    it('an upload of another format is refused with the formats an upload may be', async () => {
      const client = new Client(server.url, await server.newKey());
      const refused = await client.upload(Buffer.from('neither an image nor a presentation, only some words of text'), 'notes.txt');
      assert.equal(refused.status, 415);
      assert.equal(refused.body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
      assert.deepEqual(refused.body.error.details.accepted, UPLOAD_FORMATS);
    });
  });
}
