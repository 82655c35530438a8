// The playground: any kind from the browser. Inputs are uploaded here (dropped or picked,
// with progress) or chosen from the files already stored (also /playground?fileId=…, "Open in
// playground" on Files); a watermark's logo is chosen on its own and is never an input. The
// kind's options are a form generated from its schema, checked in the browser before anything
// is sent. Each run replaces the results view and joins the session's history; results show
// before/after with zoom, a slide gallery for decks, batch totals and a ZIP of everything, and
// the API request that reproduces the run. All through /api/* with the session, within the
// account's plan (Free included).
import { useEffect, useMemo, useRef, useState, type DragEvent, type ReactNode } from 'react';
import { api, ApiError, downloadUrl, isFinished, uploadFile, type ApiFile, type ApiTask } from '../api';
import { ApiRequestPanel } from '../api-request';
import type { JobCall } from '../api-snippets';
import { ErrorBox, PageTitle, ProgressBar, RegionBox, StatusBadge, Thumb, useAsync, usePreview } from '../components';
import { bytes } from '../format';
import { Markdown } from '../markdown';
import { Link, useLocation } from '../router';
import { SchemaForm, toBody, type FormValues, type JsonSchema } from '../schema-form';
import { disabledFields, validateForm, type OptionRules } from '../validation';
import '../playground.css';

type BodySchema = JsonSchema & { properties: Record<string, JsonSchema>; required: string[] };

interface Operation {
  kind: string;
  summary: string;
  description: string;
  accepts: string;
  multiInput: { min: number; max: number } | null;
  batch: boolean;
  body: BodySchema;
  batchBody: BodySchema | null;
  rules?: OptionRules;
  /** Its output is its input re-encoded (compress, convert): the results show what was saved. */
  reencodes: boolean;
}

interface Picked {
  localId: number;
  name: string;
  size: number;
  localUrl?: string;
  progress: number;
  state: 'uploading' | 'uploaded' | 'failed';
  /** Chosen from the stored files rather than uploaded here. */
  stored: boolean;
  uploaded?: ApiFile;
  error?: unknown;
}

interface RunInput {
  fileId: string;
  name: string;
  size: number;
  width?: number;
  height?: number;
}

/** One run of the playground, as the session's history keeps it. */
interface RunRecord {
  id: number;
  kind: string;
  /** The kind only re-encodes (Operation.reencodes): size is the point, so savings are shown. */
  reencodes?: boolean;
  call: JobCall;
  inputs: RunInput[];
  batchId?: string;
  startedAt: string;
  tasks: { taskId: string; fileId?: string; label: string }[];
}

const INPUT_FIELDS = new Set(['fileId', 'fileIds']);
const HISTORY_KEY = 'imgapi.playground.history';
/** Results of a run shown with before/after previews; the others get a lazily loaded thumbnail. */
const RICH_RESULTS = 6;
let nextLocalId = 1;
let nextStepId = 1;

/** A step kind of a pipeline's `steps` (one alternative of its items' oneOf). */
interface StepKind {
  kind: string;
  properties: Record<string, JsonSchema>;
  required: string[];
}

interface StepState {
  id: number;
  kind: string;
  values: FormValues;
}

/** The step kinds an array option takes (a pipeline's steps), from its items' alternatives; else none. */
function stepKindsOf(schema: JsonSchema | undefined): StepKind[] {
  const alternatives = schema?.type === 'array' ? schema.items?.oneOf : undefined;
  return (alternatives ?? []).flatMap((alternative) => {
    const kind = alternative.properties?.kind?.const;
    if (typeof kind !== 'string') return [];
    const properties = Object.fromEntries(Object.entries(alternative.properties ?? {}).filter(([name]) => name !== 'kind'));
    return [{ kind, properties, required: (alternative.required ?? []).filter((name) => name !== 'kind') }];
  });
}

type FileFieldRenderer = (field: { id: string; name: string; value: string; onChange: (value: string) => void; disabled: boolean }) => ReactNode;

/** A pipeline's steps: add a kind, fill its options (its own schema form), reorder, remove. */
function StepEditor(props: {
  kinds: StepKind[];
  steps: StepState[];
  onChange: (steps: StepState[]) => void;
  problems: Record<string, string>[];
  listProblem?: string;
  rulesOf: (kind: string) => OptionRules | undefined;
  max: number;
  renderFileField: FileFieldRenderer;
}) {
  const { kinds, steps, onChange } = props;
  const [adding, setAdding] = useState(kinds[0]?.kind ?? '');
  const move = (index: number, by: number) => {
    const list = [...steps];
    const [step] = list.splice(index, 1);
    list.splice(index + by, 0, step!);
    onChange(list);
  };
  return (
    <div className={`steps-editor ${props.listProblem ? 'field-invalid' : ''}`} data-testid="steps" data-field="steps">
      <div className="steps-title">
        Steps <code className="muted small">steps</code>
      </div>
      {steps.length === 0 && <p className="muted small">No steps yet: add the transforms in the order they should run.</p>}
      <ol className="step-list">
        {steps.map((step, index) => {
          const kind = kinds.find((k) => k.kind === step.kind);
          return (
            <li key={step.id} className="step" data-step={index} data-kind={step.kind}>
              <div className="step-head">
                <strong>
                  {index + 1}. {step.kind}
                </strong>
                <div className="actions">
                  <button
                    type="button"
                    className="secondary small"
                    disabled={index === 0}
                    onClick={() => move(index, -1)}
                    aria-label={`move step ${index + 1} up`}
                  >
                    ↑
                  </button>
                  <button
                    type="button"
                    className="secondary small"
                    disabled={index === steps.length - 1}
                    onClick={() => move(index, 1)}
                    aria-label={`move step ${index + 1} down`}
                  >
                    ↓
                  </button>
                  <button
                    type="button"
                    className="secondary small"
                    onClick={() => onChange(steps.filter((s) => s.id !== step.id))}
                    aria-label={`remove step ${index + 1}`}
                  >
                    ✕
                  </button>
                </div>
              </div>
              {kind && (
                <SchemaForm
                  idPrefix={`step-${step.id}-`}
                  properties={kind.properties}
                  required={kind.required}
                  values={step.values}
                  onChange={(values) => onChange(steps.map((s) => (s.id === step.id ? { ...s, values } : s)))}
                  problems={props.problems[index] ?? {}}
                  disabled={disabledFields(step.values, props.rulesOf(step.kind))}
                  renderFileField={props.renderFileField}
                />
              )}
            </li>
          );
        })}
      </ol>
      {props.listProblem && (
        <div className="error-text small" data-testid="problem-steps">
          {props.listProblem}
        </div>
      )}
      <div className="run">
        <select aria-label="kind of the next step" value={adding} onChange={(e) => setAdding(e.target.value)} data-testid="step-kind">
          {kinds.map((k) => (
            <option key={k.kind} value={k.kind}>
              {k.kind}
            </option>
          ))}
        </select>
        <button
          type="button"
          className="secondary"
          disabled={steps.length >= props.max}
          onClick={() => onChange([...steps, { id: nextStepId++, kind: adding, values: {} }])}
          data-testid="add-step"
        >
          Add step
        </button>
        <span className="muted small">
          {steps.length} of at most {props.max}
        </span>
      </div>
    </div>
  );
}

function loadHistory(): RunRecord[] {
  try {
    const stored = JSON.parse(sessionStorage.getItem(HISTORY_KEY) ?? '[]') as unknown;
    return Array.isArray(stored) ? (stored as RunRecord[]) : [];
  } catch {
    return [];
  }
}

function sizeChange(before: number, after: number): string {
  if (after === before) return 'the same size as the input';
  const percent = Math.abs(((after - before) / before) * 100);
  const shown = percent < 1 ? percent.toFixed(1) : Math.round(percent);
  // A no-break space keeps "−82 %" on one line.
  return after < before ? `${bytes(before - after)} smaller (−${shown}\u00a0%)` : `${bytes(after - before)} larger (+${shown}\u00a0%)`;
}

const optionSummary = (body: Record<string, unknown>) =>
  Object.entries(body)
    .filter(([name]) => !INPUT_FIELDS.has(name))
    .map(([name, value]) => `${name}=${typeof value === 'object' ? JSON.stringify(value) : String(value)}`)
    .join(', ') || 'defaults';

/** Follows the tasks of a run until all have finished: a batch in one request, else each task. */
async function follow(run: RunRecord, update: (tasks: ApiTask[]) => void, signal: AbortSignal): Promise<void> {
  const done = new Set<string>();
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  while (!signal.aborted && done.size < run.tasks.length) {
    let tasks: ApiTask[];
    if (run.batchId) {
      tasks = (await api.get<{ tasks: ApiTask[] }>(`/api/batches/${encodeURIComponent(run.batchId)}`, { signal })).tasks;
    } else if (run.tasks.length - done.size === 1) {
      const open = run.tasks.find((t) => !done.has(t.taskId))!;
      tasks = [await api.get<ApiTask>(`/api/tasks/${encodeURIComponent(open.taskId)}?wait=10`, { signal, unlimited: true })];
    } else {
      const open = run.tasks.filter((t) => !done.has(t.taskId));
      tasks = await Promise.all(open.map((t) => api.get<ApiTask>(`/api/tasks/${encodeURIComponent(t.taskId)}`, { signal })));
    }
    update(tasks);
    for (const task of tasks) if (isFinished(task.status)) done.add(task.taskId);
    if (done.size < run.tasks.length) await sleep(run.batchId || run.tasks.length > 1 ? 1000 : 500);
  }
}

/** Before and after in one frame: a slider reveals the output over the input; zoom to compare detail. */
function Compare({ before, after, label }: { before: string; after: string; label: string }) {
  const [position, setPosition] = useState(50);
  const [zoom, setZoom] = useState(1);
  const box = zoom === 1 ? 800 : 2048;
  const beforeSrc = usePreview(before, box).src;
  const afterSrc = usePreview(after, box).src;
  return (
    <div className="compare" data-testid="compare">
      <div className="compare-view" tabIndex={0} role="region" aria-label={`before and after: ${label}`}>
        <div className="compare-stage" style={{ width: `${zoom * 100}%` }}>
          {beforeSrc ? <img src={beforeSrc} alt={`${label}: before`} /> : <div className="thumb thumb-large" />}
          {afterSrc && <img className="after" src={afterSrc} alt={`${label}: after`} style={{ clipPath: `inset(0 0 0 ${position}%)` }} />}
          <div className="compare-line" style={{ left: `${position}%` }} />
        </div>
      </div>
      <div className="compare-controls">
        <label className="small">
          Before ◂ ▸ after{' '}
          <input
            type="range"
            min={0}
            max={100}
            value={position}
            onChange={(e) => setPosition(Number(e.target.value))}
            aria-label={`compare ${label}`}
          />
        </label>
        <label className="small">
          Zoom{' '}
          <select value={zoom} onChange={(e) => setZoom(Number(e.target.value))} data-testid="compare-zoom">
            {[1, 2, 4].map((z) => (
              <option key={z} value={z}>
                {z}×
              </option>
            ))}
          </select>
        </label>
      </div>
    </div>
  );
}

/** A deck's slides: a gallery (previews load as they scroll into view) and the ZIP of all. */
function Slides({ task }: { task: ApiTask }) {
  const slides = task.outputFileIds ?? [];
  const numbers = task.result?.slides;
  return (
    <div data-testid="slides">
      <div className="run">
        <a className="button" href={downloadUrl(task.outputFileId!)} download data-testid="slides-zip">
          Download all {slides.length} slides (ZIP)
        </a>
        <span className="muted small">
          {task.result?.imageFormat?.toUpperCase()} {task.result?.width ? `${task.result.width}×${task.result.height}` : ''}
        </span>
      </div>
      <ol className="slides">
        {slides.map((id, i) => (
          <li key={id}>
            <Thumb fileId={id} alt={`slide ${numbers?.[i] ?? i + 1}`} box={160} />
            <a href={downloadUrl(id)} download className="small">
              Slide {numbers?.[i] ?? i + 1}
            </a>
          </li>
        ))}
      </ol>
    </div>
  );
}

/**
 * One task of a run. `rich`: before/after previews (the first few of a run); the rest show a
 * thumbnail that loads as it scrolls into view, so a batch of 50 does not fetch 100 previews.
 */
function TaskResult({ run, task, entry, rich }: { run: RunRecord; task: ApiTask | undefined; entry: RunRecord['tasks'][number]; rich: boolean }) {
  const status = task?.status ?? 'queued';
  const input = run.inputs.find((i) => i.fileId === entry.fileId) ?? (run.inputs.length === 1 ? run.inputs[0] : undefined);
  const result = task?.result;
  const sameShape =
    input?.width && input.height && result?.width && result.height && Math.abs(input.width / input.height - result.width / result.height) < 0.02;
  // An image output has pixels to show (a PDF or a ZIP of pages has no width).
  const isImage = result?.width !== undefined;
  return (
    <li data-task-id={entry.taskId} data-status={status}>
      <div className="result-head">
        <Link to={`/tasks/${entry.taskId}`}>
          <code>{entry.taskId}</code>
        </Link>{' '}
        <span className="muted">{entry.label}</span> <StatusBadge status={status} />
      </div>
      {task && !isFinished(task.status) && (
        <>
          <ProgressBar value={task.progress} label={`progress of ${entry.taskId}`} />
          <div className="muted small">{task.status === 'queued' ? 'Waiting in the queue…' : `Processing: ${Math.round(task.progress)} %`}</div>
        </>
      )}
      {task?.error && (
        <div className="error" role="alert">
          <strong>{task.error.code}</strong> {task.error.message}
        </div>
      )}
      {task?.status === 'completed' && task.outputFileId && result && (
        <div className="result-body-wide">
          {task.outputFileIds?.length ? (
            <Slides task={task} />
          ) : rich && isImage && input && sameShape ? (
            <Compare before={input.fileId} after={task.outputFileId} label={entry.label} />
          ) : rich && isImage && input?.width ? (
            <div className="grid two">
              <div>
                <div className="muted small">Before</div>
                <Thumb fileId={input.fileId} alt={`${entry.label}: before`} box={320} eager />
              </div>
              <div>
                <div className="muted small">After</div>
                <Thumb fileId={task.outputFileId} alt={`${entry.label}: after`} box={320} eager />
              </div>
            </div>
          ) : (
            <Thumb fileId={task.outputFileId} alt={`result of ${entry.label}`} box={320} eager={rich} />
          )}
          {rich && result.regions?.length && input?.width && input.height ? (
            <CoveredRegions fileId={input.fileId} regions={result.regions} width={input.width} height={input.height} label={entry.label} />
          ) : null}
          <p className="muted" data-testid="result-meta">
            {result.format}
            {result.width ? ` · ${result.width}×${result.height}` : ''}
            {result.pages ? ` · ${result.pages} ${result.format === 'zip' ? 'slides' : 'pages'}` : ''}
            {` · ${bytes(result.size)}`}
            {run.reencodes && (result.inputSize ?? input?.size) ? ` · ${sizeChange(result.inputSize ?? input!.size, result.size)}` : ''}
            {/* What a quality search chose (compress quality "auto"): the quality, and the metric it kept. */}
            {result.ssim !== undefined
              ? ` · ${result.quality !== undefined ? `quality ${result.quality} chosen` : 'lossless'}, SSIM ${result.ssim}`
              : ''}
          </p>
          {!task.outputFileIds?.length && (
            <a className="button" href={downloadUrl(task.outputFileId)} download data-testid="result-download">
              Download
            </a>
          )}
        </div>
      )}
    </li>
  );
}

/** What a redact covered (result.regions), drawn over the input: the faces it found and the regions it was given. */
function CoveredRegions(props: {
  fileId: string;
  regions: NonNullable<NonNullable<ApiTask['result']>['regions']>;
  width: number;
  height: number;
  label: string;
}) {
  const { src } = usePreview(props.fileId, 640);
  const faces = props.regions.filter((r) => r.source === 'face').length;
  return (
    <figure className="covered-regions" data-testid="covered-regions">
      <div className="face-frame">
        {src && <img src={src} alt={`${props.label}: before, with what was covered`} />}
        {src && props.regions.map((region, i) => <RegionBox key={i} box={region} width={props.width} height={props.height} />)}
      </div>
      <figcaption className="muted small">
        Covered: {faces} face{faces === 1 ? '' : 's'}
        {props.regions.length > faces ? `, ${props.regions.length - faces} given region${props.regions.length - faces === 1 ? '' : 's'}` : ''}
      </figcaption>
    </figure>
  );
}

function Results({ run, tasks }: { run: RunRecord; tasks: Record<string, ApiTask> }) {
  const list = run.tasks.map((t) => tasks[t.taskId]);
  const finished = list.filter((t) => t && isFinished(t.status)).length;
  const completed = list.filter((t): t is ApiTask => t?.status === 'completed');
  const before = completed.reduce((sum, t) => sum + (t.result?.inputSize ?? run.inputs.find((i) => i.fileId === t.input.fileId)?.size ?? 0), 0);
  const after = completed.reduce((sum, t) => sum + (t.result?.size ?? 0), 0);
  const several = run.tasks.length > 1;
  return (
    <section className="card" data-testid="results-card" data-run={run.id} aria-labelledby="results-title">
      <h2 id="results-title">
        3. Results <span className="muted small">run {run.id}</span>
      </h2>
      <p className="muted small run-options" data-testid="run-summary">
        {run.kind} · {optionSummary(run.call.body)} · {run.inputs.map((i) => i.name).join(', ')}
        {run.batchId && (
          <>
            {' '}
            · batch <code>{run.batchId}</code>
          </>
        )}
      </p>
      {several && (
        <div className="batch-totals" data-testid="batch-totals">
          <span>
            {finished} of {run.tasks.length} finished, {completed.length} completed
          </span>
          {completed.length > 0 && run.reencodes && (
            <span>
              {bytes(before)} → {bytes(after)}: {before >= after ? `${bytes(before - after)} saved` : `${bytes(after - before)} more`}
            </span>
          )}
          {run.batchId &&
            (finished === run.tasks.length ? (
              <a className="button" href={`/api/batches/${encodeURIComponent(run.batchId)}/download`} download data-testid="batch-zip">
                Download all (ZIP)
              </a>
            ) : (
              <span className="muted small">The ZIP of all outputs is ready when every task has finished.</span>
            ))}
        </div>
      )}
      <ul className="results" data-testid="results">
        {run.tasks.map((entry, index) => (
          <TaskResult key={entry.taskId} run={run} task={tasks[entry.taskId]} entry={entry} rich={index < RICH_RESULTS} />
        ))}
      </ul>
      <ApiRequestPanel call={run.call} />
    </section>
  );
}

/** Stored files to add as inputs, searchable by name. */
function StoredFiles({ onPick, exclude }: { onPick: (file: ApiFile) => void; exclude: Set<string> }) {
  const list = useAsync((signal) => api.get<{ files: ApiFile[] }>('/api/files?limit=100', { signal }), []);
  const [query, setQuery] = useState('');
  const files = (list.data?.files ?? []).filter((f) => f.filename.toLowerCase().includes(query.trim().toLowerCase()));
  return (
    <div data-testid="stored-files">
      <label className="inline-label">
        Search{' '}
        <input type="search" value={query} onChange={(e) => setQuery(e.target.value)} placeholder="file name" aria-label="search stored files" />
      </label>
      <ErrorBox error={list.error} />
      {list.data && files.length === 0 && <p className="muted small">{query ? 'No stored file has that name.' : 'No stored files yet.'}</p>}
      {files.length > 0 && (
        <ul className="stored-files">
          {files.map((f) => (
            <li key={f.fileId} data-file-id={f.fileId}>
              <span className="name" title={f.filename}>
                {f.filename}
              </span>
              <span className="muted small">
                {f.format}
                {f.width ? ` ${f.width}×${f.height}` : ''} · {bytes(f.size)}
              </span>
              <button
                type="button"
                className="secondary small"
                disabled={exclude.has(f.fileId)}
                onClick={() => onPick(f)}
                aria-label={`${exclude.has(f.fileId) ? 'Added' : 'Add'} ${f.filename}`}
              >
                {exclude.has(f.fileId) ? 'Added' : 'Add'}
              </button>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** A watermark's logo: a stored image or one uploaded just for this; never one of the inputs. */
function LogoPicker(props: { id: string; value: string; onChange: (value: string) => void; disabled: boolean }) {
  const list = useAsync((signal) => api.get<{ files: ApiFile[] }>('/api/files?limit=100', { signal }), []);
  const [extra, setExtra] = useState<ApiFile[]>([]);
  const [uploading, setUploading] = useState(false);
  const [error, setError] = useState<unknown>();
  const input = useRef<HTMLInputElement>(null);
  const files = [...extra, ...(list.data?.files ?? []).filter((f) => !extra.some((e) => e.fileId === f.fileId))].filter(
    // An image, by the media type the service read from its bytes (never a document or a ZIP).
    (f) => f.mimeType.startsWith('image/'),
  );
  const upload = async (file: File) => {
    setUploading(true);
    setError(undefined);
    try {
      const uploaded = await uploadFile(file, () => undefined);
      setExtra((list) => [uploaded, ...list]);
      props.onChange(uploaded.fileId);
    } catch (err) {
      setError(err);
    } finally {
      setUploading(false);
    }
  };
  return (
    <div className="logo-picker">
      <select id={props.id} name="logoFileId" value={props.value} disabled={props.disabled} onChange={(e) => props.onChange(e.target.value)}>
        <option value="">(no logo)</option>
        {files.map((f) => (
          <option key={f.fileId} value={f.fileId}>
            {f.filename} ({f.fileId})
          </option>
        ))}
      </select>
      <button type="button" className="secondary small" disabled={props.disabled || uploading} onClick={() => input.current?.click()}>
        {uploading ? 'Uploading…' : 'Upload a logo'}
      </button>
      <input
        ref={input}
        type="file"
        accept="image/*"
        hidden
        data-testid="logo-input"
        onChange={(e) => {
          const file = e.target.files?.[0];
          if (file) void upload(file);
          e.target.value = '';
        }}
      />
      <ErrorBox error={error} />
    </div>
  );
}

export function PlaygroundPage() {
  const { query } = useLocation();
  const catalogue = useAsync(
    (signal) => api.get<{ operations: Operation[]; limits: { batchSize: number; maxFileBytes: number } }>('/dashboard-api/operations', { signal }),
    [],
  );
  const operations = catalogue.data?.operations ?? [];
  const limits = catalogue.data?.limits;
  const [kind, setKind] = useState(query.get('kind') ?? 'compress');
  const op = operations.find((o) => o.kind === kind) ?? operations[0];
  const [values, setValues] = useState<FormValues>({});
  const [steps, setSteps] = useState<StepState[]>([]);
  const [picked, setPicked] = useState<Picked[]>([]);
  const [showStored, setShowStored] = useState(false);
  const [dragging, setDragging] = useState(false);
  const [submitError, setSubmitError] = useState<unknown>();
  const [submitting, setSubmitting] = useState(false);
  const [checked, setChecked] = useState(false);
  const [history, setHistory] = useState<RunRecord[]>(loadHistory);
  const [currentId, setCurrentId] = useState<number>();
  const [tasks, setTasks] = useState<Record<string, ApiTask>>({});
  const following = useRef<AbortController | undefined>(undefined);
  const fileInput = useRef<HTMLInputElement>(null);
  const current = history.find((r) => r.id === currentId);

  useEffect(() => () => following.current?.abort(), []);
  useEffect(() => {
    setValues({});
    setSteps([]);
    setChecked(false);
    setSubmitError(undefined);
  }, [kind]);
  useEffect(() => {
    sessionStorage.setItem(HISTORY_KEY, JSON.stringify(history.slice(0, 50)));
  }, [history]);
  useEffect(
    () => () => {
      for (const p of picked) if (p.localUrl) URL.revokeObjectURL(p.localUrl);
    },
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [],
  );

  const update = (localId: number, change: Partial<Picked>) =>
    setPicked((list) => list.map((p) => (p.localId === localId ? { ...p, ...change } : p)));

  const addStored = (file: ApiFile) =>
    setPicked((list) =>
      list.some((p) => p.uploaded?.fileId === file.fileId)
        ? list
        : [...list, { localId: nextLocalId++, name: file.filename, size: file.size, progress: 100, state: 'uploaded', stored: true, uploaded: file }],
    );

  // /playground?fileId=…&fileId=…: "Open in playground" from Files.
  const openIds = query.getAll('fileId').join(',');
  useEffect(() => {
    if (!openIds) return;
    const controller = new AbortController();
    for (const id of openIds.split(',')) {
      api.get<ApiFile>(`/api/files/${encodeURIComponent(id)}`, { signal: controller.signal }).then(addStored, (error) => {
        if (!controller.signal.aborted)
          setPicked((list) => [...list, { localId: nextLocalId++, name: id, size: 0, progress: 0, state: 'failed', stored: true, error }]);
      });
    }
    return () => controller.abort();
  }, [openIds]);

  const addFiles = (files: FileList | File[]) => {
    const added = [...files].map((file) => ({
      file,
      item: {
        localId: nextLocalId++,
        name: file.name,
        size: file.size,
        localUrl: /^image\/(png|jpeg|gif|webp|avif|bmp)$/.test(file.type) ? URL.createObjectURL(file) : undefined,
        progress: 0,
        state: 'uploading',
        stored: false,
      } satisfies Picked,
    }));
    setPicked((list) => [...list, ...added.map((a) => a.item)]);
    for (const { file, item } of added) {
      uploadFile(file, (fraction) => update(item.localId, { progress: fraction * 100 })).then(
        (uploaded) => update(item.localId, { uploaded, state: 'uploaded', progress: 100 }),
        (error) => update(item.localId, { error, state: 'failed' }),
      );
    }
  };

  const onDrop = (event: DragEvent) => {
    event.preventDefault();
    setDragging(false);
    if (event.dataTransfer.files.length) addFiles(event.dataTransfer.files);
  };

  const remove = (localId: number) =>
    setPicked((list) => {
      const gone = list.find((p) => p.localId === localId);
      if (gone?.localUrl) URL.revokeObjectURL(gone.localUrl);
      return list.filter((p) => p.localId !== localId);
    });

  const ready = picked.filter((p) => p.state === 'uploaded' && p.uploaded);
  const uploading = picked.some((p) => p.state === 'uploading');
  const stepKinds = useMemo(() => stepKindsOf(op?.body.properties.steps), [op]);
  const options = useMemo(() => {
    if (!op) return { properties: {} as Record<string, JsonSchema>, required: [] as string[] };
    // A pipeline's steps have their own editor; every other option is a field of the form.
    const own = (name: string) => !INPUT_FIELDS.has(name) && !(name === 'steps' && stepKinds.length > 0);
    const properties = Object.fromEntries(Object.entries(op.body.properties).filter(([name]) => own(name)));
    return { properties, required: (op.body.required ?? []).filter(own) };
  }, [op, stepKinds]);
  const rulesOf = (kind: string) => operations.find((o) => o.kind === kind)?.rules;
  const stepKindOf = (kind: string) => stepKinds.find((k) => k.kind === kind);
  const disabled = disabledFields(values, op?.rules);
  const clientProblems = validateForm(options.properties, options.required, values, op?.rules);
  const clientStepProblems = steps.map((step) => {
    const kind = stepKindOf(step.kind);
    return kind ? validateForm(kind.properties, kind.required, step.values, rulesOf(step.kind)) : {};
  });
  const stepsSchema = op?.body.properties.steps;
  const clientListProblem = stepKinds.length > 0 && steps.length < (stepsSchema?.minItems ?? 1) ? 'Add at least one step.' : undefined;
  const clientProblemCount =
    Object.keys(clientProblems).length + clientStepProblems.reduce((n, p) => n + Object.keys(p).length, 0) + (clientListProblem ? 1 : 0);
  // One message per field: the browser's check (once a run was tried), else the server's.
  const problems: Record<string, string> = {};
  const stepProblems: Record<string, string>[] = steps.map(() => ({}));
  let listProblem: string | undefined;
  const sentence = (message: string) => message.charAt(0).toUpperCase() + message.slice(1) + (/[.!?]$/.test(message) ? '' : '.');
  if (submitError instanceof ApiError)
    for (const f of submitError.fields) {
      const inStep = /^steps\[(\d+)\]\.([A-Za-z]+)/.exec(f.field);
      if (inStep && stepProblems[Number(inStep[1])]) stepProblems[Number(inStep[1])]![inStep[2]!] ??= sentence(f.message);
      else if (f.field.startsWith('steps') && stepKinds.length > 0) listProblem ??= sentence(f.message);
      else problems[f.field.split(/[.[]/)[0]!] ??= sentence(f.message);
    }
  if (checked) {
    Object.assign(problems, clientProblems);
    clientStepProblems.forEach((p, i) => Object.assign(stepProblems[i]!, p));
    listProblem = clientListProblem ?? listProblem;
  }
  const fieldErrorShown = submitError instanceof ApiError && submitError.fields.length > 0;

  /** How the picked files become requests: one multi-input task, one task, a batch, or single tasks. */
  const plan = (() => {
    if (!op || ready.length === 0) return undefined;
    const ids = ready.map((p) => p.uploaded!.fileId);
    if (op.multiInput) return { mode: 'multi' as const, ids, text: `one ${op.kind} task with ${ids.length} file${ids.length === 1 ? '' : 's'}` };
    if (ids.length === 1) return { mode: 'single' as const, ids, text: `one ${op.kind} task` };
    if (op.batch && limits && ids.length <= limits.batchSize)
      return { mode: 'batch' as const, ids, text: `a batch of ${ids.length} ${op.kind} tasks` };
    return {
      mode: 'each' as const,
      ids,
      text: `${ids.length} separate ${op.kind} tasks${op.batch ? ` (your plan's batch size is ${limits?.batchSize ?? 0})` : ''}`,
    };
  })();

  const startFollowing = (run: RunRecord) => {
    following.current?.abort();
    const controller = new AbortController();
    following.current = controller;
    follow(run, (list) => setTasks((map) => ({ ...map, ...Object.fromEntries(list.map((t) => [t.taskId, t])) })), controller.signal).catch((err) => {
      if (!controller.signal.aborted) setSubmitError(err);
    });
  };

  const show = (run: RunRecord) => {
    setCurrentId(run.id);
    startFollowing(run);
  };

  const run = async () => {
    if (!op || !plan) return;
    // A new run replaces the results view, whatever comes of it.
    following.current?.abort();
    setCurrentId(undefined);
    setSubmitError(undefined);
    setChecked(true);
    if (clientProblemCount > 0) {
      const first = Object.keys(clientProblems)[0];
      const stepIndex = clientStepProblems.findIndex((p) => Object.keys(p).length > 0);
      const target = first
        ? `option-${first}`
        : stepIndex >= 0
          ? `step-${steps[stepIndex]!.id}-${Object.keys(clientStepProblems[stepIndex]!)[0]}`
          : undefined;
      if (target) document.getElementById(target)?.focus();
      return;
    }
    setSubmitting(true);
    const body: Record<string, unknown> = {
      ...(stepKinds.length > 0
        ? {
            steps: steps.map((step) => {
              const kind = stepKindOf(step.kind)!;
              const off = new Set(disabledFields(step.values, rulesOf(step.kind)).keys());
              return { kind: step.kind, ...toBody(kind.properties, step.values, off) };
            }),
          }
        : {}),
      ...toBody(options.properties, values, new Set(disabled.keys())),
    };
    const inputs: RunInput[] = ready.map((p) => ({
      fileId: p.uploaded!.fileId,
      name: p.name,
      size: p.uploaded!.size,
      width: p.uploaded!.width,
      height: p.uploaded!.height,
    }));
    const names = new Map(inputs.map((i) => [i.fileId, i.name]));
    const headers = () => ({ 'idempotency-key': crypto.randomUUID() });
    const id = (history[0]?.id ?? 0) + 1;
    const call = (mode: JobCall['mode'], requestBody: Record<string, unknown>): JobCall => ({
      origin: location.origin,
      kind: op.kind,
      mode,
      body: requestBody,
      inputNames: inputs.map((i) => i.name),
    });
    try {
      let record: RunRecord;
      const base = { id, kind: op.kind, reencodes: op.reencodes, inputs, startedAt: new Date().toISOString() };
      if (plan.mode === 'multi') {
        const requestBody = { fileIds: plan.ids, ...body };
        const queued = await api.post<{ taskId: string }>(`/api/process/${op.kind}`, requestBody, { headers: headers() });
        record = { ...base, call: call('multi', requestBody), tasks: [{ taskId: queued.taskId, label: `${plan.ids.length} files` }] };
      } else if (plan.mode === 'batch') {
        const requestBody = { fileIds: plan.ids, ...body };
        const queued = await api.post<{ batchId: string; tasks: { taskId: string; fileId: string }[] }>(
          `/api/process/batch/${op.kind}`,
          requestBody,
          {
            headers: headers(),
          },
        );
        record = {
          ...base,
          call: call('batch', requestBody),
          batchId: queued.batchId,
          tasks: queued.tasks.map((t) => ({ taskId: t.taskId, fileId: t.fileId, label: names.get(t.fileId) ?? t.fileId })),
        };
      } else {
        const started: RunRecord['tasks'] = [];
        for (const fileId of plan.ids) {
          const queued = await api.post<{ taskId: string }>(`/api/process/${op.kind}`, { fileId, ...body }, { headers: headers() });
          started.push({ taskId: queued.taskId, fileId, label: names.get(fileId) ?? fileId });
        }
        // The call shown is the first input's; the others differ only in fileId.
        const first = call('single', { fileId: plan.ids[0], ...body });
        const note =
          started.length > 1 ? `One request per file; this is the first of ${started.length} (the others differ only in fileId).` : undefined;
        record = { ...base, call: { ...first, note }, tasks: started };
      }
      setHistory((list) => [record, ...list]);
      show(record);
    } catch (err) {
      setSubmitError(err);
    } finally {
      setSubmitting(false);
    }
  };

  const inputIds = new Set(picked.map((p) => p.uploaded?.fileId).filter((id): id is string => Boolean(id)));
  return (
    <>
      <PageTitle title="Playground" />
      <ErrorBox error={catalogue.error} />
      <div className="grid playground">
        <section className="card" aria-labelledby="inputs-title">
          <h2 id="inputs-title">1. Files</h2>
          <div
            className={`dropzone ${dragging ? 'dragging' : ''}`}
            data-testid="dropzone"
            onDragOver={(e) => {
              e.preventDefault();
              setDragging(true);
            }}
            onDragLeave={() => setDragging(false)}
            onDrop={onDrop}
          >
            <p>Drop {op?.accepts === 'pdf' ? 'PDFs' : op?.accepts === 'presentation' ? 'images or presentations' : 'images'} here</p>
            <p className="muted small">
              or{' '}
              <button type="button" className="link" onClick={() => fileInput.current?.click()}>
                choose files
              </button>{' '}
              or{' '}
              <button type="button" className="link" onClick={() => setShowStored((v) => !v)} aria-expanded={showStored} data-testid="show-stored">
                use stored files
              </button>
              {limits && ` · at most ${bytes(limits.maxFileBytes)} each`}
            </p>
            <input
              ref={fileInput}
              type="file"
              multiple
              hidden
              data-testid="file-input"
              onChange={(e) => {
                if (e.target.files?.length) addFiles(e.target.files);
                e.target.value = '';
              }}
            />
          </div>
          {showStored && <StoredFiles onPick={addStored} exclude={inputIds} />}
          {picked.length > 0 && (
            <ul className="picked" data-testid="picked-files">
              {picked.map((p) => (
                <li key={p.localId} data-state={p.state} data-file-id={p.uploaded?.fileId}>
                  {p.localUrl ? (
                    <div className="thumb">
                      <img src={p.localUrl} alt={p.name} />
                    </div>
                  ) : p.uploaded?.width ? (
                    <Thumb fileId={p.uploaded.fileId} format={p.uploaded.format} alt={p.name} />
                  ) : (
                    <div className="thumb">
                      <span className="thumb-placeholder">{p.uploaded?.format?.toUpperCase() ?? '…'}</span>
                    </div>
                  )}
                  <div className="picked-body">
                    <div className="picked-name">{p.name}</div>
                    <div className="muted small">
                      {p.stored ? 'stored · ' : ''}
                      {bytes(p.size)}
                      {p.uploaded &&
                        ` · ${p.uploaded.format}${p.uploaded.width ? ` ${p.uploaded.width}×${p.uploaded.height}` : ''} · ${p.uploaded.fileId}`}
                    </div>
                    {p.state === 'uploading' && <ProgressBar value={p.progress} label={`upload of ${p.name}`} />}
                    {p.state === 'failed' && <ErrorBox error={p.error} />}
                  </div>
                  <button type="button" className="secondary small" onClick={() => remove(p.localId)} aria-label={`remove ${p.name}`}>
                    ✕
                  </button>
                </li>
              ))}
            </ul>
          )}
        </section>

        <section className="card" aria-labelledby="job-title">
          <h2 id="job-title">2. Job</h2>
          <label className="inline-label">
            Kind{' '}
            <select name="kind" value={op?.kind ?? kind} onChange={(e) => setKind(e.target.value)} data-testid="kind">
              {operations.map((o) => (
                <option key={o.kind} value={o.kind}>
                  {o.kind}
                </option>
              ))}
            </select>
          </label>
          {op && (
            <>
              <p className="muted small">
                <Markdown text={op.description} />
              </p>
              {stepKinds.length > 0 && (
                <StepEditor
                  kinds={stepKinds}
                  steps={steps}
                  onChange={setSteps}
                  problems={stepProblems}
                  listProblem={listProblem}
                  rulesOf={rulesOf}
                  max={stepsSchema?.maxItems ?? 10}
                  renderFileField={(field) => <LogoPicker {...field} />}
                />
              )}
              <SchemaForm
                properties={options.properties}
                required={options.required}
                values={values}
                onChange={setValues}
                problems={problems}
                disabled={disabled}
                renderFileField={(field) => <LogoPicker {...field} />}
              />
              <div className="run">
                <button type="button" onClick={run} disabled={!plan || uploading || submitting} data-testid="run">
                  {submitting ? 'Starting…' : `Run ${op.kind}`}
                </button>
                <span className="muted small">{uploading ? 'Waiting for uploads…' : plan ? `Runs ${plan.text}.` : 'Add a file first.'}</span>
              </div>
              {checked && clientProblemCount > 0 && (
                <p className="error-text small" role="alert" data-testid="form-problems">
                  Nothing was sent: {clientProblemCount === 1 ? 'one option needs' : `${clientProblemCount} options need`} fixing (marked above).
                </p>
              )}
              {submitError !== undefined &&
                (fieldErrorShown ? (
                  <p className="error-text small" role="alert" data-testid="form-problems">
                    The server refused the options (marked above); nothing was queued.
                  </p>
                ) : (
                  <ErrorBox error={submitError} />
                ))}
            </>
          )}
        </section>
      </div>

      {current && <Results run={current} tasks={tasks} />}

      {history.length > 0 && (
        <section className="card" aria-labelledby="history-title">
          <h2 id="history-title">History</h2>
          <p className="muted small">This session's runs, newest first (kept until the tab closes).</p>
          <ol className="history" data-testid="history">
            {history.map((r) => (
              <li key={r.id} className={r.id === currentId ? 'current' : ''} data-run={r.id}>
                <span>Run {r.id}</span>
                <span className="muted small run-options">
                  {r.kind} · {optionSummary(r.call.body)} · {r.inputs.length} file{r.inputs.length === 1 ? '' : 's'} ·{' '}
                  {new Date(r.startedAt).toLocaleTimeString()}
                </span>
                {r.id === currentId ? (
                  <span className="muted small">shown above</span>
                ) : (
                  <button type="button" className="secondary small" onClick={() => show(r)}>
                    Show
                  </button>
                )}
              </li>
            ))}
          </ol>
        </section>
      )}
    </>
  );
}
