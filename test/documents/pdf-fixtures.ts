// PDFs for the pdf-to-images tests. The corpus holds no PDF, so the real ones are made the way
// this service makes them — image-to-pdf (pdf-lib) of corpus photos — and the hostile ones are
// written object by object, with a correct cross-reference table, so that each is broken in
// exactly one way: a password, a page count that lies, a page the size of a field.
import { buildPdf } from '../../src/documents/image-to-pdf.js';
import { DEFAULT_PLANS } from '../../src/accounts/plans.js';
import { corpusFile } from '../helpers.js';

/**
 * image-to-pdf's own output of three corpus photos at 72 dpi, so a page's size in points is the
 * photo's in pixels: 600×450, 450×600, 600×450.
 */
export const PHOTO_PAGES = [
  { width: 600, height: 450 },
  { width: 450, height: 600 },
  { width: 600, height: 450 },
];

export function photoPdf(): Promise<Buffer> {
  const images = ['Landscape_1.jpg', 'Portrait_1.jpg', 'Landscape_1.jpg'].map((name) => ({
    path: corpusFile(`images/sharp/${name}`),
    format: 'jpeg',
  }));
  return buildPdf(images, { pageSize: 'fit' }, { limits: DEFAULT_PLANS.max, deadline: Date.now() + 60_000 });
}

/** A PDF written object by object (objects numbered from 1; the catalog is 1), its xref exact. */
function writePdf(objects: string[], trailer = ''): Buffer {
  const parts: Buffer[] = [Buffer.from('%PDF-1.4\n')];
  let length = parts[0]!.length;
  const offsets: number[] = [];
  for (const [index, object] of objects.entries()) {
    offsets.push(length);
    const part = Buffer.from(`${index + 1} 0 obj\n${object}\nendobj\n`, 'latin1');
    parts.push(part);
    length += part.length;
  }
  const xref = [`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`, ...offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`)].join('');
  parts.push(Buffer.from(`${xref}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R ${trailer}>>\nstartxref\n${length}\n%%EOF\n`));
  return Buffer.concat(parts);
}

const CONTENT = '<< /Length 35 >>\nstream\n0 0 1 rg 10 10 100 100 re f\nendstream';

/**
 * `pages` pages of `mediaBox` points (a blue square on each, one content stream shared), the
 * page tree claiming `count` pages (by default, the truth).
 */
export function simplePdf({
  pages = 1,
  mediaBox = [612, 792],
  count = pages,
}: { pages?: number; mediaBox?: [number, number]; count?: number } = {}): Buffer {
  // 1 catalog, 2 page tree, 3 content, 4… pages.
  const kids = Array.from({ length: pages }, (_, i) => `${i + 4} 0 R`).join(' ');
  const page = `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 ${mediaBox[0]} ${mediaBox[1]}] /Contents 3 0 R >>`;
  return writePdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [${kids}] /Count ${count} >>`,
    CONTENT,
    ...Array.from({ length: pages }, () => page),
  ]);
}

/**
 * A PDF under the standard security handler whose user password is not empty: no reader opens
 * it without the password (the /U entry matches no key the empty password makes).
 */
export function encryptedPdf(): Buffer {
  const encrypt = `<< /Filter /Standard /V 1 /R 2 /O <${'11'.repeat(32)}> /U <${'22'.repeat(32)}> /P -4 >>`;
  const id = '<0123456789abcdef0123456789abcdef>';
  return writePdf(
    [
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [4 0 R] /Count 1 >>',
      CONTENT,
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R >>',
      encrypt,
    ],
    `/Encrypt 5 0 R /ID [${id} ${id}] `,
  );
}
