// Counts the frames of a GIF or an animated WebP as its bytes stream past, without decoding a
// pixel and holding at most one small block in memory. An upload's header probe reads only the
// first bytes, where a large animation's later frames are not yet in sight; this count covers
// the whole file, so the frame limits (maxFrames, maxTotalPixels) hold at queue time too.
//
// GIF: blocks after the screen descriptor and its colour table — an image descriptor (0x2C) is
// a frame; extensions (0x21) and image data are chains of sub-blocks; 0x3B ends the file.
// WebP: RIFF chunks — VP8X gives the canvas, each ANMF chunk is a frame; a file with no ANMF is
// one frame.
// Which formats are counted is the format table's (`streamedFrames`); each has its counter here.
import { hasStreamedFrames, type StreamedFrameFormat } from './formats.js';
import { sniff } from './sniff.js';

export interface FrameCount {
  frames: number;
  /** The canvas a WebP's VP8X chunk declares (GIF's logical screen is not what decoders use). */
  canvas?: { width: number; height: number };
}

type Need = { bytes: number; then: (data: Buffer) => void } | { skip: number; then: () => void };

export class FrameCounter {
  private kind: StreamedFrameFormat | 'other' | undefined;
  private pending: Buffer = Buffer.alloc(0);
  private need: Need | undefined;
  private frames = 0;
  private canvas: FrameCount['canvas'];
  private finished = false;
  private broken = false;

  /** Feeds the next bytes of the file. */
  push(chunk: Buffer): void {
    if (this.kind === 'other' || this.finished || this.broken) return;
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    if (!this.kind) {
      if (this.pending.length < 12) return;
      this.start();
      if (this.kind === 'other') {
        this.pending = Buffer.alloc(0);
        return;
      }
    }
    this.run();
  }

  /**
   * The count once the whole file was fed: undefined for other formats, or for a file cut short
   * or malformed (its decoder will say what is wrong with it).
   */
  result(): FrameCount | undefined {
    if (this.kind === 'webp' && !this.broken && this.need && 'bytes' in this.need && this.pending.length === 0) {
      // A RIFF file ends between chunks.
      return { frames: Math.max(1, this.frames), ...(this.canvas ? { canvas: this.canvas } : {}) };
    }
    if (this.kind === 'gif' && this.finished && !this.broken) return { frames: this.frames };
    return undefined;
  }

  /** Where each counted format's walk begins: a row that says `streamedFrames` needs one (the compiler asks). */
  private readonly starts: Record<StreamedFrameFormat, () => void> = {
    gif: () => (this.need = { bytes: 13, then: (screen) => this.gifScreen(screen) }),
    webp: () => (this.need = { skip: 12, then: () => this.webpChunk() }),
  };

  private start(): void {
    this.kind = countedKind(this.pending) ?? 'other';
    if (this.kind !== 'other') this.starts[this.kind]();
  }

  private run(): void {
    while (this.need && !this.finished && !this.broken) {
      const need = this.need;
      if ('skip' in need) {
        const skipped = Math.min(need.skip, this.pending.length);
        this.pending = this.pending.subarray(skipped);
        need.skip -= skipped;
        if (need.skip > 0) return;
        need.then();
      } else {
        if (this.pending.length < need.bytes) return;
        const data = this.pending.subarray(0, need.bytes);
        this.pending = this.pending.subarray(need.bytes);
        need.then(data);
      }
    }
  }

  // GIF -----------------------------------------------------------------------------------------

  private gifScreen(screen: Buffer): void {
    const packed = screen[10] ?? 0;
    const table = packed & 0x80 ? 3 * 2 ** ((packed & 7) + 1) : 0;
    this.need = { skip: table, then: () => this.gifBlock() };
  }

  private gifBlock(): void {
    this.need = {
      bytes: 1,
      then: ([introducer]) => {
        if (introducer === 0x3b) this.finished = true;
        else if (introducer === 0x21) this.need = { bytes: 1, then: () => this.gifSubBlocks(() => this.gifBlock()) };
        else if (introducer === 0x2c) this.need = { bytes: 9, then: (descriptor) => this.gifImage(descriptor) };
        else this.broken = true;
      },
    };
  }

  private gifImage(descriptor: Buffer): void {
    this.frames++;
    const packed = descriptor[8] ?? 0;
    const table = packed & 0x80 ? 3 * 2 ** ((packed & 7) + 1) : 0;
    // The local colour table, then the LZW minimum code size, then the data's sub-blocks.
    this.need = { skip: table + 1, then: () => this.gifSubBlocks(() => this.gifBlock()) };
  }

  private gifSubBlocks(done: () => void): void {
    this.need = {
      bytes: 1,
      then: ([size]) => {
        if (!size) done();
        else this.need = { skip: size!, then: () => this.gifSubBlocks(done) };
      },
    };
  }

  // WebP ----------------------------------------------------------------------------------------

  private webpChunk(): void {
    this.need = {
      bytes: 8,
      then: (header) => {
        const fourcc = header.toString('latin1', 0, 4);
        const size = header.readUInt32LE(4);
        const padded = size + (size & 1);
        if (fourcc === 'ANMF') this.frames++;
        if (fourcc === 'VP8X' && size >= 10) {
          this.need = {
            bytes: 10,
            then: (vp8x) => {
              this.canvas = { width: vp8x.readUIntLE(4, 3) + 1, height: vp8x.readUIntLE(7, 3) + 1 };
              this.need = { skip: padded - 10, then: () => this.webpChunk() };
            },
          };
        } else {
          this.need = { skip: padded, then: () => this.webpChunk() };
        }
      },
    };
  }
}

/** Which counted format a file's first bytes (12 suffice) begin, if any: by the table's signatures. */
export function countedKind(head: Buffer): StreamedFrameFormat | undefined {
  const sniffed = sniff(head);
  return sniffed && !('refused' in sniffed) && hasStreamedFrames(sniffed.format) ? sniffed.format : undefined;
}

/** Counts the frames of a whole stream of bytes (an object already stored). */
export async function countFrames(body: AsyncIterable<Buffer>): Promise<FrameCount | undefined> {
  const counter = new FrameCounter();
  for await (const chunk of body) counter.push(chunk);
  return counter.result();
}
