// Temporary files and directories carry the name of the process that writes them, so what a
// killed process left behind (a SIGKILL mid-upload, a crash mid-task) is told apart from what a
// running one is still writing, and swept at the next start and periodically after.
//
// A name is `<prefix><host>-<pid>-<instance>-…`: `host` hashes the host name, `instance` is
// random per process start (a restarted container runs as the same pid on the same host).
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Entries whose writer cannot be checked from here (another machine on a shared volume, names
 * from before this scheme, a reused pid) are abandoned once untouched this long: nothing live
 * goes that long without a write (bodies stall out after BODY_STALL_SECONDS, tasks time out).
 */
const UNTOUCHED_STALE_MS = 24 * 3600_000;

/** The directories of tasks, previews and delivery renders under the system's temporary directory. */
const WORK_DIR_PREFIXES = ['imgapi-task-', 'imgapi-preview-', 'imgapi-render-'];

const HOST = crypto.createHash('sha256').update(os.hostname()).digest('hex').slice(0, 8);
const INSTANCE = crypto.randomBytes(4).toString('hex');
const OWNER = /^([0-9a-f]{8})-(\d+)-([0-9a-f]{8})-/;

/** The start of a temporary name owned by this process (e.g. for fs.mkdtemp). */
export function ownedTempPrefix(prefix: string): string {
  return `${prefix}${HOST}-${process.pid}-${INSTANCE}-`;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether the entry `name` (under `prefix`) was left by a process that no longer writes it. */
function isAbandoned(name: string, prefix: string, modifiedAt: number, now: number): boolean {
  const owner = OWNER.exec(name.slice(prefix.length));
  if (owner && owner[1] === HOST) {
    const pid = Number(owner[2]);
    if (pid === process.pid) {
      if (owner[3] !== INSTANCE) return true; // an earlier process that ran as this pid
    } else if (!isRunning(pid)) {
      return true;
    }
  }
  return now - modifiedAt > UNTOUCHED_STALE_MS;
}

/** Removes the abandoned entries of `dir` whose names start with `prefix`; returns how many. */
export async function removeAbandoned(dir: string, prefix: string, now = Date.now()): Promise<number> {
  let names: string[];
  try {
    names = await fs.promises.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  let removed = 0;
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const entry = path.join(dir, name);
    const stat = await fs.promises.lstat(entry).catch(() => undefined);
    if (!stat || !isAbandoned(name, prefix, stat.mtimeMs, now)) continue;
    await fs.promises.rm(entry, { recursive: true, force: true });
    removed++;
  }
  return removed;
}

/** Task and preview directories abandoned under the system's temporary directory. */
export async function removeAbandonedWorkDirs(now = Date.now()): Promise<number> {
  let removed = 0;
  for (const prefix of WORK_DIR_PREFIXES) removed += await removeAbandoned(os.tmpdir(), prefix, now);
  return removed;
}
