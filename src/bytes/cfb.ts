// A minimal reader of OLE2 compound files ([MS-CFB]): the container of PowerPoint 97–2003 decks
// and of password-encrypted OOXML packages. It reads only what identification needs — the
// names of the root storage's children and the first bytes of one small stream — by random
// access, so a large file is never read whole. Every offset and chain is bounds- and
// cycle-checked: the input is untrusted.

export interface ByteReader {
  size: number;
  /** Up to `length` bytes at `offset` (fewer only at the end of the file). */
  read(offset: number, length: number): Promise<Buffer>;
}

export class CfbError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CfbError';
  }
}

export const CFB_SIGNATURE = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);

const END_OF_CHAIN = 0xfffffffe;
const FREE_SECTOR = 0xffffffff;
const NO_STREAM = 0xffffffff;
const MAX_SECTOR = 0xfffffffa;
const MAX_MINI_STREAM = 64 * 1024 * 1024;
const MAX_DIRECTORY_BYTES = 4 * 1024 * 1024;
/** Far more than any real presentation has: directory sectors, chain steps, entries read. */
const MAX_STEPS = 1 << 20;

/** Where sector `sector` starts; it must start inside the file (the header is sector -1). */
function offsetOf(sector: number, sectorSize: number, fileSize: number): number {
  const offset = (sector + 1) * sectorSize;
  if (sector > MAX_SECTOR || offset >= fileSize) throw new CfbError(`sector ${sector} lies outside the file`);
  return offset;
}

export interface CfbEntry {
  name: string;
  /** 1 storage, 2 stream, 5 root. */
  type: number;
  startSector: number;
  size: number;
}

export class CompoundFile {
  private constructor(
    private readonly reader: ByteReader,
    private readonly sectorSize: number,
    private readonly miniSectorSize: number,
    private readonly miniCutoff: number,
    private readonly fat: Uint32Array,
    private readonly entries: (CfbEntry & { left: number; right: number; child: number })[],
    private readonly firstMiniFatSector: number,
  ) {}

  static async open(reader: ByteReader): Promise<CompoundFile> {
    if (reader.size < 512) throw new CfbError('shorter than a compound file header');
    const header = await reader.read(0, 512);
    if (!header.subarray(0, 8).equals(CFB_SIGNATURE)) throw new CfbError('not a compound file');
    if (header.readUInt16LE(0x1c) !== 0xfffe) throw new CfbError('bad byte order mark');
    const sectorShift = header.readUInt16LE(0x1e);
    if (sectorShift !== 9 && sectorShift !== 12) throw new CfbError(`unsupported sector size 2^${sectorShift}`);
    const sectorSize = 1 << sectorShift;
    const miniSectorSize = 1 << header.readUInt16LE(0x20);
    if (miniSectorSize !== 64) throw new CfbError('unsupported mini sector size');
    const fatSectorCount = header.readUInt32LE(0x2c);
    const firstDirectorySector = header.readUInt32LE(0x30);
    const miniCutoff = header.readUInt32LE(0x38);
    const firstMiniFatSector = header.readUInt32LE(0x3c);
    let difatSector = header.readUInt32LE(0x44);
    const difatCount = header.readUInt32LE(0x48);
    const sectorCount = Math.ceil(reader.size / sectorSize);
    if (fatSectorCount > sectorCount || difatCount > sectorCount) throw new CfbError('sector counts larger than the file');

    const sectorOffset = (sector: number): number => offsetOf(sector, sectorSize, reader.size);

    // The DIFAT: 109 FAT sector numbers in the header, the rest in a chain of DIFAT sectors.
    const fatSectors: number[] = [];
    for (let i = 0; i < 109 && fatSectors.length < fatSectorCount; i++) fatSectors.push(header.readUInt32LE(0x4c + 4 * i));
    const perDifat = sectorSize / 4 - 1;
    for (let i = 0; i < difatCount && fatSectors.length < fatSectorCount; i++) {
      if (difatSector === END_OF_CHAIN || difatSector === FREE_SECTOR) break;
      const block = await reader.read(sectorOffset(difatSector), sectorSize);
      for (let j = 0; j < perDifat && fatSectors.length < fatSectorCount; j++) fatSectors.push(block.readUInt32LE(4 * j));
      difatSector = block.readUInt32LE(4 * perDifat);
    }
    if (fatSectors.length < fatSectorCount) throw new CfbError('the sector allocation table is incomplete');

    const fat = new Uint32Array((fatSectorCount * sectorSize) / 4);
    for (const [i, sector] of fatSectors.entries()) {
      const block = await reader.read(sectorOffset(sector), sectorSize);
      if (block.length < sectorSize) throw new CfbError('truncated allocation table');
      for (let j = 0; j < sectorSize / 4; j++) fat[(i * sectorSize) / 4 + j] = block.readUInt32LE(4 * j);
    }

    const file = new CompoundFile(reader, sectorSize, miniSectorSize, miniCutoff, fat, [], firstMiniFatSector);
    // Bounded: a real deck's directory is a few sectors; a hostile chain could span the file.
    const directory = await file.readChain(firstDirectorySector, MAX_DIRECTORY_BYTES, sectorOffset);
    for (let offset = 0; offset + 128 <= directory.length; offset += 128) {
      const raw = directory.subarray(offset, offset + 128);
      const nameLength = Math.min(64, raw.readUInt16LE(0x40));
      file.entries.push({
        name: raw.toString('utf16le', 0, Math.max(0, nameLength - 2)),
        type: raw[0x42]!,
        left: raw.readUInt32LE(0x44),
        right: raw.readUInt32LE(0x48),
        child: raw.readUInt32LE(0x4c),
        startSector: raw.readUInt32LE(0x74),
        // Sizes above 4 GiB do not occur in presentations we accept; the high word is ignored.
        size: raw.readUInt32LE(0x78),
      });
    }
    if (file.entries[0]?.type !== 5) throw new CfbError('no root storage');
    return file;
  }

  /** The streams and storages directly inside the root storage. */
  rootChildren(): CfbEntry[] {
    const out: CfbEntry[] = [];
    const seen = new Set<number>();
    const stack = [this.entries[0]!.child];
    while (stack.length) {
      const index = stack.pop()!;
      if (index === NO_STREAM || index >= this.entries.length || seen.has(index)) continue;
      seen.add(index);
      const entry = this.entries[index]!;
      if (entry.type === 1 || entry.type === 2) out.push({ name: entry.name, type: entry.type, startSector: entry.startSector, size: entry.size });
      stack.push(entry.left, entry.right);
    }
    return out;
  }

  /** The first `limit` bytes of a stream directly inside the root storage. */
  async readRootStream(name: string, limit: number): Promise<Buffer | undefined> {
    const entry = this.rootChildren().find((e) => e.type === 2 && e.name === name);
    if (!entry) return undefined;
    const want = Math.min(limit, entry.size);
    const sectorOffset = (sector: number): number => offsetOf(sector, this.sectorSize, this.reader.size);
    if (entry.size >= this.miniCutoff) return (await this.readChain(entry.startSector, want, sectorOffset)).subarray(0, want);
    // Small streams live in the mini stream (held by the root entry), allocated by the mini FAT.
    const root = this.entries[0]!;
    if (root.size > MAX_MINI_STREAM) throw new CfbError('the mini stream is implausibly large');
    const miniStream = await this.readChain(root.startSector, root.size, sectorOffset);
    const miniFat = await this.readChain(this.firstMiniFatSector, (root.size / this.miniSectorSize) * 4, sectorOffset);
    const chunks: Buffer[] = [];
    let got = 0;
    let sector = entry.startSector;
    for (let steps = 0; got < want; steps++) {
      if (steps > MAX_STEPS || sector === END_OF_CHAIN || 4 * sector + 4 > miniFat.length) throw new CfbError('broken mini stream chain');
      const start = sector * this.miniSectorSize;
      if (start + this.miniSectorSize > miniStream.length) throw new CfbError('mini sector outside the mini stream');
      chunks.push(miniStream.subarray(start, start + this.miniSectorSize));
      got += this.miniSectorSize;
      sector = miniFat.readUInt32LE(4 * sector);
    }
    return Buffer.concat(chunks).subarray(0, want);
  }

  /** Follows a FAT chain from `start`, reading at most `limit` bytes (whole sectors). */
  private async readChain(start: number, limit: number, sectorOffset: (sector: number) => number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let got = 0;
    let sector = start;
    const seen = new Set<number>();
    while (sector !== END_OF_CHAIN && got < limit) {
      if (sector >= this.fat.length || seen.has(sector) || seen.size > MAX_STEPS) throw new CfbError('broken sector chain');
      seen.add(sector);
      const block = await this.reader.read(sectorOffset(sector), this.sectorSize);
      chunks.push(block);
      got += block.length;
      sector = this.fat[sector]!;
    }
    return Buffer.concat(chunks);
  }
}
