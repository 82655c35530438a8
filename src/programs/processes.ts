// Child processes for the document tools (LibreOffice, poppler). Each runs as the leader of a
// process group of its own, so a timeout, a cancel or plain cleanup kills everything it started
// (soffice's oosplash and soffice.bin, helpers a stand-in forks), never just the leader.
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';

export interface RunOptions {
  /** Killed (the whole group, SIGKILL) after this long. */
  timeoutMs: number;
  /** Killed likewise when this aborts (the task was canceled or lost its lease). */
  signal?: AbortSignal;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Bytes of stdout and stderr kept (the tail); the rest is drained. */
  keepOutputBytes?: number;
  /**
   * A long-lived program this process talks to (a warm LibreOffice): its stdin is a pipe, `onSpawn`
   * gets the child to write to and read from, and neither the child nor its timer keeps Node running.
   */
  service?: { onSpawn: (child: ChildProcessByStdio<Writable, Readable, Readable>) => void };
}

export interface RunResult {
  /** Exit code, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
  stdout: string;
  stderr: string;
  durationMs: number;
  pid: number | undefined;
}

/** The program could not be started at all (not installed, not executable). */
export class ProgramMissing extends Error {
  constructor(
    readonly program: string,
    cause: string,
  ) {
    super(`${program} could not be started: ${cause}`);
    this.name = 'ProgramMissing';
  }
}

/** SIGKILL to the whole group led by `pid`; a group that is already gone is fine. */
export function killGroup(pid: number | undefined): void {
  if (!pid) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/**
 * Runs `command args` without a shell as a new process group, and resolves when it has exited
 * and its group has been killed (whatever it left running). Never rejects for how the program
 * ended; rejects with ProgramMissing when it could not start.
 */
export function runProcess(command: string, args: string[], options: RunOptions): Promise<RunResult> {
  const keep = options.keepOutputBytes ?? 16 * 1024;
  const started = Date.now();
  return new Promise<RunResult>((resolve, reject) => {
    if (options.signal?.aborted) {
      resolve({ code: null, signal: null, timedOut: false, aborted: true, stdout: '', stderr: '', durationMs: 0, pid: undefined });
      return;
    }
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      detached: true,
      stdio: [options.service ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    const stdout = new Tail(keep);
    const stderr = new Tail(keep);
    child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk));
    let timedOut = false;
    let aborted = false;
    let spawnError: Error | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
    }, options.timeoutMs);
    const onAbort = () => {
      aborted = true;
      killGroup(child.pid);
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.service && child.stdin && child.pid !== undefined) {
      timer.unref();
      child.unref();
      for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as { unref?: () => void }).unref?.();
      child.stdin.on('error', () => {}); // a write after the program died: its exit tells the rest
      options.service.onSpawn(child as ChildProcessByStdio<Writable, Readable, Readable>);
    }
    child.once('error', (err) => {
      spawnError = err;
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      // The leader is gone; whatever it started in its group goes with it.
      killGroup(child.pid);
      if (spawnError && child.pid === undefined) {
        reject(new ProgramMissing(command, (spawnError as NodeJS.ErrnoException).code ?? spawnError.message));
        return;
      }
      resolve({
        code,
        signal,
        timedOut,
        aborted,
        stdout: stdout.text(),
        stderr: stderr.text(),
        durationMs: Date.now() - started,
        pid: child.pid,
      });
    });
  });
}

/** Keeps the last `limit` bytes written to it. */
class Tail {
  private chunks: Buffer[] = [];
  private length = 0;
  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
    while (this.length - this.chunks[0]!.length >= this.limit) this.length -= this.chunks.shift()!.length;
  }

  text(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.limit)).toString('utf8');
  }
}

/**
 * Where `command` would be run from: itself when it names a path, else the first executable
 * of that name on PATH; undefined when there is none. Looked up anew on every call, so a
 * converter installed while the service runs is seen at once.
 */
export function findExecutable(command: string, envPath = process.env.PATH ?? ''): string | undefined {
  const candidates = command.includes('/')
    ? [command]
    : envPath
        .split(path.delimiter)
        .filter(Boolean)
        .map((dir) => path.join(dir, command));
  for (const candidate of candidates) {
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // not this one
    }
  }
  return undefined;
}

/**
 * What an external program's output may say in a task's error, a response or the log: its last
 * non-empty lines reduced to safe text. Every tool's message passes through here. Gone: heap
 * addresses (ffmpeg's `[mov,mp4… @ 0x55d0…]` context tags, any `0x` pointer), absolute paths
 * (a task's temporary directory, the data directory: the file's name alone stays), control
 * and format characters (terminal escapes, bidi overrides); at most `maxLength` characters.
 */
export function lastLines(text: string, count = 3, maxLength = 300): string {
  return text
    .split(/[\r\n]+/)
    .map(safeToolLine)
    .filter(Boolean)
    .slice(-count)
    .join(' | ')
    .slice(0, maxLength);
}

function safeToolLine(line: string): string {
  return (
    line
      .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '') // terminal colours, before the escape character itself goes
      .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, ' ')
      // ffmpeg's "[demuxer @ 0x55…] ": the component's name is worth keeping, its address is not.
      .replace(/\[([^\]@]*?)\s*@\s*0x[0-9a-f]+\]/gi, '[$1]')
      .replace(/\b0x[0-9a-f]{4,}\b/gi, '0x…')
      // An absolute path (also as a file: URL) becomes its last segment.
      .replace(/(?:file:\/\/)?(?:\/[^\s/'"`,;:()[\]]+){2,}\/?/g, (found) => found.replace(/\/$/, '').split('/').pop()!)
      .replace(/\s+/g, ' ')
      .trim()
  );
}
