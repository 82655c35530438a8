// JPEG XL inputs for the tests: the corpus has none, so real ones are made from corpus photos by
// libjxl's own encoder (cjxl, Debian's libjxl-tools: scripts/setup.mjs installs it for tests),
// and a hostile one is written bit by bit.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { corpusFile, tempDir } from '../helpers.js';

/**
 * The corpus file `relative` (or PNG bytes) encoded by cjxl with `args` (`--container=1` for the
 * ISO-BMFF form). cjxl 0.7 keeps a JPEG's EXIF in a container: a bare codestream is made from a PNG.
 */
export function cjxl(input: string | Buffer, args: string[] = []): Buffer {
  const dir = tempDir('jxl-');
  try {
    const out = path.join(dir, 'out.jxl');
    const source = typeof input === 'string' ? corpusFile(input) : path.join(dir, 'in.png');
    if (typeof input !== 'string') fs.writeFileSync(source, input);
    execFileSync('cjxl', [source, out, '--quiet', '-e', '3', '-d', '1', '--lossless_jpeg=0', ...args], { stdio: 'pipe' });
    return fs.readFileSync(out);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** `file` (JPEG XL) decoded by libjxl's djxl to PNG, or a throw (with djxl's message) when it cannot. */
export function djxl(file: Buffer): Buffer {
  const dir = tempDir('djxl-');
  try {
    fs.writeFileSync(path.join(dir, 'in.jxl'), file);
    execFileSync('djxl', [path.join(dir, 'in.jxl'), path.join(dir, 'out.png')], { stdio: 'pipe' });
    return fs.readFileSync(path.join(dir, 'out.png'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** A bare codestream whose SizeHeader declares `width` × `height` (1:1 or any: ratio 0), then nothing that decodes. */
export function jxlDeclaring(width: number, height: number): Buffer {
  const bits: number[] = [];
  const put = (value: number, n: number) => {
    for (let i = 0; i < n; i++) bits.push(Math.floor(value / 2 ** i) % 2);
  };
  // div8 0; height: selector 3 (30 bits); ratio 0; width: selector 3 (30 bits).
  put(0, 1);
  put(3, 2);
  put(height - 1, 30);
  put(0, 3);
  put(3, 2);
  put(width - 1, 30);
  put(1, 1); // ImageMetadata: all_default
  const bytes = Buffer.alloc(Math.ceil(bits.length / 8) + 64);
  bits.forEach((bit, i) => (bytes[i >> 3] = bytes[i >> 3]! | (bit << (i & 7))));
  return Buffer.concat([Buffer.from([0xff, 0x0a]), bytes]);
}
