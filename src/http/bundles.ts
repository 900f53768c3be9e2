import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { HttpError, type LocalHttpServer } from './server.js';

/**
 * The browser bundles, built by `npm run build` (src/web/build.mjs, esbuild) into dist/web/: one
 * script and one style sheet per page, no CDN, nothing loaded from elsewhere (plants are often
 * offline). `console` is the commissioning console (/console), `hmi` the operator panel (/).
 * Both src/http (tsx, tests) and dist/http (npm start) sit two levels below the package root, so
 * the same relative path finds the bundles. Read once and kept: about 100 kB each.
 */
export type BundleName = 'console' | 'hmi';
export interface Bundle {
  js: string;
  css: string;
}

const DIR = fileURLToPath(new URL('../../dist/web/', import.meta.url));
const cache = new Map<BundleName, Bundle>();

export function readBundle(name: BundleName): Bundle | null {
  const hit = cache.get(name);
  if (hit) return hit;
  try {
    const b = { js: readFileSync(`${DIR}${name}.js`, 'utf8'), css: readFileSync(`${DIR}${name}.css`, 'utf8') };
    cache.set(name, b);
    return b;
  } catch {
    return null;
  }
}

/** GET `${base}/app.js` and `${base}/app.css`: a page's bundle. Public: the code holds no gateway data. */
export function registerBundleRoutes(http: LocalHttpServer, name: BundleName, base: string, options: { label: string; essential?: boolean }): void {
  const get = () => {
    const b = readBundle(name);
    if (!b) throw new HttpError(503, 'not_built', `the ${options.label} is not built: run npm run build`);
    return b;
  };
  const routeOptions = { name: `${options.label} asset`, access: 'public' as const, essential: options.essential === true };
  http.route('GET', `${base}/app.js`, () => ({ text: get().js, contentType: 'text/javascript; charset=utf-8' }), routeOptions);
  http.route('GET', `${base}/app.css`, () => ({ text: get().css, contentType: 'text/css; charset=utf-8' }), routeOptions);
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** The HTML shell of a page: its title, its style sheet and script under `base`, and what shows until the script runs. */
export function pageShell(o: { title: string; base: string; viewport: string; loading: string }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="${o.viewport}">
<title>${escapeHtml(o.title)}</title>
<link rel="stylesheet" href="${o.base}/app.css">
</head>
<body>
<div id="app">${o.loading}</div>
<script type="module" src="${o.base}/app.js"></script>
</body>
</html>
`;
}

/** What a page shows when its bundle is missing (a checkout without `npm run build`). */
export function notBuiltPage(label: string): string {
  return `<!doctype html><meta charset="utf-8"><title>${label} not built</title>
<p style="font:16px system-ui;padding:24px">The ${label}'s browser code is not built. Run <code>npm run build</code> in the gateway's folder and reload.</p>`;
}
