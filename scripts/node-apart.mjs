// Loaded (NODE_OPTIONS=--import) into every process of the Node that setup brought into .node/
// while the checkout's node_modules are built for another Node — a node_modules shared with other
// checkouts that still run the system's Node, which nobody may rebuild in place. The native
// modules listed in .node/apart.json (those node-gyp compiles: better-sqlite3) are then resolved
// from .node/node_modules, built for this Node; everything else still from node_modules.
// When node_modules are built for this Node (a fresh clone's, or after the switch), setup
// removes apart.json and this hook is not loaded.
import fs from 'node:fs';
import { registerHooks } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const apart = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '.node');
const names = new Set(JSON.parse(fs.readFileSync(path.join(apart, 'apart.json'), 'utf8')).packages);
// Resolving as if imported from a file in .node/ finds .node/node_modules first.
const parentURL = pathToFileURL(path.join(apart, 'apart.mjs')).href;

registerHooks({
  resolve(specifier, context, nextResolve) {
    const name = specifier.startsWith('@') ? specifier.split('/', 2).join('/') : specifier.split('/', 1)[0];
    return names.has(name) ? nextResolve(specifier, { ...context, parentURL }) : nextResolve(specifier, context);
  },
});
