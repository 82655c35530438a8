// Pixel helpers for the kinds' tests: raw RGBA of an image, and how far two images are apart.
import assert from 'node:assert/strict';
import sharp from 'sharp';

export async function rgba(image: Buffer | string) {
  const { data, info } = await sharp(image).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

/** Mean absolute difference per channel, 0–255, of the upright images (resized to `size` first, when given). */
export async function meanDifference(a: Buffer | string, b: Buffer | string, size?: { width: number; height: number }): Promise<number> {
  const pixels = (img: Buffer | string) =>
    sharp(img)
      .autoOrient()
      .resize(size ? { ...size, fit: 'fill' } : undefined)
      .removeAlpha()
      .raw()
      .toBuffer();
  const [x, y] = await Promise.all([pixels(a), pixels(b)]);
  assert.equal(x.length, y.length);
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += Math.abs(x[i]! - y[i]!);
  return sum / x.length;
}

/** The bounding box of the pixels whose RGB differs by more than `threshold` (summed), or undefined. */
export function changedBox(before: { data: Buffer; width: number; height: number }, after: { data: Buffer }, threshold = 6) {
  let minX = Infinity,
    minY = Infinity,
    maxX = -1,
    maxY = -1;
  for (let y = 0; y < before.height; y++) {
    for (let x = 0; x < before.width; x++) {
      const i = (y * before.width + x) * 4;
      const d =
        Math.abs(before.data[i]! - after.data[i]!) +
        Math.abs(before.data[i + 1]! - after.data[i + 1]!) +
        Math.abs(before.data[i + 2]! - after.data[i + 2]!);
      if (d > threshold) {
        minX = Math.min(minX, x);
        maxX = Math.max(maxX, x);
        minY = Math.min(minY, y);
        maxY = Math.max(maxY, y);
      }
    }
  }
  return maxX < 0 ? undefined : { minX, minY, maxX, maxY };
}

/** How many pixels are exactly the colour `rgb`. */
export function countColour(image: { data: Buffer }, [r, g, b]: [number, number, number]): number {
  let n = 0;
  for (let i = 0; i < image.data.length; i += 4) if (image.data[i] === r && image.data[i + 1] === g && image.data[i + 2] === b) n++;
  return n;
}
