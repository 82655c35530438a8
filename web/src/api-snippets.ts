// The calls behind what the dashboard does, as code a developer can paste: curl (POSIX sh, no jq),
// the SDK (sdk/, `@imgapi/sdk/node`) and the CLI (`npx imgapi`). Each reproduces exactly the job
// it was made from: the same kind, the same request body, against this origin.

export type Language = 'curl' | 'sdk' | 'cli';

export const LANGUAGES: { id: Language; label: string }[] = [
  { id: 'curl', label: 'curl' },
  { id: 'sdk', label: 'SDK (TypeScript)' },
  { id: 'cli', label: 'CLI' },
];

export interface JobCall {
  origin: string;
  kind: string;
  /** single: POST /api/process/{kind} with fileId; multi: one task with fileIds; batch: POST /api/process/batch/{kind}. */
  mode: 'single' | 'multi' | 'batch';
  /** The request body exactly as sent (fileId/fileIds included). */
  body: Record<string, unknown>;
  /** The inputs' file names, in order, for the CLI (which uploads local files). */
  inputNames: string[];
  /** The key itself (right after it is created); otherwise $IMGAPI_KEY from the environment. */
  apiKey?: string;
  /** Said beside the code (several single tasks: the code is the first one's). */
  note?: string;
}

/** A word for the shell: single-quoted unless it is plainly safe. */
export function shellQuote(text: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The first "field":"value" of a JSON answer (from stdin, or `file`), without jq. */
const extract = (field: string, file?: string) => `grep -o '"${field}":"[^"]*"'${file ? ` ${file}` : ''} | head -n 1 | cut -d'"' -f4`;

function environment(origin: string, apiKey: string | undefined): string {
  return [
    `export IMGAPI_URL=${shellQuote(origin)}`,
    apiKey ? `export IMGAPI_KEY=${shellQuote(apiKey)}` : `: "\${IMGAPI_KEY:?export IMGAPI_KEY=<your API key> (API keys page) first}"`,
  ].join('\n');
}

/** Long-polls the task in $TASK into task.json until it has finished (any HTTP error stops). */
const waitForTask = [
  `rm -f task.json`,
  `until grep -Eq '"status":"(completed|failed|canceled)"' task.json 2>/dev/null; do`,
  `  curl -fsS "$IMGAPI_URL/api/tasks/$TASK?wait=30" -H "x-api-key: $IMGAPI_KEY" -o task.json || break`,
  `done`,
];

function curlJob(call: JobCall): string {
  const path = call.mode === 'batch' ? `/api/process/batch/${call.kind}` : `/api/process/${call.kind}`;
  const lines = [environment(call.origin, call.apiKey), '', `# queue the job (202), then wait for it: each status call waits up to 30 s`];
  const post = [
    `curl -fsS -X POST "$IMGAPI_URL${path}" \\`,
    `  -H "x-api-key: $IMGAPI_KEY" -H 'content-type: application/json' \\`,
    `  -d ${shellQuote(JSON.stringify(call.body))}`,
  ];
  if (call.mode === 'batch') {
    lines.push(
      `BATCH=$(${post.join('\n')} | ${extract('batchId')})`,
      `rm -f batch.json`,
      `until grep -q '"queued":0' batch.json 2>/dev/null && grep -q '"processing":0' batch.json; do`,
      `  sleep 1; curl -fsS "$IMGAPI_URL/api/batches/$BATCH" -H "x-api-key: $IMGAPI_KEY" -o batch.json || break`,
      `done`,
      `# every output in one ZIP (with manifest.json)`,
      `curl -fsS "$IMGAPI_URL/api/batches/$BATCH/download" -H "x-api-key: $IMGAPI_KEY" -o "$BATCH.zip"`,
    );
  } else {
    lines.push(
      `TASK=$(${post.join('\n')} | ${extract('taskId')})`,
      ...waitForTask,
      `OUTPUT=$(${extract('outputFileId', 'task.json')})`,
      // The service names outputs (`<input stem>.<tag>.<ext>`, from the kind and the options it
      // ran with): the file keeps that name, as the SDK and the CLI keep it.
      `NAME=$(curl -fsS "$IMGAPI_URL/api/files/$OUTPUT" -H "x-api-key: $IMGAPI_KEY" | ${extract('filename')})`,
      `curl -fsS "$IMGAPI_URL/api/download/$OUTPUT" -H "x-api-key: $IMGAPI_KEY" -o "./$NAME"`,
    );
  }
  return lines.join('\n');
}

const tsValue = (value: unknown) =>
  JSON.stringify(value, null, 0)
    .replace(/"([A-Za-z_$][\w$]*)":/g, '$1: ')
    .replace(/,(?=\S)/g, ', ');

function sdkJob(call: JobCall): string {
  const head = [
    `import { Imgapi } from '@imgapi/sdk/node';`,
    '',
    `const imgapi = new Imgapi({ baseUrl: ${JSON.stringify(call.origin)}, apiKey: ${call.apiKey ? JSON.stringify(call.apiKey) : 'process.env.IMGAPI_KEY'} });`,
  ];
  if (call.mode === 'batch') {
    const { fileIds, ...options } = call.body;
    return [
      ...head,
      `const batch = await imgapi.batch(${JSON.stringify(call.kind)}, ${tsValue(fileIds)}, ${tsValue(options)});`,
      `for (const { taskId } of batch.tasks) {`,
      `  const task = await imgapi.wait(taskId);`,
      `  if (task.status === 'completed') await imgapi.download(task.outputFileId!, 'out/');`,
      `  else console.error(taskId, task.error?.code, task.error?.message);`,
      `}`,
    ].join('\n');
  }
  return [
    ...head,
    `const queued = await imgapi.process(${JSON.stringify(call.kind)}, ${tsValue(call.body)});`,
    `const task = await imgapi.wait(queued.taskId); // long-polls until it has finished`,
    `if (task.status !== 'completed') throw new Error(task.error?.message ?? task.status);`,
    `await imgapi.download(task.outputFileId!, 'out/'); // keeps the service's file name`,
  ].join('\n');
}

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** `--name value` for the CLI, as src/cli/job-options.ts reads them back. */
export function cliOptions(options: Record<string, unknown>): string[] {
  const words: string[] = [];
  for (const [name, value] of Object.entries(options)) {
    if (value === undefined || value === false) continue;
    if (value === true) words.push(`--${kebab(name)}`);
    else if (name === 'steps' && Array.isArray(value)) {
      // A pipeline's steps: `--step kind:name=value,…`, in order (src/cli/job-options.ts stepValue).
      for (const step of value as Record<string, unknown>[]) {
        const { kind, ...options } = step;
        const pairs = Object.entries(options).map(([option, v]) => `${kebab(option)}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`);
        words.push('--step', shellQuote(pairs.length ? `${String(kind)}:${pairs.join(',')}` : String(kind)));
      }
    } else if (Array.isArray(value) && value.some((v) => typeof v === 'object' && v !== null))
      words.push(`--${kebab(name)}`, shellQuote(JSON.stringify(value)));
    else if (Array.isArray(value)) words.push(`--${kebab(name)}`, shellQuote(value.join(',')));
    else if (typeof value === 'object' && value !== null) words.push(`--${kebab(name)}`, shellQuote(JSON.stringify(value)));
    else words.push(`--${kebab(name)}`, shellQuote(String(value)));
  }
  return words;
}

function cliJob(call: JobCall): string {
  const { fileId: _fileId, fileIds: _fileIds, ...options } = call.body;
  const inputs = call.inputNames.length ? call.inputNames.map(shellQuote) : ['photo.jpg'];
  return [
    environment(call.origin, call.apiKey),
    '',
    `# uploads the local files, runs the job (a batch where your plan allows), writes the outputs to out/`,
    ['npx imgapi run', call.kind, ...inputs, '-o out', ...cliOptions(options)].join(' '),
  ].join('\n');
}

export function jobSnippet(language: Language, call: JobCall): string {
  if (language === 'curl') return curlJob(call);
  if (language === 'sdk') return sdkJob(call);
  return cliJob(call);
}

/** The typical flow with a new key: check the key, upload, queue, wait, download. */
export function firstCallSnippet(language: Language, origin: string, apiKey: string): string {
  if (language === 'curl')
    return [
      environment(origin, apiKey),
      '',
      `curl -fsS "$IMGAPI_URL/api/account" -H "x-api-key: $IMGAPI_KEY"   # your plan and usage`,
      '',
      `# 1. upload  2. start a job  3. poll until it has finished  4. download`,
      `FILE=$(curl -fsS "$IMGAPI_URL/api/upload" -H "x-api-key: $IMGAPI_KEY" -F file=@photo.jpg | ${extract('fileId')})`,
      `TASK=$(curl -fsS -X POST "$IMGAPI_URL/api/process/resize" -H "x-api-key: $IMGAPI_KEY" \\`,
      `  -H 'content-type: application/json' -d "{\\"fileId\\":\\"$FILE\\",\\"width\\":800,\\"format\\":\\"webp\\"}" | ${extract('taskId')})`,
      ...waitForTask,
      `curl -fsS "$IMGAPI_URL/api/download/$(${extract('outputFileId', 'task.json')})" -H "x-api-key: $IMGAPI_KEY" -o photo-800.webp`,
    ].join('\n');
  if (language === 'sdk')
    return [
      `import { Imgapi } from '@imgapi/sdk/node';`,
      '',
      `const imgapi = new Imgapi({ baseUrl: ${JSON.stringify(origin)}, apiKey: ${JSON.stringify(apiKey)} });`,
      `console.log(await imgapi.account()); // your plan and usage`,
      `const file = await imgapi.upload('photo.jpg');`,
      `const queued = await imgapi.process('resize', { fileId: file.fileId, width: 800, format: 'webp' });`,
      `const task = await imgapi.wait(queued.taskId);`,
      `if (task.status !== 'completed') throw new Error(task.error?.message ?? task.status);`,
      `await imgapi.download(task.outputFileId!, 'out/');`,
    ].join('\n');
  return [environment(origin, apiKey), '', `npx imgapi run resize photo.jpg -o out --width 800 --format webp`].join('\n');
}
