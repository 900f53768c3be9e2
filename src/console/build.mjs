// Bundles the console's browser code (src/console/web) into dist/console-web/ with esbuild:
// Preact + htm for the components, uPlot for the charts, all in one file served by the gateway
// (no CDN, no request leaves the plant). Run by `npm run build`.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
await build({
  absWorkingDir: root,
  entryPoints: { app: 'src/console/web/app.js' },
  outdir: 'dist/console-web',
  bundle: true,
  format: 'esm',
  minify: true,
  target: ['chrome100', 'firefox100', 'safari15'],
  legalComments: 'linked',
  logLevel: 'warning',
  loader: { '.css': 'css' },
});
