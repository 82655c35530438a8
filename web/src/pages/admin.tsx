// The operator's page: queue depth and recent failures, accounts (plans, reset links, disabling), invitations.
import { useEffect, useState, type FormEvent } from 'react';
import { api } from '../api';
import { ConfirmDialog, CopyButton, ErrorBox, PageTitle, useAsync } from '../components';
import { DataTable, Pager, usePagedList, type Column } from '../data-table';
import { bytes, count, dateTime, label, relative } from '../format';
import { Link } from '../router';
import { useSession } from '../session';

interface AdminAccount {
  accountId: string;
  email: string;
  plan: string;
  isAdmin: boolean;
  createdAt: string;
  storageBytes: number;
  monthlyTasks: number;
  activeKeys: number;
  disabledAt: string | null;
}

interface Failure {
  taskId: string;
  type: string;
  email: string;
  error: { code: string; message: string };
  /** input: the input's or the account's (a broken file, a quota); system: the service's. */
  fault: 'input' | 'system';
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
          <Link to={`/tasks/${f.taskId}`}>
            <code>{f.taskId}</code>
          </Link>{' '}
          · {f.attempts} attempt{f.attempts === 1 ? '' : 's'}
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
      <ErrorBox error={queue.error} onRetry={queue.reload} />
      {q && (
        <>
          <div className="stats">
            <Stat value={q.queued} label="queued" testId="queue-queued" />
            <Stat value={q.processing} label="processing" testId="queue-processing" />
          </div>
          {q.byKind.length > 0 && <p className="muted small">{q.byKind.map((k) => `${k.type} ${k.status}: ${k.count}`).join(' · ')}</p>}
          <h3>System faults</h3>
          <p className="muted small">The service's own failures (a bug, a lost worker, a job over its time budget): these need the operator.</p>
          <DataTable
            compact
            testId="failures-system"
            caption="Recent system faults"
            rows={q.recentFailures.filter((f) => f.fault === 'system')}
            columns={FAILURE_COLUMNS}
            rowKey={(f) => f.taskId}
            empty="None recently."
          />
          <h3>Input errors</h3>
          <p className="muted small">
            Failures caused by the input or the account (a broken file, an unreachable target size, a quota): the customer can fix these.
          </p>
          <DataTable
            compact
            testId="failures"
            caption="Recent input errors"
            rows={q.recentFailures.filter((f) => f.fault === 'input')}
            columns={FAILURE_COLUMNS}
            rowKey={(f) => f.taskId}
            empty="None recently."
          />
        </>
      )}
    </section>
  );
}

/** A plan picked in a row, not saved until Save and the confirmation. */
function PlanEditor({ account, plans, onSave }: { account: AdminAccount; plans: string[]; onSave: (account: AdminAccount, plan: string) => void }) {
  const [plan, setPlan] = useState(account.plan);
  useEffect(() => setPlan(account.plan), [account.plan]);
  return (
    <div className="plan-edit">
      <select aria-label={`plan of ${account.email}`} value={plan} onChange={(e) => setPlan(e.target.value)}>
        {plans.map((p) => (
          <option key={p}>{p}</option>
        ))}
      </select>
      {plan !== account.plan && (
        <>
          <button type="button" className="small" onClick={() => onSave(account, plan)} aria-label={`Save the plan of ${account.email}`}>
            Save
          </button>
          <button
            type="button"
            className="secondary small"
            onClick={() => setPlan(account.plan)}
            aria-label={`Undo the plan change of ${account.email}`}
          >
            Undo
          </button>
        </>
      )}
    </div>
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
  const [pending, setPending] = useState<{ account: AdminAccount; plan: string }>();
  const [resetLink, setResetLink] = useState<{ email: string; url: string; expiresAt: string }>();
  const [toggling, setToggling] = useState<AdminAccount>();
  const me = useSession().info?.account?.accountId;
  const setDisabled = async (account: AdminAccount, disabled: boolean) => {
    setToggling(undefined);
    setError(undefined);
    try {
      await api.patch(`/dashboard-api/admin/accounts/${encodeURIComponent(account.accountId)}`, { disabled });
      setSaved(disabled ? `${account.email} is disabled` : `${account.email} is enabled again`);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const makeResetLink = async (account: AdminAccount) => {
    setError(undefined);
    setResetLink(undefined);
    try {
      setResetLink(await api.post(`/dashboard-api/admin/accounts/${encodeURIComponent(account.accountId)}/reset-link`));
    } catch (err) {
      setError(err);
    }
  };
  const changePlan = async (account: AdminAccount, plan: string) => {
    setPending(undefined);
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
      className: 'wrap',
      cell: (a) => (
        <div>
          {a.email} {a.isAdmin && <span className="badge">operator</span>}{' '}
          {a.disabledAt && (
            <span className="badge bad" title={`Disabled ${dateTime(a.disabledAt)}`} data-testid="disabled-badge">
              disabled
            </span>
          )}
        </div>
      ),
    },
    {
      header: 'Plan',
      cell: (a) => <PlanEditor account={a} plans={list.data?.plans ?? []} onSave={(account, plan) => setPending({ account, plan })} />,
    },
    { header: 'Tasks this month', cell: (a) => count(a.monthlyTasks) },
    { header: 'Storage', cell: (a) => bytes(a.storageBytes) },
    { header: 'Active keys', cell: (a) => a.activeKeys },
    { header: 'Created', title: (a) => a.createdAt, cell: (a) => dateTime(a.createdAt) },
    {
      label: 'Actions',
      cell: (a) => (
        <div className="actions">
          <button type="button" className="secondary small" onClick={() => makeResetLink(a)} aria-label={`Password-reset link for ${a.email}`}>
            Reset link
          </button>
          {a.accountId !== me && (
            <button
              type="button"
              className="secondary small"
              onClick={() => setToggling(a)}
              aria-label={`${a.disabledAt ? 'Enable' : 'Disable'} ${a.email}`}
            >
              {a.disabledAt ? 'Enable' : 'Disable'}
            </button>
          )}
        </div>
      ),
    },
  ];
  return (
    <section className="card" aria-labelledby="accounts-title">
      <h2 id="accounts-title">Accounts</h2>
      <form
        className="form inline"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          list.reset();
          setQ(search.trim());
        }}
      >
        <label>
          Search
          <input name="q" type="search" placeholder="email" value={search} onChange={(e) => setSearch(e.target.value)} />
        </label>
        <button type="submit" className="secondary">
          Find
        </button>
      </form>
      <ErrorBox error={error ?? list.error} onRetry={list.error ? list.reload : undefined} />
      {saved && (
        <div className="notice ok" role="status">
          {saved}
        </div>
      )}
      {resetLink && (
        <div className="secret" data-testid="reset-link">
          <p>
            Send this link to <strong>{resetLink.email}</strong>: it sets a new password once, until {dateTime(resetLink.expiresAt)}, and ends the
            account's other sessions. It is shown only now.
          </p>
          <div className="secret-row">
            <code className="secret-value" data-testid="reset-link-url">
              {resetLink.url}
            </code>
            <CopyButton text={resetLink.url} label="Copy link" />
          </div>
        </div>
      )}
      <DataTable
        testId="accounts-table"
        caption="Accounts"
        rows={list.data?.accounts ?? []}
        columns={columns}
        rowKey={(a) => a.accountId}
        rowAttributes={(a) => ({ 'data-email': a.email })}
        empty={q ? `No account's email contains “${q}”.` : 'No accounts.'}
        loading={list.loading}
        error={list.error}
      />
      <Pager list={list} />
      <ConfirmDialog
        open={!!pending}
        title="Change the plan?"
        confirmLabel={pending ? `Move to ${pending.plan}` : 'Move'}
        onCancel={() => setPending(undefined)}
        onConfirm={() => pending && changePlan(pending.account, pending.plan)}
      >
        {pending && (
          <p data-testid="plan-confirm-text">
            Move <strong>{pending.account.email}</strong> from <strong>{pending.account.plan}</strong> to <strong>{pending.plan}</strong>? Its limits
            and its API keys change within a second.
          </p>
        )}
      </ConfirmDialog>
      <ConfirmDialog
        open={!!toggling}
        title={toggling?.disabledAt ? 'Enable the account?' : 'Disable the account?'}
        confirmLabel={toggling?.disabledAt ? 'Enable' : 'Disable'}
        danger={!toggling?.disabledAt}
        onCancel={() => setToggling(undefined)}
        onConfirm={() => toggling && setDisabled(toggling, !toggling.disabledAt)}
      >
        {toggling && (
          <p data-testid="disable-confirm-text">
            {toggling.disabledAt ? (
              <>
                Enable <strong>{toggling.email}</strong> again? Its API keys work again within a second and it can log in.
              </>
            ) : (
              <>
                Disable <strong>{toggling.email}</strong>? Its API keys are refused within a second, its dashboard sessions end and it cannot log in.
                Its files, keys and tasks are kept (tasks already queued still run) until it is enabled again.
              </>
            )}
          </p>
        )}
      </ConfirmDialog>
    </section>
  );
}

interface Readiness {
  status: string;
  checks: Record<string, { ok: boolean; required: boolean; detail?: string }>;
}

/** The server's readiness checks (GET /readyz): database, storage, converters, sandbox. */
function HealthCard() {
  const health = useAsync(async (signal) => {
    const response = await fetch('/readyz', { signal, headers: { accept: 'application/json' } });
    return (await response.json()) as Readiness;
  }, []);
  const checks = Object.entries(health.data?.checks ?? {});
  return (
    <section className="card" data-testid="health" aria-labelledby="health-title">
      <h2 id="health-title">
        Health {health.data && <span className={health.data.status === 'ready' ? 'badge ok' : 'badge bad'}>{health.data.status}</span>}
      </h2>
      <ErrorBox error={health.error} onRetry={health.reload} />
      {health.loading && !health.data && <p className="muted">Loading…</p>}
      {checks.length > 0 && (
        <ul className="health">
          {checks.map(([name, check]) => (
            <li key={name} data-check={name}>
              <span className={check.ok ? 'badge ok' : 'badge bad'}>{check.ok ? 'ok' : 'down'}</span>
              <strong>{label(name)}</strong>
              <span className="muted small">{check.required ? 'required' : 'optional'}</span>
              {check.detail && <span className="small">{check.detail}</span>}
            </li>
          ))}
        </ul>
      )}
      <p className="muted small">
        From <a href="/readyz">/readyz</a>: converters (LibreOffice, poppler) and the sandbox are reported, never fatal; the kinds that need a missing
        one fail until it is installed.
      </p>
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
  const [revoking, setRevoking] = useState<Invite>();
  const revoke = async (inviteId: string) => {
    setRevoking(undefined);
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
          <button type="button" className="secondary" onClick={() => setRevoking(i)} aria-label={`Revoke invitation ${i.prefix}`}>
            Revoke
          </button>
        ),
    },
  ];
  return (
    <section className="card" aria-labelledby="invites-title">
      <h2 id="invites-title">Invitations</h2>
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
          <span>
            For email <span className="muted small">(optional)</span>
          </span>
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
        caption="Invitations"
        empty="No invitations yet."
        loading={list.loading}
        error={list.error}
      />
      <ConfirmDialog
        open={!!revoking}
        title="Revoke this invitation?"
        confirmLabel="Revoke invitation"
        danger
        onCancel={() => setRevoking(undefined)}
        onConfirm={() => revoking && revoke(revoking.inviteId)}
      >
        {revoking && (
          <p>
            The code <code>{revoking.prefix}…</code>
            {revoking.email ? ` for ${revoking.email}` : ''} stops working at once.
          </p>
        )}
      </ConfirmDialog>
    </section>
  );
}

export function AdminPage() {
  return (
    <>
      <PageTitle title="Operator" />
      <HealthCard />
      <QueueCard />
      <AccountsCard />
      <InvitesCard />
    </>
  );
}
