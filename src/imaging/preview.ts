// Inline previews: the first frame, upright, fitted inside a box, never enlarged.
import sharp from 'sharp';
import { AppError } from '../errors.js';

export interface Preview {
  data: Buffer;
  mimeType: 'image/png' | 'image/jpeg';
}

export async function decodeForPreview(
  input: string | Buffer,
  format: string,
  maxPixels: number,
  box: { width?: number; height?: number },
): Promise<Preview> {
  try {
    const image = sharp(input, { limitInputPixels: maxPixels, failOn: 'none' }).autoOrient();
    const meta = await image.metadata();
    const resized = image.resize({ width: box.width, height: box.height, fit: 'inside', withoutEnlargement: true }).toColourspace('srgb');
    if (meta.hasAlpha) return { data: await resized.png({ compressionLevel: 6 }).toBuffer(), mimeType: 'image/png' };
    return { data: await resized.jpeg({ quality: 82, mozjpeg: true }).toBuffer(), mimeType: 'image/jpeg' };
  } catch (err) {
    const message = String((err as Error).message);
    if (/pixel limit/i.test(message)) throw new AppError('PREVIEW_UNAVAILABLE', 'The image is larger than the plan\'s pixel limit');
    throw new AppError('PREVIEW_UNAVAILABLE', `This ${format} file cannot be previewed: it could not be decoded`);
  }
}
