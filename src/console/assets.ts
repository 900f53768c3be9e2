import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The console's browser code, bundled by `npm run build` (src/console/build.mjs, esbuild) into
 * dist/console-web/. Both src/console (tsx, tests) and dist/console (npm start) sit two levels
 * below the package root, so the same relative path finds the bundle. Read once and kept: about
 * 100 kB.
 */
const DIR = fileURLToPath(new URL('../../dist/console-web/', import.meta.url));

let cache: { js: string; css: string } | null = null;

export function consoleAssets(): { js: string; css: string } | null {
  if (cache) return cache;
  try {
    cache = { js: readFileSync(`${DIR}app.js`, 'utf8'), css: readFileSync(`${DIR}app.css`, 'utf8') };
    return cache;
  } catch {
    return null;
  }
}

export function consolePage(title: string): string {
  const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)} · console</title>
<link rel="stylesheet" href="/console/app.css">
</head>
<body>
<div id="app"><p style="padding:24px;font:15px system-ui">Loading the console…</p></div>
<script type="module" src="/console/app.js"></script>
</body>
</html>
`;
}

export const MISSING_BUNDLE = `<!doctype html><meta charset="utf-8"><title>console not built</title>
<p style="font:16px system-ui;padding:24px">The console's browser code is not built. Run <code>npm run build</code> in the gateway's folder and reload.</p>`;
