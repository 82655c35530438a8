// The shell: the session decides between the login pages and the dashboard; the path picks the page.
import { useEffect, type ReactNode } from 'react';
import { AdminPage } from './pages/admin';
import { LoginPage, SetupPage, SignupPage } from './pages/auth';
import { FilesPage } from './pages/files';
import { KeysPage } from './pages/keys';
import { OverviewPage } from './pages/overview';
import { PlaygroundPage } from './pages/playground';
import { TaskPage, TasksPage } from './pages/tasks';
import { ROUTES, type PageName } from './routes';
import { Link, match, navigate, useLocation } from './router';
import { useSession } from './session';

const PAGES: Record<PageName, (params: Record<string, string>) => ReactNode> = {
  overview: () => <OverviewPage />,
  playground: () => <PlaygroundPage />,
  files: () => <FilesPage />,
  tasks: () => <TasksPage />,
  task: (params) => <TaskPage taskId={params.taskId!} />,
  keys: () => <KeysPage />,
  admin: () => <AdminPage />,
  login: () => <LoginPage />,
  signup: () => <SignupPage />,
  setup: () => <SetupPage />,
};

const NAV = ROUTES.flatMap((route) => ('nav' in route ? [{ to: route.path, label: route.nav, adminOnly: route.access === 'admin' }] : []));

/** The route `path` shows, with its parameters; undefined when no page has that path. */
function findRoute(path: string) {
  for (const route of ROUTES) {
    const params = match(route.path, path);
    if (params) return { route, params };
  }
  return undefined;
}

function Page({ path }: { path: string }) {
  const found = findRoute(path);
  if (found) return PAGES[found.route.page](found.params);
  return (
    <div className="card">
      <h1>Not found</h1>
      <p>
        No page at <code>{path}</code>. <Link to="/">Back to the dashboard</Link>
      </p>
    </div>
  );
}

export function App() {
  const { info, error, logout } = useSession();
  const { path } = useLocation();
  const isPublic = findRoute(path)?.route.access === 'public';

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
  if (isPublic) return <Page path={path} />;
  if (!info.authenticated || !info.account) return <div className="boot muted">Loading…</div>;
  const account = info.account;
  const nav = NAV.filter((item) => !item.adminOnly || account.isAdmin);
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
