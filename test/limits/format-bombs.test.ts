// Decompression bombs in the formats this service decodes itself or reads by their primary item:
// a few hundred bytes whose header declares 40000×40000. The upload records that size from the
// header alone, and every job fails IMAGE_TOO_LARGE when queued, before a pixel is decoded.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { Client, DIALECTS, corpusFile, startServer, type TestServer } from '../helpers.js';

const SIDE = 40_000;

/** A raw JPEG 2000 codestream: SOC, a SIZ of SIDE×SIDE RGB 8-bit, a little more. */
function jp2Bomb(): Buffer {
  const siz = Buffer.alloc(2 + 2 + 38 + 9);
  siz.writeUInt16BE(0xff51, 0);
  siz.writeUInt16BE(38 + 9, 2); // Lsiz
  siz.writeUInt32BE(SIDE, 6); // Xsiz
  siz.writeUInt32BE(SIDE, 10); // Ysiz
  siz.writeUInt32BE(1024, 22); // XTsiz
  siz.writeUInt32BE(1024, 26); // YTsiz
  siz.writeUInt16BE(3, 38); // Csiz
  for (let c = 0; c < 3; c++) siz.set([7, 1, 1], 40 + c * 3);
  return Buffer.concat([Buffer.from([0xff, 0x4f]), siz, Buffer.alloc(64)]);
}

/** A lossless JPEG (SOF3) frame header of SIDE×SIDE, 3 components, and nothing to decode. */
function losslessJpegBomb(): Buffer {
  const sof = [0xff, 0xc3, 0, 17, 8, SIDE >> 8, SIDE & 0xff, SIDE >> 8, SIDE & 0xff, 3, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0];
  return Buffer.concat([Buffer.from([0xff, 0xd8]), Buffer.from(sof), Buffer.alloc(64), Buffer.from([0xff, 0xd9])]);
}

/** pitm.avif with its grid (the primary item) declared SIDE×SIDE, in its ispe and its ImageGrid. */
function avifGridBomb(): Buffer {
  const bytes = Buffer.from(fs.readFileSync(corpusFile('images/sharp/pitm.avif')));
  const ispe = Buffer.from([0, 0, 0x10, 0, 0, 0, 0x03, 0x20]); // 4096, 800
  const at = bytes.indexOf(ispe, bytes.indexOf('ispe', 0, 'latin1'));
  assert.ok(at > 0, 'the grid has an ispe of 4096×800');
  bytes.writeUInt32BE(SIDE, at);
  bytes.writeUInt32BE(SIDE, at + 4);
  const idat = bytes.indexOf('idat', 0, 'latin1') + 4;
  assert.equal(bytes[idat + 1]! & 1, 0, 'ImageGrid with 16-bit sizes');
  bytes.writeUInt16BE(SIDE, idat + 4);
  bytes.writeUInt16BE(SIDE, idat + 6);
  return bytes;
}

for (const dialect of DIALECTS) {
  describe(`format bombs (${dialect})`, () => {
    let server: TestServer;
    let client: Client;

    before(async () => {
      server = await startServer({ dialect, workers: 1 });
      client = new Client(server.url, await server.newKey('pro'));
    });
    after(() => server.close());

    const bombs = [
      { name: 'a JPEG 2000 codestream', format: 'jp2', build: jp2Bomb },
      { name: 'a lossless JPEG', format: 'jpeg', build: losslessJpegBomb },
      { name: 'an AVIF grid', format: 'avif', build: avifGridBomb },
    ];
    for (const bomb of bombs) {
      it(`${bomb.name} declaring ${SIDE}×${SIDE}: the upload reads its header, every job fails IMAGE_TOO_LARGE when queued`, async () => {
        const upload = await client.upload(bomb.build(), 'bomb');
        assert.equal(upload.status, 201, JSON.stringify(upload.body));
        assert.deepEqual([upload.body.data.format, upload.body.data.width, upload.body.data.height], [bomb.format, SIDE, SIDE]);
        assert.equal(upload.body.data.pages, undefined);
        for (const [kind, options] of [
          ['resize', { width: 100 }],
          ['convert', { format: 'png' }],
        ] as const) {
          const queued = await client.post(`/api/process/${kind}`, { fileId: upload.body.data.fileId, ...options });
          assert.equal(queued.status, 202);
          assert.equal(queued.body.data.status, 'failed', kind);
          assert.equal(queued.body.data.error.code, 'IMAGE_TOO_LARGE');
        }
      });
    }
  });
}
