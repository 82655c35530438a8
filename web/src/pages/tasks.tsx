// Tasks: the list (filter by status, refreshed while any is unfinished) and one task's page,
// which follows the task live (long-poll GET /api/tasks/{id}?wait=) until it finishes.
import { useEffect, useState } from 'react';
import { api, downloadUrl, isFinished, TASK_STATUSES, type ApiTask } from '../api';
import { ErrorBox, PageTitle, ProgressBar, StatusBadge, Thumb } from '../components';
import { DataTable, Pager, usePagedList, type Column } from '../data-table';
import { bytes, dateTime } from '../format';
import { Link, navigate, useLocation } from '../router';
import { TaskApiRequest } from '../api-request';

export function TasksPage() {
  // The filter is in the address (/tasks?status=failed), so it can be linked and survives a reload.
  const status = useLocation().query.get('status') ?? '';
  const list = usePagedList<{ tasks: ApiTask[]; nextCursor: string | null }>('/api/tasks', { limit: '20', status });
  const tasks = list.data?.tasks ?? [];
  const unfinished = tasks.some((t) => !isFinished(t.status));
  useEffect(() => {
    if (!unfinished) return;
    const timer = setTimeout(list.reload, 2000);
    return () => clearTimeout(timer);
  }, [unfinished, list.data, list.reload]);
  const columns: Column<ApiTask>[] = [
    {
      label: 'Preview',
      cell: (task) =>
        task.outputFileId && task.status === 'completed' ? (
          <Thumb fileId={task.outputFileId} alt={`output of ${task.taskId}`} box={128} />
        ) : (
          <div className="thumb" />
        ),
    },
    {
      header: 'Task',
      cell: (task) => (
        <>
          <Link to={`/tasks/${task.taskId}`}>
            <code>{task.taskId}</code>
          </Link>
          {task.batchId && <div className="muted small">batch {task.batchId}</div>}
        </>
      ),
    },
    { header: 'Kind', cell: (task) => task.type },
    {
      header: 'Status',
      cell: (task) => (
        <>
          <StatusBadge status={task.status} />
          {task.status === 'processing' && <ProgressBar value={task.progress} label={`progress of ${task.taskId}`} />}
        </>
      ),
    },
    { header: 'Created', title: (task) => task.createdAt, cell: (task) => dateTime(task.createdAt) },
    {
      header: 'Result',
      className: 'wrap',
      cell: (task) => (
        <>
          {task.error && (
            <span className="error-text">
              <strong>{task.error.code}</strong> {task.error.message}
            </span>
          )}
          {task.result &&
            `${task.result.format ?? ''} ${task.result.width ? `${task.result.width}×${task.result.height}` : ''} ${task.result.size !== undefined ? bytes(task.result.size) : ''}`}
        </>
      ),
    },
    {
      label: 'Download',
      cell: (task) => (
        <div className="actions">
          {task.outputFileId && task.status === 'completed' && (
            <a className="button secondary" href={downloadUrl(task.outputFileId)} download>
              Download
            </a>
          )}
        </div>
      ),
    },
  ];
  return (
    <>
      <PageTitle title="Tasks">
        <label className="inline-label">
          Status{' '}
          <select
            name="status"
            value={status}
            onChange={(e) => {
              navigate(e.target.value ? `/tasks?status=${encodeURIComponent(e.target.value)}` : '/tasks', { replace: true });
              list.reset();
            }}
          >
            <option value="">all</option>
            {TASK_STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      </PageTitle>
      <ErrorBox error={list.error} onRetry={list.reload} />
      <section className="card" aria-label="Your tasks">
        <DataTable
          testId="tasks-table"
          caption="Tasks"
          error={list.error}
          rows={tasks}
          columns={columns}
          rowKey={(task) => task.taskId}
          rowAttributes={(task) => ({ 'data-task-id': task.taskId })}
          empty={status ? `No ${status} tasks.` : 'No tasks. Start one in the playground.'}
          loading={list.loading}
        />
        <Pager list={list} />
      </section>
    </>
  );
}

/** Follows a task until it finishes: long-polls, calling `onUpdate` with each state. */
async function followTask(taskId: string, onUpdate: (task: ApiTask) => void, signal: AbortSignal): Promise<ApiTask> {
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
      {task && <TaskApiRequest task={task} />}
    </>
  );
}
