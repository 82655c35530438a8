// The LibreOffice supervisor. A pool caps how many conversions run at once; the time spent
// waiting for a slot is measured apart from the run. Two ways to run one:
//
// - warm (CONVERTER_RESTART_AFTER > 0 and python3-uno installed): a few soffice instances kept
//   running between documents (warm-office.ts), each in its own sandbox with a fresh profile of
//   its own, one document at a time, the document closed and its files removed before the next.
//   An instance is replaced after CONVERTER_RESTART_AFTER conversions (its successor started at
//   once, so the next document finds it warm), after any failure, timeout or cancel (killed
//   whole), and after IDLE_MS without work.
// - one-shot (otherwise): one headless `soffice --convert-to` per document, each with a fresh
//   profile directory (removed after).
//
// Either way soffice runs in the converter sandbox (sandbox.ts), where it sees only its own
// directory (a copy of the input, the profile, the output) and the read-only system, as the
// leader of its own process group, killed whole at the timeout, on cancel and after it exits.
// soffice exits 0 even when it could not load the file, so success is a PDF that exists; the
// caller then checks it has pages.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { TaskError } from '../errors.js';
import { findExecutable, lastLines, ProgramMissing, runProcess, type RunResult } from './processes.js';
import type { Sandbox } from './sandbox.js';
import { CONVERTER_PY, PYTHON, WarmOffice, type Outcome } from './warm-office.js';

/** A warm instance unused this long is stopped (its memory back to the machine). */
const IDLE_MS = 5 * 60_000;

/**
 * The warm instances' directories of this process, removed when it exits even if nobody called
 * close() (the instances themselves die with it: the sandbox's --die-with-parent, and the
 * converter program ends everything it started when its stdin closes).
 */
const roots = new Set<string>();
let exitHook = false;
function removeAtExit(root: string): void {
  roots.add(root);
  if (exitHook) return;
  exitHook = true;
  process.once('exit', () => {
    for (const dir of roots) fs.rmSync(dir, { recursive: true, force: true });
  });
}

export interface LibreOfficeOptions {
  command: string;
  timeoutMs: number;
  concurrency: number;
  sandbox: Sandbox;
  /** Told of every conversion: how long it waited for a slot and how long soffice ran. */
  onConversion?: (event: ConversionEvent) => void;
  /**
   * Conversions one warm instance makes before it is replaced; 0 or absent: one soffice per
   * document. Warm instances need python3-uno; without it conversions run one-shot.
   */
  restartAfter?: number;
  /** How long an unused warm instance is kept (default 5 minutes). */
  idleMs?: number;
  /** Where the warm instances' directories go (default the system's temporary directory). */
  directory?: string;
}

export interface ConversionEvent {
  outcome: 'converted' | 'failed' | 'timeout' | 'canceled' | 'missing';
  waitMs: number;
  runMs: number;
  exitCode?: number | null;
  signal?: string | null;
  detail?: string;
  /** Warm pool only: `reused` an idle instance, took the `prestarted` successor of a retired one, or `started` one for this conversion. */
  instance?: 'reused' | 'prestarted' | 'started';
  /** Warm pool only: which instance (numbered from 1 in this process) converted, and its conversions so far. */
  office?: number;
  conversions?: number;
}

export interface Conversion {
  pdfPath: string;
  waitMs: number;
  runMs: number;
}

/**
 * The profile every conversion starts from. Macros are off twice over: document macros never
 * run (DisableMacrosExecution), and the security level is "very high" with no trusted
 * location. Linked content from untrusted referers is blocked. No recent-documents list, no
 * autosave or recovery data: a warm instance keeps no trace of one document for the next.
 */
const REGISTRY = `<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseLocking" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/History"><prop oor:name="PickListSize" oor:op="fuse"><value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/History"><prop oor:name="RecentDocsThumbnail" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Recovery/AutoSave"><prop oor:name="Enabled" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Recovery/RecoveryInfo"><prop oor:name="Enabled" oor:op="fuse"><value>false</value></prop></item>
</oor:items>
`;

/** Writes a fresh LibreOffice profile (user installation) into `dir`. */
async function writeProfile(dir: string): Promise<void> {
  await fs.promises.mkdir(path.join(dir, 'user'), { recursive: true });
  await fs.promises.writeFile(path.join(dir, 'user', 'registrymodifications.xcu'), REGISTRY);
}

export class LibreOffice {
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  /** Warm instances waiting for a document, most recently used last. */
  private readonly idle: WarmOffice[] = [];
  /** Successors of retired instances, starting. */
  private readonly spares: Promise<WarmOffice | undefined>[] = [];
  /** Whether python3-uno is here (probed once). */
  private warmProbe: Promise<boolean> | undefined;
  /** Where the instances' directories and the converter program go (made on first use). */
  private root: Promise<string> | undefined;
  private instances = 0;
  private closed = false;

  constructor(private readonly options: LibreOfficeOptions) {}

  /** Whether conversions use warm instances: CONVERTER_RESTART_AFTER > 0 and python3-uno installed. */
  async warm(): Promise<boolean> {
    if (!this.options.restartAfter || this.options.restartAfter < 1 || this.closed) return false;
    this.warmProbe ??= runProcess(PYTHON, ['-c', 'import uno'], { timeoutMs: 10_000, env: { PATH: '/usr/bin:/bin' } }).then(
      (run) => run.code === 0,
      () => false,
    );
    return this.warmProbe;
  }

  /**
   * Stops every warm instance (and those starting) and removes their directories. A conversion
   * asked for afterwards (a worker started again) warms a new instance from scratch.
   */
  async close(): Promise<void> {
    this.closed = true;
    const offices = [...this.idle.splice(0), ...(await Promise.all(this.spares.splice(0)))];
    await Promise.all(offices.map((office) => office?.kill()));
    if (this.root) {
      const root = await this.root;
      this.root = undefined;
      await fs.promises.rm(root, { recursive: true, force: true }).catch(() => {});
      roots.delete(root);
    }
    this.closed = false;
  }

  /** Whether the soffice command can be found (looked up anew each time). */
  available(): boolean {
    return findExecutable(this.options.command) !== undefined;
  }

  get stats(): { running: number; waiting: number; concurrency: number } {
    return { running: this.running, waiting: this.waiting.length, concurrency: this.options.concurrency };
  }

  /**
   * Converts the presentation at `input` to PDF under `workDir`; `extension` is its format's file
   * name extension, which LibreOffice's type detection reads.
   * Fails with TaskError: CONVERSION_TIMEOUT, CONVERSION_FAILED (transient when soffice
   * crashed); rejects with the signal's reason when `signal` aborts.
   */
  async toPdf(
    input: string,
    extension: string,
    workDir: string,
    { signal, deadline }: { signal?: AbortSignal; deadline?: number } = {},
  ): Promise<Conversion> {
    if (!this.available()) {
      this.options.onConversion?.({ outcome: 'missing', waitMs: 0, runMs: 0 });
      throw missing(this.options.command);
    }
    const queued = Date.now();
    const release = await this.acquire(signal);
    const waitMs = Date.now() - queued;
    const timeoutMs = Math.max(1, Math.min(this.options.timeoutMs, deadline === undefined ? Infinity : deadline - Date.now()));
    if (await this.warm().catch(() => false)) {
      let event: ConversionEvent = { outcome: 'failed', waitMs, runMs: 0 };
      try {
        const done = await this.convertWarm(input, extension, workDir, timeoutMs, signal);
        event = { ...event, ...done.event };
        return { pdfPath: this.settle(done.outcome, event, done.pdfPath, timeoutMs, signal), waitMs, runMs: event.runMs };
      } finally {
        release();
        this.options.onConversion?.(event);
      }
    }
    const dir = await fs.promises.mkdtemp(path.join(workDir, 'soffice-'));
    const profile = path.join(dir, 'profile');
    const outDir = path.join(dir, 'out');
    let run: RunResult | undefined;
    let event: ConversionEvent = { outcome: 'failed', waitMs, runMs: 0 };
    try {
      await writeProfile(profile);
      await fs.promises.mkdir(outDir);
      await fs.promises.mkdir(path.join(dir, 'tmp'));
      // A copy under the name LibreOffice's type detection expects (the format's extension), in a directory of its own.
      const source = path.join(dir, `input.${extension}`);
      await fs.promises.copyFile(input, source, fs.constants.COPYFILE_FICLONE);
      run = await this.options.sandbox
        .run(
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
          { writable: [dir], readOnly: installation(this.options.command) },
          { timeoutMs, signal, cwd: dir, env: { TMPDIR: path.join(dir, 'tmp') } },
        )
        .catch((err) => {
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
        throw new TaskError(
          'CONVERSION_TIMEOUT',
          `LibreOffice did not finish converting the presentation within ${Math.round(timeoutMs / 1000)} s and was stopped`,
        );
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
      if (run.code !== 0)
        throw new TaskError(
          'CONVERSION_FAILED',
          `LibreOffice failed (exit code ${run.code}) while converting the presentation${said ? `: ${said}` : ''}`,
        );
      throw new TaskError(
        'CONVERSION_FAILED',
        `LibreOffice could not load the presentation${/could not be loaded/i.test(said) ? ' (the file is damaged or not a presentation it reads)' : said ? `: ${said}` : ''}`,
      );
    } finally {
      release();
      this.options.onConversion?.(event);
      // The profile is this conversion's alone; the PDF stays for the caller (under workDir).
      await fs.promises.rm(profile, { recursive: true, force: true });
      await fs.promises.rm(path.join(dir, 'tmp'), { recursive: true, force: true });
    }
  }

  /**
   * One conversion on a warm instance: an idle one, else a successor being started, else a new
   * one (its start counts against the timeout). The instance goes back to the idle list only
   * after a success, below CONVERTER_RESTART_AFTER, with its job directory emptied; otherwise it
   * is killed, and after a planned retirement its successor is started at once.
   */
  private async convertWarm(
    input: string,
    extension: string,
    workDir: string,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<{ outcome: Outcome; pdfPath?: string; event: Partial<ConversionEvent> }> {
    const started = Date.now();
    const deadline = started + timeoutMs;
    let office = this.idle.pop();
    let instance: ConversionEvent['instance'] = 'reused';
    while (!office && this.spares.length) {
      instance = 'prestarted';
      office = await this.spares.shift();
    }
    if (office) clearTimeout(office.idleTimer);
    if (!office?.alive) {
      instance = 'started';
      const start = await WarmOffice.start(await this.instanceOptions(), timeoutMs, signal).catch((err: unknown) => {
        if (err instanceof ProgramMissing) throw missing(this.options.command);
        throw err;
      });
      if (!start.office) return { outcome: start.outcome, event: { runMs: Date.now() - started, instance, office: this.instances } };
      office = start.office;
    }
    let outcome: Outcome = { kind: 'failed', error: '' };
    let pdfPath: string | undefined;
    try {
      const source = path.join(office.jobDir, `input.${extension}`);
      const output = path.join(office.jobDir, 'input.pdf');
      await fs.promises.copyFile(input, source, fs.constants.COPYFILE_FICLONE);
      outcome = await office.convert(source, output, 'impress_pdf_Export', deadline - Date.now(), signal);
      if (outcome.kind === 'ok' && ((await fs.promises.stat(output).catch(() => undefined))?.size ?? 0) > 0) {
        const dir = await fs.promises.mkdtemp(path.join(workDir, 'soffice-'));
        pdfPath = path.join(dir, 'input.pdf');
        await fs.promises.copyFile(output, pdfPath);
      }
      return { outcome, pdfPath, event: { runMs: Date.now() - started, instance, office: office.number, conversions: office.conversions } };
    } finally {
      // Nothing of this document stays where the next conversion runs.
      const emptied = await fs.promises
        .rm(office.jobDir, { recursive: true, force: true })
        .then(() => fs.promises.mkdir(office!.jobDir))
        .then(
          () => true,
          () => false,
        );
      const restartAfter = this.options.restartAfter ?? 1;
      if (emptied && outcome.kind === 'ok' && pdfPath && office.alive && office.conversions < restartAfter && !this.closed) {
        this.keepIdle(office);
      } else {
        void office.kill();
        if (outcome.kind === 'ok' && pdfPath && !this.closed) this.spares.push(this.startSpare());
      }
    }
  }

  private keepIdle(office: WarmOffice): void {
    this.idle.push(office);
    office.idleTimer = setTimeout(() => {
      const index = this.idle.indexOf(office);
      if (index >= 0) this.idle.splice(index, 1);
      void office.kill();
    }, this.options.idleMs ?? IDLE_MS).unref();
  }

  /**
   * Starts a successor. Once ready it joins the idle list (and its idle timer) unless a conversion
   * has taken its promise meanwhile and is waiting for it.
   */
  private startSpare(): Promise<WarmOffice | undefined> {
    const spare: Promise<WarmOffice | undefined> = this.instanceOptions()
      .then((options) => WarmOffice.start(options, this.options.timeoutMs))
      .then(
        (start) => {
          const index = this.spares.indexOf(spare);
          if (index < 0 || !start.office) return start.office;
          this.spares.splice(index, 1);
          if (this.closed) void start.office.kill();
          else this.keepIdle(start.office);
          return undefined;
        },
        () => {
          const index = this.spares.indexOf(spare);
          if (index >= 0) this.spares.splice(index, 1);
          return undefined;
        },
      );
    return spare;
  }

  private async instanceOptions() {
    this.root ??= fs.promises.mkdtemp(path.join(this.options.directory ?? os.tmpdir(), 'imgapi-soffice-')).then(async (root) => {
      removeAtExit(root);
      await fs.promises.writeFile(path.join(root, 'convert.py'), CONVERTER_PY, { mode: 0o444 });
      return root;
    });
    const root = await this.root;
    const dir = path.join(root, `office-${++this.instances}`);
    await fs.promises.mkdir(dir);
    const soffice = findExecutable(this.options.command);
    if (!soffice) throw missing(this.options.command);
    return {
      soffice: fs.realpathSync(soffice),
      script: path.join(root, 'convert.py'),
      dir,
      sandbox: this.options.sandbox,
      readOnly: installation(this.options.command),
      writeProfile,
    };
  }

  /** A warm conversion's outcome as the PDF's path, or the TaskError (or cancel) it amounts to; fills in `event`. */
  private settle(outcome: Outcome, event: ConversionEvent, pdfPath: string | undefined, timeoutMs: number, signal?: AbortSignal): string {
    switch (outcome.kind) {
      case 'aborted':
        event.outcome = 'canceled';
        throw signal?.reason instanceof Error ? signal.reason : new Error('canceled');
      case 'timeout':
        event.outcome = 'timeout';
        throw new TaskError(
          'CONVERSION_TIMEOUT',
          `LibreOffice did not finish converting the presentation within ${Math.round(timeoutMs / 1000)} s and was stopped`,
        );
      case 'died': {
        event.exitCode = outcome.code;
        event.signal = outcome.signal;
        const said = lastLines(outcome.detail);
        event.detail = said;
        if (outcome.signal)
          throw new TaskError('CONVERSION_FAILED', `LibreOffice stopped with ${outcome.signal} while converting the presentation`, true);
        throw new TaskError(
          'CONVERSION_FAILED',
          `LibreOffice failed (exit code ${outcome.code ?? 'unknown'}) while converting the presentation${said ? `: ${said}` : ''}`,
        );
      }
      case 'failed':
      case 'ok': {
        if (outcome.kind === 'ok' && pdfPath) {
          event.outcome = 'converted';
          return pdfPath;
        }
        const said = outcome.kind === 'failed' ? lastLines(outcome.error) : '';
        event.detail = said;
        throw new TaskError(
          'CONVERSION_FAILED',
          `LibreOffice could not load the presentation${/could not be loaded/i.test(said) ? ' (the file is damaged or not a presentation it reads)' : said ? `: ${said}` : ''}`,
        );
      }
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

/**
 * LibreOffice's installation directory when soffice lives in one of its own (`<root>/program/`,
 * as the packages of libreoffice.org install under /opt): the sandbox must show it whole.
 */
function installation(command: string): string[] {
  const executable = findExecutable(command);
  const program = executable && path.dirname(fs.realpathSync(executable));
  return program && path.basename(program) === 'program' ? [path.dirname(program)] : [];
}

function missing(command: string): TaskError {
  return new TaskError('CONVERSION_FAILED', `LibreOffice (${command}) is not installed on this server, so presentations cannot be converted`);
}
