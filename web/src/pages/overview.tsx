// Usage: the plan and its limits, this month's tasks, today's batch files, storage, and tasks
// per day for the last 30 days (GET /api/account and /api/account/usage, with the session).
import { useEffect, useState } from 'react';
import { api, type AccountInfo } from '../api';
import { ErrorBox, PageTitle, UsageBar, useAsync } from '../components';
import { bytes, count, label, resetTime, seconds } from '../format';
import { Link } from '../router';
import { GettingStarted } from '../api-request';

interface Day {
  date: string;
  tasks: number;
}

const LIMIT_FORMAT: Record<string, (v: number) => string> = {
  storageBytes: bytes,
  maxFileBytes: bytes,
  retentionSeconds: seconds,
};

/** What each limit is called on this page: what it means to a person, not its key in GET /api/account. */
const LIMIT_LABELS: Record<string, string> = {
  apiAccess: 'API access',
  monthlyTasks: 'Tasks per month',
  dailyBatchFiles: 'Batch files per day',
  batchSize: 'Files per batch',
  storageBytes: 'Storage',
  retentionSeconds: 'Retention',
  priority: 'Queue priority',
  maxFileBytes: 'Largest file',
  maxPixels: 'Pixels per frame',
  maxFrames: 'Frames per animation',
  maxAiUpscalePixels: 'AI upscale input pixels',
  maxTotalPixels: 'Pixels of all frames',
  requestsPerSecond: 'Requests per second',
  monthlyRenders: 'Delivery renders per month',
  origins: 'Origins',
  maxQueuedTasks: 'Tasks queued at once',
};

function limitValue(name: string, value: number | boolean): string {
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  return (LIMIT_FORMAT[name] ?? count)(value);
}

/** Whether the window is phone-narrow, kept up to date as it changes. */
function useNarrow(query = '(max-width: 600px)'): boolean {
  const [narrow, setNarrow] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const media = window.matchMedia(query);
    const update = () => setNarrow(media.matches);
    media.addEventListener('change', update);
    return () => media.removeEventListener('change', update);
  }, [query]);
  return narrow;
}

function TasksChart({ days }: { days: Day[] }) {
  // The SVG scales to its card: drawn 720 wide, a phone would shrink its labels to 5 px. On a
  // narrow screen it is drawn about as wide as it is shown, so its text stays at its own size.
  const width = useNarrow() ? 340 : 720;
  const height = 180;
  const pad = { top: 12, right: 8, bottom: 28, left: 40 };
  const max = Math.max(1, ...days.map((d) => d.tasks));
  const step = (width - pad.left - pad.right) / Math.max(1, days.length);
  const scale = (v: number) => ((height - pad.top - pad.bottom) * v) / max;
  const total = days.reduce((sum, d) => sum + d.tasks, 0);
  return (
    <figure className="chart" data-testid="tasks-chart">
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={`Tasks per day for the last ${days.length} days: ${total} in all`}>
        <line x1={pad.left} x2={width - pad.right} y1={height - pad.bottom} y2={height - pad.bottom} className="axis" />
        <text x={pad.left - 6} y={pad.top + 4} className="tick" textAnchor="end">
          {max}
        </text>
        <text x={pad.left - 6} y={height - pad.bottom} className="tick" textAnchor="end">
          0
        </text>
        {days.map((d, i) => {
          const h = scale(d.tasks);
          return (
            <rect key={d.date} x={pad.left + i * step + 1} y={height - pad.bottom - h} width={Math.max(1, step - 2)} height={h} className="column">
              <title>{`${d.date}: ${d.tasks} task${d.tasks === 1 ? '' : 's'}`}</title>
            </rect>
          );
        })}
        {days.length > 0 && (
          <>
            <text x={pad.left} y={height - 8} className="tick">
              {days[0]!.date}
            </text>
            <text x={width - pad.right} y={height - 8} className="tick" textAnchor="end">
              {days[days.length - 1]!.date}
            </text>
          </>
        )}
      </svg>
      <figcaption className="muted small">
        {count(total)} task{total === 1 ? '' : 's'} in the last {days.length} days (UTC days)
      </figcaption>
    </figure>
  );
}

export function OverviewPage() {
  const account = useAsync((signal) => api.get<AccountInfo>('/api/account', { signal }), []);
  const usage = useAsync((signal) => api.get<{ days: Day[] }>('/api/account/usage?days=30', { signal }), []);
  const a = account.data;
  return (
    <>
      <PageTitle title="Usage" />
      <ErrorBox error={account.error ?? usage.error} />
      <GettingStarted />
      {a && (
        <div className="grid two">
          <section className="card">
            <h2>
              Plan <span className={`badge plan-${a.plan}`}>{a.plan}</span>
            </h2>
            {!a.limits.apiAccess && (
              <div className="notice">
                The Free plan has no API access: use the <Link to="/playground">playground</Link>. API keys you create start working when the operator
                moves the account to Pro or Max.
              </div>
            )}
            <UsageBar
              testId="usage-monthly"
              label="Tasks this month"
              usage={a.usage.monthlyTasks}
              format={count}
              note={`Resets ${resetTime(a.usage.monthlyTasks.resetsAt)}`}
            />
            <UsageBar
              testId="usage-batch"
              label="Batch files today"
              usage={a.usage.dailyBatchFiles}
              format={count}
              note={a.usage.dailyBatchFiles.limit > 0 ? `Resets ${resetTime(a.usage.dailyBatchFiles.resetsAt)}` : 'Batches are not part of this plan'}
            />
            <UsageBar testId="usage-storage" label="Storage" usage={a.usage.storageBytes} format={bytes} />
          </section>
          <section className="card">
            <h2>Limits of the {a.plan} plan</h2>
            <table className="table compact" data-testid="limits">
              <tbody>
                {Object.entries(a.limits).map(([name, value]) => (
                  <tr key={name}>
                    <th scope="row">{LIMIT_LABELS[name] ?? label(name)}</th>
                    <td>{limitValue(name, value)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
        </div>
      )}
      <section className="card">
        <h2>Tasks per day</h2>
        {usage.data ? <TasksChart days={usage.data.days} /> : !usage.error && <p className="muted">Loading…</p>}
      </section>
    </>
  );
}
