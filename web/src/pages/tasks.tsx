// Tasks: the list (filter by status, refreshed while any is unfinished) and one task's page,
// which follows the task live (long-poll GET /api/tasks/{id}?wait=) until it finishes.
import { useEffect, useState } from 'react';
import { api, downloadUrl, isFinished, type ApiTask, type TaskStatus } from '../api';
import { ErrorBox, PageTitle, Pager, ProgressBar, StatusBadge, Thumb, useAsync, useCursorPages } from '../components';
import { bytes, dateTime } from '../format';
import { Link } from '../router';

const STATUSES: TaskStatus[] = ['queued', 'processing', 'completed', 'failed', 'canceled'];

export function TasksPage() {
  const pages = useCursorPages();
  const [status, setStatus] = useState('');
  const list = useAsync(
    (signal) =>
      api.get<{ tasks: ApiTask[]; nextCursor: string | null }>(
        `/api/tasks?limit=20${status ? `&status=${status}` : ''}${pages.cursor ? `&cursor=${encodeURIComponent(pages.cursor)}` : ''}`,
        { signal },
      ),
    [pages.cursor, status],
  );
  const tasks = list.data?.tasks ?? [];
  const unfinished = tasks.some((t) => !isFinished(t.status));
  useEffect(() => {
    if (!unfinished) return;
    const timer = setTimeout(list.reload, 2000);
    return () => clearTimeout(timer);
  }, [unfinished, list.data, list.reload]);
  return (
    <>
      <PageTitle title="Tasks">
        <label className="inline-label">
          Status{' '}
          <select
            value={status}
            onChange={(e) => {
              setStatus(e.target.value);
              pages.reset();
            }}
          >
            <option value="">all</option>
            {STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      </PageTitle>
      <ErrorBox error={list.error} />
      <section className="card">
        {tasks.length === 0 ? (
          <p className="muted">{list.loading ? 'Loading…' : 'No tasks. Start one in the playground.'}</p>
        ) : (
          <table className="table" data-testid="tasks-table">
            <thead>
              <tr>
                <th />
                <th>Task</th>
                <th>Kind</th>
                <th>Status</th>
                <th>Created</th>
                <th>Result</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {tasks.map((task) => (
                <tr key={task.taskId} data-task-id={task.taskId}>
                  <td>{task.outputFileId && task.status === 'completed' ? <Thumb fileId={task.outputFileId} alt={`output of ${task.taskId}`} box={128} /> : <div className="thumb" />}</td>
                  <td>
                    <Link to={`/tasks/${task.taskId}`}>
                      <code>{task.taskId}</code>
                    </Link>
                    {task.batchId && <div className="muted small">batch {task.batchId}</div>}
                  </td>
                  <td>{task.type}</td>
                  <td>
                    <StatusBadge status={task.status} />
                    {task.status === 'processing' && <ProgressBar value={task.progress} label={`progress of ${task.taskId}`} />}
                  </td>
                  <td title={task.createdAt}>{dateTime(task.createdAt)}</td>
                  <td className="wrap">
                    {task.error && (
                      <span className="error-text">
                        <strong>{task.error.code}</strong> {task.error.message}
                      </span>
                    )}
                    {task.result && `${task.result.format ?? ''} ${task.result.width ? `${task.result.width}×${task.result.height}` : ''} ${task.result.size !== undefined ? bytes(task.result.size) : ''}`}
                  </td>
                  <td>
<div className="actions">
                    {task.outputFileId && task.status === 'completed' && (
                      <a className="button secondary" href={downloadUrl(task.outputFileId)} download>
                        Download
                      </a>
                    )}
                  </div>
</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <Pager page={pages.page} hasNext={!!list.data?.nextCursor} onNext={() => list.data?.nextCursor && pages.next(list.data.nextCursor)} onPrevious={pages.previous} />
      </section>
    </>
  );
}

/** Follows a task until it finishes: long-polls, calling `onUpdate` with each state. */
export async function followTask(taskId: string, onUpdate: (task: ApiTask) => void, signal: AbortSignal): Promise<ApiTask> {
  let task = await api.get<ApiTask>(`/api/tasks/${encodeURIComponent(taskId)}`, { signal });
  onUpdate(task);
  while (!isFinished(task.status) && !signal.aborted) {
    task = await api.get<ApiTask>(`/api/tasks/${encodeURIComponent(taskId)}?wait=10`, { signal, unlimited: true });
    onUpdate(task);
    // Progress moves while the task runs; the long-poll only answers at the finish, so look again soon.
    if (!isFinished(task.status)) await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return task;
}

export function TaskPage({ taskId }: { taskId: string }) {
  const [task, setTask] = useState<ApiTask>();
  const [error, setError] = useState<unknown>();
  const [version, setVersion] = useState(0);
  useEffect(() => {
    const controller = new AbortController();
    followTask(taskId, setTask, controller.signal).catch((err) => {
      if (!controller.signal.aborted) setError(err);
    });
    return () => controller.abort();
  }, [taskId, version]);

  const cancel = async () => {
    try {
      setTask(await api.del<ApiTask>(`/api/tasks/${encodeURIComponent(taskId)}`));
    } catch (err) {
      setError(err);
    }
    setVersion((v) => v + 1);
  };

  const inputs = task ? (task.input.fileIds ?? (task.input.fileId ? [task.input.fileId] : [])) : [];
  return (
    <>
      <PageTitle title="Task">
        <Link to="/tasks">All tasks</Link>
      </PageTitle>
      <ErrorBox error={error} />
      {task && (
        <div className="grid two">
          <section className="card" data-testid="task-detail">
            <h2>
              <code>{task.taskId}</code>
            </h2>
            <p>
              <StatusBadge status={task.status} /> <span className="muted">{task.type}</span>
              {!isFinished(task.status) && <span className="muted small live"> · following live</span>}
            </p>
            <ProgressBar value={task.status === 'completed' ? 100 : task.progress} label="task progress" />
            {task.error && (
              <div className="error" role="alert">
                <strong>{task.error.code}</strong> {task.error.message}
              </div>
            )}
            <table className="table compact">
              <tbody>
                <tr>
                  <th scope="row">Created</th>
                  <td>{dateTime(task.createdAt)}</td>
                </tr>
                <tr>
                  <th scope="row">Started</th>
                  <td>{dateTime(task.startedAt)}</td>
                </tr>
                <tr>
                  <th scope="row">Finished</th>
                  <td>{dateTime(task.completedAt)}</td>
                </tr>
                <tr>
                  <th scope="row">Attempts</th>
                  <td>{task.attempts}</td>
                </tr>
                {task.batchId && (
                  <tr>
                    <th scope="row">Batch</th>
                    <td>
                      <code>{task.batchId}</code>
                    </td>
                  </tr>
                )}
                <tr>
                  <th scope="row">Inputs</th>
                  <td>
                    {inputs.map((id) => (
                      <div key={id}>
                        <a href={downloadUrl(id)} download>
                          <code>{id}</code>
                        </a>
                      </div>
                    ))}
                  </td>
                </tr>
                <tr>
                  <th scope="row">Options</th>
                  <td>
                    <code className="wrap">{JSON.stringify(task.options)}</code>
                  </td>
                </tr>
              </tbody>
            </table>
            {!isFinished(task.status) && (
              <button type="button" className="danger" onClick={cancel}>
                Cancel task
              </button>
            )}
          </section>
          <section className="card">
            <h2>Result</h2>
            {task.status === 'completed' && task.outputFileId ? (
              <>
                <Thumb fileId={task.outputFileId} alt="the task's output" box={640} eager />
                {task.result && (
                  <p className="muted">
                    {task.result.format} · {task.result.width && `${task.result.width}×${task.result.height} · `}
                    {task.result.size !== undefined && bytes(task.result.size)}
                    {task.result.pages ? ` · ${task.result.pages} pages` : ''}
                  </p>
                )}
                <a className="button" href={downloadUrl(task.outputFileId)} download data-testid="task-download">
                  Download the output
                </a>
                {task.outputFileIds && (
                  <ul>
                    {task.outputFileIds.map((id, i) => (
                      <li key={id}>
                        <a href={downloadUrl(id)} download>
                          Output {i + 1}
                        </a>
                      </li>
                    ))}
                  </ul>
                )}
              </>
            ) : (
              <p className="muted">{isFinished(task.status) ? 'No output.' : 'The output appears here when the task completes.'}</p>
            )}
          </section>
        </div>
      )}
    </>
  );
}
