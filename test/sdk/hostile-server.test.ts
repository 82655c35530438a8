// The SDK against a server that lies (test/hostile-api.ts): a download's name is reduced to one
// safe file name and written inside the folder asked for, an existing file is never replaced
// unless `overwrite` is asked (not even by two downloads racing for one name), and the name
// it answers carries no control or bidi character.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Imgapi as BrowserImgapi } from '../../sdk/index.js';
import { Imgapi, ImgapiError, safeFileName, withoutControlCharacters } from '../../sdk/node.js';
import { HOSTILE_DISPOSITIONS, UNPRINTABLE, startHostileApi, type HostileApi } from '../hostile-api.js';

/** Every file under `dir`, relative to it, hidden ones included. */
const filesUnder = (dir: string): string[] => (fs.readdirSync(dir, { recursive: true }) as string[]).sort();

describe('SDK against a hostile server', { timeout: 120_000 }, () => {
  let api: HostileApi;
  let sandbox: string;
  before(async () => {
    api = await startHostileApi();
  });
  after(() => api.close());
  const fresh = () => fs.mkdtempSync(path.join(os.tmpdir(), 'imgapi-hostile-sdk-'));

  it('safeFileName: one component, no control or bidi characters, no leading dot, no device name, bounded', () => {
    const cases: Array<[string | undefined, string]> = [
      ['.bashrc', 'bashrc'],
      ['../../.ssh/authorized_keys', 'authorized_keys'],
      ['C:\\Windows\\evil.dll', 'evil.dll'],
      ['\x1b]0;pwn\x07evil.png', 'evil.png'],
      ['\x1b[2J\x1b[31mred.png', 'red.png'],
      ['\x9b2Jc1.png', 'c1.png'],
      ['a\u202egnp.exe', 'agnp.exe'],
      ['zero\u200bwidth.png', 'zerowidth.png'],
      ['a<b>c:d"e|f?g*.png', 'a_b_c_d_e_f_g_.png'],
      ['com1.txt', '_com1.txt'],
      ['Aux', '_Aux'],
      ['name. . ', 'name'],
      ['照片 été.png', '照片 été.png'],
      ['..', 'file_fallback'],
      ['', 'file_fallback'],
      [undefined, 'file_fallback'],
    ];
    for (const [name, expected] of cases) assert.equal(safeFileName(name, 'file_fallback'), expected, JSON.stringify(name));
    assert.equal(safeFileName('/', '../..'), 'download', 'a fallback is made safe too');
    const long = safeFileName(`${'😀'.repeat(100)}.png`);
    assert.ok(Buffer.byteLength(long) <= 200 && long.endsWith('.png') && !long.includes('\ufffd'), 'cut by whole characters, extension kept');
    assert.equal(withoutControlCharacters('a\x1b[1;31mb\x1b[0m\r\nc\td', '\n'), 'ab\ncd');
  });

  it('download to a folder: every hostile Content-Disposition ends as one safe name inside it', async () => {
    sandbox = fresh();
    try {
      const imgapi = new Imgapi({ baseUrl: api.url, apiKey: 'k' });
      for (const [index, { header, name }] of HOSTILE_DISPOSITIONS.entries()) {
        const fileId = `file_case${index}`;
        api.downloads.set(fileId, { disposition: header });
        const folder = path.join(sandbox, String(index), 'out');
        fs.mkdirSync(folder, { recursive: true });
        const saved = await imgapi.download(fileId, folder);
        const expected = name ?? fileId;
        assert.equal(saved.filename, expected, header);
        assert.equal(saved.path, path.join(folder, expected), header);
        assert.deepEqual(filesUnder(path.join(sandbox, String(index))), ['out', path.join('out', expected)], header);
        assert.equal(fs.readFileSync(saved.path!, 'utf8'), `bytes of ${fileId}`);
      }
      assert.deepEqual(fs.readdirSync(sandbox).sort(), HOSTILE_DISPOSITIONS.map((_, i) => String(i)).sort(), 'nothing beside the folders');
      assert.ok(!fs.existsSync('/tmp/absolute.png'), 'an absolute name is not followed');

      // The browser entry answers the same safe name (a page may use it as a download's name).
      const browser = new BrowserImgapi({ baseUrl: api.url, apiKey: 'k' });
      for (const [index, { name }] of HOSTILE_DISPOSITIONS.entries()) {
        const { filename } = await browser.download(`file_case${index}`);
        assert.equal(filename, name ?? `file_case${index}`);
        assert.doesNotMatch(filename, UNPRINTABLE);
      }
    } finally {
      fs.rmSync(sandbox, { recursive: true, force: true });
    }
  });

  it('an existing file is not replaced without overwrite (to a folder or a path), is with it, and no partial file is left', async () => {
    sandbox = fresh();
    try {
      const imgapi = new Imgapi({ baseUrl: api.url, apiKey: 'k' });
      api.downloads.set('file_existing', { disposition: 'attachment; filename="existing.txt"' });
      const existing = path.join(sandbox, 'existing.txt');
      fs.writeFileSync(existing, 'mine');
      for (const destination of [sandbox, `${sandbox}/`, existing]) {
        const refused = await imgapi.download('file_existing', destination).catch((err: unknown) => err);
        assert.ok(refused instanceof ImgapiError, String(refused));
        assert.equal(refused.code, 'FILE_EXISTS');
        assert.equal(refused.details?.path, existing);
        assert.equal(fs.readFileSync(existing, 'utf8'), 'mine');
      }
      // run() passes overwrite on as well.
      api.tasks.set('upload', { outputFileId: 'file_existing' });
      const run = await imgapi.run('convert', Buffer.from('abc'), { format: 'png' } as never, { destination: existing }).catch((err: unknown) => err);
      assert.equal((run as ImgapiError).code, 'FILE_EXISTS');
      assert.deepEqual(filesUnder(sandbox), ['existing.txt'], 'no partial file left');

      const replaced = await imgapi.download('file_existing', sandbox, { overwrite: true });
      assert.equal(replaced.path, existing);
      assert.equal(fs.readFileSync(existing, 'utf8'), 'bytes of file_existing');
      // A link planted where the name would go is replaced itself, never written through.
      const elsewhere = path.join(sandbox, 'elsewhere.txt');
      fs.writeFileSync(elsewhere, 'not yours');
      fs.rmSync(existing);
      fs.symlinkSync(elsewhere, existing);
      assert.equal(((await imgapi.download('file_existing', sandbox).catch((err: unknown) => err)) as ImgapiError).code, 'FILE_EXISTS');
      await imgapi.download('file_existing', sandbox, { overwrite: true });
      assert.equal(fs.readFileSync(elsewhere, 'utf8'), 'not yours');
      assert.ok(!fs.lstatSync(existing).isSymbolicLink());
      assert.deepEqual(filesUnder(sandbox), ['elsewhere.txt', 'existing.txt']);
    } finally {
      fs.rmSync(sandbox, { recursive: true, force: true });
    }
  });

  it('downloads racing for one name: one wins whole, the others are FILE_EXISTS', async () => {
    sandbox = fresh();
    try {
      const imgapi = new Imgapi({ baseUrl: api.url, apiKey: 'k' });
      const ids = Array.from({ length: 8 }, (_, i) => `file_race${i}`);
      for (const id of ids) api.downloads.set(id, { disposition: 'attachment; filename="same.png"', body: Buffer.alloc(64 * 1024, id) });
      const outcomes = await Promise.allSettled(ids.map((id) => imgapi.download(id, sandbox)));
      const won = outcomes.filter((o) => o.status === 'fulfilled');
      assert.equal(won.length, 1);
      for (const lost of outcomes.filter((o) => o.status === 'rejected')) assert.equal((lost.reason as ImgapiError).code, 'FILE_EXISTS');
      const winner = (won[0] as PromiseFulfilledResult<{ fileId: string }>).value.fileId;
      assert.deepEqual(fs.readFileSync(path.join(sandbox, 'same.png')), Buffer.alloc(64 * 1024, winner));
      assert.deepEqual(filesUnder(sandbox), ['same.png']);
    } finally {
      fs.rmSync(sandbox, { recursive: true, force: true });
    }
  });
});
