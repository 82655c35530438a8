// `imgapi run <kind> <files or globs…> -o <dir> [--option value…]`: uploads each file, queues
// the kind (a batch per `batchSize` files where the kind and the plan allow it, else a job per
// file; one job for all of them for a several-input kind such as image-to-pdf), waits, and
// writes the outputs to <dir>, at most --concurrency files in flight. Ends with a summary table.
import fs from 'node:fs';
import path from 'node:path';
import {
  ImgapiError,
  taskFailure,
  type Batch,
  type BatchKind,
  type BatchOptions,
  type Imgapi,
  type JobRequest,
  type Kind,
  type Task,
} from '../../sdk/node.js';
import {
  boardFor,
  connect,
  describeError,
  expandInputs,
  failureLine,
  mapLimit,
  retryLine,
  UsageError,
  type ClientIo,
  type CommonOptions,
  type InputFile,
} from './common.js';
import { isFlag, kindsOf, optionName, optionValue, OptionError, stepValue, type KindInfo } from './job-options.js';
import { canonicalFormat, extensionOf, isFormat, OUTPUT_FORMATS } from '../imaging/formats.js';
import { formatBytes, formatDuration, table, type Board, type Row } from './progress.js';
import { json } from './terminal.js';

interface Outcome {
  /** The input as named (for a several-input kind: all of them, joined by ", "); --json: absolute. */
  input: string;
  /** `skipped`: its output existed, so it was not sent; `canceled`: Ctrl-C stopped it. */
  status: 'done' | 'failed' | 'skipped' | 'canceled';
  bytesBefore: number;
  bytesAfter: number;
  /** The files written (for a skipped input: the output found), absolute. */
  outputs: string[];
  fileId?: string;
  taskId?: string;
  ms: number;
  error?: { code: string; message: string; requestId?: string };
}

interface Entry {
  name: string;
  files: InputFile[];
  row: Row;
  outcome: Outcome;
  started: number;
}

export async function runCommand(options: CommonOptions, io: ClientIo): Promise<number> {
  if (!options.output) throw new UsageError('run: say where the outputs go with -o <dir>');
  const board = boardFor(options, io);
  const client = connect(options, (event) => board.print(retryLine(event)));
  const document = await readDocument(options.url);
  const { info, patterns, jobOptions } = parseRunArguments(options.rest, document);
  const files = await expandInputs(patterns);
  fs.mkdirSync(options.output, { recursive: true });

  // Ctrl-C once: stop starting files, abort what is in flight (a download's partial file is
  // removed as it aborts), cancel the tasks started, print the summary so far. Twice: quit now.
  const interrupt = new AbortController();
  const onInterrupt = () => {
    if (interrupt.signal.aborted) process.exit(130);
    board.print('interrupted: stopping (Ctrl-C again to quit at once)');
    interrupt.abort();
  };
  process.on('SIGINT', onInterrupt);
  const outputDir = path.resolve(options.output);
  const run = new Run(client, board, info, jobOptions, outputDir, files, options.concurrency, options.overwrite, interrupt.signal);
  let outcomes: Outcome[];
  try {
    if (info.multiInput) outcomes = [await run.together()];
    else {
      const batchSize = await batchSizeFor(client, info, files.length, options.batch);
      outcomes = batchSize ? await run.batched(batchSize) : await run.each();
    }
    if (interrupt.signal.aborted && !options.keepRunning) await run.cancelStarted();
  } finally {
    process.off('SIGINT', onInterrupt);
  }
  board.close();

  const count = (status: Outcome['status']) => outcomes.filter((outcome) => outcome.status === status).length;
  const failed = count('failed');
  const totals = {
    files: outcomes.length,
    done: count('done'),
    skipped: count('skipped'),
    canceled: count('canceled'),
    failed,
    bytesBefore: sum(outcomes.map((o) => o.bytesBefore)),
    bytesAfter: sum(outcomes.map((o) => o.bytesAfter)),
    ms: Date.now() - run.started,
  };
  const interrupted = interrupt.signal.aborted;
  if (options.json) {
    const report = { ok: failed === 0 && !interrupted, interrupted, kind: info.kind, outputDir, files: run.absolute(outcomes), totals };
    io.stdout.write(`${json(report)}\n`);
  } else io.stdout.write(`${summary(outcomes, totals)}\n`);
  return interrupted ? 130 : failed ? 1 : 0;
}

/** GET /openapi.json: the kinds and their options, as this service has them. */
async function readDocument(baseUrl: string): Promise<unknown> {
  const url = `${baseUrl.replace(/\/+$/, '')}/openapi.json`;
  let response: Response;
  try {
    response = await fetch(url);
  } catch (err) {
    const cause = err instanceof Error && err.cause instanceof Error ? ` (${err.cause.message})` : '';
    throw new ImgapiError({ code: 'NETWORK_ERROR', status: 0, message: `cannot reach ${url}${cause}`, cause: err });
  }
  if (!response.ok) throw await ImgapiError.fromResponse(response);
  return response.json();
}

/** The kind, the files and the job options of `run`'s arguments, options typed by the document. */
function parseRunArguments(args: string[], document: unknown): { info: KindInfo; patterns: string[]; jobOptions: Record<string, unknown> } {
  const kinds = kindsOf(document);
  const known = [...kinds.keys()].join(', ');
  const [kind, ...rest] = args;
  if (!kind || kind.startsWith('-')) throw new UsageError(`run: name the kind first (${known})`);
  const info = kinds.get(kind);
  if (!info) throw new UsageError(`unknown kind "${kind}"; the service has ${known}`);
  const patterns: string[] = [];
  const jobOptions: Record<string, unknown> = {};
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--') {
      patterns.push(...rest.slice(i + 1));
      break;
    }
    if (!arg.startsWith('--')) {
      if (arg.startsWith('-') && arg !== '-') throw new UsageError(`unknown option ${arg}`);
      patterns.push(arg);
      continue;
    }
    const equals = arg.indexOf('=');
    const name = optionName(equals > 0 ? arg.slice(2, equals) : arg.slice(2));
    // A pipeline's steps: `--step kind:name=value,…` (repeated, in order) or `--steps file.json`.
    if ((name === 'step' || name === 'steps') && info.options.has('steps')) {
      const value = equals > 0 ? arg.slice(equals + 1) : rest[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
      try {
        if (name === 'step') jobOptions.steps = [...((jobOptions.steps as unknown[] | undefined) ?? []), stepValue(document, info, value)];
        else jobOptions.steps = [...((jobOptions.steps as unknown[] | undefined) ?? []), ...readSteps(value)];
      } catch (err) {
        if (err instanceof OptionError) throw new UsageError(err.message);
        throw err;
      }
      continue;
    }
    const next = rest[i + 1];
    let raw: string | true = true;
    if (equals > 0) raw = arg.slice(equals + 1);
    else if (isFlag(document, info, name)) {
      if (next === 'true' || next === 'false') {
        raw = next;
        i++;
      }
    } else if (next !== undefined) {
      raw = next;
      i++;
    }
    try {
      jobOptions[name] = optionValue(document, info, name, raw);
    } catch (err) {
      if (err instanceof OptionError) throw new UsageError(err.message);
      throw err;
    }
  }
  return { info, patterns, jobOptions };
}

/** `--steps file.json`: a JSON array of steps (`[{"kind": "resize", "width": 800}, …]`), or an object with `steps`. */
function readSteps(file: string): unknown[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    throw new UsageError(`--steps: cannot read ${file}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UsageError(`--steps: ${file} is not JSON`);
  }
  const steps = Array.isArray(parsed) ? parsed : (parsed as { steps?: unknown } | null)?.steps;
  if (!Array.isArray(steps)) throw new UsageError(`--steps: ${file} must hold an array of steps, or an object with "steps"`);
  return steps;
}

/** Files per batch request, or 0 for a job per file: batches only where the plan takes them all. */
async function batchSizeFor(client: Imgapi, info: KindInfo, files: number, allowed: boolean): Promise<number> {
  if (!allowed || !info.batch || files < 2) return 0;
  const { limits, usage } = await client.account();
  const left = usage.dailyBatchFiles.limit - usage.dailyBatchFiles.used;
  return limits.batchSize >= 2 && left >= files ? limits.batchSize : 0;
}

class Run {
  readonly started = Date.now();
  /** The inputs, never overwritten. */
  private readonly inputs: Set<string>;
  /** Each input's output name without its extension: its own, numbered when another input has it. */
  private readonly stems = new Map<InputFile, string>();

  constructor(
    private readonly client: Imgapi,
    private readonly board: Board,
    private readonly info: KindInfo,
    private readonly jobOptions: Record<string, unknown>,
    private readonly outputDir: string,
    private readonly files: InputFile[],
    private readonly concurrency: number,
    private readonly overwrite: boolean,
    private readonly signal: AbortSignal,
  ) {
    this.inputs = new Set(files.map((file) => file.path));
    const used = new Set<string>();
    for (const file of files) {
      const stem = path.basename(file.name, path.extname(file.name));
      let unique = stem;
      for (let n = 2; used.has(unique); n++) unique = `${stem}-${n}`;
      used.add(unique);
      this.stems.set(file, unique);
    }
  }

  /** The outcomes with every path absolute (for --json): the inputs as resolved, the outputs are. */
  absolute(outcomes: Outcome[]): Outcome[] {
    return outcomes.map((outcome, index) => ({ ...outcome, input: this.entries[index]?.files.map((file) => file.path).join(', ') ?? outcome.input }));
  }

  /** Cancels each task this run queued that has not finished (after Ctrl-C, unless --keep-running). */
  async cancelStarted(): Promise<void> {
    const open = this.entries.filter((entry) => entry.outcome.taskId && entry.outcome.status === 'canceled');
    await Promise.all(
      open.map(async (entry) => {
        try {
          await this.client.cancel(entry.outcome.taskId!);
        } catch (err) {
          this.board.print(failureLine(entry.name, describeError(err)));
        }
      }),
    );
  }

  private entries: Entry[] = [];

  /** A job per file. */
  each(): Promise<Outcome[]> {
    const entries = this.files.map((file) => this.entry(file.name, [file]));
    return mapLimit(entries, this.concurrency, async (entry) => {
      await this.step(entry, async () => {
        if (this.skipped(entry)) return;
        const [fileId] = await this.upload(entry);
        await this.queue(entry, { fileId });
        await this.finish(entry);
      });
      return entry.outcome;
    });
  }

  /**
   * Uploads, then a batch request per `size` files, then each batch waited on as one (one
   * long-poll per batch, not one per task: a big run stays within the plan's request rate) and
   * its outputs downloaded.
   */
  async batched(size: number): Promise<Outcome[]> {
    const entries = this.files.map((file) => this.entry(file.name, [file]));
    await mapLimit(entries, this.concurrency, (entry) =>
      this.step(entry, () => (this.skipped(entry) ? Promise.resolve() : this.upload(entry).then(() => undefined))),
    );
    const uploaded = entries.filter((entry) => entry.outcome.fileId && entry.outcome.status === 'done');
    const batches: { batchId: string; entries: Entry[] }[] = [];
    for (let start = 0; start < uploaded.length; start += size) {
      const chunk = uploaded.slice(start, start + size);
      try {
        // The options were read against this service's schema for the kind (job-options.ts).
        const queued = await this.client.batch(
          this.info.kind as BatchKind,
          chunk.map((entry) => entry.outcome.fileId!),
          this.jobOptions as BatchOptions<BatchKind>,
          { signal: this.signal },
        );
        // The batch answers one task per file, in order; a file left without one has failed.
        chunk.forEach((entry, index) => {
          const task = queued.tasks[index];
          if (task) entry.outcome.taskId = task.taskId;
          else this.fail(entry, new Error('the batch answered no task for this file'));
        });
        batches.push({ batchId: queued.batchId, entries: chunk });
      } catch (err) {
        // A batch is all or nothing: when one file is refused, queue each alone so that every
        // file gets its own answer. Anything else (a quota, the rate) is every file's answer.
        const perFile = err instanceof ImgapiError && [400, 404, 409, 410].includes(err.status);
        if (!perFile) for (const entry of chunk) this.fail(entry, err);
        else await mapLimit(chunk, this.concurrency, (entry) => this.step(entry, () => this.queue(entry, { fileId: entry.outcome.fileId })));
      }
    }
    const inBatch = new Set(batches.flatMap((batch) => batch.entries));
    const alone = entries.filter((entry) => !inBatch.has(entry) && entry.outcome.taskId && entry.outcome.status !== 'failed');
    await Promise.all([
      mapLimit(alone, this.concurrency, (entry) => this.step(entry, () => this.finish(entry))),
      mapLimit(batches, this.concurrency, (batch) => this.finishBatch(batch.batchId, batch.entries)),
    ]);
    return entries.map((entry) => entry.outcome);
  }

  /** Waits for the batch as one, then writes each task's outputs (its task is found by id: the batch lists them in order). */
  private async finishBatch(batchId: string, entries: Entry[]): Promise<void> {
    const open = entries.filter((entry) => entry.outcome.status !== 'failed');
    for (const entry of open) entry.row.update('queued');
    const byTask = (batch: Batch) => new Map(batch.tasks.map((task) => [task.taskId, task]));
    let batch: Batch;
    try {
      batch = await this.client.waitBatch(batchId, {
        signal: this.signal,
        pollSeconds: this.board.mode === 'tty' ? 1 : 30,
        onUpdate: (update) => {
          const tasks = byTask(update);
          for (const entry of open) {
            const task = tasks.get(entry.outcome.taskId!);
            if (task && task.status !== 'completed') entry.row.update(task.status === 'processing' ? 'processing' : 'queued', task.progress / 100);
          }
        },
      });
    } catch (err) {
      for (const entry of open) this.fail(entry, err);
      return;
    }
    const tasks = byTask(batch);
    await mapLimit(open, this.concurrency, (entry) =>
      this.step(entry, async () => {
        const task = tasks.get(entry.outcome.taskId!);
        if (!task) throw new Error('the batch no longer lists this task');
        await this.deliver(entry, task);
      }),
    );
  }

  /** One job for every file (image-to-pdf): its inputs in order. */
  async together(): Promise<Outcome> {
    const names = this.files.map((file) => file.name);
    const entry = this.entry(names.join(', '), this.files, names.length > 1 ? `${names[0]} + ${names.length - 1} more` : names[0]);
    await this.step(entry, async () => {
      const fileIds = await this.upload(entry);
      await this.queue(entry, { fileIds });
      await this.finish(entry);
    });
    return entry.outcome;
  }

  private entry(name: string, files: InputFile[], label = name): Entry {
    const outcome: Outcome = { input: name, status: 'done', bytesBefore: sum(files.map((f) => f.size)), bytesAfter: 0, outputs: [], ms: 0 };
    const entry = { name, files, row: this.board.add(label), outcome, started: 0 };
    this.entries.push(entry);
    return entry;
  }

  /**
   * Whether the input's output exists already (then it is not sent: no upload, no charge):
   * `<dir>/<name>[.<kind>…].<ext>` for the format asked, or for any format the service writes when
   * none is asked (neither the format nor the service's whole tag is known before the task has run);
   * a name that is another input's (`photo.small.webp` is not `photo`'s) does not count. Never
   * with --overwrite.
   */
  private skipped(entry: Entry): boolean {
    if (this.overwrite || entry.files.length !== 1) return false;
    const asked = this.jobOptions.format;
    // An alias (`jpg`) names its format's file (`.jpg` for jpeg).
    const formats = typeof asked === 'string' && isFormat(canonicalFormat(asked)) ? [canonicalFormat(asked)] : OUTPUT_FORMATS;
    const stem = this.stems.get(entry.files[0]!)!;
    const extensions = new Set(formats.map((format) => `.${extensionOf(format)}`));
    // A tag starts with its kind's name (a pipeline's, with its first step's): another kind's output is not this one's.
    const steps = this.jobOptions.steps;
    const lead = Array.isArray(steps) && typeof steps[0]?.kind === 'string' ? (steps[0].kind as string) : this.info.kind;
    const others = [...this.stems.values()].filter((other) => other !== stem && other.startsWith(`${stem}.`));
    const existing = fs.existsSync(this.outputDir) ? fs.readdirSync(this.outputDir) : [];
    const found = existing
      .filter((name) => name.startsWith(stem) && extensions.has(path.extname(name)))
      .filter((name) => {
        const tag = name.slice(stem.length, -path.extname(name).length);
        return (tag === '' || (TAG.test(tag) && tag.startsWith(`.${lead}`))) && !others.some((other) => name.startsWith(`${other}.`));
      })
      .map((name) => path.join(this.outputDir, name))
      .find((candidate) => !this.inputs.has(candidate));
    if (!found) return false;
    entry.outcome.status = 'skipped';
    entry.outcome.bytesBefore = 0;
    entry.outcome.outputs.push(found);
    entry.row.finish('done', `${entry.name}: skipped, ${shown(found)} exists (--overwrite redoes it)`);
    return true;
  }

  /** Runs one stage of an entry; a failure ends the entry with its code and message. */
  private async step(entry: Entry, work: () => Promise<void>): Promise<void> {
    if (entry.outcome.status !== 'done') return;
    if (this.signal.aborted) {
      // Ctrl-C: a file not started is not started; one in flight ends as canceled.
      entry.outcome.status = 'canceled';
      entry.row.update('failed');
      return;
    }
    entry.started ||= Date.now();
    try {
      await work();
    } catch (err) {
      this.fail(entry, err);
    }
  }

  private fail(entry: Entry, err: unknown): void {
    entry.outcome.ms = Date.now() - (entry.started || this.started);
    if (this.signal.aborted) {
      entry.outcome.status = 'canceled';
      entry.row.finish('failed', `${entry.name}: canceled`);
      return;
    }
    entry.outcome.status = 'failed';
    entry.outcome.error = describeError(err);
    entry.row.finish('failed', failureLine(entry.name, entry.outcome.error));
  }

  private async upload(entry: Entry): Promise<string[]> {
    entry.row.update('uploading');
    const total = entry.outcome.bytesBefore || 1;
    const sent = entry.files.map(() => 0);
    const fileIds = await mapLimit(entry.files, this.concurrency, async (file, index) => {
      const stored = await this.client.upload(file.path, {
        signal: this.signal,
        onProgress: ({ loaded }) => {
          sent[index] = loaded;
          entry.row.update('uploading', sum(sent) / total);
        },
      });
      return stored.fileId;
    });
    entry.outcome.fileId = fileIds[0];
    entry.row.update('uploaded');
    return fileIds;
  }

  private async queue(entry: Entry, input: { fileId: string | undefined } | { fileIds: string[] }): Promise<void> {
    // The options were read against this service's schema for the kind (job-options.ts).
    const request = { ...this.jobOptions, ...input } as JobRequest<Kind>;
    const queued = await this.client.process(this.info.kind as Kind, request, { signal: this.signal });
    entry.outcome.taskId = queued.taskId;
  }

  /** Waits for the task and writes its outputs. */
  private async finish(entry: Entry): Promise<void> {
    const taskId = entry.outcome.taskId!;
    entry.row.update('queued');
    const task = await this.client.wait(taskId, {
      signal: this.signal,
      // On a terminal the bar shows the task's progress: ask every second.
      pollSeconds: this.board.mode === 'tty' ? 1 : 30,
      onUpdate: (update) => entry.row.update(update.status === 'processing' ? 'processing' : 'queued', update.progress / 100),
    });
    await this.deliver(entry, task);
  }

  /** Writes a finished task's outputs; a task that did not complete is the entry's failure. */
  private async deliver(entry: Entry, task: Task): Promise<void> {
    if (task.status !== 'completed') throw taskFailure(task);
    // A deck's slides are its outputs (outputFileId is their ZIP); other kinds have one.
    const outputs = task.outputFileIds?.length ? task.outputFileIds : task.outputFileId ? [task.outputFileId] : [];
    entry.row.update('downloading');
    for (const [index, fileId] of outputs.entries()) {
      // A one-slide deck's single image is in the slides' format, not the ZIP's.
      const format = task.outputFileIds?.length ? task.result?.imageFormat : task.result?.format;
      // The service's name (`<input stem>.<tag>.<ext>`, the one naming rule) gives the tag; the
      // stem is the input's here (numbered when two inputs share one) and the extension the
      // format table's: nothing else the server says becomes part of a path. A slide whose name
      // carries no tag is `.slide-<n>`, as the service names slides.
      const slide = task.result?.slides?.[index];
      const slideTag = outputs.length === 1 ? undefined : `slide-${Number.isSafeInteger(slide) && slide! > 0 ? slide : index + 1}`;
      const destination = (file: { filename: string }) => {
        const tag = tagOf(file.filename, entry.files[0]?.name) ?? slideTag;
        return this.target(entry.files[0], format, tag ? `.${tag}` : '');
      };
      const saved = await this.client.download(fileId, destination, {
        overwrite: this.overwrite,
        // Aborted by Ctrl-C, the SDK removes its partial file: no half-written output is left.
        signal: this.signal,
        onProgress: ({ loaded, total }) => entry.row.update('downloading', (index + (total ? loaded / total : 0)) / outputs.length),
      });
      entry.outcome.outputs.push(path.resolve(saved.path!));
      entry.outcome.bytesAfter += saved.size;
    }
    entry.outcome.ms = Date.now() - entry.started;
    entry.row.finish('done', doneLine(entry.name, entry.outcome));
  }

  /**
   * `<dir>/<input's name><suffix>.<output's extension>`; `<name>-<kind>…` where that is an input.
   * The extension is the format table's for the format the task names, `.bin` for one it does not
   * know: nothing the server says becomes part of a path as it is.
   */
  private target(input: InputFile | undefined, format: string | undefined, suffix: string): string {
    const stem = `${(input && this.stems.get(input)) ?? 'output'}${suffix}`;
    const extension = format !== undefined && isFormat(format) ? extensionOf(format) : 'bin';
    let candidate = path.join(this.outputDir, `${stem}.${extension}`);
    for (let n = 1; this.inputs.has(candidate); n++)
      candidate = path.join(this.outputDir, `${stem}-${this.info.kind}${n > 1 ? `-${n}` : ''}.${extension}`);
    return candidate;
  }
}

/** What a tag of the naming rule may hold (`resize-800`, `resize-800.watermark`, `rotate-ccw90`), after its dot. */
const TAG = /^\.[a-z0-9][a-z0-9.x-]*$/;

/**
 * The tag of a service's output name `<input stem>.<tag>.<ext>` for the input named `input`:
 * `flowers.resize-1600.webp` of `flowers.jpg` → `resize-1600`; undefined when the name has none
 * or is not of that input (a name the server made up is not followed).
 */
function tagOf(outputName: string, input: string | undefined): string | undefined {
  if (!input) return undefined;
  const stem = path.basename(input, path.extname(input));
  const extension = path.extname(outputName);
  if (!stem || !outputName.startsWith(`${stem}.`) || !extension) return undefined;
  const tag = outputName.slice(stem.length, -extension.length);
  return TAG.test(tag) ? tag.slice(1) : undefined;
}

/** A path as the text output shows it: relative to the current directory. */
const shown = (file: string): string => path.relative(process.cwd(), file) || '.';

const sum = (values: number[]): number => values.reduce((total, value) => total + value, 0);

function change(before: number, after: number): string {
  if (!before || !after) return '';
  const percent = Math.round((after / before - 1) * 100);
  return percent === 0 ? '0%' : `${percent > 0 ? '+' : '−'}${Math.abs(percent)}%`;
}

function doneLine(name: string, outcome: Outcome): string {
  const sizes = `${formatBytes(outcome.bytesBefore)} → ${formatBytes(outcome.bytesAfter)}`;
  const delta = change(outcome.bytesBefore, outcome.bytesAfter);
  return `${name}: done → ${outcome.outputs.map(shown).join(', ')} (${sizes}${delta ? `, ${delta}` : ''}, ${formatDuration(outcome.ms)})`;
}

function summary(
  outcomes: Outcome[],
  totals: { files: number; done: number; skipped: number; canceled: number; failed: number; bytesBefore: number; bytesAfter: number; ms: number },
): string {
  const rows = outcomes.map((o) => [
    o.input,
    formatBytes(o.bytesBefore),
    o.status === 'done' ? formatBytes(o.bytesAfter) : '—',
    o.status === 'done' ? change(o.bytesBefore, o.bytesAfter) : '',
    formatDuration(o.ms),
    o.status === 'done'
      ? o.outputs.map(shown).join(', ')
      : o.status === 'failed'
        ? `failed: ${o.error?.code}`
        : `${o.status}${o.outputs[0] ? `: ${shown(o.outputs[0])}` : ''}`,
  ]);
  const doneBefore = sum(outcomes.filter((o) => o.status === 'done').map((o) => o.bytesBefore));
  rows.push([
    `total (${totals.files})`,
    formatBytes(totals.bytesBefore),
    formatBytes(totals.bytesAfter),
    change(doneBefore, totals.bytesAfter),
    formatDuration(totals.ms),
    [
      `${totals.done} done`,
      ...(totals.skipped ? [`${totals.skipped} skipped`] : []),
      ...(totals.canceled ? [`${totals.canceled} canceled`] : []),
      ...(totals.failed ? [`${totals.failed} failed`] : []),
    ].join(', '),
  ]);
  return table(['file', 'before', 'after', 'change', 'time', 'result'], rows, ['left', 'right', 'right', 'right', 'right', 'left']);
}
