// The operator's page: queue depth and recent failures, accounts and their plans, invitations.
import { useEffect, useState, type FormEvent } from 'react';
import { api } from '../api';
import { CopyButton, ErrorBox, PageTitle, Pager, useAsync, useCursorPages } from '../components';
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

interface Queue {
  queued: number;
  processing: number;
  byKind: { type: string; status: string; count: number }[];
  recentFailures: { taskId: string; type: string; email: string; error: { code: string; message: string }; attempts: number; failedAt: string | null }[];
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
            <div className="stat">
              <div className="stat-value" data-testid="queue-queued">
                {count(q.queued)}
              </div>
              <div className="muted">queued</div>
            </div>
            <div className="stat">
              <div className="stat-value" data-testid="queue-processing">
                {count(q.processing)}
              </div>
              <div className="muted">processing</div>
            </div>
          </div>
          {q.byKind.length > 0 && (
            <p className="muted small">
              {q.byKind.map((k) => `${k.type} ${k.status}: ${k.count}`).join(' · ')}
            </p>
          )}
          <h3>Recent failures</h3>
          {q.recentFailures.length === 0 ? (
            <p className="muted">None.</p>
          ) : (
            <table className="table compact" data-testid="failures">
              <thead>
                <tr>
                  <th>When</th>
                  <th>Account</th>
                  <th>Kind</th>
                  <th>Error</th>
                </tr>
              </thead>
              <tbody>
                {q.recentFailures.map((f) => (
                  <tr key={f.taskId}>
                    <td title={f.failedAt ?? ''}>{relative(f.failedAt)}</td>
                    <td>{f.email}</td>
                    <td>{f.type}</td>
                    <td className="wrap">
                      <strong>{f.error.code}</strong> {f.error.message}
                      <div className="muted small">
                        <code>{f.taskId}</code> · {f.attempts} attempt{f.attempts === 1 ? '' : 's'}
                      </div>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </section>
  );
}

function AccountsCard() {
  const pages = useCursorPages();
  const [search, setSearch] = useState('');
  const [q, setQ] = useState('');
  const list = useAsync(
    (signal) =>
      api.get<{ plans: string[]; accounts: AdminAccount[]; nextCursor: string | null }>(
        `/dashboard-api/admin/accounts?limit=25${q ? `&q=${encodeURIComponent(q)}` : ''}${pages.cursor ? `&cursor=${encodeURIComponent(pages.cursor)}` : ''}`,
        { signal },
      ),
    [q, pages.cursor],
  );
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
  return (
    <section className="card">
      <h2>Accounts</h2>
      <form
        className="form inline"
        onSubmit={(e) => {
          e.preventDefault();
          pages.reset();
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
      <table className="table" data-testid="accounts-table">
        <thead>
          <tr>
            <th>Email</th>
            <th>Plan</th>
            <th>Tasks this month</th>
            <th>Storage</th>
            <th>Active keys</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {(list.data?.accounts ?? []).map((a) => (
            <tr key={a.accountId} data-email={a.email}>
              <td>
                {a.email} {a.isAdmin && <span className="badge">operator</span>}
              </td>
              <td>
                <select aria-label={`plan of ${a.email}`} value={a.plan} onChange={(e) => changePlan(a, e.target.value)}>
                  {(list.data?.plans ?? []).map((p) => (
                    <option key={p}>{p}</option>
                  ))}
                </select>
              </td>
              <td>{count(a.monthlyTasks)}</td>
              <td>{bytes(a.storageBytes)}</td>
              <td>{a.activeKeys}</td>
              <td title={a.createdAt}>{dateTime(a.createdAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager page={pages.page} hasNext={!!list.data?.nextCursor} onNext={() => list.data?.nextCursor && pages.next(list.data.nextCursor)} onPrevious={pages.previous} />
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
  return (
    <section className="card">
      <h2>Invitations</h2>
      {list.data && (
        <p className="muted">
          Sign-up is <strong>{list.data.signupMode}</strong> (<code>SIGNUP_MODE</code>).{' '}
          {list.data.signupMode === 'invite' ? 'New accounts need a code from here.' : list.data.signupMode === 'open' ? 'Anyone can sign up; codes are not needed.' : 'Nobody can sign up; create accounts with the CLI.'}
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
      {(list.data?.invites.length ?? 0) > 0 && (
        <table className="table compact">
          <thead>
            <tr>
              <th>Code</th>
              <th>For</th>
              <th>Created</th>
              <th>Status</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.data!.invites.map((i) => {
              const expired = !i.usedAt && new Date(i.expiresAt).getTime() <= Date.now();
              return (
                <tr key={i.inviteId}>
                  <td>
                    <code>{i.prefix}…</code>
                  </td>
                  <td>{i.email ?? 'anyone'}</td>
                  <td>{dateTime(i.createdAt)}</td>
                  <td>{i.usedAt ? `used by ${i.usedBy ?? '?'} ${relative(i.usedAt)}` : expired ? 'expired' : `open, expires ${relative(i.expiresAt)}`}</td>
                  <td>
                    {!i.usedAt && !expired && (
                      <button type="button" className="secondary" onClick={() => revoke(i.inviteId)}>
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
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
