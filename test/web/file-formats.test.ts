// The dashboard offers render formats without importing the server: held here to the format
// table (src/imaging/formats.ts), the one place those facts live. (Output files it does not name:
// the service does, and its snippets keep that name.)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RENDER_FORMATS } from '../../sdk/delivery.js';
import { OUTPUT_FORMATS } from '../../src/imaging/formats.js';

describe("the dashboard's formats are the table's", () => {
  it('render formats (delivery f:) are formats jobs write', () => {
    for (const format of RENDER_FORMATS) assert.ok((OUTPUT_FORMATS as readonly string[]).includes(format), format);
  });
});
