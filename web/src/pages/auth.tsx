// Login, sign-up and first-run setup.
import { useState, type FormEvent, type ReactNode } from 'react';
import { api, type SessionInfo } from '../api';
import { ErrorBox, PageTitle } from '../components';
import { Link, navigate, useLocation } from '../router';
import { useSession } from '../session';

function AuthCard({ title, children }: { title: string; children: ReactNode }) {
  return (
    <div className="auth">
      <div className="auth-brand">
        <img src="/favicon.svg" alt="" width={32} height={32} /> imgapi
      </div>
      <div className="card auth-card">
        <PageTitle title={title} />
        {children}
      </div>
    </div>
  );
}

function useSubmit(url: string, body: () => unknown) {
  const { adopt } = useSession();
  const { query } = useLocation();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const info = await api.post<SessionInfo>(url, body());
      adopt(info);
      const next = query.get('next');
      navigate(next && next.startsWith('/') && !next.startsWith('//') ? next : '/', { replace: true });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { submit, error, busy };
}

export function LoginPage() {
  const { info } = useSession();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { submit, error, busy } = useSubmit('/auth/login', () => ({ email, password }));
  return (
    <AuthCard title="Log in">
      {info?.setupRequired && (
        <div className="notice">
          This installation has no operator account yet. <Link to="/setup">Set it up</Link> with the one-time token printed in the server's log.
        </div>
      )}
      <form onSubmit={submit} className="form">
        <label>
          Email
          <input type="email" name="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Password
          <input type="password" name="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Logging in…' : 'Log in'}
        </button>
      </form>
      {info && info.signupMode !== 'closed' && (
        <p className="muted">
          No account? <Link to="/signup">Sign up</Link>
          {info.signupMode === 'invite' ? ' with an invitation code' : ''}.
        </p>
      )}
    </AuthCard>
  );
}

export function SignupPage() {
  const { info } = useSession();
  const { query } = useLocation();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [inviteCode, setInviteCode] = useState(query.get('invite') ?? '');
  const mode = info?.signupMode;
  const { submit, error, busy } = useSubmit('/auth/signup', () => ({ email, password, ...(inviteCode ? { inviteCode } : {}) }));
  if (mode === 'closed') {
    return (
      <AuthCard title="Sign up">
        <p>Sign-up is closed on this installation. Ask its operator for an account.</p>
        <p>
          <Link to="/login">Log in</Link>
        </p>
      </AuthCard>
    );
  }
  return (
    <AuthCard title="Create your account">
      <p className="muted">New accounts start on the Free plan: the dashboard and its playground, within the Free plan's limits. API keys work from the Pro plan on.</p>
      <form onSubmit={submit} className="form">
        <label>
          Email
          <input type="email" name="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Password <span className="muted small">(at least 8 characters)</span>
          <input type="password" name="password" autoComplete="new-password" minLength={8} required value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        {mode === 'invite' && (
          <label>
            Invitation code
            <input name="inviteCode" required value={inviteCode} onChange={(e) => setInviteCode(e.target.value)} />
          </label>
        )}
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Sign up'}
        </button>
      </form>
      <p className="muted">
        Have an account? <Link to="/login">Log in</Link>.
      </p>
    </AuthCard>
  );
}

export function SetupPage() {
  const { info } = useSession();
  const [token, setToken] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { submit, error, busy } = useSubmit('/auth/setup', () => ({ token: token.trim(), email, password }));
  if (info && !info.setupRequired) {
    return (
      <AuthCard title="Setup">
        <p>This installation already has an operator account.</p>
        <p>
          <Link to="/login">Log in</Link>
        </p>
      </AuthCard>
    );
  }
  return (
    <AuthCard title="Set up this installation">
      <p className="muted">
        Create the operator (administrator) account. The server printed a one-time setup token in its log when it started (look for
        “No administrator account exists yet”). Operators can also run <code>imgapi users create --admin</code> instead.
      </p>
      <form onSubmit={submit} className="form">
        <label>
          Setup token
          <input name="token" autoComplete="off" spellCheck={false} required value={token} onChange={(e) => setToken(e.target.value)} />
        </label>
        <label>
          Operator email
          <input type="email" name="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        </label>
        <label>
          Password <span className="muted small">(at least 8 characters)</span>
          <input type="password" name="password" autoComplete="new-password" minLength={8} required value={password} onChange={(e) => setPassword(e.target.value)} />
        </label>
        <ErrorBox error={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create the operator account'}
        </button>
      </form>
    </AuthCard>
  );
}
