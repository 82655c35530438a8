// AVIF image sequences (animated AVIF, major brand `avis`): an ISO-BMFF movie whose track holds
// AV1 frames, read here only as far as the header goes — the colour track's size, its frames and
// their timing (stts in the media's timescale), the loop count (the edit list), and the alpha
// auxiliary track (a track whose `auxl` reference names the colour track) — without decoding a
// pixel, so the plan's limits are checked first. The frames themselves are decoded and written by
// ffmpeg (ffmpeg.ts): libvips 8.17 reads HEIF items only, and libheif's WebAssembly build has no
// AV1 decoder.
//
// As libavif reads a sequence: the colour track is the first AV1 track that is no auxiliary of
// another; an edit list flagged "repeat" loops forever when the track's duration is indefinite,
// else as often as the duration holds the edit; an edit list without the flag plays once; a
// track without an edit list has an unknown repetition, which players (and libavif's callers)
// loop forever.
import type { ByteReader } from './cfb.js';

export interface SequenceHeader {
  width: number;
  height: number;
  frames: number;
  /** Each frame's display time, in ms. */
  delay: number[];
  /** Plays in all, as libvips says it: 0 for ever. */
  loop: number;
  /** ffmpeg's stream index (the track's place in the movie) of the colour track, and of the alpha track when there is one. */
  colourStream: number;
  alphaStream?: number;
}

/** The file is not a readable image sequence (its message says why). */
export class SequenceError extends Error {
  override name = 'SequenceError';
}

/** The largest movie header (moov) read: 10 000 frames need well under 1 MiB. */
const MAX_MOOV_BYTES = 16 * 1024 * 1024;
/** Top-level boxes walked before giving up (a real file has a handful). */
const MAX_TOP_LEVEL_BOXES = 1024;
/**
 * Frames a sequence may declare: 100× the largest plan's maxFrames. Its timing is expanded to a
 * delay per frame before the plan's limits are checked, and a header of a few bytes can declare
 * billions of one-byte frames.
 */
const MAX_SEQUENCE_FRAMES = 100_000;
const ALPHA_URNS = new Set(['urn:mpeg:mpegB:cicp:systems:auxiliary:alpha', 'urn:mpeg:hevc:2015:auxid:1']);
const MAX_LOOP = 65_535;

/** Whether the file's first 12 bytes say it is an AVIF image sequence (major brand `avis`), as libavif decides. */
export const isSequenceHead = (head: Buffer): boolean => head.length >= 12 && head.toString('latin1', 4, 12) === 'ftypavis';

interface Box {
  type: string;
  /** Where the box begins (its header). */
  at?: number;
  /** Where the box's content starts and ends, in the buffer (or the file, for top-level boxes). */
  start: number;
  end: number;
}

/** The boxes in `buf[start, end)`; a box that runs past `end` is a malformed file. */
function* boxes(buf: Buffer, start: number, end: number): Generator<Box> {
  let at = start;
  while (at + 8 <= end) {
    let size = buf.readUInt32BE(at);
    const type = buf.toString('latin1', at + 4, at + 8);
    let header = 8;
    if (size === 1) {
      if (at + 16 > end) throw new SequenceError(`the ${type} box is cut short`);
      size = Number(buf.readBigUInt64BE(at + 8));
      header = 16;
    } else if (size === 0) {
      size = end - at;
    }
    if (size < header || at + size > end) throw new SequenceError(`the ${type} box runs past its container`);
    yield { type, at, start: at + header, end: at + size };
    at += size;
  }
}

const child = (buf: Buffer, parent: Box, type: string): Box | undefined => {
  for (const box of boxes(buf, parent.start, parent.end)) if (box.type === type) return box;
  return undefined;
};

function need(box: Box | undefined, what: string): Box {
  if (!box) throw new SequenceError(`the track has no ${what} box`);
  return box;
}

/** A full box's version and flags, and a reader past them that checks every read against the box's end. */
function fullBox(buf: Buffer, box: Box) {
  if (box.end - box.start < 4) throw new SequenceError(`the ${box.type} box is cut short`);
  let at = box.start + 4;
  const take = (bytes: number) => {
    if (at + bytes > box.end) throw new SequenceError(`the ${box.type} box is cut short`);
    const from = at;
    at += bytes;
    return from;
  };
  return {
    version: buf[box.start]!,
    flags: buf.readUIntBE(box.start + 1, 3),
    u32: () => buf.readUInt32BE(take(4)),
    u64: () => Number(buf.readBigUInt64BE(take(8))),
    skip: (bytes: number) => void take(bytes),
  };
}

interface Track {
  index: number;
  id: number;
  /** In the movie's timescale; undefined when indefinite (all ones). */
  duration: number | undefined;
  auxFor: number[];
  codec: string;
  auxType?: string;
  width: number;
  height: number;
  timescale: number;
  /** Sample counts and durations, from stts. */
  timing: { count: number; delta: number }[];
  samples: number;
  sampleBytes: number;
  chunkOffsets: number[];
  edit?: { repeat: boolean; segmentDuration: number };
}

function readTrack(buf: Buffer, trak: Box, index: number): Track {
  const tkhd = fullBox(buf, need(child(buf, trak, 'tkhd'), 'tkhd'));
  const long = tkhd.version === 1;
  tkhd.skip(long ? 16 : 8);
  const id = tkhd.u32();
  tkhd.skip(4);
  const duration = long ? tkhd.u64() : tkhd.u32();
  const indefinite = long ? duration >= 2 ** 64 - 1 : duration === 0xffffffff;

  const auxl = child(buf, trak, 'tref') && child(buf, child(buf, trak, 'tref')!, 'auxl');
  const auxFor: number[] = [];
  if (auxl) for (let at = auxl.start; at + 4 <= auxl.end; at += 4) auxFor.push(buf.readUInt32BE(at));

  const mdia = need(child(buf, trak, 'mdia'), 'mdia');
  const mdhd = fullBox(buf, need(child(buf, mdia, 'mdhd'), 'mdhd'));
  mdhd.skip(mdhd.version === 1 ? 16 : 8);
  const timescale = mdhd.u32();
  const stbl = need(child(buf, need(child(buf, mdia, 'minf'), 'minf'), 'stbl'), 'stbl');

  const stsd = need(child(buf, stbl, 'stsd'), 'stsd');
  const entry = boxes(buf, stsd.start + 8, stsd.end).next().value as Box | undefined;
  if (!entry || entry.end - entry.start < 28) throw new SequenceError('the track has no sample description');
  let auxType: string | undefined;
  // A visual sample entry's fixed part is 78 bytes; its own boxes (av1C, auxi, colr…) follow.
  if (entry.end - entry.start > 78) {
    const auxi = child(buf, { type: entry.type, start: entry.start + 78, end: entry.end }, 'auxi');
    if (auxi && auxi.end > auxi.start + 4) auxType = buf.toString('latin1', auxi.start + 4, auxi.end).replace(/\0.*$/s, '');
  }

  const stts = fullBox(buf, need(child(buf, stbl, 'stts'), 'stts'));
  const timing = Array.from({ length: stts.u32() }, () => ({ count: stts.u32(), delta: stts.u32() }));
  const stsz = fullBox(buf, need(child(buf, stbl, 'stsz'), 'stsz'));
  const sampleSize = stsz.u32();
  const samples = stsz.u32();
  let sampleBytes = sampleSize * samples;
  if (sampleSize === 0) for (let i = 0; i < samples; i++) sampleBytes += stsz.u32();
  const stco = child(buf, stbl, 'stco') ?? child(buf, stbl, 'co64');
  const chunkOffsets: number[] = [];
  if (stco) {
    const offsets = fullBox(buf, stco);
    const count = offsets.u32();
    for (let i = 0; i < count; i++) chunkOffsets.push(stco.type === 'co64' ? offsets.u64() : offsets.u32());
  }

  let edit: Track['edit'];
  const elst = child(buf, trak, 'edts') && child(buf, child(buf, trak, 'edts')!, 'elst');
  if (elst) {
    const list = fullBox(buf, elst);
    const count = list.u32();
    const segmentDuration = count ? (list.version === 1 ? list.u64() : list.u32()) : 0;
    edit = { repeat: (list.flags & 1) === 1, segmentDuration };
  }

  return {
    index,
    id,
    duration: indefinite ? undefined : duration,
    auxFor,
    codec: entry.type,
    auxType,
    width: buf.readUInt16BE(entry.start + 24),
    height: buf.readUInt16BE(entry.start + 26),
    timescale,
    timing,
    samples,
    sampleBytes,
    chunkOffsets,
    edit,
  };
}

/** Plays in all (0: for ever), from the colour track's edit list as libavif reads it. */
function loopOf(track: Track): number {
  if (!track.edit) return 0;
  if (!track.edit.repeat) return 1;
  if (track.duration === undefined || !track.edit.segmentDuration) return 0;
  return Math.min(MAX_LOOP, Math.max(1, Math.ceil(track.duration / track.edit.segmentDuration)));
}

/** The sequence's header from its movie box (`moov`); `fileSize` bounds where its samples may lie. */
function parseMovie(moov: Buffer, fileSize: number): SequenceHeader {
  const tracks = [...boxes(moov, 0, moov.length)].filter((box) => box.type === 'trak').map((trak, index) => readTrack(moov, trak, index));
  const colour = tracks.find((track) => track.codec === 'av01' && track.auxFor.length === 0);
  if (!colour) throw new SequenceError('the sequence has no AV1 colour track');
  const alpha = tracks.find(
    (track) => track.codec === 'av01' && track.auxFor.includes(colour.id) && (track.auxType === undefined || ALPHA_URNS.has(track.auxType)),
  );
  for (const track of alpha ? [colour, alpha] : [colour]) {
    const frames = track.timing.reduce((sum, t) => sum + t.count, 0);
    if (!track.width || !track.height) throw new SequenceError('the track has no size');
    if (!track.timescale) throw new SequenceError('the track has no timescale');
    if (!frames || frames !== track.samples) throw new SequenceError(`the track's timing lists ${frames} frames, its samples are ${track.samples}`);
    if (track.sampleBytes > fileSize || track.chunkOffsets.some((offset) => offset >= fileSize)) {
      throw new SequenceError('the file is cut short: its frames lie past its end');
    }
  }
  if (alpha && (alpha.width !== colour.width || alpha.height !== colour.height || alpha.samples !== colour.samples)) {
    throw new SequenceError('the alpha track does not match the colour track');
  }
  if (colour.samples > MAX_SEQUENCE_FRAMES) {
    throw new SequenceError(`the sequence declares ${colour.samples} frames; at most ${MAX_SEQUENCE_FRAMES} are read`);
  }
  const delay = colour.timing.flatMap(({ count, delta }) => Array<number>(count).fill(Math.round((delta * 1000) / colour.timescale)));
  return {
    width: colour.width,
    height: colour.height,
    frames: colour.samples,
    delay,
    loop: loopOf(colour),
    colourStream: colour.index,
    ...(alpha ? { alphaStream: alpha.index } : {}),
  };
}

/**
 * The header of the image sequence `file` holds: its top-level boxes walked (reading only their
 * headers) to the movie box, which is read whole (at most MAX_MOOV_BYTES). Throws SequenceError.
 */
export async function readSequenceHeader(file: ByteReader): Promise<SequenceHeader> {
  let at = 0;
  for (let count = 0; at + 8 <= file.size && count < MAX_TOP_LEVEL_BOXES; count++) {
    const head = await file.read(at, 16);
    if (head.length < 8) break;
    let size = head.readUInt32BE(0);
    const type = head.toString('latin1', 4, 8);
    let header = 8;
    if (size === 1) {
      if (head.length < 16) break;
      size = Number(head.readBigUInt64BE(8));
      header = 16;
    } else if (size === 0) {
      size = file.size - at;
    }
    if (size < header) throw new SequenceError(`the ${type} box has an impossible size`);
    if (type === 'moov') {
      if (size > MAX_MOOV_BYTES) throw new SequenceError(`the movie header is larger than ${MAX_MOOV_BYTES} bytes`);
      if (at + size > file.size) throw new SequenceError('the file is cut short inside its movie header');
      return parseMovie(await file.read(at + header, size - header), file.size);
    }
    at += size;
  }
  throw new SequenceError('the sequence has no movie header (moov)');
}

/**
 * A sequence in memory (ffmpeg's output) with the timing and loop count given: each track's
 * sample durations (stts) from `delay`, its media duration to match, and an edit list that
 * repeats the track `loop` times in all (0: for ever, the track's duration then indefinite), as
 * libavif writes them. ffmpeg's muxer guesses the last frame's duration (it has no next frame to
 * take it from) and writes no edit list. The new movie box is appended and the old one becomes a
 * `free` box, so no sample's or item's offset moves.
 */
export function retimeSequence(data: Buffer, delay: readonly number[], loop: number): Buffer {
  const moov = [...boxes(data, 0, data.length)].find((box) => box.type === 'moov');
  if (!moov) throw new SequenceError('the sequence has no movie header (moov)');
  const movieTimescale = timescaleOf(data, need(child(data, moov, 'mvhd'), 'mvhd'));
  const totalMs = delay.reduce((sum, ms) => sum + ms, 0);
  const segment = Math.round((totalMs * movieTimescale) / 1000);
  const trackDuration = loop === 0 ? undefined : segment * loop;
  const children = [...boxes(data, moov.start, moov.end)].map((box) => {
    if (box.type === 'mvhd') return withDuration(data, box, trackDuration);
    if (box.type !== 'trak') return raw(data, box);
    const parts = [...boxes(data, box.start, box.end)]
      .filter((part) => part.type !== 'edts')
      .flatMap((part) => {
        if (part.type === 'tkhd') return [withDuration(data, part, trackDuration), editList(segment)];
        if (part.type === 'mdia') return [retimeMedia(data, part, delay)];
        return [raw(data, part)];
      });
    return container('trak', parts);
  });
  const old = Buffer.from(data);
  old.write('free', moov.at! + 4, 'latin1');
  return Buffer.concat([old, container('moov', children)]);
}

const raw = (data: Buffer, box: Box): Buffer => data.subarray(box.at!, box.end);

function container(type: string, parts: Buffer[]): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + parts.reduce((sum, part) => sum + part.length, 0), 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, ...parts]);
}

/** An mvhd's or mdhd's timescale. */
function timescaleOf(data: Buffer, box: Box): number {
  const header = fullBox(data, box);
  header.skip(header.version === 1 ? 16 : 8);
  return header.u32() || 1000;
}

/**
 * A copy of an mvhd, mdhd or tkhd with its duration set (undefined: indefinite, all ones). It
 * follows the times and the timescale (mvhd, mdhd), or the times, the track id and a reserved
 * word (tkhd).
 */
function withDuration(data: Buffer, box: Box, duration: number | undefined): Buffer {
  const copy = Buffer.from(raw(data, box));
  const version = data[box.start]!;
  const times = version === 1 ? 16 : 8;
  const at = box.start - box.at! + 4 + times + (box.type === 'tkhd' ? 8 : 4);
  if (version === 1) copy.writeBigUInt64BE(duration === undefined ? 2n ** 64n - 1n : BigInt(duration), at);
  else copy.writeUInt32BE(duration === undefined ? 0xffffffff : Math.min(duration, 0xfffffffe), at);
  return copy;
}

/** An edit list that shows the whole track from its start, flagged to repeat. */
function editList(segment: number): Buffer {
  const elst = Buffer.alloc(20);
  elst.writeUInt32BE(1, 0); // version 0, flags: repeat
  elst.writeUInt32BE(1, 4);
  elst.writeUInt32BE(Math.min(segment, 0xffffffff), 8);
  elst.writeInt32BE(0, 12); // media time
  elst.writeUInt32BE(0x00010000, 16); // rate 1.0
  return container('edts', [container('elst', [elst])]);
}

/** A track's mdia with its stts from `delay` (in the media's timescale) and its mdhd's duration to match. */
function retimeMedia(data: Buffer, mdia: Box, delay: readonly number[]): Buffer {
  const mdhd = need(child(data, mdia, 'mdhd'), 'mdhd');
  const timescale = timescaleOf(data, mdhd);
  const ticks = delay.map((ms) => Math.max(1, Math.round((ms * timescale) / 1000)));
  const runs: { count: number; delta: number }[] = [];
  for (const delta of ticks) {
    const last = runs.at(-1);
    if (last?.delta === delta) last.count++;
    else runs.push({ count: 1, delta });
  }
  const stts = Buffer.alloc(8 + runs.length * 8);
  stts.writeUInt32BE(runs.length, 4);
  runs.forEach(({ count, delta }, i) => {
    stts.writeUInt32BE(count, 8 + i * 8);
    stts.writeUInt32BE(delta, 12 + i * 8);
  });
  const rebuild = (box: Box, path: string[]): Buffer => {
    if (!path.length) return container('stts', [stts]);
    const parts = [...boxes(data, box.start, box.end)].map((part) => {
      if (part.type === path[0]) return rebuild(part, path.slice(1));
      if (part.type === 'mdhd')
        return withDuration(
          data,
          part,
          ticks.reduce((sum, t) => sum + t, 0),
        );
      return raw(data, part);
    });
    return container(box.type, parts);
  };
  return rebuild(mdia, ['minf', 'stbl', 'stts']);
}

/** A ByteReader over bytes in memory (an encoder's output). */
export const bufferReader = (data: Buffer): ByteReader => ({
  size: data.length,
  read: (offset, length) => Promise.resolve(data.subarray(offset, offset + length)),
});
