// Output files are named after what made them: `photo.jpg` resized to 800 px wide as WebP is
// `photo.resize-800.webp`, rotated by 90° `photo.rotate-90.jpg`, through a pipeline
// `photo.resize-800.watermark.webp`. The operation writes `<input name>.<output extension>`; the
// worker adds the tag before the extension when it stores the output. Kinds whose output is
// already a different thing keep the operation's name: convert (the extension says it),
// image-to-pdf and presentation-to-images (their own names).

type Options = Record<string, unknown>;

const num = (value: unknown): string | undefined =>
  typeof value === 'number' && Number.isFinite(value) ? String(Math.round(value * 100) / 100) : undefined;

/** `800x600`, `800` (width only), `x600` (height only), or undefined. */
function size(options: Options): string | undefined {
  const width = num(options.width);
  const height = num(options.height);
  if (width && height) return `${width}x${height}`;
  if (width) return width;
  if (height) return `x${height}`;
  return undefined;
}

const joined = (kind: string, detail: string | undefined) => (detail ? `${kind}-${detail}` : kind);

/** The tag of one step of `kind` with `options`, or undefined for kinds that keep their name. */
function operationTag(kind: string, options: Options): string | undefined {
  switch (kind) {
    case 'resize':
      return joined('resize', size(options));
    case 'crop':
      return joined('crop', num(options.width) && num(options.height) ? `${num(options.width)}x${num(options.height)}` : undefined);
    case 'rotate': {
      const angle = num(options.angle);
      return joined('rotate', angle === undefined ? undefined : angle.startsWith('-') ? `ccw${angle.slice(1)}` : angle);
    }
    case 'flip':
      return joined('flip', typeof options.direction === 'string' ? options.direction : undefined);
    case 'watermark':
      return 'watermark';
    case 'upscale': {
      const factor = num(options.factor);
      const detail = factor ? `${factor}x` : size(options);
      return joined('upscale', options.model === 'esrgan' && detail ? `${detail}-esrgan` : detail);
    }
    case 'compress':
      return joined('compress', num(options.quality) ? `q${num(options.quality)}` : undefined);
    case 'pipeline': {
      const steps = Array.isArray(options.steps) ? (options.steps as Options[]) : [];
      const tags = steps.map((step) => operationTag(String(step.kind), step)).filter((tag): tag is string => !!tag);
      if (tags.length === 0) return 'pipeline';
      return tags.length > 4 ? [...tags.slice(0, 3), `and-${tags.length - 3}-more`].join('.') : tags.join('.');
    }
    default:
      return undefined;
  }
}

/** `filename` with the task's operation tag before its extension: `photo.webp` → `photo.resize-800.webp`. */
export function namedAfterOperation(filename: string, kind: string, options: Options): string {
  const tag = operationTag(kind, options);
  if (!tag) return filename;
  const dot = filename.lastIndexOf('.');
  return dot > 0 ? `${filename.slice(0, dot)}.${tag}${filename.slice(dot)}` : `${filename}.${tag}`;
}
