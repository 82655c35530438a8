// Presentations are recognised by their contents, never by their names: an OOXML package
// (PPTX, PPSX) or an ODF package (ODP) is a ZIP whose parts say what it is; a PowerPoint 97–2003
// deck (PPT) is an OLE2 compound file with a "PowerPoint Document" stream. Password-protected
// OOXML decks are OLE2 files holding an "EncryptedPackage"; encrypted PPTs say so in their
// CurrentUser stream; encrypted ODPs in their manifest.
//
// Macros are never run (the converter's profile disables them), so a deck in an accepted format
// is accepted with whatever macros it carries — an ODP with Basic, a PPT or PPTX with a VBA
// project (the corpus's testODPMacro.odp must render). The macro-enabled OOXML formats (PPTM,
// PPSM, POTM) and templates are formats of their own that the contract does not accept.
//
// Identification reads the ZIP's central directory and a few small parts, or the OLE
// directory, by random access: cheap for any size. The ZIP's expanded size is bounded from the
// central directory at upload, and again, by actually inflating every entry, before LibreOffice
// sees the file (a ZIP may understate its sizes; yauzl refuses an entry that inflates to more).
import { Readable } from 'node:stream';
import yauzl from 'yauzl';
import { mimeOf, type PresentationFormat } from '../imaging/formats.js';
import { CFB_SIGNATURE, CfbError, CompoundFile } from '../bytes/cfb.js';
import { fileSource, type ByteSource } from '../bytes/sources.js';
import { SvgPartDetector } from './svg-parts.js';

/** The most a presentation's ZIP may expand to, and the most entries it may hold. */
export const MAX_EXPANDED_BYTES = 1024 * 1024 * 1024;
const MAX_ZIP_ENTRIES = 10_000;
/** Parts read to identify a package ([Content_Types].xml, mimetype, the ODF manifest). */
const MAX_PART_BYTES = 4 * 1024 * 1024;

export interface Identified {
  format: PresentationFormat;
  mimeType: string;
  /** Password-protected: LibreOffice cannot open it; its task fails with DOCUMENT_ENCRYPTED. */
  encrypted: boolean;
}

/** The bytes are a container, but not a presentation this service reads; `message` says why. */
export class NotAPresentation extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotAPresentation';
  }
}

const ZIP_LOCAL_HEADER = Buffer.from([0x50, 0x4b, 0x03, 0x04]);

/** Whether the first bytes are those of a ZIP or an OLE2 file: a presentation, perhaps. */
export function containerKind(head: Buffer): 'zip' | 'ole' | undefined {
  if (head.subarray(0, 4).equals(ZIP_LOCAL_HEADER)) return 'zip';
  if (head.subarray(0, 8).equals(CFB_SIGNATURE)) return 'ole';
  return undefined;
}

/** What presentation the container holds; NotAPresentation when it holds none we read. */
export async function identifyPresentation(source: ByteSource): Promise<Identified> {
  const kind = containerKind(await source.read(0, 8));
  if (kind === 'zip') return identifyZip(source);
  if (kind === 'ole') return identifyOle(source);
  throw new NotAPresentation('The file is not an image or presentation this service reads');
}

const identified = (format: PresentationFormat, encrypted = false): Identified => ({ format, mimeType: mimeOf(format), encrypted });

class Reader extends yauzl.RandomAccessReader {
  constructor(private readonly source: ByteSource) {
    super();
  }

  override _readStreamForRange(start: number, end: number): Readable {
    return this.source.stream(start, end);
  }
}

async function openZip(source: ByteSource): Promise<yauzl.ZipFile> {
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromRandomAccessReaderPromise(new Reader(source), source.size, {
      lazyEntries: true,
      autoClose: false,
      validateEntrySizes: true,
      strictFileNames: false,
    });
  } catch (err) {
    throw new NotAPresentation(`The file starts like a ZIP package but is not a readable one (${(err as Error).message})`);
  }
  // Entry and read errors reach their callers through eachEntry and the entry streams; an
  // 'error' the ZipFile emits outside them (closing its reader) must not end the process.
  zip.on('error', () => {});
  return zip;
}

/**
 * Every entry from the central directory, the declared expanded size bounded. Two entries of
 * one name are refused: which of them a reader takes is its own choice, so what is checked
 * here might not be what LibreOffice reads.
 */
async function listEntries(zip: yauzl.ZipFile): Promise<Map<string, yauzl.Entry>> {
  if (zip.entryCount > MAX_ZIP_ENTRIES) {
    throw new NotAPresentation(`The package holds ${zip.entryCount} entries; at most ${MAX_ZIP_ENTRIES} are accepted`);
  }
  const entries = new Map<string, yauzl.Entry>();
  let expanded = 0;
  try {
    for await (const entry of zip.eachEntry()) {
      expanded += entry.uncompressedSize;
      if (expanded > MAX_EXPANDED_BYTES) {
        throw new NotAPresentation(`The package expands to more than ${MAX_EXPANDED_BYTES / 1024 / 1024} MiB; it is refused before conversion`);
      }
      if (entries.has(entry.fileName)) throw new NotAPresentation(`The package holds two entries named ${entry.fileName}`);
      entries.set(entry.fileName, entry);
    }
  } catch (err) {
    if (err instanceof NotAPresentation) throw err;
    throw new NotAPresentation(`The ZIP package is damaged (${(err as Error).message})`);
  }
  return entries;
}

async function readEntry(zip: yauzl.ZipFile, entry: yauzl.Entry, limit = MAX_PART_BYTES): Promise<Buffer> {
  if (entry.uncompressedSize > limit) throw new NotAPresentation(`The package part ${entry.fileName} is implausibly large`);
  if (entry.isEncrypted()) throw new NotAPresentation('The ZIP package is encrypted');
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of await zip.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  } catch (err) {
    throw new NotAPresentation(`The package part ${entry.fileName} cannot be read (${(err as Error).message})`);
  }
}

const ODF_KINDS: Record<string, string> = {
  text: 'an OpenDocument text document',
  spreadsheet: 'an OpenDocument spreadsheet',
  graphics: 'an OpenDocument drawing',
  'presentation-template': 'an OpenDocument presentation template',
};

async function identifyZip(source: ByteSource): Promise<Identified> {
  const zip = await openZip(source);
  try {
    const entries = await listEntries(zip);
    const mimetype = entries.get('mimetype');
    if (mimetype) {
      const type = (await readEntry(zip, mimetype, 256)).toString('latin1').trim();
      if (type === mimeOf('odp')) {
        const manifest = entries.get('META-INF/manifest.xml');
        const encrypted = manifest ? /<manifest:encryption-data\b/.test((await readEntry(zip, manifest)).toString('utf8')) : false;
        return identified('odp', encrypted);
      }
      const odf = /^application\/vnd\.oasis\.opendocument\.(.+)$/.exec(type);
      throw new NotAPresentation(
        `The file is ${odf ? (ODF_KINDS[odf[1]!] ?? `an OpenDocument ${odf[1]} file`) : 'a ZIP package'}, not a presentation`,
      );
    }
    const types = entries.get('[Content_Types].xml');
    if (types) return identified(ooxmlFormat((await readEntry(zip, types)).toString('utf8')));
    throw new NotAPresentation('The file is a ZIP archive, not a presentation');
  } finally {
    zip.close();
  }
}

/** The presentation kind an OOXML package's main part declares. */
function ooxmlFormat(contentTypes: string): PresentationFormat {
  const types = [...contentTypes.matchAll(/ContentType\s*=\s*"([^"]+)"/g)].map((m) => m[1]!);
  const has = (suffix: string) => types.some((t) => t.endsWith(suffix));
  if (has('.presentationml.presentation.main+xml')) return 'pptx';
  if (has('.presentationml.slideshow.main+xml')) return 'ppsx';
  if (types.some((t) => /ms-powerpoint\.(presentation|slideshow|template)\.macroEnabled\.main\+xml$/.test(t))) {
    throw new NotAPresentation('Macro-enabled presentations (PPTM, PPSM, POTM) are not accepted; save the deck as PPTX');
  }
  if (has('.presentationml.template.main+xml')) throw new NotAPresentation('PowerPoint templates (POTX) are not accepted; save the deck as PPTX');
  if (types.some((t) => t.includes('wordprocessingml') || t.includes('ms-word')))
    throw new NotAPresentation('The file is a Word document, not a presentation');
  if (types.some((t) => t.includes('spreadsheetml') || t.includes('ms-excel')))
    throw new NotAPresentation('The file is an Excel workbook, not a presentation');
  throw new NotAPresentation('The file is an Office Open XML package without a presentation');
}

async function identifyOle(source: ByteSource): Promise<Identified> {
  let file: CompoundFile;
  try {
    file = await CompoundFile.open(source);
  } catch (err) {
    if (err instanceof CfbError) throw new NotAPresentation(`The file starts like an OLE2 compound file but is damaged (${err.message})`);
    throw err;
  }
  try {
    const names = new Set(file.rootChildren().map((e) => e.name));
    // An OOXML package under a password: the container does not say which kind; we take it as
    // the deck it was uploaded as, and its task fails DOCUMENT_ENCRYPTED before any conversion.
    if (names.has('EncryptedPackage') && names.has('EncryptionInfo')) return identified('pptx', true);
    if (names.has('PowerPoint Document')) {
      // CurrentUserAtom ([MS-PPT] 2.3.2): its headerToken says whether the deck is encrypted.
      const currentUser = await file.readRootStream('Current User', 16);
      const encrypted = currentUser !== undefined && currentUser.length >= 16 && currentUser.readUInt32LE(12) === 0xf3d1c4df;
      return identified('ppt', encrypted);
    }
    if (names.has('WordDocument')) throw new NotAPresentation('The file is a Word 97–2003 document, not a presentation');
    if (names.has('Workbook') || names.has('Book')) throw new NotAPresentation('The file is an Excel 97–2003 workbook, not a presentation');
    throw new NotAPresentation('The file is an OLE2 compound file, not a PowerPoint presentation');
  } catch (err) {
    if (err instanceof CfbError) throw new NotAPresentation(`The OLE2 compound file is damaged (${err.message})`);
    throw err;
  }
}

/** What inflating a package found. */
export interface ZipParts {
  /** The entries LibreOffice could read as SVG (svg-parts.ts). */
  svgParts: Set<string>;
}

/**
 * Before LibreOffice sees a ZIP package: inflates every entry (nothing is written) so that its
 * real expanded size, not the one it declares, stays within the bound, and a damaged entry is
 * found here rather than inside the converter; on the way, finds the SVG parts.
 */
export async function verifyZipExpansion(file: string, signal?: AbortSignal): Promise<ZipParts> {
  const svgParts = new Set<string>();
  const source = await fileSource(file);
  try {
    const zip = await openZip(source);
    try {
      const entries = await listEntries(zip);
      for (const entry of entries.values()) {
        if (signal?.aborted) throw signal.reason;
        if (entry.isEncrypted()) throw new NotAPresentation('The ZIP package is encrypted');
        const detector = new SvgPartDetector(entry.fileName);
        try {
          // validateEntrySizes: an entry that inflates past its declared size is an error.
          for await (const chunk of await zip.openReadStreamPromise(entry)) detector.push(chunk as Buffer);
        } catch (err) {
          throw new NotAPresentation(`The package entry ${entry.fileName} is damaged (${(err as Error).message})`);
        }
        if (detector.isSvg()) svgParts.add(entry.fileName);
      }
    } finally {
      zip.close();
    }
  } finally {
    await source.close();
  }
  return { svgParts };
}
