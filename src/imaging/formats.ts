// Every fact about the formats this service stores, in one table: the media type and extension,
// whether an upload may be one, how its pixels are read, whether it holds an animation or alpha,
// and, for the formats jobs write, the encoder and its defaults. Sniffing (sniff.ts), uploads,
// the job kinds' inputs, the OpenAPI enums of `format`, the raw decoders, the encoders and the
// docs/formats.md's table (`npm run docs:formats`) all read it; nothing repeats it.
// Each row carries its signature (magic bytes, and a closer look where they are not enough:
// signatures.ts), as imgproxy's `imagetype` keeps them beside each type; sniff.ts, the frame
// counter, uploads and the pipeline ask the row, never `format === '…'`.
// A new format is a row here, and what else it needs is asked for: a raw decoder in decoders/
// by the compiler, a corpus sample (or a made one) by test/imaging/formats.test.ts.
import type { Sharp } from 'sharp';
import { encodeJxl, JXL_QUALITY, type EncodeBounds, type RgbaPixels } from './jxl-encode.js';
import { bmpHeader, hasBrand, isSvg, jpeg2000, jpegHeader, jpegProcess, type HeadHeader, type Signature } from './signatures.js';

/** How the output of an encoder is tuned; `quality` undefined means the format's default. */
export interface EncodeSettings {
  quality?: number;
  lossless?: boolean;
  /** Compress favours small files (palette PNG, more effort); other kinds favour speed and fidelity. */
  favourSize?: boolean;
  /**
   * PNG favouring size: the image's exact number of colours when few,
   * counted by encode.ts up to 16 (smaller bit depths); 0 or absent when it has more or was not counted.
   */
  colours?: number;
  /** Frame timing, for animations. */
  delay?: number[];
  loop?: number;
  /** The task's deadline and cancel, for encoders that run outside libvips (JPEG XL). */
  bounds?: EncodeBounds;
}

/** How jobs write a format (its saver): libvips' encoder on the pipeline, or one of its own over the finished pixels. */
type Writer = {
  /** Whether `lossless` can be honoured. */
  lossless: boolean;
  /** What the encoder does by default, as docs/formats.md's table says it. */
  defaults: string;
  /**
   * Its lossy coding decides each block of at most 256 px from that block alone (a DCT or
   * transform codec): a quality's effect on a few full-resolution crops is its effect on the
   * whole, so a quality search may probe crops (encode.ts). A palette is chosen for the whole image: not.
   */
  localCoding?: boolean;
} & (
  | { encode(image: Sharp, settings: EncodeSettings): Sharp }
  | {
      /** The pipeline's output as 8-bit RGBA, encoded outside libvips (which cannot write the format). */
      encodePixels(pixels: RgbaPixels, settings: EncodeSettings): Promise<Buffer>;
    }
);

interface FormatDefinition {
  /** As people write it, for the docs. */
  title: string;
  /** The media type files of this format are served as. */
  mime: string;
  /** Other media types a file of this format may carry (what sniffing could tell of it). */
  otherMimes?: readonly string[];
  extension: string;
  /** Other names the `format` option accepts for it (`jpg`), stored and answered as the format's own. */
  aliases?: readonly string[];
  /** What reads it: the image kinds, presentation-to-images, pdf-to-images, or nothing (an output only). */
  input: 'image' | 'presentation' | 'pdf' | null;
  /**
   * How its first bytes are recognised (signatures.ts). A recognised format that nothing reads
   * (`input` null) is refused by name. Presentations have none: their container decides (documents/container.ts).
   */
  signature?: Signature;
  /**
   * What sharp's prebuilt libvips does with an image: decodes it; reads only its header (HEIC:
   * libheif is built without an HEVC decoder); or nothing (BMP: no loader). Where it does not
   * decode, this service decodes the pixels itself (decoders/) and hands sharp raw pixels.
   */
  libvips?: 'decode' | 'header' | 'none';
  /** Its frames are an animation, read as one and written as one. */
  animation?: boolean;
  /**
   * Its frames are counted as an upload streams past (frame-count.ts): the header probe reads
   * only the head, where a large animation's later frames are not yet in sight.
   */
  streamedFrames?: boolean;
  /**
   * An HEIF file that libvips reads: its image is its primary item (heif-items.ts), and an image
   * sequence (brand `avis`) is read from its movie header and decoded by ffmpeg (avif-sequence.ts,
   * ffmpeg.ts), as an animation to it is written.
   */
  heifSequences?: boolean;
  /**
   * A document that may name outside resources (SVG): libvips reads it only as rewritten without
   * them (svg.ts, on the decoding thread).
   */
  outsideReferences?: boolean;
  /** It can carry an alpha channel. */
  alpha?: boolean;
  /**
   * Its EXIF tags are the file's own IFDs (TIFF), which libvips does not hand over as an EXIF block
   * as it does a JPEG's APP1, a PNG's eXIf, a WebP's EXIF chunk or a HEIF's Exif item: info.ts reads them from the file.
   */
  exifInIfds?: boolean;
  /**
   * Its header, read from the file's first bytes as libvips would report it, or undefined where
   * the head cannot settle it: then libvips reads it (a trip through libuv's pool and, for a
   * delivery miss of a 2 MP JPEG under load, 1–3 ms of CPU). source.ts's `inspect` asks it first.
   */
  headerInHead?: (head: Buffer) => HeadHeader | undefined;
  /** What docs/formats.md says beyond the other columns. */
  notes?: string;
  write?: Writer;
}

const JPEG_QUALITY = 80;
const PNG_QUALITY = 80;
const WEBP_QUALITY = 80;
const AVIF_QUALITY = 50;

/** Animation timing, only where it is set. */
const timing = ({ delay, loop }: EncodeSettings) => ({ ...(delay ? { delay } : {}), ...(loop !== undefined ? { loop } : {}) });

// Encoders: for JPEG, mozjpeg's trellis quantisation when favouring size (compress) and
// libjpeg-turbo with optimised Huffman tables otherwise (mozjpeg costs as much CPU as the whole
// rest of a 12 MP → 720 px thumbnail for ~10 % fewer bytes); for PNG a quantised palette when
// favouring size and fast zlib otherwise (level 9 with adaptive filtering costs 8× the time of
// level 6 on large images for a few percent); moderate efforts for WebP, AVIF and GIF.
export const FORMATS = {
  jpeg: {
    title: 'JPEG',
    mime: 'image/jpeg',
    extension: 'jpg',
    aliases: ['jpg'],
    input: 'image',
    signature: { magic: [[[0, '\xff\xd8\xff']]], check: jpegProcess },
    libvips: 'decode',
    headerInHead: jpegHeader,
    notes: "lossless JPEG (process 14, SOF3) is decoded by this service's own decoder (jpeg-lossless-decoder-js)",
    write: {
      lossless: false,
      defaults: `quality ${JPEG_QUALITY}; mozjpeg for compress`,
      localCoding: true,
      encode: (image, { quality, favourSize }) =>
        image.jpeg({ quality: quality ?? JPEG_QUALITY, ...(favourSize ? { mozjpeg: true } : { optimiseCoding: true }) }),
    },
  },
  png: {
    title: 'PNG',
    mime: 'image/png',
    extension: 'png',
    input: 'image',
    signature: { magic: [[[0, '\x89PNG\r\n\x1a\n']]] },
    libvips: 'decode',
    alpha: true,
    write: {
      lossless: true,
      defaults: `zlib level 6; with \`quality\` (or by compress) a quantised palette, quality ${PNG_QUALITY}`,
      encode(image, { quality, lossless, favourSize, colours }) {
        if (lossless) return image.png({ compressionLevel: 9, adaptiveFiltering: true });
        if (quality === undefined && !favourSize) return image.png({ compressionLevel: 6 });
        // Few colours (counted): the palette holds exactly them at the smallest bit depth, lossless
        // by default; a quality still quantises. sharp takes the bit depth from `colours`, rounding
        // down (5–8 colours would be 2 bits, 4 colours): the palette's size is given as 2, 4 or 16.
        if (colours) {
          return image.png({
            palette: true,
            colours: colours <= 2 ? 2 : colours <= 4 ? 4 : 16,
            quality: quality ?? 100,
            dither: quality === undefined ? 0 : 1,
            compressionLevel: 9,
            effort: 4,
          });
        }
        return image.png({ palette: true, quality: quality ?? PNG_QUALITY, compressionLevel: 9, effort: 4 });
      },
    },
  },
  webp: {
    title: 'WebP',
    mime: 'image/webp',
    extension: 'webp',
    input: 'image',
    signature: {
      magic: [
        [
          [0, 'RIFF'],
          [8, 'WEBP'],
        ],
      ],
    },
    libvips: 'decode',
    animation: true,
    streamedFrames: true,
    alpha: true,
    write: {
      lossless: true,
      defaults: `quality ${WEBP_QUALITY}`,
      localCoding: true,
      encode: (image, settings) =>
        settings.lossless
          ? image.webp({ lossless: true, effort: 4, ...timing(settings) })
          : image.webp({ quality: settings.quality ?? WEBP_QUALITY, effort: 4, ...timing(settings) }),
    },
  },
  avif: {
    title: 'AVIF',
    mime: 'image/avif',
    extension: 'avif',
    input: 'image',
    // AVIF before HEIC: AVIF files routinely list the generic HEIF brands (mif1, miaf) too.
    signature: { magic: [[[4, 'ftyp']]], check: hasBrand(new Set(['avif', 'avis'])) },
    libvips: 'decode',
    animation: true,
    heifSequences: true,
    alpha: true,
    notes:
      "a still AVIF is its primary item: a grid assembled, clap/irot/imir applied, alpha and ICC/nclx colour read (libheif); an image sequence (animated AVIF, brand `avis`) is decoded by ffmpeg (libdav1d): every frame with its timing, the edit list's loop count and the alpha track, colour by the stream's matrix and range; animations are written as sequences by ffmpeg (libaom-av1; every frame, its delay, the loop count, alpha as an auxiliary track; about 1 s for 150 frames of 120×120); without ffmpeg, sequences fail with `CONVERSION_FAILED` and an animation to AVIF is its first frame",
    write: {
      lossless: true,
      defaults: `quality ${AVIF_QUALITY}`,
      localCoding: true,
      encode: (image, { quality, lossless, favourSize }) =>
        lossless
          ? image.avif({ lossless: true, effort: favourSize ? 4 : 2 })
          : image.avif({ quality: quality ?? AVIF_QUALITY, effort: favourSize ? 4 : 2 }),
    },
  },
  gif: {
    title: 'GIF',
    mime: 'image/gif',
    extension: 'gif',
    input: 'image',
    signature: { magic: [[[0, 'GIF87a']], [[0, 'GIF89a']]] },
    libvips: 'decode',
    animation: true,
    streamedFrames: true,
    alpha: true,
    write: {
      lossless: true,
      defaults: '256 colours; `quality` scales the palette',
      encode(image, settings) {
        // GIF has no quality knob; the colour count plays that part.
        const { quality, lossless, favourSize } = settings;
        const colours = quality === undefined || lossless ? 256 : Math.max(2, Math.round((256 * quality) / 100));
        return image.gif({ colours, effort: favourSize ? 7 : 4, ...timing(settings) });
      },
    },
  },
  tiff: {
    title: 'TIFF',
    mime: 'image/tiff',
    extension: 'tiff',
    aliases: ['tif'],
    input: 'image',
    // Classic TIFF and BigTIFF, either byte order.
    signature: { magic: [[[0, 'II*\0']], [[0, 'MM\0*']], [[0, 'II+\0']], [[0, 'MM\0+']]] },
    libvips: 'decode',
    alpha: true,
    exifInIfds: true,
    notes: 'the first page is read',
    write: {
      lossless: true,
      defaults: 'deflate; with `quality`, JPEG-compressed',
      localCoding: true,
      encode: (image, { quality, lossless }) =>
        lossless || quality === undefined
          ? image.tiff({ compression: 'deflate', predictor: 'horizontal' })
          : image.tiff({ compression: 'jpeg', quality }),
    },
  },
  heic: {
    title: 'HEIC/HEIF',
    mime: 'image/heic',
    // HEIF whose brands name no codec: stored as heic, served as image/heif.
    otherMimes: ['image/heif'],
    extension: 'heic',
    input: 'image',
    // HEIF whose brands name only the generic HEIF brands: the codec is unknown, so not claimed as HEVC.
    signature: {
      magic: [[[4, 'ftyp']]],
      check: hasBrand(new Set(['heic', 'heix', 'hevc', 'hevx', 'heim', 'heis', 'hevm', 'hevs']), new Set(['mif1', 'msf1'])),
    },
    libvips: 'header',
    alpha: true,
    notes: "only the primary image (libheif's WebAssembly build); its ICC profile and EXIF are kept as a JPEG's",
  },
  jp2: {
    title: 'JPEG 2000',
    mime: 'image/jp2',
    // A raw codestream (J2K) rather than a JP2 file.
    otherMimes: ['image/j2c'],
    extension: 'jp2',
    input: 'image',
    signature: { magic: [[[0, '\0\0\0\x0cjP  \r\n\x87\n']], [[0, '\xff\x4f\xff\x51']]], check: jpeg2000 },
    libvips: 'none',
    alpha: true,
    notes:
      "JP2 files and raw codestreams (OpenJPEG's WebAssembly build): 1–4 components of one precision up to 16 bits, not subsampled; a JP2's ICC profile is kept as a JPEG's, sYCC is refused",
  },
  bmp: {
    title: 'BMP',
    mime: 'image/bmp',
    extension: 'bmp',
    input: 'image',
    signature: { magic: [[[0, 'BM']]], check: bmpHeader },
    libvips: 'none',
    alpha: true,
  },
  svg: {
    title: 'SVG',
    mime: 'image/svg+xml',
    extension: 'svg',
    input: 'image',
    // Text: no magic number, only structure (asked after every row with magic bytes).
    signature: { check: isSvg },
    libvips: 'decode',
    alpha: true,
    outsideReferences: true,
    notes: 'rewritten without outside references before librsvg draws it',
  },
  jxl: {
    title: 'JPEG XL',
    mime: 'image/jxl',
    extension: 'jxl',
    input: 'image',
    // A bare codestream, or the ISO-BMFF container's signature box.
    signature: { magic: [[[0, '\xff\x0a']], [[0, '\0\0\0\x0cJXL \r\n\x87\n']]] },
    libvips: 'none',
    alpha: true,
    notes:
      "bare codestreams and ISO-BMFF containers, read and written by libjxl's WebAssembly build (@jsquash/jxl) on threads of their own: the pixel limit checked from the header first, 8-bit sRGB, an animation's first frame",
    write: {
      lossless: true,
      defaults: `quality ${JXL_QUALITY} (distance 2.35), effort 3 (5 for compress)`,
      localCoding: true,
      encodePixels: (pixels, { quality, lossless, favourSize, bounds }) => encodeJxl(pixels, { quality, lossless, favourSize }, bounds),
    },
  },
  pptx: {
    title: 'PowerPoint (PPTX)',
    mime: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
    extension: 'pptx',
    input: 'presentation',
  },
  ppsx: {
    title: 'PowerPoint show (PPSX)',
    mime: 'application/vnd.openxmlformats-officedocument.presentationml.slideshow',
    extension: 'ppsx',
    input: 'presentation',
  },
  ppt: {
    title: 'PowerPoint 97–2003 (PPT)',
    mime: 'application/vnd.ms-powerpoint',
    extension: 'ppt',
    input: 'presentation',
  },
  odp: {
    title: 'OpenDocument (ODP)',
    mime: 'application/vnd.oasis.opendocument.presentation',
    extension: 'odp',
    input: 'presentation',
  },
  pdf: {
    title: 'PDF',
    mime: 'application/pdf',
    extension: 'pdf',
    input: 'pdf',
    signature: { magic: [[[0, '%PDF-']]] },
    notes: 'read by poppler, in the converter sandbox; written by image-to-pdf',
  },
  zip: {
    title: 'ZIP',
    mime: 'application/zip',
    extension: 'zip',
    input: null,
    notes: "written by presentation-to-images (the slides' images)",
  },
} as const satisfies Record<string, FormatDefinition>;

type Table = typeof FORMATS;
/** Every format a stored file can be. */
export type Format = keyof Table;
/** The formats of the given input. */
type InputOf<I> = { [F in Format]: Table[F]['input'] extends I ? F : never }[Format];
/** The formats the image kinds read. */
export type ImageFormat = InputOf<'image'>;
/** The formats presentation-to-images reads. */
export type PresentationFormat = InputOf<'presentation'>;
/** The formats jobs write with an encoder (the `format` option). */
export type OutputFormat = { [F in Format]: Table[F] extends { write: Writer } ? F : never }[Format];
/** Images whose pixels this service decodes itself (decoders/): libvips cannot. */
export type RawDecodedFormat = { [F in ImageFormat]: Table[F] extends { libvips: 'decode' } ? never : F }[ImageFormat];

const definitions = Object.entries(FORMATS) as [Format, FormatDefinition][];
const formatsWhere = <F extends Format>(test: (definition: FormatDefinition) => boolean): readonly F[] =>
  definitions.filter(([, definition]) => test(definition)).map(([format]) => format as F);

/** In the table's order: the OpenAPI enums list them so. */
export const STORED_FORMATS: readonly Format[] = definitions.map(([format]) => format);
export const IMAGE_FORMATS: ReadonlySet<string> = new Set(formatsWhere<ImageFormat>((d) => d.input === 'image'));
/** What an upload may be: whatever some kind reads. */
export const UPLOAD_FORMATS: readonly Format[] = formatsWhere((d) => d.input !== null);
export const OUTPUT_FORMATS: readonly OutputFormat[] = formatsWhere<OutputFormat>((d) => d.write !== undefined);
/** Every media type a stored file is served as. */
export const MEDIA_TYPES: readonly string[] = definitions.flatMap(([, d]) => [d.mime, ...(d.otherMimes ?? [])]);

const definition = (format: string): FormatDefinition | undefined => (FORMATS as Record<string, FormatDefinition>)[format];
/** Whether `value` is a row of the table (the CLI checks a task's `result.format` so). */
export const isFormat = (value: string): value is Format => Object.hasOwn(FORMATS, value);

/** Which kinds read the format: the image kinds, presentation-to-images, or none. */
export const inputOf = (format: string): FormatDefinition['input'] => definition(format)?.input ?? null;
/**
 * A paged document that poppler reads (the row's `input: 'pdf'`): an upload counts its pages,
 * a preview and a delivery URL render one of them, where an image is decoded.
 */
export const isPopplerDocument = (format: string): boolean => inputOf(format) === 'pdf';
const isOutputFormat = (value: string): value is OutputFormat => definition(value)?.write !== undefined;

/** Every name the `format` option accepts for an output: the formats, then their aliases (`jpg`, `tif`). */
export const OUTPUT_FORMAT_NAMES: readonly string[] = [
  ...OUTPUT_FORMATS,
  ...OUTPUT_FORMATS.flatMap((format) => (FORMATS[format] as FormatDefinition).aliases ?? []),
];
const ALIASES: ReadonlyMap<string, Format> = new Map(
  definitions.flatMap(([format, d]) => (d.aliases ?? []).map((alias) => [alias, format] as const)),
);
/** The format an alias names (`jpg` → `jpeg`); any other value as it is. */
export const canonicalFormat = (name: string): string => ALIASES.get(name) ?? name;
/** The aliases, as the OpenAPI document describes them: "`jpg` (jpeg), `tif` (tiff)". */
export const aliasesText = (): string => [...ALIASES].map(([alias, format]) => `\`${alias}\` (${format})`).join(', ');

/**
 * The rows sniffing asks, in the table's order, those with magic bytes first: a text format
 * (SVG) has only structure, so it is asked last.
 */
export const SIGNATURES: readonly {
  format: Format;
  signature: Signature;
  input: FormatDefinition['input'];
  title: string;
  mimes: readonly string[];
}[] = [...definitions.filter(([, d]) => d.signature?.magic), ...definitions.filter(([, d]) => d.signature && !d.signature.magic)].map(
  ([format, d]) => ({ format, signature: d.signature!, input: d.input, title: d.title, mimes: [d.mime, ...(d.otherMimes ?? [])] }),
);

/** Formats whose frames are counted as an upload streams past (frame-count.ts has a counter for each). */
export type StreamedFrameFormat = { [F in Format]: Table[F] extends { streamedFrames: true } ? F : never }[Format];
export const hasStreamedFrames = (format: string): format is StreamedFrameFormat => definition(format)?.streamedFrames === true;
/** An HEIF file libvips reads (AVIF): its primary item, or an image sequence read by ffmpeg. */
export const readsHeifSequences = (format: string): boolean => definition(format)?.heifSequences === true;
export const hasOutsideReferences = (format: string): boolean => definition(format)?.outsideReferences === true;
/** The format's header as its first bytes give it (FormatDefinition.headerInHead), where they can. */
export const headerInHead = (format: string, head: Buffer): HeadHeader | undefined => definition(format)?.headerInHead?.(head);
export const readsHeaderInHead = (format: string): boolean => definition(format)?.headerInHead !== undefined;

/** Whether a quality search for `format` may probe crops of the image (Writer.localCoding). */
export const hasLocalCoding = (format: OutputFormat): boolean => writerOf(format).localCoding === true;
/** How jobs write `format`. */
export const writerOf = (format: OutputFormat): Writer => FORMATS[format].write;
export const isRawDecoded = (format: string): format is RawDecodedFormat => {
  const libvips = definition(format)?.libvips;
  return libvips === 'header' || libvips === 'none';
};
/** Whether libvips can read the format's header (BMP's is read by the service's own decoder). */
export const libvipsReadsHeader = (format: string): boolean => definition(format)?.libvips !== 'none';
/** Whether a file's frames are an animation (GIF, WebP, an AVIF image sequence); TIFF pages and HEIF items are not. */
export const isAnimation = (format: string): boolean => definition(format)?.animation === true;
/** Whether the format's EXIF is its own IFDs (TIFF) rather than a block libvips reports. */
export const hasExifInIfds = (format: string): boolean => definition(format)?.exifInIfds === true;
export const canHoldAlpha = (format: string): boolean => definition(format)?.alpha === true;
export const canBeLossless = (format: OutputFormat): boolean => FORMATS[format].write.lossless;
export const mimeOf = <F extends Format>(format: F): Table[F]['mime'] => FORMATS[format].mime;
export const extensionOf = (format: string): string => definition(format)?.extension ?? format;

/**
 * The contract's default: keep the input's format where we can write it, else PNG when the
 * image has alpha and JPEG when it has none (HEIC, BMP and SVG inputs, for instance).
 */
export function defaultOutputFormat(inputFormat: string, hasAlpha: boolean): OutputFormat {
  if (isOutputFormat(inputFormat)) return inputFormat;
  return hasAlpha ? 'png' : 'jpeg';
}

export function outputFilename(inputName: string, format: string, suffix = ''): string {
  const base = inputName.replace(/\.[A-Za-z0-9]{1,5}$/, '') || 'output';
  return `${base}${suffix}.${extensionOf(format)}`;
}

/** docs/formats.md's table of formats (`npm run docs:formats` writes it; a test keeps it so). */
export function formatTable(): string {
  const yes = (value: boolean | undefined) => (value ? 'yes' : '—');
  const rows = definitions.map(([format, d]) => {
    const input =
      d.input === 'image' ? 'every image kind' : d.input === 'presentation' ? 'presentation-to-images' : d.input === 'pdf' ? 'pdf-to-images' : '—';
    const mimes = [d.mime, ...(d.otherMimes ?? [])].map((mime) => `\`${mime}\``).join(', ');
    // Raw-decoded images: decoding them blocks the event loop, so previews (made in the API process) refuse them.
    const notes = [
      isRawDecoded(format) ? "decoded by this service's own decoder, on a thread of its own" : '',
      d.notes ?? '',
      d.aliases ? `\`format\` also takes ${d.aliases.map((alias) => `\`${alias}\``).join(', ')}` : '',
    ]
      .filter(Boolean)
      .join('; ');
    const cells = [
      d.title,
      `\`${format}\``,
      mimes,
      `\`.${d.extension}\``,
      input,
      d.write?.defaults ?? '—',
      d.write ? yes(d.write.lossless) : '—',
      yes(d.animation),
      yes(d.alpha),
      notes,
    ];
    return `| ${cells.join(' | ')} |`;
  });
  return [
    '| format | `format` | media type | extension | input of | output: encoder defaults | lossless | animation | alpha | notes |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}
