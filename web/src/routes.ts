// Every page of the dashboard, once. App.tsx renders them (a component per `page`) and lists the
// ones with a `nav` label in the top bar, in this order; the build writes their paths to
// dist/pages.json (vite.config.ts), and the server answers exactly those paths with index.html.
// Plain data without imports, so the build configuration can read it too.

export interface Route {
  path: string;
  page: string;
  /** public: signed-out pages (a signed-in visitor goes to /); admin: in the top bar for operators only. */
  access: 'public' | 'account' | 'admin';
  /** The label of its link in the top bar; pages without one are reached from other pages. */
  nav?: string;
}

export const ROUTES = [
  { path: '/', page: 'overview', access: 'account', nav: 'Usage' },
  { path: '/playground', page: 'playground', access: 'account', nav: 'Playground' },
  { path: '/files', page: 'files', access: 'account', nav: 'Files' },
  { path: '/files/:fileId', page: 'file', access: 'account' },
  { path: '/tasks', page: 'tasks', access: 'account', nav: 'Tasks' },
  { path: '/tasks/:taskId', page: 'task', access: 'account' },
  { path: '/keys', page: 'keys', access: 'account', nav: 'API keys' },
  { path: '/webhooks', page: 'webhooks', access: 'account', nav: 'Webhooks' },
  { path: '/delivery', page: 'delivery', access: 'account', nav: 'Delivery' },
  { path: '/admin', page: 'admin', access: 'admin', nav: 'Operator' },
  { path: '/login', page: 'login', access: 'public' },
  { path: '/signup', page: 'signup', access: 'public' },
  { path: '/setup', page: 'setup', access: 'public' },
  { path: '/reset-password', page: 'reset', access: 'public' },
] as const satisfies readonly Route[];

export type PageName = (typeof ROUTES)[number]['page'];
