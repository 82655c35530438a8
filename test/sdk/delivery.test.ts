// Delivery URLs built by the SDK: offline signing (Web Crypto and node:crypto) against an HMAC
// computed here independently, the transform grammar checked before any request, the encoding of
// origin paths, and — against a real server — that a URL it builds renders and a tampered one is
// refused.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { Imgapi as BrowserImgapi, DeliveryUrlError, deliveryUrl, sourceSegment, transformSegment } from '../../sdk/index.js';
import { deliveryUrlSync, Imgapi } from '../../sdk/node.js';
import { clientCommand } from '../../src/cli/client.js';
import { DIALECTS, corpusFile, type TestServer } from '../helpers.js';
import { startPublicServer } from './support.js';

const JPEG = corpusFile('images/sharp/concert.jpg');

const KEY = { keyId: 'sk_test123', secret: 'c2VjcmV0LXNpZ25pbmcta2V5LWZvci10ZXN0cy0wMDAx' };
const BASE = 'https://img.example.net';

/** The signature as the contract defines it, computed without the SDK. */
const expectedSignature = (secret: string, signed: string) => crypto.createHmac('sha256', secret).update(signed).digest('base64url');

describe('delivery URLs (SDK, offline)', () => {
  it('signs "{transform}/{source}" with HMAC-SHA256, base64url without padding, in both signers', async () => {
    const signed = 'w:720,f:auto/file_abc123';
    const want = `${BASE}/r/${KEY.keyId}/${expectedSignature(KEY.secret, signed)}/${signed}`;
    assert.equal(await deliveryUrl('file_abc123', 'w:720,f:auto', { baseUrl: `${BASE}/`, signingKey: KEY }), want);
    assert.equal(deliveryUrlSync('file_abc123', 'w:720,f:auto', { baseUrl: BASE, signingKey: KEY }), want);
    const imgapi = new Imgapi({ baseUrl: BASE, signingKey: KEY });
    assert.equal(await imgapi.url('file_abc123', 'w:720,f:auto'), want);
    assert.equal(imgapi.urlSync('file_abc123', 'w:720,f:auto'), want);
    assert.equal(await new BrowserImgapi({ baseUrl: BASE, signingKey: KEY }).url('file_abc123', 'w:720,f:auto'), want);
    assert.doesNotMatch(want.split('/')[5]!, /[=+/]/);
    // A CDN in front of /r/: the URL points there, the signature is the same.
    const cdn = new Imgapi({ baseUrl: BASE, deliveryBaseUrl: 'https://cdn.example.net', signingKey: KEY });
    assert.equal(imgapi.urlSync('file_abc123', '-').replace(BASE, 'https://cdn.example.net'), cdn.urlSync('file_abc123', '-'));
  });

  it('lists an object transform in one order, preset first; none is "-"', () => {
    assert.equal(transformSegment({ dpr: 2, f: 'auto', w: 720, p: 'card' }), 'p:card,w:720,dpr:2,f:auto');
    assert.equal(
      transformSegment({ fit: 'cover', g: 'attention', h: 300, bg: 'ffffff80', rot: 90, flip: 'hv', q: 80 }),
      'h:300,fit:cover,g:attention,q:80,bg:ffffff80,rot:90,flip:hv',
    );
    assert.equal(transformSegment({ blur: 2.5, sharpen: 0.5, page: 3 }), 'blur:2.5,sharpen:0.5,page:3');
    assert.equal(transformSegment(undefined), '-');
    assert.equal(transformSegment({}), '-');
    assert.equal(transformSegment(''), '-');
    // A string keeps its order.
    assert.equal(transformSegment('f:webp,w:10'), 'f:webp,w:10');
  });

  it('refuses what the service would refuse, naming the pair', () => {
    const refused: [unknown, RegExp][] = [
      ['w:0', /w:0 — w takes a whole number of px from 1 to 4096/],
      ['w:4097', /w:4097/],
      ['w:12.5', /w:12\.5/],
      [{ w: 2100, dpr: 2 }, /w:2100 at dpr:2 is 4200 px; a render is at most 4096 px a side/],
      ['g:attention,w:10', /g:attention chooses a crop, so it needs fit:cover/],
      ['dpr:5', /dpr:5 — dpr takes a number from 1 to 4/],
      ['dpr:0.5', /dpr:0\.5/],
      ['f:bmp', /f:bmp — f takes jpeg, png, webp, avif, gif, jxl, auto/],
      ['q:101', /q:101/],
      ['bg:#fff', /bg:#fff/],
      ['bg:fffff', /bg:fffff/],
      ['rot:45', /rot:45/],
      ['flip:x', /flip:x/],
      ['fit:stretch', /fit:stretch/],
      ['g:up', /g:up/],
      ['page:0', /page:0/],
      ['p:Bad_Name', /p:Bad_Name/],
      ['width:10', /unknown transform name "width"/],
      ['w', /"w" is not a name:value pair/],
      ['w:10,w:20', /"w" is given twice/],
      ['w:10,', /"" is not a name:value pair/],
      ['constructor:1', /unknown transform name "constructor"/],
      [{ width: 10 }, /unknown transform name width/],
    ];
    for (const [transform, message] of refused)
      assert.throws(
        () => transformSegment(transform as never),
        (err: Error) => err instanceof DeliveryUrlError && message.test(err.message),
        JSON.stringify(transform),
      );
  });

  it('percent-encodes each segment of an origin path (spaces, unicode, ? and #) and signs the encoded text', async () => {
    const source = { origin: 'shop', path: '/photos/été 2026/a?b#c&d%e+f.jpg' };
    const encoded = 'o/shop/photos/%C3%A9t%C3%A9%202026/a%3Fb%23c%26d%25e%2Bf.jpg';
    assert.equal(sourceSegment(source), encoded);
    const url = await deliveryUrl(source, { w: 100 }, { baseUrl: BASE, signingKey: KEY });
    assert.equal(url, `${BASE}/r/${KEY.keyId}/${expectedSignature(KEY.secret, `w:100/${encoded}`)}/w:100/${encoded}`);
    // The URL parses back to the same path: nothing in it is read as a query or a fragment.
    const parsed = new URL(url);
    assert.equal(parsed.search, '');
    assert.equal(parsed.hash, '');
    assert.equal(parsed.pathname, url.slice(BASE.length));

    for (const [bad, message] of [
      [{ origin: 'shop', path: 'a/../b.jpg' }, /"\." or "\.\." segment/],
      [{ origin: 'shop', path: './b.jpg' }, /"\." or "\.\." segment/],
      [{ origin: 'shop', path: '' }, /empty/],
      [{ origin: 'Shop', path: 'a.jpg' }, /not an origin name/],
      ['file/../x', /not a fileId/],
      ['', /not a fileId/],
    ] as const)
      assert.throws(() => sourceSegment(bad), message);
  });

  it('a public preset is unsigned (_) and needs no secret; anything else needs the secret', async () => {
    const publicKey = { keyId: KEY.keyId };
    assert.equal(
      await deliveryUrl('file_abc', 'p:thumb', { baseUrl: BASE, signingKey: publicKey, publicPreset: true }),
      `${BASE}/r/${KEY.keyId}/_/p:thumb/file_abc`,
    );
    assert.equal(
      new Imgapi({ baseUrl: BASE, signingKey: publicKey }).urlSync('file_abc', { p: 'thumb' }, { publicPreset: true }),
      `${BASE}/r/${KEY.keyId}/_/p:thumb/file_abc`,
    );
    await assert.rejects(
      deliveryUrl('file_abc', 'p:thumb,w:10', { baseUrl: BASE, signingKey: publicKey, publicPreset: true }),
      /exactly one public preset/,
    );
    await assert.rejects(deliveryUrl('file_abc', 'w:10', { baseUrl: BASE, signingKey: publicKey }), /needs the key's secret/);
    await assert.rejects(new Imgapi({ baseUrl: BASE }).url('file_abc', 'w:10'), /needs the signingKey option/);
    assert.throws(() => deliveryUrlSync('file_abc', 'w:10', { baseUrl: BASE, signingKey: { keyId: 'a/b', secret: 'x' } }), /not a signing key id/);
  });
});

describe('imgapi url (in-process; test/sdk/cli.test.ts runs the binary)', () => {
  /** The command with `args` and `env`: its exit status and what it printed. */
  async function url(args: string[], env: Record<string, string>) {
    let stdout = '';
    let stderr = '';
    const stream = (write: (text: string) => void) => ({ write: (text: string) => (write(text), true) }) as unknown as NodeJS.WriteStream;
    const code = await clientCommand('url', args, { stdout: stream((t) => (stdout += t)), stderr: stream((t) => (stderr += t)), env });
    return { code, stdout, stderr };
  }
  const env = { IMGAPI_URL: BASE, IMGAPI_SIGNING_KEY_ID: KEY.keyId, IMGAPI_SIGNING_SECRET: KEY.secret };

  it('prints the URL the SDK builds, from pairs or --transform', async () => {
    const options = { baseUrl: BASE, signingKey: KEY };
    assert.deepEqual(await url(['file_abc', '--w', '720', '--fit=cover', '--g', 'attention', '--dpr', '1.5'], env), {
      code: 0,
      stdout: `${deliveryUrlSync('file_abc', { w: 720, fit: 'cover', g: 'attention', dpr: 1.5 }, options)}\n`,
      stderr: '',
    });
    assert.equal(
      (await url(['file_abc', '--transform', 'f:webp,w:10', '--json'], env)).stdout,
      `${JSON.stringify({ url: deliveryUrlSync('file_abc', 'f:webp,w:10', options) })}\n`,
    );
    assert.equal(
      (await url(['--', 'o/shop/-a b.jpg'], env)).stdout,
      `${deliveryUrlSync({ origin: 'shop', path: '-a b.jpg' }, undefined, options)}\n`,
    );
  });

  it("a usage error is one line naming the problem, then the command's usage, exit 2", async () => {
    const cases: [string[], Record<string, string>, string][] = [
      [['file_abc', '--w', '10', '--transform', 'h:10'], env, 'url: give the transform either as --transform or as pairs (--w …), not both'],
      [['file_abc', '--w', '10', '--w', '20'], env, 'url: --w is given twice'],
      [['file_abc', '--w'], env, 'url: --w needs a value'],
      [['file_abc', 'file_def'], env, 'url: name one source: a fileId or o/<origin>/<path>'],
      [[], env, 'url: name one source: a fileId or o/<origin>/<path>'],
      [['o/shop'], env, 'url: "o/shop" names no path: write o/<origin>/<path>'],
      [['o/shop/a/../b.jpg'], env, 'url: the origin path "a/../b.jpg" has a "." or ".." segment'],
      [
        ['file_abc', '--transform', 'w:1,constructor:2'],
        env,
        'url: unknown transform name "constructor"; known: p, w, h, fit, g, dpr, f, q, bg, rot, flip, blur, sharpen, page',
      ],
      [
        ['file_abc', '--p', 'card', '--w', '10', '--public'],
        env,
        'url: an unsigned (_) URL takes exactly one public preset as its transform: "p:name"',
      ],
      [['file_abc'], { ...env, IMGAPI_URL: 'not a url' }, 'url: --url (or IMGAPI_URL) is not a URL: "not a url"'],
    ];
    for (const [args, caseEnv, line] of cases) {
      const result = await url(args, caseEnv);
      assert.equal(result.code, 2, args.join(' '));
      assert.equal(result.stdout, '');
      const [first, blank, usage] = result.stderr.split('\n');
      assert.deepEqual([first, blank, usage], [`imgapi: ${line}`, '', 'Usage:'], args.join(' '));
      assert.match(result.stderr, /^ {2}url <fileId \| o\/<origin>\/<path>>/m);
    }
  });
});

for (const dialect of DIALECTS) {
  describe(`delivery URLs built by the SDK, against a real server (${dialect})`, () => {
    let server: TestServer;
    let origin: http.Server;
    const originPaths: string[] = [];
    let imgapi: Imgapi;
    let keyId: string;
    let fileId: string;

    before(async () => {
      server = await startPublicServer(dialect, { env: { ORIGIN_ALLOW_PRIVATE_NETWORKS: '1' } });
      // An origin on loopback that serves the JPEG at one path with a space, unicode, ? and # in it.
      origin = http.createServer((request, response) => {
        originPaths.push(request.url ?? '');
        if (decodeURIComponent(request.url ?? '') === '/shop/photos/été 1?#.jpg')
          response.writeHead(200, { 'content-type': 'image/jpeg' }).end(fs.readFileSync(JPEG));
        else response.writeHead(404).end();
      });
      await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
      const admin = new Imgapi({ baseUrl: server.url, apiKey: await server.newKey('pro') });
      const created = await admin.api.POST('/api/signing-keys', {});
      assert.equal(created.response.status, 201);
      keyId = created.data!.data.keyId;
      imgapi = new Imgapi({ baseUrl: server.url, apiKey: await server.newKey('pro'), signingKey: { keyId, secret: created.data!.data.secret } });
      fileId = (await admin.upload(JPEG)).fileId;
      const originCreated = await admin.api.POST('/api/origins', {
        body: { name: 'shop', baseUrl: `http://127.0.0.1:${(origin.address() as AddressInfo).port}/shop` },
      });
      assert.equal(originCreated.response.status, 201, JSON.stringify(originCreated.error));
      const preset = await admin.api.POST('/api/presets', { body: { name: 'thumb', transform: 'w:40,f:png', public: true } });
      assert.equal(preset.response.status, 201, JSON.stringify(preset.error));
    });
    after(async () => {
      origin?.close();
      await server?.close();
    });

    /** GET the URL: its status, type and, for an image, its width. */
    async function render(url: string): Promise<{ status: number; type: string | null; width?: number; code?: string }> {
      const response = await fetch(url, { headers: { accept: 'image/avif,image/webp,*/*' } });
      const bytes = Buffer.from(await response.arrayBuffer());
      if (!response.ok) return { status: response.status, type: response.headers.get('content-type'), code: JSON.parse(bytes.toString()).error.code };
      return { status: response.status, type: response.headers.get('content-type'), width: (await sharp(bytes).metadata()).width };
    }

    it('a stored file renders at the width and format asked (async and sync URLs alike); a tampered URL is 403', async () => {
      const url = await imgapi.url(fileId, { w: 120, f: 'png' });
      assert.equal(imgapi.urlSync(fileId, { w: 120, f: 'png' }), url);
      assert.deepEqual(await render(url), { status: 200, type: 'image/png', width: 120 });
      // dpr multiplies the width; f:auto answers what Accept prefers.
      assert.deepEqual(await render(await imgapi.url(fileId, { w: 60, dpr: 2, f: 'auto' })), { status: 200, type: 'image/avif', width: 120 });

      const parts = url.split('/');
      const signature = parts[5]!;
      parts[5] = (signature[0] === 'A' ? 'B' : 'A') + signature.slice(1);
      assert.deepEqual(await render(parts.join('/')), { status: 403, type: 'application/json; charset=utf-8', code: 'SIGNATURE_INVALID' });
      // The signature covers the transform: the same signature with another width is refused.
      assert.equal((await render(url.replace('w:120', 'w:121'))).code, 'SIGNATURE_INVALID');
    });

    it("an origin's path with a space, unicode, ? and # reaches the origin as encoded and renders", async () => {
      const url = await imgapi.url({ origin: 'shop', path: 'photos/été 1?#.jpg' }, 'w:50,f:webp');
      assert.deepEqual(await render(url), { status: 200, type: 'image/webp', width: 50 });
      assert.ok(originPaths.includes('/shop/photos/%C3%A9t%C3%A9%201%3F%23.jpg'), originPaths.join(', '));
    });

    it('a public preset renders unsigned (_), with no secret in the client', async () => {
      const unsigned = new Imgapi({ baseUrl: server.url, signingKey: { keyId } });
      const url = unsigned.urlSync(fileId, 'p:thumb', { publicPreset: true });
      assert.match(url, /\/_\/p:thumb\//);
      assert.deepEqual(await render(url), { status: 200, type: 'image/png', width: 40 });
    });
  });
}
