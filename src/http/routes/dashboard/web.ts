// The dashboard's static files (web/dist, built by the setup step) with a strict
// Content-Security-Policy: scripts, styles, fonts and API calls from this origin only, nothing
// inline, no framing. Its pages all answer index.html (the app routes in the browser); every
// other path keeps its own meaning (/api, /docs, /openapi.json, /uploads, /healthz, …). The
// pages are those the build lists in pages.json, from the dashboard's route table
// (web/src/routes.ts), so the server and the browser cannot disagree about them. A browser's
// GET of an unknown path answers index.html with 404, and the dashboard shows its 404 page.
import fs from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Services } from '../../../services.js';
import { setNotFoundPage } from '../../errors.js';

/** The paths the build in `dir` routes (pages.json: URL patterns such as /tasks/:taskId), or undefined. */
function builtPages(dir: string): string[] | undefined {
  try {
    const pages: unknown = JSON.parse(fs.readFileSync(path.join(dir, 'pages.json'), 'utf8'));
    if (Array.isArray(pages) && pages.length > 0 && pages.every((page) => typeof page === 'string' && page.startsWith('/'))) return pages;
  } catch {
    // missing or unreadable: reported by the caller
  }
  return undefined;
}

const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': DASHBOARD_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=()',
};

export async function webRoutes(app: FastifyInstance, services: Services): Promise<void> {
  const dir = services.config.dashboardDir;
  const index = path.join(dir, 'index.html');
  const built = fs.existsSync(index);
  if (!built) services.logger.warn({ dashboardDir: dir }, 'the dashboard is not built (no index.html): run `npm run setup` to build web/');

  const sendIndex = async (_request: unknown, reply: FastifyReply) => {
    reply.headers(SECURITY_HEADERS).header('cache-control', 'no-cache');
    if (!built && !fs.existsSync(index)) {
      return reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send('The dashboard is not built. Run `npm run setup` (it builds web/) and restart the server.\n');
    }
    return reply.type('text/html; charset=utf-8').send(await fs.promises.readFile(index));
  };
  const pages = built ? builtPages(dir) : undefined;
  if (built && !pages)
    services.logger.warn(
      { dashboardDir: dir },
      'the dashboard build lists no pages (pages.json): only / is served; run `npm run setup` to rebuild web/',
    );
  for (const page of pages ?? ['/']) app.get(page, { schema: { hide: true } }, sendIndex);
  // A browser that navigates to any other path (outside /api) gets the dashboard with status 404:
  // it shows its own "not found" page, with the way back, instead of the JSON error.
  if (built) setNotFoundPage(app, async (request, reply) => sendIndex(request, reply.code(404)));

  if (!built) return;
  // Hashed file names: cached for good. Only what the build put in assets/ (and the icon) is served.
  await app.register(fastifyStatic, {
    root: path.join(dir, 'assets'),
    prefix: '/assets/',
    index: false,
    dotfiles: 'deny',
    immutable: true,
    maxAge: '365d',
    setHeaders: (res) => {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
    },
    schemaHide: true,
  });
  const icon = path.join(dir, 'favicon.svg');
  if (fs.existsSync(icon)) {
    app.get('/favicon.svg', { schema: { hide: true } }, async (_request, reply) =>
      reply
        .headers(SECURITY_HEADERS)
        .header('cache-control', 'public, max-age=86400')
        .type('image/svg+xml')
        .send(await fs.promises.readFile(icon)),
    );
  }
}
