// Builds the dashboard to dist/, which the API server serves at / (src/http/routes/dashboard/web.ts).
// Everything is bundled: no CDN, no external fonts, no inline script (the server's CSP forbids them).
import react from '@vitejs/plugin-react';
import { defineConfig, type Plugin } from 'vite';
import { ROUTES } from './src/routes.ts';

/** dist/pages.json: the paths the server answers with index.html (src/http/routes/dashboard/web.ts). */
function pageList(): Plugin {
  return {
    name: 'imgapi-page-list',
    generateBundle() {
      this.emitFile({ type: 'asset', fileName: 'pages.json', source: `${JSON.stringify(ROUTES.map((route) => route.path))}\n` });
    },
  };
}

export default defineConfig({
  plugins: [react(), pageList()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    // Inline assets would become data: URLs in CSS/JS; keep every asset a file of this origin.
    assetsInlineLimit: 0,
    sourcemap: false,
    // No modulepreload polyfill: it would be an extra inline-looking shim for old browsers only.
    modulePreload: { polyfill: false },
  },
  server: {
    // `npm run dev` next to a running server: the API and auth routes go to it.
    proxy: {
      '/api': 'http://localhost:3000',
      '/auth': 'http://localhost:3000',
      '/dashboard-api': 'http://localhost:3000',
    },
  },
});
