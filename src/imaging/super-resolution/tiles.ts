// How an image is cut into tiles for the super-resolution network, and how each tile's result
// goes back. Every tile is run with `overlap` pixels of its neighbours around it (fewer at the
// image's edges, where there is nothing), and only its core is kept: the network sees, at every
// kept pixel, the same neighbourhood as in one run over the whole image, so there are no seams.
// The network's receptive field is narrower than the overlap (test/imaging/esrgan.test.ts compares
// a tiled run with an untiled one). Memory is bounded by the tile size, whatever the image's.

export interface Tile {
  /** The core: the input pixels whose upscaled values this tile decides. */
  x: number;
  y: number;
  width: number;
  height: number;
  /** The region run through the network: the core and its overlap, within the image. */
  runX: number;
  runY: number;
  runWidth: number;
  runHeight: number;
}

/** One row of tiles: its output rows are produced together and written out as one band. */
export interface TileRow {
  y: number;
  height: number;
  tiles: Tile[];
}

export function planTiles(width: number, height: number, tileSize: number, overlap: number): TileRow[] {
  const rows: TileRow[] = [];
  for (let y = 0; y < height; y += tileSize) {
    const h = Math.min(tileSize, height - y);
    const tiles: Tile[] = [];
    for (let x = 0; x < width; x += tileSize) {
      const w = Math.min(tileSize, width - x);
      const runX = Math.max(0, x - overlap);
      const runY = Math.max(0, y - overlap);
      tiles.push({
        x,
        y,
        width: w,
        height: h,
        runX,
        runY,
        runWidth: Math.min(width, x + w + overlap) - runX,
        runHeight: Math.min(height, y + h + overlap) - runY,
      });
    }
    rows.push({ y, height: h, tiles });
  }
  return rows;
}

/**
 * The run region of `tile`, as float RGB (0–255) the network takes, cut from packed bytes of
 * `channels` per pixel (3, or 4 whose alpha is left out).
 */
export function tileInput(pixels: Uint8Array, imageWidth: number, channels: number, tile: Tile): Float32Array {
  const out = new Float32Array(tile.runWidth * tile.runHeight * 3);
  for (let row = 0; row < tile.runHeight; row++) {
    let from = ((tile.runY + row) * imageWidth + tile.runX) * channels;
    let to = row * tile.runWidth * 3;
    for (let x = 0; x < tile.runWidth; x++, from += channels, to += 3) {
      out[to] = pixels[from]!;
      out[to + 1] = pixels[from + 1]!;
      out[to + 2] = pixels[from + 2]!;
    }
  }
  return out;
}

/**
 * Copies the core of a tile's network output (float RGB of the run region, `scale` times larger)
 * into `band`: packed RGB bytes, `bandWidth` pixels wide, whose first row is the tile row's first
 * output row.
 */
export function placeTile(output: Float32Array | Int32Array | Uint8Array, tile: Tile, scale: number, band: Uint8Array, bandWidth: number): void {
  const runWidth = tile.runWidth * scale;
  const offsetX = (tile.x - tile.runX) * scale;
  const offsetY = (tile.y - tile.runY) * scale;
  const coreWidth = tile.width * scale;
  for (let row = 0; row < tile.height * scale; row++) {
    const from = ((offsetY + row) * runWidth + offsetX) * 3;
    const to = (row * bandWidth + tile.x * scale) * 3;
    for (let i = 0; i < coreWidth * 3; i++) {
      const v = Math.round(output[from + i]!);
      band[to + i] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
  }
}
