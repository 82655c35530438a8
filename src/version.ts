// The service's version, from one place: package.json's "version". The server (/healthz, the
// OpenAPI document's info.version, the start-up line), `imgapi --version` and the container
// image's labels all report this; the SDK's package.json is kept at the same number.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout's root (the nearest folder above this module with a package.json): src/ and dist/src/ alike. */
export function repositoryRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
}

export const VERSION: string = (JSON.parse(fs.readFileSync(path.join(repositoryRoot(), 'package.json'), 'utf8')) as { version: string }).version;
