import { notBuiltPage, pageShell, readBundle, registerBundleRoutes } from '../http/bundles.js';
import type { LocalHttpServer } from '../http/server.js';

/**
 * The operator (HMI) page, served at `/` by the gateway: the shell of the operator panel, whose
 * code (src/annotations/web, Preact, like the console) `npm run build` bundles into
 * dist/web/hmi.js and hmi.css, served under /hmi. No external scripts, styles, fonts or images
 * (plants are often offline; the page's CSP forbids loading anything from elsewhere). What the
 * panel does is described in src/annotations/web/app.tsx.
 */

/** Plants are offline: the page must not load anything from elsewhere, and cannot. */
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The page with the configured title (the panel shows it as its heading too). */
export function hmiPage(title: string): string {
  return pageShell({ title, base: '/hmi', viewport: 'width=device-width, initial-scale=1, user-scalable=no', loading: '' });
}

/** GET / (the page) and /hmi/app.js, /hmi/app.css (its bundle). */
export function registerHmiPage(http: LocalHttpServer, title: string): void {
  const html = hmiPage(title);
  const headers = { 'content-security-policy': CSP, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' };
  http.route('GET', '/', () => (readBundle('hmi') ? { html, headers } : { status: 503, html: notBuiltPage('operator panel'), headers }), {
    // The page itself is a static shell without data (public); what it shows comes from
    // /api/panel, a read: when reads need the token the panel asks for it (web/app.tsx).
    // Essential: served from http.reserved_connections too, like the panel and the downtime buttons.
    name: 'hmi',
    access: 'public',
    essential: true,
  });
  registerBundleRoutes(http, 'hmi', '/hmi', { label: 'operator panel', essential: true });
}
