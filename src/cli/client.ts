// The client commands of `imgapi`: run, upload, task, download, info, webhooks, url. They talk to a running service
// through the SDK (sdk/node.ts) with IMGAPI_URL and IMGAPI_KEY (or --url/--key), and exit 0 when
// everything was done, 1 when something failed, 2 on a usage error.
import fs from 'node:fs';
import path from 'node:path';
import { taskFailure, type FileInfo, type Task } from '../../sdk/node.js';
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
} from './common.js';
import { formatBytes } from './progress.js';
import { runCommand } from './run.js';
import { json, printable, Terminal, type OutputStream } from './terminal.js';
import { urlCommand, URL_USAGE } from './url.js';
import { webhooksCommand, WEBHOOKS_USAGE } from './webhooks.js';

const RUN_USAGE = `  run <kind> <files or globs…> -o <dir> [--<option> <value>…]
                                  a job per file (a batch where the plan allows it); the
                                  outputs go to <dir>. Options are the kind's, e.g.
                                  imgapi run resize 'photos/*.jpg' -o out --width 1600 --format webp
  run pipeline <files…> -o <dir> --step <kind>:<name>=<value>,… [--step …] [--format …]
                                  several steps in one task, in order, e.g.
                                  imgapi run pipeline a.jpg -o out --step resize:width=800 \\
                                    --step 'watermark:text=© 2026 Me,opacity=0.5' --format webp
                                  or --steps steps.json (a JSON array of {"kind": …, …})`;
const UPLOAD_USAGE = `  upload <files or globs…>        prints "<fileId><TAB><file>" for each file stored, in order`;
const TASK_USAGE = `  task <taskId> [--wait]          prints the task (its status, progress, outputs, error);
                                  --wait: once it has finished`;
const DOWNLOAD_USAGE = `  download <fileId> [-o <file or dir>]
                                  writes the file (default: the current directory, under the
                                  service's name for it, made a safe file name)`;
const INFO_USAGE = `  info <fileId or file> [--faces]  prints an image's info: size, frames, colour space, EXIF
                                  camera and date, GPS, palette, BlurHash, ThumbHash and
                                  perceptual hash (a local file is uploaded first); --faces
                                  also finds the faces (a box and score each)`;

const OPTIONS_USAGE = `  --url URL          the service (default: $IMGAPI_URL, else http://localhost:3000)
  --key KEY          the API key (default: $IMGAPI_KEY)
  --concurrency N    files in flight at once (default 4)
  --no-batch         run: one job per file even where a batch would do
  --skip-existing    run: an input whose output exists in -o is skipped before it is
                     uploaded, so it is never sent or charged again (the default for run;
                     "exists": <dir>/<name>.<ext> for the --format asked, or for any
                     format the service writes when none is asked)
  --overwrite        run: redo every input and replace its output; download: replace
                     the file (without it an existing file is never replaced; an input
                     is never replaced)
  --keep-running     run: on Ctrl-C leave the tasks already queued running on the service
                     (by default they are canceled). Ctrl-C stops starting new files,
                     removes half-written outputs, prints the summary so far and exits 130;
                     a second Ctrl-C exits at once
  --json             print the outcome as JSON on stdout (paths absolute), no progress

  Exit status: 0 all done, 1 something failed, 2 usage error, 130 interrupted.`;

export const CLIENT_USAGE = `Client commands (talk to a running service):

${RUN_USAGE}
${UPLOAD_USAGE}
${TASK_USAGE}
${DOWNLOAD_USAGE}
${INFO_USAGE}
${WEBHOOKS_USAGE}
${URL_USAGE}

${OPTIONS_USAGE}`;

/** One command's usage, for its usage errors: that command alone, not every command's. */
function usageOf(command: string): string {
  const own = new Map([
    ['run', RUN_USAGE],
    ['upload', UPLOAD_USAGE],
    ['task', TASK_USAGE],
    ['download', DOWNLOAD_USAGE],
    ['info', INFO_USAGE],
    ['webhooks', WEBHOOKS_USAGE],
  ]).get(command);
  // `url` is offline and has options of its own: its usage alone says what it takes.
  if (command === 'url') return `Usage:\n${URL_USAGE}`;
  return own ? `Usage:\n${own}\n\n${OPTIONS_USAGE}` : CLIENT_USAGE;
}

export const CLIENT_COMMANDS = ['run', 'upload', 'task', 'download', 'info', 'webhooks', 'url'] as const;

// Maps, not object literals: an argument such as `constructor` must not find Object's prototype.
const VALUE_FLAGS = new Map<string, 'url' | 'key' | 'concurrency' | 'output'>([
  ['--url', 'url'],
  ['--key', 'key'],
  ['--concurrency', 'concurrency'],
  ['--output', 'output'],
  ['-o', 'output'],
]);
const BOOLEAN_FLAGS = new Map<string, 'json' | 'wait' | 'noBatch' | 'overwrite' | 'skipExisting' | 'keepRunning' | 'help'>([
  ['--json', 'json'],
  ['--skip-existing', 'skipExisting'],
  ['--keep-running', 'keepRunning'],
  ['--overwrite', 'overwrite'],
  ['--wait', 'wait'],
  ['--no-batch', 'noBatch'],
  ['--help', 'help'],
  ['-h', 'help'],
]);

export function parseCommon(args: string[], env: NodeJS.ProcessEnv): CommonOptions {
  const values: Partial<Record<'url' | 'key' | 'concurrency' | 'output', string>> = {};
  const booleans = { json: false, wait: false, noBatch: false, overwrite: false, skipExisting: false, keepRunning: false, help: false };
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      rest.push(...args.slice(i));
      break;
    }
    const [flag, inline] =
      arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const valueFlag = VALUE_FLAGS.get(flag);
    const booleanFlag = BOOLEAN_FLAGS.get(flag);
    if (valueFlag) {
      const value = inline ?? args[++i];
      if (value === undefined) throw new UsageError(`${flag} needs a value`);
      values[valueFlag] = value;
    } else if (booleanFlag && inline === undefined) {
      booleans[booleanFlag] = true;
    } else {
      rest.push(arg);
    }
  }
  if (booleans.overwrite && booleans.skipExisting) throw new UsageError('--overwrite and --skip-existing cannot go together');
  const concurrency = Number(values.concurrency ?? 4);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) throw new UsageError('--concurrency takes a whole number from 1 to 64');
  return {
    url: values.url ?? env.IMGAPI_URL ?? 'http://localhost:3000',
    key: values.key ?? env.IMGAPI_KEY,
    concurrency,
    output: values.output,
    overwrite: booleans.overwrite,
    keepRunning: booleans.keepRunning,
    json: booleans.json,
    wait: booleans.wait,
    batch: !booleans.noBatch,
    help: booleans.help,
    rest,
  };
}

/** Runs a client command; answers the exit status. */
export async function clientCommand(
  command: string,
  args: string[],
  streams: { stdout: OutputStream; stderr: OutputStream; env: NodeJS.ProcessEnv } = {
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
  },
): Promise<number> {
  const io: ClientIo = { stdout: new Terminal(streams.stdout), stderr: new Terminal(streams.stderr), env: streams.env };
  try {
    const options = parseCommon(args, io.env);
    if (options.help) {
      io.stdout.write(`${CLIENT_USAGE}\n`);
      return 0;
    }
    switch (command) {
      case 'run':
        return await runCommand(options, io);
      case 'upload':
        return await uploadCommand(options, io);
      case 'task':
        return await taskCommand(options, io);
      case 'download':
        return await downloadCommand(options, io);
      case 'info':
        return await infoCommand(options, io);
      case 'webhooks':
        return await webhooksCommand(options, io);
      case 'url':
        return urlCommand(options, io);
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`imgapi: ${err.message}\n\n${usageOf(command)}\n`);
      return 2;
    }
    // Whatever stopped the command as a whole (the service unreachable, a refused key).
    const { code, message } = describeError(err);
    io.stderr.write(`imgapi: ${printable(`${code}: ${message}`)}\n`);
    return 1;
  }
}

/** The positional arguments: exactly `count` of them (any number for -1), else a usage error. */
function noOptionsLeft(options: CommonOptions, count: 1, usage: string): [string];
function noOptionsLeft(options: CommonOptions, count: -1, usage: string): string[];
function noOptionsLeft(options: CommonOptions, count: number, usage: string): string[] {
  const unknown = options.rest.find((arg) => arg.startsWith('-') && arg !== '--');
  if (unknown) throw new UsageError(`unknown option ${unknown}`);
  const positionals = options.rest.filter((arg) => arg !== '--');
  if (count >= 0 && positionals.length !== count) throw new UsageError(`usage: ${usage}`);
  return positionals;
}

async function uploadCommand(options: CommonOptions, io: ClientIo): Promise<number> {
  const files = await expandInputs(noOptionsLeft(options, -1, 'imgapi upload <files or globs…>'));
  const board = boardFor(options, io);
  const client = connect(options, (event) => board.print(retryLine(event)));
  const outcomes = await mapLimit(files, options.concurrency, async (file) => {
    const row = board.add(file.name);
    row.update('uploading');
    try {
      const stored = await client.upload(file.path, { onProgress: ({ loaded, total }) => row.update('uploading', total ? loaded / total : 0) });
      row.finish('done', `${file.name}: uploaded ${stored.fileId} (${formatBytes(stored.size)})`);
      return { file: file.path, status: 'done' as const, fileId: stored.fileId, size: stored.size, format: stored.format };
    } catch (err) {
      const error = describeError(err);
      row.finish('failed', failureLine(file.name, error));
      return { file: file.path, status: 'failed' as const, error };
    }
  });
  board.close();
  const failed = outcomes.filter((outcome) => outcome.status === 'failed');
  if (options.json) io.stdout.write(`${json({ ok: failed.length === 0, files: outcomes })}\n`);
  // In the order the files were named, so that a script can pair them.
  else
    for (const [index, outcome] of outcomes.entries()) if (outcome.fileId) io.stdout.write(`${printable(outcome.fileId)}\t${files[index]!.name}\n`);
  return failed.length ? 1 : 0;
}

async function taskCommand(options: CommonOptions, io: ClientIo): Promise<number> {
  const [taskId] = noOptionsLeft(options, 1, 'imgapi task <taskId> [--wait]');
  // Retries are said on stderr either way: stdout holds the task alone.
  const client = connect(options, (event) => io.stderr.write(`${retryLine(event)}\n`));
  try {
    const task = options.wait ? await client.wait(taskId) : await client.task(taskId);
    io.stdout.write(options.json ? `${json(task)}\n` : `${taskText(task)}\n`);
    if (!options.wait || task.status === 'completed') return 0;
    throw taskFailure(task);
  } catch (err) {
    io.stderr.write(`${failureLine(taskId, describeError(err))}\n`);
    return 1;
  }
}

/** A task as text: a line per field that says something (status, progress, outputs, error). */
function taskText(task: Task): string {
  const rows: [string, string][] = [
    ['task', task.taskId],
    ['kind', task.type],
    ['status', task.status],
    ['progress', `${task.progress}%`],
    ...(task.outputFileId ? [['output', task.outputFileId] as [string, string]] : []),
    ...(task.outputFileIds?.length ? [['outputs', task.outputFileIds.join(', ')] as [string, string]] : []),
    ...(task.error ? [['error', `${task.error.code}: ${task.error.message}`] as [string, string]] : []),
    ['created', task.createdAt],
  ];
  return rows.map(([name, value]) => `${`${name}:`.padEnd(10)}${printable(value)}`).join('\n');
}

async function downloadCommand(options: CommonOptions, io: ClientIo): Promise<number> {
  const [fileId] = noOptionsLeft(options, 1, 'imgapi download <fileId> [-o <file or dir>]');
  const board = boardFor(options, io);
  const client = connect(options, (event) => board.print(retryLine(event)));
  const row = board.add(fileId);
  row.update('downloading');
  try {
    // Into a folder the file takes the service's name, made safe (sdk/file-names.ts).
    const saved = await client.download(fileId, options.output ?? '.', {
      overwrite: options.overwrite,
      onProgress: ({ loaded, total }) => row.update('downloading', total ? loaded / total : 0),
    });
    board.close();
    const written = path.resolve(saved.path ?? '');
    io.stdout.write(options.json ? `${json({ ...saved, path: written })}\n` : `${printable(written)}\n`);
    return 0;
  } catch (err) {
    board.close();
    io.stderr.write(`${failureLine(fileId, describeError(err))}\n`);
    return 1;
  }
}

async function infoCommand(options: CommonOptions, io: ClientIo): Promise<number> {
  const faces = options.rest.includes('--faces');
  const [target] = noOptionsLeft({ ...options, rest: options.rest.filter((arg) => arg !== '--faces') }, 1, 'imgapi info <fileId or file> [--faces]');
  const client = connect(options, (event) => io.stderr.write(`${retryLine(event)}\n`));
  try {
    // A path that exists is a local file to upload; anything else is taken as a file id.
    const local = fs.existsSync(target) && fs.statSync(target).isFile();
    const fileId = local ? (await client.upload(target)).fileId : target;
    const info = await client.info(fileId, { faces });
    io.stdout.write(
      options.json ? `${json({ fileId, ...(local ? { file: path.resolve(target) } : {}), ...info })}\n` : `${infoText(fileId, info)}\n`,
    );
    return 0;
  } catch (err) {
    io.stderr.write(`${failureLine(target, describeError(err))}\n`);
    return 1;
  }
}

/**
 * An image's info as text: a line per fact, the EXIF reduced to what a person looks for first.
 * The server's answer is not trusted to have the shape it should: a field of another type is
 * left out or printed as text, never a crash, and everything goes through `printable`.
 */
function infoText(fileId: string, info: FileInfo): string {
  const exif: Record<string, unknown> = info.exif !== null && typeof info.exif === 'object' ? info.exif : {};
  const text = (name: string) => (typeof exif[name] === 'string' || typeof exif[name] === 'number' ? String(exif[name]) : undefined);
  const camera = [text('Make'), text('Model')].filter(Boolean).join(' ');
  const taken = text('DateTimeOriginal') ?? text('CreateDate');
  const number = (value: unknown, digits: number) => (typeof value === 'number' ? value.toFixed(digits) : String(value));
  const list = (value: unknown, each: (item: unknown) => string) => (Array.isArray(value) ? value.map(each) : undefined);
  const gps = info.gps as { latitude?: unknown; longitude?: unknown } | null | undefined;
  const faces = list(info.faces, (item) => {
    const f = (item ?? {}) as Record<string, unknown>;
    return `${f.width}×${f.height} at ${f.left},${f.top} (${number(f.score, 2)})`;
  });
  const rows: [string, unknown][] = [
    ['file', fileId],
    ['format', info.format],
    ['size', `${info.width}×${info.height}${Number(info.pages) > 1 ? `, ${info.pages} frames` : ''}`],
    ['alpha', info.hasAlpha ? 'yes' : 'no'],
    ['colour', `${info.colorSpace}, orientation ${info.orientation}`],
    ['camera', camera || undefined],
    ['taken', taken],
    ['exif', info.exif ? `${Object.keys(exif).length} tags (--json shows them)` : 'none'],
    ['gps', gps && typeof gps === 'object' ? `${number(gps.latitude, 6)}, ${number(gps.longitude, 6)}` : 'none'],
    ['dominant', info.dominant],
    ['palette', list(info.palette, String)?.join(' ')],
    ['blurhash', info.blurhash],
    ['thumbhash', info.thumbhash],
    ['phash', info.phash],
    ['faces', faces && (faces.join('; ') || 'none')],
  ];
  return rows
    .filter((row): row is [string, NonNullable<unknown>] => row[1] !== undefined && row[1] !== null)
    .map(([name, value]) => `${`${name}:`.padEnd(11)}${printable(String(value))}`)
    .join('\n');
}
