// ffmpeg for AVIF image sequences (bytes/avif-sequence.ts reads their headers): libdav1d decodes their
// frames to raw RGBA, libaom-av1 writes an animation as one. Run as LibreOffice and poppler are
// (beside them in src/programs/): no shell, in the converter sandbox seeing only its input (read-only) and its
// own work directory, its whole process group killed at the timeout or on cancel, its output
// bounded — the decoded frames by `-fs` and a byte count checked against the header, which the
// plan's limits were checked against before ffmpeg starts.
//
// Colour: the scaler converts with the matrix and range the AV1 stream signals (nclx), to full
// range RGB; primaries and transfer are taken as sRGB's (AVIF writers signal BT.709/sRGB for
// SDR images). Written sequences are BT.601 4:2:0 signalled as sRGB (nclx 1/13/6, limited range),
// RGB (identity matrix) when lossless; alpha as an auxiliary track of full range.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { findExecutable, lastLines, ProgramMissing, type RunResult } from './processes.js';
import { SandboxUnavailable, type Access, type Sandbox } from './sandbox.js';
import { TaskError } from '../errors.js';
import { ownedTempPrefix } from '../temp-files.js';
import { pngChunk } from '../bytes/png-chunk.js';
import { bufferReader, readSequenceHeader, retimeSequence, SequenceError, type SequenceHeader } from '../bytes/avif-sequence.js';

export interface FfmpegOptions {
  /** A name on PATH or a path. */
  command: string;
  /** The longest one run may take (the task's deadline may cut it shorter). */
  timeoutMs: number;
  sandbox: Sandbox;
}

export interface FfmpegRun {
  signal?: AbortSignal;
  deadline?: number;
}

/** Frames stacked one below the other, 4 channels (RGBA) of 8 bits. */
export interface RgbaFrames {
  data: Buffer;
  width: number;
  /** One frame's height. */
  height: number;
  frames: number;
}

export interface SequenceSettings {
  /** 1–100 as for still AVIF (libheif's mapping to the AV1 quantiser); undefined: 50. */
  quality?: number;
  lossless?: boolean;
  favourSize?: boolean;
  /** Each frame's display time, in ms (absent: 100 ms each). */
  delay?: number[];
  /** Plays in all, as libvips says it: 0 (or absent) for ever. */
  loop?: number;
  /** Whether the frames' alpha is written (an auxiliary track). */
  alpha: boolean;
}

/** ffmpeg is not installed: animated AVIF can be neither read nor written here. */
export class FfmpegMissing extends TaskError {
  constructor(readonly program: string) {
    super(
      'CONVERSION_FAILED',
      `${program} (ffmpeg) is not installed on this server, so animated AVIF (AV1 image sequences) cannot be read or written`,
    );
  }
}

const DEFAULT_QUALITY = 50;
/** A frame's display time when none is given. */
const DEFAULT_DELAY_MS = 100;

/** Each frame's delay in whole ms, at least 1 (a sample of no duration is no frame to a player). */
const delays = (frames: number, delay: number[] | undefined): number[] =>
  Array.from({ length: frames }, (_, i) => Math.max(1, Math.round(delay?.[i] ?? DEFAULT_DELAY_MS)));

export class Ffmpeg {
  constructor(private readonly options: FfmpegOptions) {}

  get command(): string {
    return this.options.command;
  }

  available(): boolean {
    return findExecutable(this.options.command) !== undefined;
  }

  /**
   * The first `frames` frames of the sequence at `input` (its header already read and checked
   * against the limits) as RGBA. INVALID_IMAGE when ffmpeg cannot decode them all.
   */
  async decode(input: string, header: SequenceHeader, frames: number, run: FfmpegRun): Promise<RgbaFrames> {
    const frameBytes = header.width * header.height * 4;
    const expected = frameBytes * frames;
    return this.withWorkDir(async (dir) => {
      const out = path.join(dir, 'frames.rgba');
      const colour = `[0:${header.colourStream}]scale=in_color_matrix=auto:in_range=auto:out_range=full,format=rgba`;
      const graph =
        header.alphaStream === undefined
          ? `${colour}[out]`
          : `${colour}[c];[0:${header.alphaStream}]scale=in_range=auto:out_range=full,format=gray[a];[c][a]alphamerge[out]`;
      const result = await this.run(
        [
          // No frame may be larger than the header said (a stream that lies about its size).
          '-max_pixels',
          String(header.width * header.height),
          // The movie demuxer only, whatever the bytes look like to ffmpeg's probe (never a
          // playlist or another demuxer that opens further files), and paths as files only.
          '-f',
          'mov',
          '-i',
          `file:${input}`,
          '-filter_complex',
          graph,
          '-map',
          '[out]',
          '-frames:v',
          String(frames),
          '-fps_mode',
          'passthrough',
          '-f',
          'rawvideo',
          '-pix_fmt',
          'rgba',
          '-fs',
          String(expected),
          `file:${out}`,
        ],
        { readOnly: [input], writable: [dir] },
        run,
      );
      const size = (await fs.promises.stat(out).catch(() => undefined))?.size ?? 0;
      if (result.code !== 0 || size !== expected) {
        const decoded = Math.floor(size / frameBytes);
        const why = lastLines(result.stderr) || (size === expected ? `ffmpeg exit code ${result.code}` : `${decoded} of ${frames} frames decoded`);
        throw new TaskError('INVALID_IMAGE', `The AVIF image sequence could not be decoded: ${why}`);
      }
      return { data: await fs.promises.readFile(out), width: header.width, height: header.height, frames };
    });
  }

  /**
   * `frames` as an AVIF image sequence (libaom-av1, not still-picture), its timing from
   * `settings.delay` and its loop count from `settings.loop` (retimeSequence), read back to
   * check that it holds every frame.
   */
  async encode(frames: RgbaFrames, settings: SequenceSettings, run: FfmpegRun): Promise<{ data: Buffer; header: SequenceHeader }> {
    return this.withWorkDir(async (dir) => {
      const apng = path.join(dir, 'frames.png');
      const out = path.join(dir, 'out.avif');
      await writeApng(apng, frames, delays(frames.frames, settings.delay));
      const lossless = settings.lossless === true;
      // libheif's mapping of quality to the AV1 quantiser, as sharp's still AVIF.
      const crf = lossless ? 0 : Math.round(((100 - (settings.quality ?? DEFAULT_QUALITY)) * 63) / 100);
      const pixels = lossless ? 'gbrp' : 'yuv420p';
      // Timestamps in ms, as the delays are (else the encoder takes 1 / the frame rate the APNG
      // reader guesses, which libaom refuses when it is more than a second).
      const graph = settings.alpha
        ? `[0:v]settb=1/1000,split[c][a];[c]format=${pixels}[colour];[a]alphaextract,format=gray[alpha]`
        : `[0:v]settb=1/1000,format=${pixels}[colour]`;
      const result = await this.run(
        [
          '-f',
          'apng',
          '-i',
          `file:${apng}`,
          '-filter_complex',
          graph,
          '-map',
          '[colour]',
          ...(settings.alpha ? ['-map', '[alpha]'] : []),
          '-fps_mode',
          'passthrough',
          '-enc_time_base',
          '1:1000',
          '-c:v',
          'libaom-av1',
          '-still-picture',
          '0',
          // libaom's real-time mode: 44 frames of 400×400 in 1.1 s where its default ("good",
          // speed 6) takes 4.8 s, for 9 % more bytes at the same quantiser; compress, which
          // favours size, takes speed 5 (1.7 s, the bytes of "good").
          '-usage',
          'realtime',
          '-cpu-used',
          settings.favourSize ? '5' : '6',
          '-row-mt',
          '1',
          '-crf',
          String(crf),
          '-b:v',
          '0',
          ...(lossless ? ['-aom-params', 'lossless=1'] : []),
          '-color_primaries:v:0',
          'bt709',
          '-color_trc:v:0',
          'iec61966-2-1',
          '-colorspace:v:0',
          lossless ? 'rgb' : 'smpte170m',
          '-color_range:v:0',
          lossless ? 'pc' : 'tv',
          ...(settings.alpha ? ['-color_range:v:1', 'pc'] : []),
          '-f',
          'avif',
          `file:${out}`,
        ],
        { readOnly: [apng], writable: [dir] },
        run,
      );
      if (result.code !== 0) {
        throw new TaskError(
          'CONVERSION_FAILED',
          `ffmpeg could not write the AVIF image sequence${lastLines(result.stderr) ? `: ${lastLines(result.stderr)}` : ''}`,
        );
      }
      let data: Buffer = await fs.promises.readFile(out);
      let header: SequenceHeader;
      try {
        data = retimeSequence(data, delays(frames.frames, settings.delay), settings.loop ?? 0);
        header = await readSequenceHeader(bufferReader(data));
      } catch (err) {
        if (!(err instanceof SequenceError)) throw err;
        throw new TaskError('CONVERSION_FAILED', `ffmpeg wrote an AVIF image sequence that cannot be read back: ${err.message}`);
      }
      if (header.frames !== frames.frames) {
        throw new TaskError('CONVERSION_FAILED', `ffmpeg wrote ${header.frames} frames of ${frames.frames} into the AVIF image sequence`);
      }
      return { data, header };
    });
  }

  private async withWorkDir<T>(work: (dir: string) => Promise<T>): Promise<T> {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), ownedTempPrefix('imgapi-task-')));
    try {
      return await work(dir);
    } finally {
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  }

  private async run(args: string[], access: Access, { signal, deadline }: FfmpegRun): Promise<RunResult> {
    const { command } = this.options;
    if (!this.available()) throw new FfmpegMissing(command);
    const timeoutMs = Math.max(1, Math.min(this.options.timeoutMs, deadline === undefined ? Infinity : deadline - Date.now()));
    const run = await this.options.sandbox
      .run(command, ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', ...args], access, { timeoutMs, signal })
      .catch((err) => {
        if (err instanceof ProgramMissing) throw new FfmpegMissing(command);
        if (err instanceof SandboxUnavailable) {
          throw new TaskError(
            'CONVERSION_FAILED',
            `Animated AVIF is not decoded or written on this server without the converter sandbox (CONVERTER_SANDBOX=required), which cannot be set up: ${err.reason}`,
          );
        }
        throw err;
      });
    if (run.aborted) throw signal?.reason instanceof Error ? signal.reason : new Error('canceled');
    if (run.timedOut) throw new TaskError('PROCESSING_TIMEOUT', `ffmpeg did not finish within ${Math.round(timeoutMs / 1000)} s and was stopped`);
    return run;
  }
}

/**
 * The frames as an animated PNG (what ffmpeg reads with each frame's own delay; raw video would
 * be one frame rate): every frame whole, no filter, deflated at zlib's fastest level.
 */
async function writeApng(file: string, { data, width, height, frames }: RgbaFrames, delay: number[]): Promise<void> {
  const handle = await fs.promises.open(file, 'w');
  try {
    const write = (type: string, body: Buffer) => handle.write(pngChunk(type, body));
    await handle.write(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(width, 0);
    ihdr.writeUInt32BE(height, 4);
    ihdr[8] = 8;
    ihdr[9] = 6; // RGBA
    await write('IHDR', ihdr);
    const actl = Buffer.alloc(8);
    actl.writeUInt32BE(frames, 0);
    await write('acTL', actl);
    const rowBytes = width * 4;
    let sequence = 0;
    for (let frame = 0; frame < frames; frame++) {
      const fctl = Buffer.alloc(26);
      fctl.writeUInt32BE(sequence++, 0);
      fctl.writeUInt32BE(width, 4);
      fctl.writeUInt32BE(height, 8);
      fctl.writeUInt16BE(Math.min(65_535, delay[frame]!), 20);
      fctl.writeUInt16BE(1000, 22);
      await write('fcTL', fctl);
      const rows = Buffer.alloc((rowBytes + 1) * height);
      const start = frame * rowBytes * height;
      for (let y = 0; y < height; y++) data.copy(rows, y * (rowBytes + 1) + 1, start + y * rowBytes, start + (y + 1) * rowBytes);
      // On the libuv pool: frames of a large animation would hold the event loop for seconds.
      const deflated = await deflate(rows, { level: 1 });
      if (frame === 0) {
        await write('IDAT', deflated);
      } else {
        const number = Buffer.alloc(4);
        number.writeUInt32BE(sequence++, 0);
        await write('fdAT', Buffer.concat([number, deflated]));
      }
    }
    await write('IEND', Buffer.alloc(0));
  } finally {
    await handle.close();
  }
}

const deflate = promisify(zlib.deflate);
