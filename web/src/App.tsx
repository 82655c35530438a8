// The shell: the session decides between the login pages and the dashboard; the path picks the page.
import { useEffect, useState, type ReactNode } from 'react';
import { ApiError } from './api';
import { ErrorBox } from './components';
import { AdminPage } from './pages/admin';
import { DeliveryPage } from './pages/delivery';
import { LoginPage, ResetPasswordPage, SetupPage, SignupPage } from './pages/auth';
import { FilePage } from './pages/file';
import { FilesPage } from './pages/files';
import { KeysPage } from './pages/keys';
import { OverviewPage } from './pages/overview';
import { PlaygroundPage } from './pages/playground';
import { TaskPage, TasksPage } from './pages/tasks';
import { WebhooksPage } from './pages/webhooks';
import { ROUTES, type PageName } from './routes';
import { Link, match, navigate, useLocation } from './router';
import { useSession } from './session';

const PAGES: Record<PageName, (params: Record<string, string>) => ReactNode> = {
  overview: () => <OverviewPage />,
  playground: () => <PlaygroundPage />,
  files: () => <FilesPage />,
  file: (params) => <FilePage fileId={params.fileId!} />,
  tasks: () => <TasksPage />,
  task: (params) => <TaskPage taskId={params.taskId!} />,
  keys: () => <KeysPage />,
  webhooks: () => <WebhooksPage />,
  delivery: () => <DeliveryPage />,
  admin: () => <AdminPage />,
  login: () => <LoginPage />,
  signup: () => <SignupPage />,
  setup: () => <SetupPage />,
  reset: () => <ResetPasswordPage />,
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

/** The dashboard's 404: an unknown address inside the dashboard, with the ways back. */
function NotFoundPage({ path, signedIn }: { path: string; signedIn: boolean }) {
  useEffect(() => {
    document.title = 'Page not found · imgapi';
  }, []);
  return (
    <section className="card not-found" data-testid="not-found">
      <p className="big" aria-hidden="true">
        404
      </p>
      <h1>Page not found</h1>
      <p>
        There is no dashboard page at <code>{path}</code>. The address may be mistyped, or the page has moved.
      </p>
      <p>
        {signedIn ? <Link to="/">Back to the dashboard</Link> : <Link to="/login">Log in</Link>} · <a href="/docs">API reference</a>
      </p>
    </section>
  );
}

function Page({ path, signedIn }: { path: string; signedIn: boolean }) {
  const found = findRoute(path);
  if (found) return PAGES[found.route.page](found.params);
  return <NotFoundPage path={path} signedIn={signedIn} />;
}

function SkipLink() {
  return (
    <a className="skip-link" href="#main">
      Skip to content
    </a>
  );
}

/** A page outside the signed-in shell (login, loading, errors): still a main landmark. */
function Bare({ children }: { children: ReactNode }) {
  return (
    <>
      <SkipLink />
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </>
  );
}

export function App() {
  const { info, error, logout } = useSession();
  const { path } = useLocation();
  const found = findRoute(path);
  const isPublic = found?.route.access === 'public';
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [path]);

  useEffect(() => {
    if (!info || !found) return;
    if (!info.authenticated && !isPublic) {
      const target = info.setupRequired ? '/setup' : '/login';
      navigate(path === '/' ? target : `${target}?next=${encodeURIComponent(path)}`, { replace: true });
    } else if (info.authenticated && isPublic) {
      navigate('/', { replace: true });
    }
  }, [info, isPublic, path, found]);

  if (error)
    return (
      <Bare>
        <div className="boot">
          <ErrorBox error={new ApiError(0, 'NETWORK_ERROR', error)} onRetry={() => location.reload()} />
        </div>
      </Bare>
    );
  if (!info)
    return (
      <Bare>
        <div className="boot muted">Loading…</div>
      </Bare>
    );
  if (!found && !info.authenticated)
    return (
      <Bare>
        <NotFoundPage path={path} signedIn={false} />
      </Bare>
    );
  if (isPublic)
    return (
      <Bare>
        <Page path={path} signedIn={false} />
      </Bare>
    );
  if (!info.authenticated || !info.account)
    return (
      <Bare>
        <div className="boot muted">Loading…</div>
      </Bare>
    );
  const account = info.account;
  const nav = NAV.filter((item) => !item.adminOnly || account.isAdmin);
  return (
    <div className="shell">
      <SkipLink />
      <header className={menuOpen ? 'topbar open' : 'topbar'}>
        <Link to="/" className="brand">
          <img src="/favicon.svg" alt="" width={24} height={24} /> imgapi
        </Link>
        <button
          type="button"
          className="secondary menu-button"
          aria-expanded={menuOpen}
          aria-controls="dashboard-nav"
          onClick={() => setMenuOpen((open) => !open)}
        >
          {menuOpen ? 'Close menu' : 'Menu'}
        </button>
        <nav aria-label="Dashboard" id="dashboard-nav" className={menuOpen ? 'open' : undefined}>
          {nav.map((item) => {
            const active = item.to === '/' ? path === '/' : path.startsWith(item.to);
            return (
              <Link key={item.to} to={item.to} className={active ? 'active' : undefined} current={active}>
                {item.label}
              </Link>
            );
          })}
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
      <main className="content" id="main" tabIndex={-1}>
        <Page path={path} signedIn />
      </main>
      <footer className="footer muted small">
        API reference at <a href="/docs">/docs</a> · the dashboard calls the same <code>/api/*</code> routes with your session
      </footer>
    </div>
  );
}
