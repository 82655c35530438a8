// The converter sandbox. LibreOffice and poppler load whatever their input names — an SVG
// part's <image href="file:///…">, an ODP picture linked by path, an OLE object, a font — so
// run as they are they can read every file this process can, every account's stored objects
// among them. Each run is therefore wrapped in bubblewrap (bwrap): its own user, PID, network,
// IPC, UTS and cgroup namespaces (--unshare-all: no network, no other process in sight), no
// capabilities, a cleared environment, and a root of its own that holds only the read-only
// system (/usr with the /bin, /lib… links, the few parts of /etc and /var the programs read),
// empty /tmp, /proc and /dev, and the paths the run is given: its work directory read-write,
// its inputs read-only. DATA_DIR is masked even if it lies under a system directory. bwrap
// dies with the process that started it, and the whole sandbox with it.
//
// CONVERTER_SANDBOX=required (the default) sandboxes, and fails the conversions when bwrap cannot
// set a sandbox up here (a probe, repeated each minute); `auto` runs the programs unconfined then,
// as /readyz and the log say; `off` never sandboxes. Unconfined or
// not, a program gets a minimal environment: no credential of this process reaches it.
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config, SandboxMode } from '../config.js';
import { TaskError } from '../errors.js';
import { findExecutable, lastLines, ProgramMissing, runProcess, type RunOptions, type RunResult } from './processes.js';

export interface SandboxOptions {
  mode: SandboxMode;
  /** bubblewrap's program: a name on PATH or a path. */
  command: string;
  /** Directories no sandboxed program may see, even under a system directory (DATA_DIR). */
  hidden: string[];
  logger?: Logger;
}

/** What a run may reach besides the read-only system; every path must exist. */
export interface Access {
  readOnly?: string[];
  writable?: string[];
}

export type SandboxStatus = { confined: true } | { confined: false; reason: string };

/** A conversion refused because CONVERTER_SANDBOX=required and no sandbox can be set up. */
export class SandboxUnavailable extends TaskError {
  constructor(readonly reason: string) {
    super(
      'CONVERSION_FAILED',
      `Documents are not converted on this server without the converter sandbox (CONVERTER_SANDBOX=required), which cannot be set up: ${reason}`,
    );
  }
}

/** System directories bound read-only (those that exist); /bin, /lib… are links into /usr on merged systems. */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/** What the programs read outside /usr: fontconfig, LibreOffice's links into /etc, the loader's cache. */
const SYSTEM_FILES = ['/etc/fonts', '/etc/libreoffice', '/etc/ld.so.cache', '/etc/alternatives', '/var/cache/fontconfig'];
/** How long a probe's answer stands. */
const PROBE_TTL_MS = 60_000;

/** The sandbox the configuration asks for; DATA_DIR (and a SQLite database's directory) hidden. */
export function createSandbox(config: Config, logger?: Logger): Sandbox {
  const hidden = [config.dataDir];
  if (config.database.dialect === 'sqlite') hidden.push(path.dirname(path.resolve(config.database.file)));
  return new Sandbox({ mode: config.converterSandbox, command: config.bwrapCommand, hidden, logger });
}

export class Sandbox {
  private probe: { at: number; status: Promise<SandboxStatus> } | undefined;
  private lastReported: string | undefined;

  /** The hidden directories as they really are (DATA_DIR may be reached through a link). */
  private readonly hidden: string[];

  constructor(private readonly options: SandboxOptions) {
    this.hidden = options.hidden.map(realPath);
  }

  get mode(): SandboxMode {
    return this.options.mode;
  }

  /** Whether runs are confined now: bwrap is installed and a sandbox could be set up (probed at most once a minute). */
  status(): Promise<SandboxStatus> {
    if (this.options.mode === 'off') return Promise.resolve({ confined: false, reason: 'CONVERTER_SANDBOX=off' });
    const now = Date.now();
    if (!this.probe || now - this.probe.at > PROBE_TTL_MS) {
      const status = this.runProbe().then((result) => {
        this.report(result);
        return result;
      });
      this.probe = { at: now, status };
    }
    return this.probe.status;
  }

  /**
   * Runs `command args` (see runProcess) inside the sandbox, reaching only `access`; unconfined
   * when no sandbox can be set up and the mode allows it; SandboxUnavailable when it does not.
   * Rejects with ProgramMissing when the program is not installed.
   */
  async run(command: string, args: string[], access: Access, options: RunOptions): Promise<RunResult> {
    const executable = findExecutable(command);
    if (!executable) throw new ProgramMissing(command, 'ENOENT');
    const env = { ...minimalEnvironment(access), ...options.env };
    const status = await this.status();
    const bwrap = status.confined ? findExecutable(this.options.command) : undefined;
    if (!bwrap) {
      const reason = status.confined ? `${this.options.command} (bubblewrap) is no longer installed` : status.reason;
      if (this.options.mode === 'required') throw new SandboxUnavailable(reason);
      return runProcess(executable, args, { ...options, env });
    }
    const confined = [
      ...this.systemArguments(),
      ...this.accessArguments(access, executable, options.cwd),
      ...environmentArguments(env),
      '--',
      executable,
      ...args,
    ];
    const run = await runProcess(bwrap, confined, { ...options, cwd: undefined, env: { PATH: process.env.PATH ?? '' } });
    return signalFromExitCode(run);
  }

  /** The sandbox without the run's own paths: the system, masks, fresh /proc, /dev and /tmp. */
  private systemArguments(): string[] {
    const args = ['--unshare-all', '--die-with-parent', '--new-session', '--cap-drop', 'ALL'];
    for (const dir of SYSTEM_DIRS) {
      const stat = lstat(dir);
      if (stat?.isSymbolicLink()) args.push('--symlink', fs.readlinkSync(dir), dir);
      else if (stat?.isDirectory()) args.push('--ro-bind', dir, dir);
    }
    for (const file of SYSTEM_FILES) args.push('--ro-bind-try', file, file);
    // An empty directory over DATA_DIR wherever a system directory would show it.
    for (const dir of this.hidden) if (SYSTEM_DIRS.some((root) => within(dir, root))) args.push('--tmpfs', dir);
    args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
    return args;
  }

  /** The run's own paths, and the program itself, unless the read-only system shows them already. */
  private accessArguments(access: Access, executable: string, cwd: string | undefined): string[] {
    const shown = (file: string) => SYSTEM_DIRS.some((root) => within(file, root)) && !this.hidden.some((dir) => within(file, dir));
    const args: string[] = [];
    for (const file of [...(access.readOnly ?? []), fs.realpathSync(executable)]) if (!shown(file)) args.push('--ro-bind', file, file);
    for (const dir of access.writable ?? []) args.push('--bind', dir, dir);
    if (cwd) args.push('--chdir', cwd);
    return args;
  }

  /** Whether bwrap can set up this sandbox here: unprivileged user namespaces may be off, a container may forbid them. */
  private async runProbe(): Promise<SandboxStatus> {
    const bwrap = findExecutable(this.options.command);
    if (!bwrap) return { confined: false, reason: `${this.options.command} (bubblewrap) is not installed` };
    const probe = findExecutable('true');
    if (!probe) return { confined: false, reason: 'no `true` program to probe the sandbox with' };
    try {
      const run = await runProcess(bwrap, [...this.systemArguments(), '--clearenv', '--', probe], { timeoutMs: 10_000 });
      if (run.code === 0) return { confined: true };
      return { confined: false, reason: `bwrap cannot set up a sandbox here: ${lastLines(run.stderr) || `exit code ${run.code ?? run.signal}`}` };
    } catch (err) {
      return { confined: false, reason: `bwrap cannot be run: ${(err as Error).message}` };
    }
  }

  /** Logs when the answer changes: a warning while converters run unconfined. */
  private report(status: SandboxStatus): void {
    const said = status.confined ? 'confined' : status.reason;
    if (said === this.lastReported) return;
    this.lastReported = said;
    if (status.confined) this.options.logger?.info('document converters run in the bwrap sandbox');
    else if (this.options.mode === 'required')
      this.options.logger?.error(
        { reason: status.reason },
        'the converter sandbox cannot be set up: presentation conversions fail (CONVERTER_SANDBOX=required)',
      );
    else
      this.options.logger?.warn(
        { reason: status.reason },
        'the converter sandbox cannot be set up: LibreOffice and poppler run unconfined and can read any file this process can',
      );
  }
}

/** PATH, HOME (the first writable directory), a UTF-8 locale. */
function minimalEnvironment(access: Access): NodeJS.ProcessEnv {
  return {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: access.writable?.[0] ?? os.tmpdir(),
    LANG: 'C.UTF-8',
  };
}

function environmentArguments(env: NodeJS.ProcessEnv): string[] {
  const args = ['--clearenv'];
  for (const [name, value] of Object.entries(env)) if (value !== undefined) args.push('--setenv', name, value);
  return args;
}

/**
 * bwrap exits 128 + n when the program was killed by signal n (the shell's convention): the
 * run reports the signal, as for an unconfined program (a crash is then told from a failure).
 */
function signalFromExitCode(run: RunResult): RunResult {
  if (run.signal || run.code === null || run.code <= 128) return run;
  const signal = Object.entries(os.constants.signals).find(([, number]) => number === run.code! - 128)?.[0] as NodeJS.Signals | undefined;
  return signal ? { ...run, code: null, signal } : run;
}

function within(file: string, dir: string): boolean {
  const relative = path.relative(dir, file);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

function realPath(file: string): string {
  try {
    return fs.realpathSync(file);
  } catch {
    return path.resolve(file);
  }
}

function lstat(file: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(file);
  } catch {
    return undefined;
  }
}
