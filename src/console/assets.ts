import { pageShell } from '../http/bundles.js';

/** The console's page: its bundle (dist/web/console.js and .css, src/http/bundles.ts) under /console. */
export function consolePage(title: string): string {
  return pageShell({
    title: `${title} · console`,
    base: '/console',
    viewport: 'width=device-width, initial-scale=1',
    loading: '<p style="padding:24px;font:15px system-ui">Loading the console…</p>',
  });
}
