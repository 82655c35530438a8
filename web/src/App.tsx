// The shell: the session decides between the login pages and the dashboard; the path picks the page.
import { useEffect } from 'react';
import { AdminPage } from './pages/admin';
import { LoginPage, SetupPage, SignupPage } from './pages/auth';
import { FilesPage } from './pages/files';
import { KeysPage } from './pages/keys';
import { OverviewPage } from './pages/overview';
import { PlaygroundPage } from './pages/playground';
import { TaskPage, TasksPage } from './pages/tasks';
import { PUBLIC_PAGES } from './routes';
import { Link, match, navigate, useLocation } from './router';
import { useSession } from './session';

const NAV = [
  { to: '/', label: 'Usage' },
  { to: '/playground', label: 'Playground' },
  { to: '/files', label: 'Files' },
  { to: '/tasks', label: 'Tasks' },
  { to: '/keys', label: 'API keys' },
];

function Page({ path }: { path: string }) {
  const task = match('/tasks/:taskId', path);
  if (task) return <TaskPage taskId={task.taskId!} />;
  switch (path) {
    case '/':
      return <OverviewPage />;
    case '/playground':
      return <PlaygroundPage />;
    case '/files':
      return <FilesPage />;
    case '/tasks':
      return <TasksPage />;
    case '/keys':
      return <KeysPage />;
    case '/admin':
      return <AdminPage />;
    default:
      return (
        <div className="card">
          <h1>Not found</h1>
          <p>
            No page at <code>{path}</code>. <Link to="/">Back to the dashboard</Link>
          </p>
        </div>
      );
  }
}

export function App() {
  const { info, error, logout } = useSession();
  const { path } = useLocation();
  const isPublic = PUBLIC_PAGES.includes(path);

  useEffect(() => {
    if (!info) return;
    if (!info.authenticated && !isPublic) {
      const target = info.setupRequired ? '/setup' : '/login';
      navigate(path === '/' ? target : `${target}?next=${encodeURIComponent(path)}`, { replace: true });
    } else if (info.authenticated && isPublic) {
      navigate('/', { replace: true });
    }
  }, [info, isPublic, path]);

  if (error) return <div className="error boot">The dashboard could not reach the server: {error}</div>;
  if (!info) return <div className="boot muted">Loading…</div>;
  if (isPublic) {
    if (path === '/signup') return <SignupPage />;
    if (path === '/setup') return <SetupPage />;
    return <LoginPage />;
  }
  if (!info.authenticated || !info.account) return <div className="boot muted">Loading…</div>;
  const account = info.account;
  const nav = account.isAdmin ? [...NAV, { to: '/admin', label: 'Operator' }] : NAV;
  return (
    <div className="shell">
      <header className="topbar">
        <Link to="/" className="brand">
          <img src="/favicon.svg" alt="" width={24} height={24} /> imgapi
        </Link>
        <nav aria-label="Dashboard">
          {nav.map((item) => (
            <Link key={item.to} to={item.to} className={(item.to === '/' ? path === '/' : path.startsWith(item.to)) ? 'active' : undefined}>
              {item.label}
            </Link>
          ))}
        </nav>
        <div className="who">
          <span className="muted" data-testid="who">
            {account.email}
          </span>{' '}
          <span className={`badge plan-${account.plan}`} data-testid="plan-badge">
            {account.plan}
          </span>
          <button type="button" className="secondary small" onClick={() => logout().then(() => navigate('/login'))}>
            Log out
          </button>
        </div>
      </header>
      <main className="content">
        <Page path={path} />
      </main>
      <footer className="footer muted small">
        API reference at <a href="/docs">/docs</a> · the dashboard calls the same <code>/api/*</code> routes with your session
      </footer>
    </div>
  );
}
