// sdk/package.json is a package of its own (@imgapi/sdk); npm run test:sdk-package packs and
// installs it for real (too slow for the suite). This keeps the cheap facts true on every run.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { REPO_ROOT } from '../helpers.js';

const read = (file: string) => JSON.parse(fs.readFileSync(path.join(REPO_ROOT, file), 'utf8')) as Record<string, any>;

describe('@imgapi/sdk package', () => {
  const sdk = read('sdk/package.json');

  it("carries the service's version and says what changed in it", () => {
    assert.equal(sdk.name, '@imgapi/sdk');
    assert.equal(sdk.version, read('package.json').version);
    const changelog = fs.readFileSync(path.join(REPO_ROOT, 'sdk', 'CHANGELOG.md'), 'utf8');
    assert.match(changelog, new RegExp(`^## ${sdk.version.replace(/\./g, '\\.')}$`, 'm'), 'sdk/CHANGELOG.md has a section for this version');
  });

  it('exports, with types, exactly what sdk:build compiles', () => {
    // sdk/tsconfig.json is JSON with comments.
    const tsconfig = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'sdk', 'tsconfig.json'), 'utf8').replace(/^\s*\/\/.*$/gm, '')) as {
      files: string[];
    };
    for (const [entry, source] of [
      ['.', 'index.ts'],
      ['./node', 'node.ts'],
    ] as const) {
      const target = sdk.exports[entry];
      assert.ok(tsconfig.files.includes(source), `${source} is built`);
      assert.equal(target.types, `./dist/${source.replace(/\.ts$/, '.d.ts')}`);
      assert.equal(target.default ?? target.node, `./dist/${source.replace(/\.ts$/, '.js')}`);
    }
    assert.equal(sdk.exports['./node'].default, undefined, 'the Node entry resolves only under the node condition');
    for (const file of ['README.md', 'CHANGELOG.md']) assert.ok(sdk.files.includes(file));
  });

  it("depends only on what the root package provides, at the root's range", () => {
    const root = read('package.json');
    for (const [name, range] of Object.entries(sdk.dependencies as Record<string, string>)) assert.equal(root.dependencies[name], range, name);
  });
});
