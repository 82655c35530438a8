// Hostile inputs against a real server process: each row uploads an input, runs a job on it (or
// asks for its preview) and says what must happen; after every row the same process must still
// answer /healthz, must have logged no error, and the data directory must hold no file that a live
// file does not account for (see hostile.ts). To add a case, add one object to CASES; the helpers
// build inputs from the corpus (`corpusInput`, `truncated`, `bitFlipped`, `garbageIdat`, …) or
// take bytes you write. HOSTILE_ROWS=<part of a row name> plays only the matching rows.
//
// The contract for damaged files (API.md, upload): a file whose pixels turn out to be broken fails
// its task with INVALID_IMAGE. Decoders run with failOn 'error', so no output is ever made of
// pixels a decoder invented (libvips' grey fill). What a task does not read, it does not check:
// a crop above the damage, or the first frame of an animation damaged further on, completes; a
// GIF cut short is the animation of its frames that arrived whole. Flipped bits in a format
// without checksums are different pixels, not an error. Those rows say so with `completes(why)`.
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import sharp from 'sharp';
import { BLUE, pixelsNear, pptxWithPictures, SLIDE_EMU, svgNaming, zipEntries } from '../documents/attack-decks.js';
import { encryptedPdf, photoPdf, simplePdf } from '../documents/pdf-fixtures.js';
import { DIALECTS } from '../helpers.js';
import { getOperation, OPERATIONS } from '../../src/operations/registry.js';
import {
  bitFlipped,
  completes,
  corpusInput,
  describeHostileTable,
  fails,
  firstBytes,
  garbageIdat,
  previewAnswers,
  refused,
  truncated,
  uploadRefused,
  type Expectation,
  type HostileInput,
  type HostileRow,
} from './hostile.js';
import { cjxl, jxlDeclaring } from '../imaging/jxl-files.js';

const JPEG = corpusInput('images/sharp/Portrait_1.jpg');
const PNG = corpusInput('images/sharp/blackbug.png');
const WEBP = corpusInput('images/sharp/4.webp');
const GIF = corpusInput('images/sharp/rotating-squares.gif');
const AVIF = corpusInput('images/libheif/example.avif');
const ANIM = corpusInput('images/crabbyavif/anim.avif');
const HEIC = corpusInput('images/libheif/rainbow-451x461.heic');
const TIFF = corpusInput('images/sharp/uncompressed_tiff.tiff');
const BMP = corpusInput('images/image-rs/rgb24.bmp');
const SVG = corpusInput('images/sharp/check.svg');
const PPTX = corpusInput('presentations/poi/SampleShow.pptx');
/** The corpus has no JPEG XL: libjxl's cjxl makes one (an ISO-BMFF container) from a corpus photo. */
const JXL: HostileInput = {
  label: 'Portrait_1.jxl (cjxl)',
  filename: 'photo.jxl',
  bytes: () => cjxl('images/sharp/Portrait_1.jpg', ['--container=1']),
};
/** A JPEG XL codestream whose SizeHeader declares 20 000 × 20 000 and holds nothing after it. */
const JXL_BOMB: HostileInput = { label: 'a JPEG XL declaring 20000×20000', filename: 'declares.jxl', bytes: () => jxlDeclaring(20_000, 20_000) };
// The corpus holds no PDF: image-to-pdf's own output of corpus photos, and PDFs written object
// by object, each broken one way (test/documents/pdf-fixtures.ts).
const PDF: HostileInput = { label: 'a PDF of three photos (image-to-pdf)', filename: 'photos.pdf', bytes: () => photoPdf() };
const PDF_ENCRYPTED: HostileInput = { label: 'a password-protected PDF', filename: 'locked.pdf', bytes: () => encryptedPdf() };

/**
 * What the damaged images are given instead of a kind's own example (Operation.example): options
 * that make it do real work, and a crop that keeps the top-left corner (see CROP_ABOVE_DAMAGE).
 */
const JOB_OPTIONS: Record<string, Record<string, unknown>> = {
  compress: { quality: 60 },
  resize: { width: 200 },
  crop: { left: 0, top: 0, width: 32, height: 32 },
  convert: { format: 'webp' },
  flip: { direction: 'vertical' },
  watermark: { text: 'hostile' },
  'image-to-pdf': {},
  // Regions only: the face detector over every frame of an animation (the damaged GIF's whole
  // frames) is test/imaging/faces.test.ts's business, and ran past the task's time limit here.
  redact: { faces: false, regions: [{ left: 0, top: 0, width: 16, height: 16 }] },
};
// A renamed or removed kind fails the file here rather than leaving its entry unused.
assert.deepEqual(
  Object.keys(JOB_OPTIONS).filter((kind) => getOperation(kind)?.accepts !== 'image'),
  [],
  'JOB_OPTIONS names a kind that is not an image kind',
);

/** Every kind that reads images, from the registry: a new kind meets every damaged image without a line here. */
const IMAGE_JOBS = OPERATIONS.filter((op) => op.accepts === 'image').map((op) => ({
  kind: op.kind,
  options: JOB_OPTIONS[op.kind] ?? (op.example as Record<string, unknown>),
}));

const INVALID = fails('INVALID_IMAGE');
const NO_CHECKSUM = (format: string) => completes(`${format} pixel data carries no checksum: flipped bits decode to other pixels, not to an error`);
const CROP_ABOVE_DAMAGE = completes('the crop keeps the top-left corner, decoded whole before the cut; the rest is never read');
const GIF_WHOLE_FRAMES = completes('a GIF decoder (libnsgif, like browsers) shows the frames that arrived whole: the output is those frames');
const FIRST_FRAME_INTACT = completes('image-to-pdf reads the first frame only, and the flipped bits fall in later frames');

/**
 * One damaged version of a corpus file, the outcome every image job must have on it, and the
 * jobs whose outcome differs, each with its reason.
 */
const DAMAGED: { input: HostileInput; every: Expectation; except?: Record<string, Expectation> }[] = [
  ...[0.3, 0.6, 0.9].flatMap((fraction) => [
    { input: truncated(JPEG, fraction), every: INVALID, except: { crop: CROP_ABOVE_DAMAGE } },
    { input: truncated(PNG, fraction), every: INVALID, except: { crop: CROP_ABOVE_DAMAGE } },
    { input: truncated(WEBP, fraction), every: INVALID },
    { input: truncated(GIF, fraction), every: GIF_WHOLE_FRAMES },
    { input: truncated(AVIF, fraction), every: INVALID },
    { input: truncated(HEIC, fraction), every: INVALID },
    { input: truncated(TIFF, fraction), every: INVALID },
    { input: truncated(BMP, fraction), every: INVALID },
    { input: truncated(SVG, fraction), every: INVALID },
  ]),
  // libjxl decodes a whole codestream or nothing.
  { input: truncated(JXL, 0.5), every: INVALID },
  { input: bitFlipped(JPEG), every: NO_CHECKSUM('JPEG entropy-coded') },
  // libspng checks every chunk's CRC.
  { input: bitFlipped(PNG), every: INVALID, except: { crop: CROP_ABOVE_DAMAGE } },
  { input: bitFlipped(WEBP), every: NO_CHECKSUM('Lossy WebP (VP8)') },
  { input: bitFlipped(GIF), every: INVALID, except: { 'image-to-pdf': FIRST_FRAME_INTACT } },
  { input: bitFlipped(AVIF), every: INVALID },
  { input: bitFlipped(HEIC), every: NO_CHECKSUM('HEVC') },
  { input: bitFlipped(TIFF), every: NO_CHECKSUM('Uncompressed TIFF') },
  { input: bitFlipped(BMP), every: NO_CHECKSUM('Uncompressed BMP') },
  { input: bitFlipped(SVG), every: INVALID },
];

/** Rows written out one by one: the issue's own examples and the paths a matrix does not reach. */
const CASES: HostileRow[] = [
  {
    name: 'a JPEG XL whose header declares 20 000 × 20 000 → convert (failed from the header, before decoding)',
    input: JXL_BOMB,
    job: { kind: 'convert', options: { format: 'png' } },
    expect: fails('IMAGE_TOO_LARGE'),
    everyDialect: true,
  },
  {
    name: 'a real PNG cut to its first 60 KB → image-to-pdf (issue 10)',
    input: firstBytes(PNG, 60 * 1024),
    job: { kind: 'image-to-pdf' },
    expect: INVALID,
    everyDialect: true,
  },
  {
    name: 'a PNG with garbage IDAT → image-to-pdf (issue 10)',
    input: garbageIdat(PNG),
    job: { kind: 'image-to-pdf' },
    expect: INVALID,
    everyDialect: true,
  },
  { name: 'a PNG with garbage IDAT → compress', input: garbageIdat(PNG), job: { kind: 'compress' }, expect: INVALID, everyDialect: true },
  {
    name: 'a clean page and a truncated one → image-to-pdf fails whole',
    input: truncated(PNG, 0.6),
    job: { kind: 'image-to-pdf', options: ({ clean, input }) => ({ fileIds: [clean, input] }) },
    expect: INVALID,
    everyDialect: true,
  },
  {
    name: 'a truncated PNG as the watermark logo',
    input: truncated(PNG, 0.6),
    job: { kind: 'watermark', options: ({ clean, input }) => ({ fileId: clean, logoFileId: input }) },
    expect: INVALID,
    everyDialect: true,
  },
  {
    name: 'a crop that reaches past the damage of a truncated JPEG',
    input: truncated(JPEG, 0.6),
    job: { kind: 'crop', options: { aspectRatio: '1:1', gravity: 'bottom' } },
    expect: INVALID,
  },
  // An AVIF image sequence's movie header says where its frames lie: cut short, it is refused at upload.
  { input: truncated(ANIM, 0.3), expect: uploadRefused(415, 'UNSUPPORTED_MEDIA_TYPE'), everyDialect: true },
  { input: truncated(ANIM, 0.9), expect: uploadRefused(415, 'UNSUPPORTED_MEDIA_TYPE') },
  {
    // The limits are checked on the header's size; ffmpeg may decode no larger frame (-max_pixels).
    name: 'an AVIF image sequence whose header says 16×16 for frames of 120×120 → convert',
    input: {
      label: 'anim.avif saying 16×16',
      filename: 'anim.avif',
      bytes: async (ctx) => {
        const bytes = Buffer.from(await ANIM.bytes(ctx));
        // The av01 sample entry's content starts at 744; its width and height at +24 and +26.
        bytes.writeUInt16BE(16, 744 + 24);
        bytes.writeUInt16BE(16, 744 + 26);
        return bytes;
      },
    },
    job: { kind: 'convert', options: { format: 'webp' } },
    expect: INVALID,
    everyDialect: true,
  },
  {
    // A delay per declared frame is built from the timing table: one stts run and a constant
    // one-byte sample size declare 105 000 frames in 105 KB (in 500 MB, half a billion).
    name: 'an AVIF image sequence declaring 105 000 one-byte frames → refused at upload',
    input: {
      label: 'anim.avif declaring 105 000 frames',
      filename: 'anim.avif',
      bytes: async (ctx) => {
        const bytes = Buffer.from(await ANIM.bytes(ctx));
        const stts = bytes.indexOf('stts');
        bytes.writeUInt32BE(1, stts + 8);
        bytes.writeUInt32BE(105_000, stts + 12);
        bytes.writeUInt32BE(1, stts + 16);
        const stsz = bytes.indexOf('stsz');
        bytes.writeUInt32BE(1, stsz + 8);
        bytes.writeUInt32BE(105_000, stsz + 12);
        return bytes;
      },
    },
    expect: uploadRefused(415, 'UNSUPPORTED_MEDIA_TYPE'),
  },
  {
    // ffmpeg's last words name its decoder by heap address ("[libdav1d @ 0x55…]"): the task's
    // error has them reduced to safe text (processes.ts lastLines).
    name: 'an AVIF image sequence whose first frame is damaged → convert: the error carries no address or path',
    input: {
      label: 'anim.avif with its first frame damaged',
      filename: 'anim.avif',
      bytes: async (ctx) => Buffer.from(await ANIM.bytes(ctx)).fill(0x5a, 1605, 1700),
    },
    job: { kind: 'convert', options: { format: 'webp' } },
    expect: INVALID,
    everyDialect: true,
    verify({ task }) {
      assert.doesNotMatch(task.error.message, /0x[0-9a-f]{4,}|\/tmp\/|imgapi-|[\u0000-\u001f]/i, task.error.message);
    },
  },
  {
    name: 'an AVIF image sequence without a still image (no meta box) → preview: its first frame',
    input: {
      label: 'anim.avif without a still image',
      filename: 'anim.avif',
      bytes: async (ctx) => {
        const bytes = Buffer.from(await ANIM.bytes(ctx));
        bytes.write('free', 44 + 4, 'latin1'); // the meta box becomes a free box
        return bytes;
      },
    },
    preview: { width: 64 },
    expect: previewAnswers([200], 'the first frame, decoded by ffmpeg as the jobs decode it'),
    everyDialect: true,
    async verify({ response }) {
      const meta = await sharp(response!.body as Buffer).metadata();
      assert.deepEqual([meta.width, meta.height], [64, 64]);
    },
  },
  // PDFs (pdf-to-images, previews): poppler in the converter sandbox; the page count and the
  // selected pages' sizes are checked against the plan before anything is rendered.
  { input: PDF_ENCRYPTED, job: { kind: 'pdf-to-images' }, expect: fails('DOCUMENT_ENCRYPTED'), everyDialect: true },
  { input: PDF_ENCRYPTED, preview: { width: 64 }, expect: previewAnswers([415], 'a PDF that needs a password has no first page to show') },
  { input: truncated(PDF, 0.3), job: { kind: 'pdf-to-images' }, expect: INVALID, everyDialect: true },
  { input: truncated(PDF, 0.3), preview: { width: 64 }, expect: previewAnswers([415], 'poppler cannot read a PDF cut before its pages') },
  {
    name: 'a PDF of 1 001 pages → pdf-to-images: more than maxFrames, refused before rendering',
    input: { label: 'a PDF of 1 001 pages', filename: 'many.pdf', bytes: () => simplePdf({ pages: 1001, mediaBox: [72, 72] }) },
    job: { kind: 'pdf-to-images', options: { width: 16 } },
    expect: fails('IMAGE_TOO_LARGE'),
  },
  {
    name: 'a PDF whose page tree claims 10 000 000 pages → pdf-to-images',
    input: { label: 'a PDF claiming 10 000 000 pages', filename: 'liar.pdf', bytes: () => simplePdf({ pages: 1, count: 10_000_000 }) },
    job: { kind: 'pdf-to-images' },
    expect: INVALID,
  },
  {
    name: 'a PDF page of 3 × 14 400 pt → pdf-to-images at 1920 px wide: 9 216 000 px tall, refused before rendering',
    input: { label: 'a PDF page of 3 × 14 400 pt', filename: 'tall.pdf', bytes: () => simplePdf({ mediaBox: [3, 14_400] }) },
    job: { kind: 'pdf-to-images' },
    expect: fails('IMAGE_TOO_LARGE'),
  },
  {
    name: 'a PDF page of 14 400 pt square → pdf-to-images at 1200 dpi, refused before rendering; its preview is fitted',
    input: { label: 'a PDF page of 14 400 pt square', filename: 'field.pdf', bytes: () => simplePdf({ mediaBox: [14_400, 14_400] }) },
    job: { kind: 'pdf-to-images', options: { dpi: 1200 } },
    expect: fails('IMAGE_TOO_LARGE'),
  },
  {
    input: { label: 'a PDF page of 14 400 pt square', filename: 'field.pdf', bytes: () => simplePdf({ mediaBox: [14_400, 14_400] }) },
    preview: { width: 64 },
    expect: previewAnswers([200], 'the first page, rendered at the preview box'),
  },
  { input: truncated(PPTX, 0.3), expect: uploadRefused(415, 'UNSUPPORTED_MEDIA_TYPE'), everyDialect: true },
  { input: truncated(PPTX, 0.6), expect: uploadRefused(415, 'UNSUPPORTED_MEDIA_TYPE') },
  { input: truncated(PPTX, 0.9), expect: uploadRefused(415, 'UNSUPPORTED_MEDIA_TYPE') },
  // The flips land in a compressed part: found when every entry is inflated, before LibreOffice.
  { input: bitFlipped(PPTX), job: { kind: 'presentation-to-images' }, expect: fails('CONVERSION_FAILED'), everyDialect: true },
  // A picture covering the whole slide, an SVG part drawing the victim's stored file (by file://
  // URL, path and relative path) over its own blue. The converter sandbox cannot see the file and
  // the SVG re-writer drops the references (test/programs/sandbox.test.ts tests each alone).
  {
    name: "a PPTX whose SVG picture names another account's stored file → presentation-to-images draws none of it",
    input: {
      label: 'PPTX with an SVG picture naming the victim',
      filename: 'svg-names-victim.pptx',
      bytes: (ctx) => pptxWithPictures([{ name: 'image.svg', bytes: svgNaming(ctx.victim.storagePath), box: { x: 0, y: 0, ...SLIDE_EMU } }]),
    },
    job: { kind: 'presentation-to-images', options: { width: 400 } },
    expect: completes("the deck renders; verify checks that its first slide is the SVG's own blue, none of the victim"),
    everyDialect: true,
    async verify(result) {
      const slide = (await zipEntries(result.output!.body))[0]!;
      const blue = await pixelsNear(slide.bytes, BLUE);
      assert.ok(
        blue.count / blue.total > 0.97,
        `${slide.name}: ${blue.count} of ${blue.total} pixels are the SVG's blue; the rest is something it drew`,
      );
    },
  },
  // adjust, trim and extend: option values past sharp's ranges are a 400 before any pixel is read,
  // a border past the plan's pixel limit fails IMAGE_TOO_LARGE when queued, damaged pixels INVALID_IMAGE
  // (the matrix below plays every damaged input; garbage in IDAT is not one of them).
  ...(
    [
      ['adjust', { blur: 100_000 }],
      ['adjust', { pixelate: 0 }],
      ['adjust', { sharpen: -1 }],
      ['adjust', { gamma: 0 }],
      ['adjust', {}],
      ['adjust', { tint: 'url(javascript:alert(1))' }],
      ['trim', { threshold: 1e9 }],
      ['trim', { background: 'x'.repeat(65) }],
      ['extend', { all: 100_001 }],
      ['extend', { left: -1 }],
    ] as const
  ).map(([kind, options]): HostileRow => ({
    name: `${kind} ${JSON.stringify(options).slice(0, 50)} → 400`,
    input: JPEG,
    job: { kind, options },
    expect: refused(400, 'VALIDATION_ERROR'),
  })),
  {
    name: 'extend by 100,000 px a side → IMAGE_TOO_LARGE',
    input: JPEG,
    job: { kind: 'extend', options: { all: 100_000 } },
    expect: fails('IMAGE_TOO_LARGE'),
    everyDialect: true,
  },
  {
    name: 'a pipeline of ten 16,000 px extends → IMAGE_TOO_LARGE',
    input: JPEG,
    job: { kind: 'pipeline', options: { steps: Array.from({ length: 10 }, () => ({ kind: 'extend', all: 16_000 })) } },
    expect: fails('IMAGE_TOO_LARGE'),
  },
  // The matrix below runs adjust's example and trim on every damaged image; this is adjust's blur.
  {
    name: 'Portrait_1.jpg cut to 60 % → adjust blur and negate',
    input: truncated(JPEG, 0.6),
    job: { kind: 'adjust', options: { blur: 3, negate: true } },
    expect: INVALID,
  },
  { input: garbageIdat(PNG), job: { kind: 'extend', options: { all: 8 } }, expect: INVALID },
  // An id that names no file, the empty one included, is refused when queued, never a task that fails later.
  ...['', 'file_AAAAAAAAAAAAAAAAAAAAAA'].map((logoFileId): HostileRow => ({
    name: `watermark logoFileId ${JSON.stringify(logoFileId)} → 404`,
    input: JPEG,
    job: { kind: 'watermark', options: { logoFileId } },
    expect: refused(404, 'NOT_FOUND'),
    everyDialect: true,
  })),
];

/** PostgreSQL plays the written-out rows and, of the matrix, every job on every format cut to 60 %. */
const onEveryDialect = (input: HostileInput) => input.label.endsWith('cut to 60 %');

/** Every kind that reads PDFs (the registry's), on the PDF cut later than CASES cuts it, and with flipped bits. */
const DAMAGED_PDFS: HostileRow[] = OPERATIONS.filter((op) => op.accepts === 'pdf').flatMap((op) => [
  { input: truncated(PDF, 0.6), job: { kind: op.kind }, expect: INVALID },
  { input: truncated(PDF, 0.9), job: { kind: op.kind }, expect: INVALID },
  {
    input: bitFlipped(PDF),
    job: { kind: op.kind },
    expect: completes("the flipped bits fall in the photos' JPEG streams, which carry no checksum: poppler draws other pixels, not an error"),
  },
]);

const ROWS: HostileRow[] = [
  ...CASES,
  ...DAMAGED_PDFS,
  ...DAMAGED.flatMap(({ input, every, except }) => [
    ...IMAGE_JOBS.map((job) => ({ input, job, expect: except?.[job.kind] ?? every, everyDialect: onEveryDialect(input) })),
    // A preview is a view, not an output: today it draws what decodes (grey where a JPEG or PNG
    // is cut short) or refuses the file; either way not a 5xx, and the process lives.
    { input, preview: {}, expect: previewAnswers([200, 415], 'a preview shows what decodes or answers PREVIEW_UNAVAILABLE') },
  ]),
];

for (const dialect of DIALECTS) describeHostileTable('hostile inputs', ROWS, dialect);

// Delivery URLs (/r/…): the same damaged images through a render, hostile URLs and a hostile
// origin. Every one is a 4xx (or 502 for the origin's own faults) with the contract's code,
// never a 5xx of the service, a hung socket or a stored render (the stray-file check).

/** A PNG whose header declares `width`×`height` and whose pixels are a few bytes: refused from the header. */
function pngDeclaring(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', zlib.deflateSync(Buffer.alloc(64))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const CLEAN = corpusInput('images/sharp/320x240.jpg', 'a clean JPEG');
const RENDER_REFUSES = refused(415, 'UNSUPPORTED_MEDIA_TYPE');

const DELIVERY_ROWS: HostileRow[] = [
  ...[JPEG, PNG, WEBP, AVIF, HEIC, TIFF, BMP, SVG].map((input): HostileRow => ({
    input: truncated(input, 0.3),
    delivery: { transform: 'w:100' },
    expect: RENDER_REFUSES,
    everyDialect: input === PNG,
  })),
  { input: garbageIdat(PNG), delivery: { transform: 'w:100,f:webp' }, expect: RENDER_REFUSES },
  {
    name: 'a PNG whose header declares 20 000 × 20 000 → /r/ (refused from the header, before decoding)',
    input: { label: 'a PNG declaring 20000×20000', filename: 'declares.png', bytes: () => pngDeclaring(20_000, 20_000) },
    delivery: { transform: 'w:100' },
    expect: refused(422, 'IMAGE_TOO_LARGE'),
    everyDialect: true,
  },
  {
    name: 'a JPEG XL whose header declares 20 000 × 20 000 → /r/ (refused from the header, before decoding)',
    input: JXL_BOMB,
    delivery: { transform: 'w:100,f:jxl' },
    expect: refused(422, 'IMAGE_TOO_LARGE'),
  },
  {
    name: '/r/ with a wrong signature',
    input: CLEAN,
    delivery: { transform: 'w:100', signature: 'wrong' },
    expect: refused(403, 'SIGNATURE_INVALID'),
    everyDialect: true,
  },
  {
    name: "/r/ of another account's file, signed by the attacker",
    input: CLEAN,
    delivery: { transform: 'w:100', source: 'victim' },
    expect: refused(404, 'NOT_FOUND'),
    everyDialect: true,
  },
  {
    name: '/r/ unsigned (`_`) without a public preset',
    input: CLEAN,
    delivery: { transform: 'p:none', signature: '_' },
    expect: refused(403, 'SIGNATURE_INVALID'),
  },
  ...['w:99999', 'w:4096,dpr:4', 'blur:100000', 'q:1e3', 'g:face', 'sharpen:-1', 'x'.repeat(2000), 'w:10,w:10'].map((transform): HostileRow => ({
    name: `/r/ ${transform.slice(0, 40)}`,
    input: CLEAN,
    delivery: { transform },
    expect: refused(400, 'VALIDATION_ERROR'),
  })),
  ...(
    [
      ['an origin that redirects (to a metadata address)', 'o/evil/moved', 502, 'ORIGIN_FAILED'],
      ['an origin that answers 500', 'o/evil/broken', 502, 'ORIGIN_FAILED'],
      ['an origin that hangs after its headers', 'o/evil/hang', 502, 'ORIGIN_FAILED'],
      ['an origin that declares 2 GB', 'o/evil/declared-2gb', 502, 'ORIGIN_FAILED'],
      ['an origin that sends HTML', 'o/evil/page.html', 415, 'UNSUPPORTED_MEDIA_TYPE'],
      ['an origin that answers 404', 'o/evil/missing', 404, 'NOT_FOUND'],
      ['an origin the account does not have', 'o/nobody/ok.png', 404, 'NOT_FOUND'],
    ] as const
  ).map(([name, source, status, code]): HostileRow => ({
    name: `/r/ from ${name}`,
    input: CLEAN,
    delivery: { transform: 'w:100', source },
    expect: refused(status, code),
    everyDialect: source === 'o/evil/hang',
  })),
];

for (const dialect of DIALECTS) {
  describeHostileTable('hostile delivery URLs', DELIVERY_ROWS, dialect, { origin: true, env: { ORIGIN_TIMEOUT_SECONDS: '2' }, waveSize: 4 });
}
