// Login, sign-up and first-run setup.
import { useEffect, useState, type FormEvent, type ReactNode } from 'react';
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

/** An auth page's form: its fields, the last try's error and the submit button. */
function AuthForm({
  form,
  label,
  busyLabel,
  children,
}: {
  form: ReturnType<typeof useSubmit>;
  label: string;
  busyLabel: string;
  children: ReactNode;
}) {
  return (
    <form onSubmit={form.submit} className="form">
      {children}
      <ErrorBox error={form.error} />
      <button type="submit" disabled={form.busy}>
        {form.busy ? busyLabel : label}
      </button>
    </form>
  );
}

function useCredentials() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  return { email, password, setEmail, setPassword };
}

/** The email and password fields; a new password is at least 8 characters. */
function CredentialFields(props: ReturnType<typeof useCredentials> & { emailLabel?: string; newPassword?: boolean }) {
  return (
    <>
      <label>
        {props.emailLabel ?? 'Email'}
        <input type="email" name="email" autoComplete="username" required value={props.email} onChange={(e) => props.setEmail(e.target.value)} />
      </label>
      <label>
        <span>
          Password
          {props.newPassword && (
            <>
              {' '}
              <span className="muted small">(at least 8 characters)</span>
            </>
          )}
        </span>
        <input
          type="password"
          name="password"
          autoComplete={props.newPassword ? 'new-password' : 'current-password'}
          minLength={props.newPassword ? 8 : undefined}
          required
          value={props.password}
          onChange={(e) => props.setPassword(e.target.value)}
        />
      </label>
    </>
  );
}

/** A page with nothing to do on this installation: why, and the way to log in. */
function NothingToDo({ title, children }: { title: string; children: ReactNode }) {
  return (
    <AuthCard title={title}>
      <p>{children}</p>
      <p>
        <Link to="/login">Log in</Link>
      </p>
    </AuthCard>
  );
}

export function LoginPage() {
  const { info } = useSession();
  const credentials = useCredentials();
  const form = useSubmit('/auth/login', () => ({ email: credentials.email, password: credentials.password }));
  return (
    <AuthCard title="Log in">
      {info?.setupRequired && (
        <div className="notice">
          This installation has no operator account yet. <Link to="/setup">Set it up</Link> with the one-time token printed in the server's log.
        </div>
      )}
      <AuthForm form={form} label="Log in" busyLabel="Logging in…">
        <CredentialFields {...credentials} />
      </AuthForm>
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
  const credentials = useCredentials();
  const [inviteCode, setInviteCode] = useState(query.get('invite') ?? '');
  const mode = info?.signupMode;
  const form = useSubmit('/auth/signup', () => ({ email: credentials.email, password: credentials.password, ...(inviteCode ? { inviteCode } : {}) }));
  if (mode === 'closed') return <NothingToDo title="Sign up">Sign-up is closed on this installation. Ask its operator for an account.</NothingToDo>;
  return (
    <AuthCard title="Create your account">
      <p className="muted">
        New accounts start on the Free plan: the dashboard and its playground, within the Free plan's limits. API keys work from the Pro plan on.
      </p>
      <AuthForm form={form} label="Sign up" busyLabel="Creating…">
        <CredentialFields {...credentials} newPassword />
        {mode === 'invite' && (
          <label>
            Invitation code
            <input name="inviteCode" required value={inviteCode} onChange={(e) => setInviteCode(e.target.value)} />
          </label>
        )}
      </AuthForm>
      <p className="muted">
        Have an account? <Link to="/login">Log in</Link>.
      </p>
    </AuthCard>
  );
}

export function SetupPage() {
  const { info } = useSession();
  // The start-up line's link carries the token in its fragment (never sent to the server): fill
  // it in, and take it out of the address bar and the history.
  const [token, setToken] = useState(() => new URLSearchParams(location.hash.slice(1)).get('token') ?? '');
  useEffect(() => {
    if (location.hash) history.replaceState(history.state, '', location.pathname + location.search);
  }, []);
  const credentials = useCredentials();
  const form = useSubmit('/auth/setup', () => ({ token: token.trim(), email: credentials.email, password: credentials.password }));
  if (info && !info.setupRequired) return <NothingToDo title="Setup">This installation already has an operator account.</NothingToDo>;
  return (
    <AuthCard title="Set up this installation">
      <p className="muted">
        Create the operator (administrator) account. When it started, the server printed a one-time setup link on its standard error (the line
        starting “imgapi”, which says “no administrator yet”); opening it fills the token in. Operators can also run{' '}
        <code>imgapi users create --admin</code> instead.
      </p>
      <AuthForm form={form} label="Create the operator account" busyLabel="Creating…">
        <label>
          Setup token
          <input name="token" autoComplete="off" spellCheck={false} required value={token} onChange={(e) => setToken(e.target.value)} />
        </label>
        <CredentialFields {...credentials} emailLabel="Operator email" newPassword />
      </AuthForm>
    </AuthCard>
  );
}

/** A password-reset link from the operator: a new password, then signed in (other sessions end). */
export function ResetPasswordPage() {
  const { query } = useLocation();
  const token = query.get('token') ?? '';
  const [password, setPassword] = useState('');
  const form = useSubmit('/auth/reset-password', () => ({ token, password }));
  if (!token) return <NothingToDo title="Reset your password">This page needs the link the operator sent you. Ask them for a new one.</NothingToDo>;
  return (
    <AuthCard title="Choose a new password">
      <p className="muted">
        The link works once, for a day. Setting a password signs you in here and signs you out everywhere else; your API keys keep working.
      </p>
      <AuthForm form={form} label="Set the new password" busyLabel="Saving…">
        <label>
          <span>
            New password <span className="muted small">(at least 8 characters)</span>
          </span>
          <input
            type="password"
            name="password"
            autoComplete="new-password"
            minLength={8}
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
        </label>
      </AuthForm>
    </AuthCard>
  );
}
