import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startHarness, type Harness } from '../annotations/helpers.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Cross-site request forgery and DNS rebinding for real, in headless Chromium: a page on another
 * origin (attacker.example, resolved to 127.0.0.1 by Chromium's host resolver rules) tries every
 * way a web page can send the downtime writes to the gateway on loopback without a token (the
 * default setup): no-cors fetch with no body and with text/plain, an auto-submitted form, a
 * sendBeacon, and a CORS fetch with JSON. None may reach a handler. Then the "rebound" name
 * (rebind.example → 127.0.0.1, the gateway's port) must be refused by the Host check, while the
 * gateway's own page at 127.0.0.1 still starts a downtime.
 */
const CHROMIUM = '/usr/bin/chromium';

function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.CI) throw new Error(`${CHROMIUM} is missing but CI is set: the CSRF browser test must run in CI (apt-get install chromium)`);
  console.warn(`\n*** SKIPPING the CSRF test in Chromium: ${CHROMIUM} is not installed (apt-get install chromium) ***\n`);
  return false;
}
const available = chromiumAvailable();

let emu: EmulatorHandle;
let browser: Browser;
let h: Harness;
let attacker: Server;
let attackerPort = 0;
/** Requests the attacker's page reported as done (its scripts post here when finished). */
const reports: string[] = [];

const ATTACK_PAGE = (gateway: string) => `<!doctype html><html><body>
<form id="f" method="POST" action="${gateway}/api/machines/press1/downtime/start" target="sink"><input name="reason" value="forged"></form>
<iframe name="sink"></iframe>
<script>
(async function () {
  var base = ${JSON.stringify(gateway)};
  var results = [];
  async function attempt(name, fn) { try { await fn(); results.push(name + ':sent'); } catch (e) { results.push(name + ':blocked'); } }
  await attempt('nocors-empty-start', function () { return fetch(base + '/api/machines/press1/downtime/start', { method: 'POST', mode: 'no-cors' }); });
  await attempt('nocors-text-start', function () { return fetch(base + '/api/machines/mixer1/downtime/start', { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{}' }); });
  await attempt('nocors-empty-cancel', function () { return fetch(base + '/api/machines/mixer1/downtime/cancel', { method: 'POST', mode: 'no-cors' }); });
  await attempt('cors-json-start', function () { return fetch(base + '/api/machines/press1/downtime/start', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }); });
  await attempt('cors-header-start', function () { return fetch(base + '/api/machines/press1/downtime/start', { method: 'POST', headers: { 'x-requested-by': 'evil' } }); });
  await attempt('beacon-start', function () { if (!navigator.sendBeacon(base + '/api/machines/mixer1/downtime/start', new Blob(['{}'], { type: 'text/plain' }))) throw new Error('not queued'); });
  document.getElementById('f').submit();
  await new Promise(function (r) { setTimeout(r, 500); });
  await fetch('/report', { method: 'POST', body: results.join(',') });
})();
</script></body></html>`;

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  h = await startHarness({ emu });
  attacker = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/report') {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        reports.push(body);
        res.end('ok');
      });
      return;
    }
    res.setHeader('content-type', 'text/html');
    res.end(ATTACK_PAGE(h.url));
  });
  await new Promise<void>((r) => attacker.listen(0, '127.0.0.1', () => r()));
  attackerPort = (attacker.address() as AddressInfo).port;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // Two names that are not the gateway's, both pointing at this machine.
      '--host-resolver-rules=MAP attacker.example 127.0.0.1, MAP rebind.example 127.0.0.1',
    ],
  });
});
afterAll(async () => {
  await browser?.close();
  await new Promise<void>((r) => (attacker ? attacker.close(() => r()) : r()));
  await h?.close();
  await emu?.close();
});

describe.skipIf(!available)('the local API in a browser: CSRF and DNS rebinding', () => {
  it('a page on another origin cannot start or cancel downtimes on a gateway without a token', async () => {
    const context = await browser.newContext();
    try {
      // The gateway's own machines have no open downtime, and one that the attacker may try to cancel.
      const svc = h.gw.handle.annotations!.service;
      svc.startDowntime('mixer1', {}, 'api');
      const page = await context.newPage();
      await page.goto(`http://attacker.example:${attackerPort}/`);
      await waitFor(() => reports.length > 0, { timeoutMs: 20_000, what: 'the attack page to finish' });
      // The attempts really left the browser (the no-cors ones are opaque: "sent" is all a page learns).
      expect(reports[0]).toContain('nocors-empty-start:sent');
      expect(reports[0]).toContain('nocors-text-start:sent');
      expect(reports[0]).toContain('cors-json-start:blocked');
      // Nothing changed: press1 has no downtime, mixer1 still has its own.
      expect(svc.openDowntime('press1')).toBeFalsy();
      expect(svc.openDowntime('mixer1')).toBeTruthy();
      // And the gateway saw the attempts and refused them itself (403), rather than never being asked.
      const metrics = await (await fetch(`${h.url}/metrics`)).text();
      expect(metrics).toMatch(/status="403"/);
      svc.cancelDowntime('mixer1', 'api');
    } finally {
      await context.close();
    }
  });

  it('a rebound name pointing at the gateway is refused; the gateway\'s own page still works', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const port = new URL(h.url).port;
      const rebound = await page.goto(`http://rebind.example:${port}/status`);
      expect(rebound?.status()).toBe(403);
      expect(await rebound?.text()).toContain('host_not_allowed');
      const reboundPage = await page.goto(`http://rebind.example:${port}/`);
      expect(reboundPage?.status()).toBe(403);
      // Same-origin from the rebound page: the script of a rebound page reads /api/panel.
      const read = await page.evaluate(async () => (await fetch('/api/panel')).status);
      expect(read).toBe(403);

      // The gateway's own page, same origin: a real tap starts a downtime.
      await page.goto(`${h.url}/`);
      await page.getByTestId('start-press1').waitFor({ state: 'visible', timeout: 15_000 });
      await page.getByTestId('start-press1').click();
      await waitFor(() => h.gw.handle.annotations!.service.openDowntime('press1'), { what: 'downtime started from the gateway page' });
      h.gw.handle.annotations!.service.cancelDowntime('press1', 'api');
    } finally {
      await context.close();
    }
  });
});
