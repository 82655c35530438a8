// The dashboard names output files and offers render formats without importing the server: held
// here to the format table (src/imaging/formats.ts), the one place those facts live.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RENDER_FORMATS } from '../../sdk/delivery.js';
import { FORMATS, OUTPUT_FORMATS } from '../../src/imaging/formats.js';
import { extensionOf } from '../../web/src/file-formats.js';

describe("the dashboard's formats are the table's", () => {
  it('every output file is named with the extension the table gives its format', () => {
    for (const format of OUTPUT_FORMATS) assert.equal(extensionOf(format), FORMATS[format].extension, format);
  });

  it('render formats (delivery f:) are formats jobs write', () => {
    for (const format of RENDER_FORMATS) assert.ok((OUTPUT_FORMATS as readonly string[]).includes(format), format);
  });
});
