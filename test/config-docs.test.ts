// The environment variables are declared once (VARIABLES in src/config.ts): loadConfig reads
// exactly those, and docs/configuration.md's table and `imgapi help` are generated from them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { CONFIGURATION_DOC, withEnvironmentTable } from '../scripts/config-docs.js';
import { VARIABLES, loadConfig } from '../src/config.js';
import { MAIN_ENTRY, REPO_ROOT } from './helpers.js';

const NAMES = Object.keys(VARIABLES).sort();

describe('environment variables', () => {
  it('loadConfig reads every declared variable and no other', () => {
    const read = new Set<string>();
    // STORAGE=s3 with no region: every S3 variable and the whole region fallback chain are read.
    const given: Record<string, string> = { STORAGE: 's3', S3_BUCKET: 'imgapi-files' };
    const env = new Proxy(given, {
      get(target, name) {
        if (typeof name === 'string') read.add(name);
        return target[name as string];
      },
    });
    loadConfig(env);
    assert.deepEqual([...read].sort(), NAMES);
  });

  it("docs/configuration.md's table is the one generated from src/config.ts (npm run docs:config rewrites it)", () => {
    const page = fs.readFileSync(CONFIGURATION_DOC, 'utf8');
    assert.equal(page, withEnvironmentTable(page), 'run `npm run docs:config` and commit docs/configuration.md');
    for (const name of NAMES) assert.ok(page.includes(`| \`${name}\` |`), `${name} has a row`);
  });

  it('`imgapi help` lists every variable', () => {
    const help = spawnSync(process.execPath, [...MAIN_ENTRY, 'help'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    assert.equal(help.status, 0, help.stderr);
    const listed = [...help.stdout.matchAll(/^ {2}([A-Z][A-Z0-9_]+) /gm)].map((m) => m[1]).sort();
    assert.deepEqual(listed, NAMES);
  });
});
