// The operator's page: queue depth and recent failures, accounts and their plans, invitations.
import { useEffect, useState, type FormEvent } from 'react';
import { api } from '../api';
import { CopyButton, ErrorBox, PageTitle, useAsync } from '../components';
import { DataTable, Pager, usePagedList, type Column } from '../data-table';
import { bytes, count, dateTime, relative } from '../format';

interface AdminAccount {
  accountId: string;
  email: string;
  plan: string;
  isAdmin: boolean;
  createdAt: string;
  storageBytes: number;
  monthlyTasks: number;
  activeKeys: number;
}

interface Failure {
  taskId: string;
  type: string;
  email: string;
  error: { code: string; message: string };
  attempts: number;
  failedAt: string | null;
}

interface Queue {
  queued: number;
  processing: number;
  byKind: { type: string; status: string; count: number }[];
  recentFailures: Failure[];
}

interface Invite {
  inviteId: string;
  prefix: string;
  email: string | null;
  createdAt: string;
  expiresAt: string;
  usedAt: string | null;
  usedBy: string | null;
}

function Stat({ value, label, testId }: { value: number; label: string; testId: string }) {
  return (
    <div className="stat">
      <div className="stat-value" data-testid={testId}>
        {count(value)}
      </div>
      <div className="muted">{label}</div>
    </div>
  );
}

const FAILURE_COLUMNS: Column<Failure>[] = [
  { header: 'When', title: (f) => f.failedAt ?? undefined, cell: (f) => relative(f.failedAt) },
  { header: 'Account', cell: (f) => f.email },
  { header: 'Kind', cell: (f) => f.type },
  {
    header: 'Error',
    className: 'wrap',
    cell: (f) => (
      <>
        <strong>{f.error.code}</strong> {f.error.message}
        <div className="muted small">
          <code>{f.taskId}</code> · {f.attempts} attempt{f.attempts === 1 ? '' : 's'}
        </div>
      </>
    ),
  },
];

function QueueCard() {
  const queue = useAsync((signal) => api.get<Queue>('/dashboard-api/admin/queue', { signal }), []);
  useEffect(() => {
    const timer = setInterval(queue.reload, 5000);
    return () => clearInterval(timer);
  }, [queue.reload]);
  const q = queue.data;
  return (
    <section className="card" data-testid="queue">
      <h2>Queue</h2>
      <ErrorBox error={queue.error} />
      {q && (
        <>
          <div className="stats">
            <Stat value={q.queued} label="queued" testId="queue-queued" />
            <Stat value={q.processing} label="processing" testId="queue-processing" />
          </div>
          {q.byKind.length > 0 && <p className="muted small">{q.byKind.map((k) => `${k.type} ${k.status}: ${k.count}`).join(' · ')}</p>}
          <h3>Recent failures</h3>
          <DataTable compact testId="failures" rows={q.recentFailures} columns={FAILURE_COLUMNS} rowKey={(f) => f.taskId} empty="None." />
        </>
      )}
    </section>
  );
}

function AccountsCard() {
  const [search, setSearch] = useState('');
  const [q, setQ] = useState('');
  const list = usePagedList<{ plans: string[]; accounts: AdminAccount[]; nextCursor: string | null }>('/dashboard-api/admin/accounts', {
    limit: '25',
    q,
  });
  const [error, setError] = useState<unknown>();
  const [saved, setSaved] = useState<string>();
  const changePlan = async (account: AdminAccount, plan: string) => {
    setError(undefined);
    try {
      await api.patch(`/dashboard-api/admin/accounts/${encodeURIComponent(account.accountId)}`, { plan });
      setSaved(`${account.email} is now on ${plan}`);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const columns: Column<AdminAccount>[] = [
    {
      header: 'Email',
      cell: (a) => (
        <>
          {a.email} {a.isAdmin && <span className="badge">operator</span>}
        </>
      ),
    },
    {
      header: 'Plan',
      cell: (a) => (
        <select aria-label={`plan of ${a.email}`} value={a.plan} onChange={(e) => changePlan(a, e.target.value)}>
          {(list.data?.plans ?? []).map((p) => (
            <option key={p}>{p}</option>
          ))}
        </select>
      ),
    },
    { header: 'Tasks this month', cell: (a) => count(a.monthlyTasks) },
    { header: 'Storage', cell: (a) => bytes(a.storageBytes) },
    { header: 'Active keys', cell: (a) => a.activeKeys },
    { header: 'Created', title: (a) => a.createdAt, cell: (a) => dateTime(a.createdAt) },
  ];
  return (
    <section className="card">
      <h2>Accounts</h2>
      <form
        className="form inline"
        onSubmit={(e) => {
          e.preventDefault();
          list.reset();
          setQ(search.trim());
        }}
      >
        <label>
          Search
          <input name="q" placeholder="email" value={search} onChange={(e) => setSearch(e.target.value)} />
        </label>
        <button type="submit" className="secondary">
          Find
        </button>
      </form>
      <ErrorBox error={error ?? list.error} />
      {saved && (
        <div className="notice ok" role="status">
          {saved}
        </div>
      )}
      <DataTable
        testId="accounts-table"
        rows={list.data?.accounts ?? []}
        columns={columns}
        rowKey={(a) => a.accountId}
        rowAttributes={(a) => ({ 'data-email': a.email })}
      />
      <Pager list={list} />
    </section>
  );
}

function InvitesCard() {
  const list = useAsync((signal) => api.get<{ signupMode: string; invites: Invite[] }>('/dashboard-api/admin/invites', { signal }), []);
  const [email, setEmail] = useState('');
  const [created, setCreated] = useState<{ code: string; signupUrl: string; email: string | null }>();
  const [error, setError] = useState<unknown>();
  const create = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    try {
      setCreated(await api.post('/dashboard-api/admin/invites', email.trim() ? { email: email.trim() } : {}));
      setEmail('');
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const revoke = async (inviteId: string) => {
    try {
      await api.del(`/dashboard-api/admin/invites/${encodeURIComponent(inviteId)}`);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const open = (i: Invite) => !i.usedAt && new Date(i.expiresAt).getTime() > Date.now();
  const columns: Column<Invite>[] = [
    { header: 'Code', cell: (i) => <code>{i.prefix}…</code> },
    { header: 'For', cell: (i) => i.email ?? 'anyone' },
    { header: 'Created', cell: (i) => dateTime(i.createdAt) },
    {
      header: 'Status',
      cell: (i) => (i.usedAt ? `used by ${i.usedBy ?? '?'} ${relative(i.usedAt)}` : open(i) ? `open, expires ${relative(i.expiresAt)}` : 'expired'),
    },
    {
      cell: (i) =>
        open(i) && (
          <button type="button" className="secondary" onClick={() => revoke(i.inviteId)}>
            Revoke
          </button>
        ),
    },
  ];
  return (
    <section className="card">
      <h2>Invitations</h2>
      {list.data && (
        <p className="muted">
          Sign-up is <strong>{list.data.signupMode}</strong> (<code>SIGNUP_MODE</code>).{' '}
          {list.data.signupMode === 'invite'
            ? 'New accounts need a code from here.'
            : list.data.signupMode === 'open'
              ? 'Anyone can sign up; codes are not needed.'
              : 'Nobody can sign up; create accounts with the CLI.'}
        </p>
      )}
      <form onSubmit={create} className="form inline">
        <label>
          For email <span className="muted small">(optional)</span>
          <input type="email" name="inviteEmail" value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <button type="submit">Create invitation</button>
      </form>
      {created && (
        <div className="secret">
          <p>Send this link{created.email ? ` to ${created.email}` : ''}; the code is shown only now and works once.</p>
          <div className="secret-row">
            <code className="secret-value">{created.signupUrl}</code>
            <CopyButton text={created.signupUrl} label="Copy link" />
          </div>
        </div>
      )}
      <ErrorBox error={error ?? list.error} />
      <DataTable
        compact
        rows={list.data?.invites ?? []}
        columns={columns}
        rowKey={(i) => i.inviteId}
        empty="No invitations yet."
        loading={list.loading}
      />
    </section>
  );
}

export function AdminPage() {
  return (
    <>
      <PageTitle title="Operator" />
      <QueueCard />
      <AccountsCard />
      <InvitesCard />
    </>
  );
}
