// Starting a worker thread whose code is a module of this service, beside its caller: compiled
// (`.js`, from dist) or run through tsx (`.ts`: tests, `node --import tsx`). A worker thread does
// not get the main thread's loader hooks, so from the sources it registers tsx's first.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/** A new thread running the module `name` (without extension) in the directory of `callerUrl`. */
export function startWorkerThread(callerUrl: string, name: string): Worker {
  const here = fileURLToPath(callerUrl);
  const entry = path.join(path.dirname(here), `${name}${path.extname(here)}`);
  if (!entry.endsWith('.ts')) return new Worker(entry);
  const tsx = import.meta.resolve('tsx/esm/api');
  const code = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(pathToFileURL(entry).href)}); });`;
  return new Worker(code, { eval: true });
}
