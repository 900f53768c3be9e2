// Bundles the browser code with esbuild into dist/web/, one script and one style sheet per page:
//   console.js / .css  the commissioning console at /console (src/console/web)
//   hmi.js / .css      the operator panel at / (src/annotations/web)
// Preact for the components, uPlot for the console's charts, all served by the gateway (no CDN,
// no request leaves the plant). TypeScript and JSX as tsconfig.web.json says (esbuild strips the
// types; `npm run typecheck` checks them). Run by `npm run build`.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
await build({
  absWorkingDir: root,
  entryPoints: { console: 'src/console/web/app.tsx', hmi: 'src/annotations/web/app.tsx' },
  outdir: 'dist/web',
  bundle: true,
  format: 'esm',
  minify: true,
  target: ['chrome100', 'firefox100', 'safari15'],
  tsconfig: 'tsconfig.web.json',
  legalComments: 'linked',
  logLevel: 'warning',
  loader: { '.css': 'css' },
});
