// Which formats we read and write, their MIME types, and the default output format.

export const OUTPUT_FORMATS = ['jpeg', 'png', 'webp', 'avif', 'gif', 'tiff'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export const OUTPUT_MIME: Record<OutputFormat, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
  avif: 'image/avif',
  gif: 'image/gif',
  tiff: 'image/tiff',
};

export const FILE_EXTENSIONS: Record<string, string> = {
  jpeg: 'jpg',
  png: 'png',
  webp: 'webp',
  avif: 'avif',
  gif: 'gif',
  tiff: 'tiff',
  heic: 'heic',
  bmp: 'bmp',
  svg: 'svg',
  pdf: 'pdf',
  zip: 'zip',
  pptx: 'pptx',
  ppsx: 'ppsx',
  ppt: 'ppt',
  odp: 'odp',
};

/** Formats that can hold more than one frame and that we write as animations. */
export const ANIMATED_OUTPUTS: ReadonlySet<OutputFormat> = new Set(['gif', 'webp']);
/** Formats that can carry an alpha channel. */
export const ALPHA_OUTPUTS: ReadonlySet<OutputFormat> = new Set(['png', 'webp', 'avif', 'gif', 'tiff']);
/** Lossy-only formats: `lossless` cannot be honoured. */
export const LOSSLESS_CAPABLE: ReadonlySet<OutputFormat> = new Set(['png', 'webp', 'avif', 'gif', 'tiff']);

export const isOutputFormat = (value: string): value is OutputFormat => (OUTPUT_FORMATS as readonly string[]).includes(value);

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
  return `${base}${suffix}.${FILE_EXTENSIONS[format] ?? format}`;
}
