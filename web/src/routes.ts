// The dashboard's pages. The server answers exactly these paths with index.html
// (DASHBOARD_PAGES in src/http/routes/dashboard/web.ts): keep the two lists the same.
export const PUBLIC_PAGES = ['/login', '/signup', '/setup'];
export const PAGES = ['/', '/login', '/signup', '/setup', '/keys', '/files', '/tasks', '/tasks/:taskId', '/playground', '/admin'];
