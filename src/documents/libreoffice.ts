// The LibreOffice supervisor: one headless soffice per conversion, each with a fresh profile
// directory (removed after), as the leader of its own process group, killed whole at the
// timeout, on cancel and after it exits. A pool caps how many run at once; the time spent
// waiting for a slot is measured apart from the run. soffice exits 0 even when it could not
// load the file, so success is a PDF that exists; the caller then checks it has pages.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { TaskError } from '../errors.js';
import { findExecutable, lastLines, ProgramMissing, runProcess, type RunResult } from './processes.js';

export interface LibreOfficeOptions {
  command: string;
  timeoutMs: number;
  concurrency: number;
  /** Told of every conversion: how long it waited for a slot and how long soffice ran. */
  onConversion?: (event: ConversionEvent) => void;
}

export interface ConversionEvent {
  outcome: 'converted' | 'failed' | 'timeout' | 'canceled' | 'missing';
  waitMs: number;
  runMs: number;
  exitCode?: number | null;
  signal?: string | null;
  detail?: string;
}

export interface Conversion {
  pdfPath: string;
  waitMs: number;
  runMs: number;
}

/**
 * The profile every conversion starts from. Macros are off twice over: document macros never
 * run (DisableMacrosExecution), and the security level is "very high" with no trusted
 * location. Linked content from untrusted referers is blocked.
 */
const REGISTRY = `<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseLocking" oor:op="fuse"><value>false</value></prop></item>
</oor:items>
`;

/** Writes a fresh LibreOffice profile (user installation) into `dir`. */
export async function writeProfile(dir: string): Promise<void> {
  await fs.promises.mkdir(path.join(dir, 'user'), { recursive: true });
  await fs.promises.writeFile(path.join(dir, 'user', 'registrymodifications.xcu'), REGISTRY);
}

/** The file extension LibreOffice's type detection expects for each stored format. */
const EXTENSIONS: Record<string, string> = { pptx: 'pptx', ppsx: 'ppsx', ppt: 'ppt', odp: 'odp' };

export class LibreOffice {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly options: LibreOfficeOptions) {}

  /** Whether the soffice command can be found (looked up anew each time). */
  available(): boolean {
    return findExecutable(this.options.command) !== undefined;
  }

  get stats(): { running: number; waiting: number; concurrency: number } {
    return { running: this.running, waiting: this.waiting.length, concurrency: this.options.concurrency };
  }

  /**
   * Converts the presentation at `input` (stored as `format`) to PDF under `workDir`.
   * Fails with TaskError: CONVERSION_TIMEOUT, CONVERSION_FAILED (transient when soffice
   * crashed); rejects with the signal's reason when `signal` aborts.
   */
  async toPdf(input: string, format: string, workDir: string, { signal, deadline }: { signal?: AbortSignal; deadline?: number } = {}): Promise<Conversion> {
    if (!this.available()) {
      this.options.onConversion?.({ outcome: 'missing', waitMs: 0, runMs: 0 });
      throw missing(this.options.command);
    }
    const queued = Date.now();
    const release = await this.acquire(signal);
    const waitMs = Date.now() - queued;
    const dir = await fs.promises.mkdtemp(path.join(workDir, 'soffice-'));
    const profile = path.join(dir, 'profile');
    const outDir = path.join(dir, 'out');
    let run: RunResult | undefined;
    let event: ConversionEvent = { outcome: 'failed', waitMs, runMs: 0 };
    try {
      await writeProfile(profile);
      await fs.promises.mkdir(outDir);
      await fs.promises.mkdir(path.join(dir, 'tmp'));
      // A copy under the name LibreOffice's type detection expects, in a directory of its own.
      const source = path.join(dir, `input.${EXTENSIONS[format] ?? format}`);
      await fs.promises.copyFile(input, source, fs.constants.COPYFILE_FICLONE);
      const timeoutMs = Math.max(1, Math.min(this.options.timeoutMs, deadline === undefined ? Infinity : deadline - Date.now()));
      run = await runProcess(
        this.options.command,
        [
          `-env:UserInstallation=${pathToFileURL(profile).href}`,
          '--headless',
          '--invisible',
          '--norestore',
          '--nologo',
          '--nodefault',
          '--nolockcheck',
          '--convert-to',
          'pdf:impress_pdf_Export',
          '--outdir',
          outDir,
          source,
        ],
        { timeoutMs, signal, cwd: dir, env: { ...process.env, TMPDIR: path.join(dir, 'tmp') } },
      ).catch((err) => {
        if (err instanceof ProgramMissing) throw missing(this.options.command);
        throw err;
      });
      event = { ...event, runMs: run.durationMs, exitCode: run.code, signal: run.signal };
      if (run.aborted) {
        event.outcome = 'canceled';
        throw signal?.reason instanceof Error ? signal.reason : new Error('canceled');
      }
      if (run.timedOut) {
        event.outcome = 'timeout';
        throw new TaskError('CONVERSION_TIMEOUT', `LibreOffice did not finish converting the presentation within ${Math.round(timeoutMs / 1000)} s and was stopped`);
      }
      const pdfPath = path.join(outDir, 'input.pdf');
      const stat = await fs.promises.stat(pdfPath).catch(() => undefined);
      // Success is a PDF, whatever the exit code says (the caller checks it has pages).
      if (stat && stat.size > 0 && !run.signal) {
        event.outcome = 'converted';
        return { pdfPath, waitMs, runMs: run.durationMs };
      }
      const said = lastLines(run.stderr) || lastLines(run.stdout);
      event.detail = said;
      if (run.signal) {
        // A crash may be the machine's (memory) as much as the file's: worth another attempt.
        throw new TaskError('CONVERSION_FAILED', `LibreOffice stopped with ${run.signal} while converting the presentation`, true);
      }
      if (run.code !== 0) throw new TaskError('CONVERSION_FAILED', `LibreOffice failed (exit code ${run.code}) while converting the presentation${said ? `: ${said}` : ''}`);
      throw new TaskError('CONVERSION_FAILED', `LibreOffice could not load the presentation${/could not be loaded/i.test(said) ? ' (the file is damaged or not a presentation it reads)' : said ? `: ${said}` : ''}`);
    } finally {
      release();
      this.options.onConversion?.(event);
      // The profile is this conversion's alone; the PDF stays for the caller (under workDir).
      await fs.promises.rm(profile, { recursive: true, force: true });
      await fs.promises.rm(path.join(dir, 'tmp'), { recursive: true, force: true });
    }
  }

  /** A slot of the pool, in arrival order; the returned function gives it back (once). */
  private async acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) throw signal.reason;
    if (this.running < this.options.concurrency) {
      this.running++;
    } else {
      await new Promise<void>((resolve, reject) => {
        const grant = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = () => {
          const index = this.waiting.indexOf(grant);
          if (index >= 0) this.waiting.splice(index, 1);
          reject(signal!.reason);
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        this.waiting.push(grant);
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      // The slot passes straight to the next in line; `running` only drops when nobody waits.
      if (next) next();
      else this.running--;
    };
  }
}

function missing(command: string): TaskError {
  return new TaskError('CONVERSION_FAILED', `LibreOffice (${command}) is not installed on this server, so presentations cannot be converted`);
}
