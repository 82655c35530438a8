#!/usr/bin/env node
// `npx imgapi …` from a checkout: build first when the compiled code is missing or stale. An
// installed build without the sources (the container image) runs what it has.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
if (fs.existsSync(path.join(root, 'src'))) {
  // Setup's notes go to stderr: stdout belongs to the command (`keys create` prints the key there).
  const setup = spawnSync(process.execPath, [path.join(root, 'scripts', 'setup.mjs'), '--build-only'], { stdio: ['ignore', 2, 2], cwd: root });
  if (setup.status !== 0) process.exit(setup.status ?? 1);
}
if (fs.existsSync(path.join(root, 'scripts', 'node-runtime.mjs'))) {
  // Under the Node setup brought when the system's is too old: this script again, there.
  const { reexecUnderProjectNode } = await import(path.join(root, 'scripts', 'node-runtime.mjs'));
  await reexecUnderProjectNode(root, fileURLToPath(import.meta.url));
}
await import(path.join(root, 'dist', 'src', 'main.js'));
