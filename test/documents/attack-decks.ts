// Decks that try to draw a file of the server into their slides, built from corpus decks: a
// PPTX whose pictures are SVG parts naming the file, an ODP whose pictures link to it by path.
// Each also draws the attacker's own blue mark, so a slide shows whether the deck rendered.
import sharp from 'sharp';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { corpusFile } from '../helpers.js';

export interface Colour {
  r: number;
  g: number;
  b: number;
}
/** The attacker's mark. */
export const BLUE: Colour = { r: 0, g: 0, b: 255 };

/** Pixels of an image within `tolerance` of `colour` (transparency over white). */
export async function pixelsNear(image: Buffer, colour: Colour, tolerance = 48): Promise<{ count: number; total: number }> {
  const { data, info } = await sharp(image).flatten({ background: '#ffffff' }).toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  let count = 0;
  for (let i = 0; i < data.length; i += info.channels) {
    if (Math.abs(data[i]! - colour.r) < tolerance && Math.abs(data[i + 1]! - colour.g) < tolerance && Math.abs(data[i + 2]! - colour.b) < tolerance)
      count++;
  }
  return { count, total: info.width * info.height };
}

/** The ways an SVG names a file by its absolute `file` path: a file:// URL, the path, a path relative to wherever the SVG is. */
export function referencesTo(file: string): string[] {
  return [`file://${file}`, file, `${'../'.repeat(24)}${file.slice(1)}`];
}

/** A blue SVG drawing `file` over itself in every way referencesTo gives, with href and xlink:href. */
export function svgNaming(file: string): string {
  const refs = referencesTo(file);
  const width = 100 * refs.length;
  const images = refs.map(
    (ref, i) =>
      `<image href="${ref}" x="${100 * i}" y="0" width="100" height="50"/><image xlink:href="${ref}" x="${100 * i}" y="50" width="100" height="50"/>`,
  );
  return `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="${width}" height="100" viewBox="0 0 ${width} 100">
<rect width="${width}" height="100" fill="#0000ff"/>${images.join('')}</svg>`;
}

/** A picture on slide 1 of SampleShow.pptx (4:3, 9144000 × 6858000 EMU), drawn above its text. */
export interface Picture {
  /** The part's name under ppt/media/; its extension need not say what it holds. */
  name: string;
  bytes: Buffer | string;
  /** Position and size in EMU. */
  box: { x: number; y: number; cx: number; cy: number };
}

export const SLIDE_EMU = { cx: 9_144_000, cy: 6_858_000 };

/** SampleShow.pptx with `pictures` added to its first slide, their parts declared image/svg+xml when named .svg. */
export function pptxWithPictures(pictures: Picture[]): Promise<Buffer> {
  const pics = pictures.map(
    (pic, i) =>
      `<p:pic><p:nvPicPr><p:cNvPr id="${100 + i}" name="Attack ${i}"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr>` +
      `<p:blipFill><a:blip r:embed="rIdAttack${i}"/><a:stretch><a:fillRect/></a:stretch></p:blipFill>` +
      `<p:spPr><a:xfrm><a:off x="${pic.box.x}" y="${pic.box.y}"/><a:ext cx="${pic.box.cx}" cy="${pic.box.cy}"/></a:xfrm><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr></p:pic>`,
  );
  const rels = pictures.map(
    (pic, i) =>
      `<Relationship Id="rIdAttack${i}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="../media/${pic.name}"/>`,
  );
  return editZip(
    'presentations/poi/SampleShow.pptx',
    (name, data) => {
      const xml = data.toString('utf8');
      if (name === 'ppt/slides/slide1.xml') return Buffer.from(xml.replace('</p:spTree>', `${pics.join('')}</p:spTree>`));
      if (name === 'ppt/slides/_rels/slide1.xml.rels') return Buffer.from(xml.replace('</Relationships>', `${rels.join('')}</Relationships>`));
      if (name === '[Content_Types].xml')
        return Buffer.from(xml.replace('<Default ', '<Default Extension="svg" ContentType="image/svg+xml"/><Default '));
      return data;
    },
    pictures.map((pic) => ({ name: `ppt/media/${pic.name}`, bytes: Buffer.from(pic.bytes) })),
  );
}

/**
 * The corpus ODP with, on its first slide, a picture linked to each of `hrefs` (6 cm squares
 * from the top left) and the attacker's blue square at the right.
 */
export function odpLinkingTo(hrefs: string[]): Promise<Buffer> {
  const frames = hrefs.map(
    (href, i) =>
      `<draw:frame draw:layer="layout" svg:width="6cm" svg:height="6cm" svg:x="${1 + 7 * i}cm" svg:y="1cm">` +
      `<draw:image xlink:href="${href}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/></draw:frame>`,
  );
  const mark = '<draw:rect draw:style-name="gAttack" draw:layer="layout" svg:width="4cm" svg:height="4cm" svg:x="23cm" svg:y="1cm"/>';
  const style =
    '<style:style style:name="gAttack" style:family="graphic"><style:graphic-properties draw:fill="solid" draw:fill-color="#0000ff" draw:stroke="none"/></style:style>';
  return editZip('presentations/tika/LibreOfficeImpress_odp_1.3.odp', (name, data) => {
    if (name !== 'content.xml') return data;
    const xml = data.toString('utf8');
    const forms = '<office:forms form:automatic-focus="false" form:apply-design-mode="false"/>';
    if (!xml.includes(forms) || !xml.includes('<office:automatic-styles>')) throw new Error('the corpus ODP changed');
    return Buffer.from(xml.replace(forms, forms + frames.join('') + mark).replace('<office:automatic-styles>', `<office:automatic-styles>${style}`));
  });
}

/** The entries of a ZIP (a presentation-to-images output), in order. */
export async function zipEntries(bytes: Buffer): Promise<{ name: string; bytes: Buffer }[]> {
  const zip = await yauzl.fromBufferPromise(bytes, { lazyEntries: true });
  const out: { name: string; bytes: Buffer }[] = [];
  for await (const entry of zip.eachEntry()) {
    const chunks: Buffer[] = [];
    for await (const chunk of await zip.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
    out.push({ name: entry.fileName, bytes: Buffer.concat(chunks) });
  }
  return out;
}

/** A corpus ZIP package with parts changed by `edit` (which returns the new bytes) and `extra` parts appended. */
export async function editZip(
  file: string,
  edit: (name: string, data: Buffer) => Buffer,
  extra: { name: string; bytes: Buffer }[] = [],
): Promise<Buffer> {
  const source = await yauzl.openPromise(corpusFile(file), { lazyEntries: true });
  const out = new yazl.ZipFile();
  for await (const entry of source.eachEntry()) {
    const chunks: Buffer[] = [];
    for await (const chunk of await source.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
    // ODF wants `mimetype` first and stored; yazl keeps the order entries are added in.
    if (entry.fileName.endsWith('/')) out.addEmptyDirectory(entry.fileName);
    else out.addBuffer(edit(entry.fileName, Buffer.concat(chunks)), entry.fileName, { compress: entry.fileName !== 'mimetype' });
  }
  source.close();
  for (const part of extra) out.addBuffer(part.bytes, part.name);
  out.end();
  const chunks: Buffer[] = [];
  for await (const chunk of out.outputStream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
