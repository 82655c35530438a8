// Every fact about the formats this service stores, in one table: the media type and extension,
// whether an upload may be one, how its pixels are read, whether it holds an animation or alpha,
// and, for the formats jobs write, the encoder and its defaults. Sniffing (sniff.ts), uploads,
// the job kinds' inputs, the OpenAPI enums of `format`, the raw decoders, the encoders and the
// README's table of formats (`npm run docs:formats`) all read it; nothing repeats it.
// A new format is a row here, and what else it needs is asked for: a raw decoder in decoders/
// by the compiler, a sniffer in sniff.ts and a corpus sample by test/imaging/formats.test.ts.
import type { Sharp } from 'sharp';

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
}

/** How jobs write a format (its saver). */
interface Writer {
  /** Whether `lossless` can be honoured. */
  lossless: boolean;
  /** What the encoder does by default, as the README's table says it. */
  defaults: string;
  encode(image: Sharp, settings: EncodeSettings): Sharp;
}

interface FormatDefinition {
  /** As people write it, for the docs. */
  title: string;
  /** The media type files of this format are served as. */
  mime: string;
  /** Other media types a file of this format may carry (what sniffing could tell of it). */
  otherMimes?: readonly string[];
  extension: string;
  /** What reads it: the image kinds, presentation-to-images, pdf-to-images, or nothing (an output only). */
  input: 'image' | 'presentation' | 'pdf' | null;
  /**
   * What sharp's prebuilt libvips does with an image: decodes it; reads only its header (HEIC:
   * libheif is built without an HEVC decoder); or nothing (BMP: no loader). Where it does not
   * decode, this service decodes the pixels itself (decoders/) and hands sharp raw pixels.
   */
  libvips?: 'decode' | 'header' | 'none';
  /** Its frames are an animation, read as one and written as one. */
  animation?: boolean;
  /** It can carry an alpha channel. */
  alpha?: boolean;
  /** What the README says beyond the other columns. */
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
    input: 'image',
    libvips: 'decode',
    notes: "lossless JPEG (process 14, SOF3) is decoded by this service's own decoder (jpeg-lossless-decoder-js)",
    write: {
      lossless: false,
      defaults: `quality ${JPEG_QUALITY}; mozjpeg for compress`,
      encode: (image, { quality, favourSize }) =>
        image.jpeg({ quality: quality ?? JPEG_QUALITY, ...(favourSize ? { mozjpeg: true } : { optimiseCoding: true }) }),
    },
  },
  png: {
    title: 'PNG',
    mime: 'image/png',
    extension: 'png',
    input: 'image',
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
    libvips: 'decode',
    animation: true,
    alpha: true,
    write: {
      lossless: true,
      defaults: `quality ${WEBP_QUALITY}`,
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
    libvips: 'decode',
    animation: true,
    alpha: true,
    notes:
      "a still AVIF is its primary item: a grid assembled, clap/irot/imir applied, alpha and ICC/nclx colour read (libheif); an image sequence (animated AVIF, brand `avis`) is decoded by ffmpeg (libdav1d): every frame with its timing, the edit list's loop count and the alpha track, colour by the stream's matrix and range; animations are written as sequences by ffmpeg (libaom-av1; every frame, its delay, the loop count, alpha as an auxiliary track; about 1 s for 150 frames of 120×120); without ffmpeg, sequences fail with `CONVERSION_FAILED` and an animation to AVIF is its first frame",
    write: {
      lossless: true,
      defaults: `quality ${AVIF_QUALITY}`,
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
    libvips: 'decode',
    animation: true,
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
    input: 'image',
    libvips: 'decode',
    alpha: true,
    notes: 'the first page is read',
    write: {
      lossless: true,
      defaults: 'deflate; with `quality`, JPEG-compressed',
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
    libvips: 'none',
    alpha: true,
  },
  svg: {
    title: 'SVG',
    mime: 'image/svg+xml',
    extension: 'svg',
    input: 'image',
    libvips: 'decode',
    alpha: true,
    notes: 'rewritten without outside references before librsvg draws it',
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
const isOutputFormat = (value: string): value is OutputFormat => definition(value)?.write !== undefined;
export const isRawDecoded = (format: string): format is RawDecodedFormat => {
  const libvips = definition(format)?.libvips;
  return libvips === 'header' || libvips === 'none';
};
/** Whether libvips can read the format's header (BMP's is read by the service's own decoder). */
export const libvipsReadsHeader = (format: string): boolean => definition(format)?.libvips !== 'none';
/** Whether a file's frames are an animation (GIF, WebP, an AVIF image sequence); TIFF pages and HEIF items are not. */
export const isAnimation = (format: string): boolean => definition(format)?.animation === true;
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

/** The README's table of formats (`npm run docs:formats` writes it; a test keeps it so). */
export function formatTable(): string {
  const yes = (value: boolean | undefined) => (value ? 'yes' : '—');
  const rows = definitions.map(([format, d]) => {
    const input =
      d.input === 'image' ? 'every image kind' : d.input === 'presentation' ? 'presentation-to-images' : d.input === 'pdf' ? 'pdf-to-images' : '—';
    const mimes = [d.mime, ...(d.otherMimes ?? [])].map((mime) => `\`${mime}\``).join(', ');
    // Raw-decoded images: decoding them blocks the event loop, so previews (made in the API process) refuse them.
    const notes = [isRawDecoded(format) ? "decoded by this service's own decoder, on a thread of its own" : '', d.notes ?? '']
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
