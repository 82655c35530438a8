// The playground: any job kind from the browser. Pick or drop files (uploaded at once, with
// progress), fill the kind's options (a form generated from its schema), run it, follow the
// tasks, preview and download the results. All through /api/* with the session, within the
// account's plan (Free included).
import { useEffect, useMemo, useRef, useState, type DragEvent } from 'react';
import { api, ApiError, downloadUrl, isFinished, uploadFile, type ApiFile, type ApiTask } from '../api';
import { ErrorBox, PageTitle, ProgressBar, StatusBadge, Thumb, useAsync } from '../components';
import { bytes } from '../format';
import { Link } from '../router';
import { SchemaForm, toBody, type FormValues, type JsonSchema } from '../schema-form';

interface Operation {
  kind: string;
  summary: string;
  description: string;
  accepts: string;
  multiInput: { min: number; max: number } | null;
  batch: boolean;
  body: JsonSchema & { properties: Record<string, JsonSchema>; required: string[] };
  batchBody: (JsonSchema & { properties: Record<string, JsonSchema>; required: string[] }) | null;
}

interface Picked {
  localId: number;
  file: File;
  localUrl?: string;
  progress: number;
  state: 'uploading' | 'uploaded' | 'failed';
  uploaded?: ApiFile;
  error?: unknown;
}

interface Run {
  taskId: string;
  label: string;
  /** Bytes of the input (one file), to show what the job saved. */
  inputSize?: number;
  task?: ApiTask;
}

const INPUT_FIELDS = new Set(['fileId', 'fileIds']);

function savings(before: number, after: number): string {
  const change = Math.round(((after - before) / before) * 100);
  return change <= 0 ? `${-change}% smaller` : `${change}% larger`;
}
let nextLocalId = 1;

/** Polls the unfinished tasks of `runs` until all finish (one left: long-poll it). */
async function followAll(runs: Run[], update: (task: ApiTask) => void, signal: AbortSignal): Promise<void> {
  const state = new Map(runs.map((r) => [r.taskId, r.task]));
  for (;;) {
    const open = [...state.entries()].filter(([, t]) => !t || !isFinished(t.status)).map(([id]) => id);
    if (open.length === 0 || signal.aborted) return;
    if (open.length === 1) {
      const task = await api.get<ApiTask>(`/api/tasks/${encodeURIComponent(open[0]!)}?wait=10`, { signal, unlimited: true });
      state.set(task.taskId, task);
      update(task);
      if (!isFinished(task.status)) await new Promise((resolve) => setTimeout(resolve, 500));
      continue;
    }
    const tasks = await Promise.all(open.map((id) => api.get<ApiTask>(`/api/tasks/${encodeURIComponent(id)}`, { signal })));
    for (const task of tasks) {
      state.set(task.taskId, task);
      update(task);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

export function PlaygroundPage() {
  const catalogue = useAsync(
    (signal) => api.get<{ operations: Operation[]; limits: { batchSize: number; maxFileBytes: number } }>('/dashboard-api/operations', { signal }),
    [],
  );
  const operations = catalogue.data?.operations ?? [];
  const limits = catalogue.data?.limits;
  const [kind, setKind] = useState('compress');
  const op = operations.find((o) => o.kind === kind) ?? operations[0];
  const [values, setValues] = useState<FormValues>({});
  const [picked, setPicked] = useState<Picked[]>([]);
  const [dragging, setDragging] = useState(false);
  const [submitError, setSubmitError] = useState<unknown>();
  const [submitting, setSubmitting] = useState(false);
  const [runs, setRuns] = useState<Run[]>([]);
  const [note, setNote] = useState<string>();
  const follow = useRef<AbortController | undefined>(undefined);
  const fileInput = useRef<HTMLInputElement>(null);

  useEffect(() => () => follow.current?.abort(), []);
  useEffect(() => setValues({}), [kind]);
  useEffect(
    () => () => {
      for (const p of picked) if (p.localUrl) URL.revokeObjectURL(p.localUrl);
    },
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [],
  );

  const update = (localId: number, change: Partial<Picked>) =>
    setPicked((list) => list.map((p) => (p.localId === localId ? { ...p, ...change } : p)));

  const addFiles = (files: FileList | File[]) => {
    const added: Picked[] = [...files].map((file) => ({
      localId: nextLocalId++,
      file,
      localUrl: /^image\/(png|jpeg|gif|webp|avif|bmp)$/.test(file.type) ? URL.createObjectURL(file) : undefined,
      progress: 0,
      state: 'uploading',
    }));
    setPicked((list) => [...list, ...added]);
    for (const item of added) {
      uploadFile(item.file, (fraction) => update(item.localId, { progress: fraction * 100 })).then(
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
  const options = useMemo(() => {
    if (!op) return { properties: {}, required: [] as string[] };
    const properties = Object.fromEntries(Object.entries(op.body.properties).filter(([name]) => !INPUT_FIELDS.has(name)));
    return { properties, required: (op.body.required ?? []).filter((name) => !INPUT_FIELDS.has(name)) };
  }, [op]);

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

  const run = async () => {
    if (!op || !plan) return;
    setSubmitting(true);
    setSubmitError(undefined);
    setNote(undefined);
    follow.current?.abort();
    const body = toBody(options.properties, values);
    const names = new Map(ready.map((p) => [p.uploaded!.fileId, p.file.name]));
    const sizes = new Map(ready.map((p) => [p.uploaded!.fileId, p.uploaded!.size]));
    const headers = () => ({ 'idempotency-key': crypto.randomUUID() });
    try {
      let started: Run[] = [];
      if (plan.mode === 'multi') {
        const queued = await api.post<{ taskId: string }>(`/api/process/${op.kind}`, { fileIds: plan.ids, ...body }, { headers: headers() });
        started = [{ taskId: queued.taskId, label: `${plan.ids.length} files` }];
      } else if (plan.mode === 'batch') {
        const queued = await api.post<{ batchId: string; tasks: { taskId: string; fileId: string }[] }>(
          `/api/process/batch/${op.kind}`,
          { fileIds: plan.ids, ...body },
          { headers: headers() },
        );
        started = queued.tasks.map((t) => ({ taskId: t.taskId, label: names.get(t.fileId) ?? t.fileId, inputSize: sizes.get(t.fileId) }));
        setNote(`Batch ${queued.batchId}`);
      } else {
        for (const id of plan.ids) {
          const queued = await api.post<{ taskId: string }>(`/api/process/${op.kind}`, { fileId: id, ...body }, { headers: headers() });
          started.push({ taskId: queued.taskId, label: names.get(id) ?? id, inputSize: sizes.get(id) });
        }
      }
      setRuns(started);
      const controller = new AbortController();
      follow.current = controller;
      followAll(started, (task) => setRuns((list) => list.map((r) => (r.taskId === task.taskId ? { ...r, task } : r))), controller.signal).catch(
        (err) => {
          if (!controller.signal.aborted) setSubmitError(err);
        },
      );
    } catch (err) {
      setSubmitError(err);
    } finally {
      setSubmitting(false);
    }
  };

  const fieldErrors = submitError instanceof ApiError ? submitError.fields : [];

  return (
    <>
      <PageTitle title="Playground" />
      <ErrorBox error={catalogue.error} />
      <div className="grid playground">
        <section className="card">
          <h2>1. Files</h2>
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
            <p>Drop images{op?.accepts === 'presentation' ? ' or presentations' : ''} here</p>
            <p className="muted small">
              or{' '}
              <button type="button" className="link" onClick={() => fileInput.current?.click()}>
                choose files
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
          {picked.length > 0 && (
            <ul className="picked" data-testid="picked-files">
              {picked.map((p) => (
                <li key={p.localId} data-state={p.state}>
                  <div className="thumb">
                    {p.localUrl ? (
                      <img src={p.localUrl} alt={p.file.name} />
                    ) : (
                      <span className="thumb-placeholder">{p.uploaded?.format?.toUpperCase() ?? '…'}</span>
                    )}
                  </div>
                  <div className="picked-body">
                    <div className="picked-name">{p.file.name}</div>
                    <div className="muted small">
                      {bytes(p.file.size)}
                      {p.uploaded &&
                        ` · ${p.uploaded.format}${p.uploaded.width ? ` ${p.uploaded.width}×${p.uploaded.height}` : ''} · ${p.uploaded.fileId}`}
                    </div>
                    {p.state === 'uploading' && <ProgressBar value={p.progress} label={`upload of ${p.file.name}`} />}
                    {p.state === 'failed' && <ErrorBox error={p.error} />}
                  </div>
                  <button type="button" className="secondary small" onClick={() => remove(p.localId)} aria-label={`remove ${p.file.name}`}>
                    ✕
                  </button>
                </li>
              ))}
            </ul>
          )}
        </section>

        <section className="card">
          <h2>2. Job</h2>
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
              <p className="muted small">{op.description}</p>
              <SchemaForm
                properties={options.properties}
                required={options.required}
                values={values}
                onChange={setValues}
                errors={fieldErrors}
                files={ready.map((p) => ({ fileId: p.uploaded!.fileId, filename: p.file.name }))}
              />
              <div className="run">
                <button type="button" onClick={run} disabled={!plan || uploading || submitting} data-testid="run">
                  {submitting ? 'Starting…' : `Run ${op.kind}`}
                </button>
                <span className="muted small">{uploading ? 'Waiting for uploads…' : plan ? `Runs ${plan.text}.` : 'Add a file first.'}</span>
              </div>
              <ErrorBox error={submitError} />
            </>
          )}
        </section>
      </div>

      {runs.length > 0 && (
        <section className="card">
          <h2>3. Results {note && <span className="muted small">{note}</span>}</h2>
          <ul className="results" data-testid="results">
            {runs.map((r) => (
              <li key={r.taskId} data-task-id={r.taskId} data-status={r.task?.status ?? 'queued'}>
                <div className="result-head">
                  <Link to={`/tasks/${r.taskId}`}>
                    <code>{r.taskId}</code>
                  </Link>{' '}
                  <span className="muted">{r.label}</span> <StatusBadge status={r.task?.status ?? 'queued'} />
                </div>
                {r.task && !isFinished(r.task.status) && <ProgressBar value={r.task.progress} label={`progress of ${r.taskId}`} />}
                {r.task?.error && (
                  <div className="error" role="alert">
                    <strong>{r.task.error.code}</strong> {r.task.error.message}
                  </div>
                )}
                {r.task?.status === 'completed' && r.task.outputFileId && (
                  <div className="result-body">
                    <Thumb fileId={r.task.outputFileId} alt={`result of ${r.label}`} box={320} eager />
                    <div>
                      {r.task.result && (
                        <p className="muted">
                          {r.task.result.format}
                          {r.task.result.width ? ` · ${r.task.result.width}×${r.task.result.height}` : ''}
                          {r.task.result.pages ? ` · ${r.task.result.pages} pages` : ''}
                          {r.task.result.size !== undefined ? ` · ${bytes(r.task.result.size)}` : ''}
                          {r.task.result.size !== undefined && r.inputSize
                            ? ` (${bytes(r.inputSize)} before, ${savings(r.inputSize, r.task.result.size)})`
                            : ''}
                        </p>
                      )}
                      <a className="button" href={downloadUrl(r.task.outputFileId)} download data-testid="result-download">
                        Download
                      </a>
                    </div>
                  </div>
                )}
              </li>
            ))}
          </ul>
        </section>
      )}
    </>
  );
}
