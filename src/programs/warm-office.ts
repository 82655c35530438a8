// A warm LibreOffice: one soffice kept running between conversions, driven through its UNO
// bridge by a small Python program (python3-uno) that starts it, then converts one document per
// request line on stdin and answers one JSON line on stdout. The soffice start (about a second of
// CPU, more on a busy machine) is paid once per instance instead of once per document.
//
// Both run inside one converter sandbox (sandbox.ts) that sees the read-only system, this
// program, and the instance's own directory: its profile (fresh, written for it alone), its
// TMPDIR, and `job/`, where one document at a time is copied in and its PDF written. Between two
// documents the first is closed in LibreOffice and `job/` emptied, so the next conversion — maybe
// another tenant's — cannot see it; the profile keeps no history (see libreoffice.ts's REGISTRY).
// The pool (libreoffice.ts) retires an instance after N conversions, after any failure, timeout or
// cancel (its whole process group killed), and after it sits idle.
import fs from 'node:fs';
import path from 'node:path';
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { killGroup, type RunResult } from './processes.js';
import type { Sandbox } from './sandbox.js';

/** The Python that has the `uno` module (Debian's python3-uno is built for the system's python3). */
export const PYTHON = '/usr/bin/python3';
/** setTimeout's longest delay: an instance lives until retired, not until a timer. */
const FOREVER_MS = 2_147_483_647;

/** The converter program; written next to the instances and shown read-only to each. */
export const CONVERTER_PY = String.raw`# imgapi's warm LibreOffice: see src/programs/warm-office.ts.
import json, os, signal, subprocess, sys, time
import uno
from com.sun.star.beans import PropertyValue
from com.sun.star.connection import NoConnectException

soffice, profile, pipe = sys.argv[1:4]

def props(**values):
    out = []
    for name, value in values.items():
        prop = PropertyValue()
        prop.Name = name
        prop.Value = value
        out.append(prop)
    return tuple(out)

def answer(**values):
    sys.stdout.write(json.dumps(values) + "\n")
    sys.stdout.flush()

def ended(wait=0):
    try:
        code = office.wait(timeout=wait) if wait else office.poll()
    except subprocess.TimeoutExpired:
        return None
    if code is None:
        return None
    if code < 0:
        return {"signal": signal.Signals(-code).name}
    return {"code": code}

def stop(status):
    # Everything this program started goes with it: soffice.bin is oosplash's child, not ours.
    sys.stdout.flush()
    os.killpg(os.getpgid(0), signal.SIGKILL)
    sys.exit(status)

office = subprocess.Popen(
    [soffice, "-env:UserInstallation=" + profile, "--headless", "--invisible", "--norestore", "--nologo",
     "--nodefault", "--nolockcheck", "--accept=pipe,name=%s;urp;" % pipe],
    stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno())
local = uno.getComponentContext()
resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
while True:
    gone = ended()
    if gone is not None:
        answer(ready=False, **gone)
        stop(1)
    try:
        context = resolver.resolve("uno:pipe,name=%s;urp;StarOffice.ComponentContext" % pipe)
        break
    except NoConnectException:
        time.sleep(0.05)
desktop = context.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", context)
answer(ready=True)

for line in sys.stdin:
    request = json.loads(line)
    document = None
    try:
        # Macros never run (NEVER_EXECUTE), links are not updated (NO_UPDATE), nothing is shown.
        document = desktop.loadComponentFromURL(uno.systemPathToFileUrl(request["input"]), "_blank", 0,
            props(Hidden=True, ReadOnly=True, MacroExecutionMode=0, UpdateDocMode=0))
        if document is None:
            answer(ok=False, error="Error: source file could not be loaded")
            continue
        document.storeToURL(uno.systemPathToFileUrl(request["output"]), props(FilterName=request["filter"]))
        answer(ok=True)
    except Exception as err:
        gone = ended(wait=2)
        if gone is not None:
            answer(ok=False, error=str(err)[:300], **gone)
            stop(1)
        message = str(err)[:300]
        answer(ok=False, error=("Error: source file could not be loaded: " + message) if document is None else message)
    finally:
        if document is not None:
            try:
                document.close(True)
            except Exception:
                try:
                    document.dispose()
                except Exception:
                    pass
stop(0)
`;

/** What the converter program answered, or how the instance ended. */
export type Outcome =
  | { kind: 'ok' }
  | { kind: 'failed'; error: string }
  | { kind: 'timeout' }
  | { kind: 'aborted' }
  | { kind: 'died'; code?: number | null; signal?: string | null; detail: string };

interface Reply {
  ready?: boolean;
  ok?: boolean;
  error?: string;
  code?: number;
  signal?: string;
}

export interface WarmOfficeOptions {
  /** soffice's resolved path. */
  soffice: string;
  /** The converter program's path (CONVERTER_PY written out). */
  script: string;
  /** A directory of this instance's own (created empty by the caller). */
  dir: string;
  sandbox: Sandbox;
  /** Read-only paths LibreOffice needs besides the system (an /opt installation). */
  readOnly: string[];
  writeProfile: (dir: string) => Promise<void>;
}

export class WarmOffice {
  /** Documents converted (successfully) so far. */
  conversions = 0;
  private child: ChildProcessByStdio<Writable, Readable, Readable> | undefined;
  private readonly replies: Reply[] = [];
  private waiter: (() => void) | undefined;
  private buffered = '';
  private ended: RunResult | undefined;
  private readonly exited: Promise<RunResult>;
  private spawned!: () => void;
  private readonly spawnedOnce = new Promise<void>((resolve) => (this.spawned = resolve));
  idleTimer: NodeJS.Timeout | undefined;
  /** Why the instance could not even be started (no sandbox, no program): rethrown by start(). */
  private failure: unknown;

  private constructor(readonly options: WarmOfficeOptions) {
    const { dir } = options;
    this.exited = (async () => {
      await options.writeProfile(path.join(dir, 'profile'));
      await fs.promises.mkdir(path.join(dir, 'tmp'));
      await fs.promises.mkdir(path.join(dir, 'job'));
      const pipe = `imgapi-${path.basename(dir)}`;
      return options.sandbox.run(
        PYTHON,
        [options.script, options.soffice, pathToFileURL(path.join(dir, 'profile')).href, pipe],
        { writable: [dir], readOnly: [options.script, options.soffice, ...options.readOnly] },
        {
          timeoutMs: FOREVER_MS,
          cwd: dir,
          env: { TMPDIR: path.join(dir, 'tmp') },
          service: { onSpawn: (child) => this.attach(child) },
        },
      );
    })().then(
      (run) => {
        this.ended = run;
        this.wake();
        return run;
      },
      (err: unknown) => {
        this.failure = err;
        this.ended = { code: null, signal: null, timedOut: false, aborted: false, stdout: '', stderr: String(err), durationMs: 0, pid: undefined };
        this.wake();
        throw err;
      },
    );
    this.exited.catch(() => {}); // read by start()
  }

  /** Starts an instance; resolves once LibreOffice answers on its bridge, or with how it ended. */
  static async start(options: WarmOfficeOptions, timeoutMs: number, signal?: AbortSignal): Promise<{ office?: WarmOffice; outcome: Outcome }> {
    const office = new WarmOffice(options);
    const reply = await office.next(timeoutMs, signal);
    if (office.failure !== undefined) {
      void office.kill();
      throw office.failure;
    }
    if ('kind' in reply) {
      office.kill();
      return { outcome: reply };
    }
    if (!reply.ready) {
      office.kill();
      return { outcome: office.death(reply) };
    }
    return { office, outcome: { kind: 'ok' } };
  }

  /** Converts `input` to a PDF at `output` (both inside this instance's `job/`) with `filter`. */
  async convert(input: string, output: string, filter: string, timeoutMs: number, signal?: AbortSignal): Promise<Outcome> {
    if (this.ended || !this.child) return this.death({});
    this.child.stdin.write(`${JSON.stringify({ input, output, filter })}\n`);
    const reply = await this.next(timeoutMs, signal);
    if ('kind' in reply) return reply;
    if (reply.ok) {
      this.conversions++;
      return { kind: 'ok' };
    }
    if (reply.code !== undefined || reply.signal !== undefined) return this.death(reply);
    return { kind: 'failed', error: reply.error ?? '' };
  }

  /** The instance's number in its pool (its directory is office-<number>). */
  get number(): number {
    return Number(/(\d+)$/.exec(this.options.dir)?.[1] ?? 0);
  }

  /** The instance's job directory: the one document being converted, and its PDF. */
  get jobDir(): string {
    return path.join(this.options.dir, 'job');
  }

  get alive(): boolean {
    return !this.ended;
  }

  /** Kills the whole instance (its process group, SIGKILL) and removes its directory. */
  kill(): Promise<void> {
    clearTimeout(this.idleTimer);
    void this.spawnedOnce.then(() => killGroup(this.child?.pid));
    if (this.child) {
      // Until it has exited and its directory is gone, the instance keeps Node running again.
      this.child.ref();
      for (const stream of [this.child.stdout, this.child.stderr]) (stream as unknown as { ref?: () => void }).ref?.();
      killGroup(this.child.pid);
    }
    return this.exited.then(
      () => fs.promises.rm(this.options.dir, { recursive: true, force: true }),
      () => fs.promises.rm(this.options.dir, { recursive: true, force: true }),
    );
  }

  private attach(child: ChildProcessByStdio<Writable, Readable, Readable>): void {
    this.child = child;
    this.spawned();
    // Bytes, not setEncoding: runProcess keeps the tail of the same stream as Buffers.
    child.stdout.on('data', (chunk: Buffer) => {
      this.buffered += chunk.toString('utf8');
      for (let end = this.buffered.indexOf('\n'); end >= 0; end = this.buffered.indexOf('\n')) {
        const line = this.buffered.slice(0, end).trim();
        this.buffered = this.buffered.slice(end + 1);
        if (!line) continue;
        try {
          this.replies.push(JSON.parse(line) as Reply);
        } catch {
          continue; // not the converter's (a stand-in's chatter): ignored
        }
        this.wake();
      }
    });
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }

  /** The next reply, or the outcome that ended the wait: the instance died, the time ran out, the signal aborted. */
  private async next(timeoutMs: number, signal?: AbortSignal): Promise<Reply | Outcome> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const reply = this.replies.shift();
      if (reply) return reply;
      if (this.ended) return this.death({});
      if (signal?.aborted) {
        void this.kill();
        return { kind: 'aborted' };
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        void this.kill();
        return { kind: 'timeout' };
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, left);
        function done() {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          resolve();
        }
        signal?.addEventListener('abort', done, { once: true });
        this.waiter = done;
      });
    }
  }

  /** How the instance ended, from the converter's last word or the process's exit. */
  private death(reply: Reply): Outcome {
    const run = this.ended;
    const signal = reply.signal ?? run?.signal ?? null;
    const code = reply.code ?? run?.code ?? null;
    return { kind: 'died', code, signal, detail: reply.error ?? (run ? run.stderr : '') };
  }
}
