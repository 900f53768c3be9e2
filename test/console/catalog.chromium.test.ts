import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { call, startHarness, type Harness } from '../annotations/helpers.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 21 §4 in a real browser: a page on another origin (attacker.example → 127.0.0.1) points
 * `<img>` tags at `/console/api/catalog?refresh=1`, posts a form and no-cors fetches to the refresh
 * route. Before the fix each image made the gateway read every page of both catalog lists from the
 * service again, ahead of sample data. Now none of it may make the gateway read upstream.
 */
const CHROMIUM = '/usr/bin/chromium';

function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.CI) throw new Error(`${CHROMIUM} is missing but CI is set: the browser tests must run in CI (apt-get install chromium)`);
  console.warn(`\n*** SKIPPING the catalog CSRF test in Chromium: ${CHROMIUM} is not installed (apt-get install chromium) ***\n`);
  return false;
}
const available = chromiumAvailable();

let emu: EmulatorHandle;
let browser: Browser;
let h: Harness;
let attacker: Server;
let attackerPort = 0;
const reports: string[] = [];

const ATTACK_PAGE = (gateway: string) => `<!doctype html><html><body>
<form id="f" method="POST" action="${gateway}/console/api/catalog/refresh" target="sink"><input name="x" value="1"></form>
<iframe name="sink"></iframe>
<script>
(async function () {
  var base = ${JSON.stringify(gateway)};
  function img(src) { return new Promise(function (r) { var i = new Image(); i.onload = i.onerror = function () { r(); }; i.src = src; }); }
  // One after the other, so each is a request of its own (not one shared load).
  for (var k = 0; k < 3; k++) await img(base + '/console/api/catalog?refresh=1&n=' + k);
  await img(base + '/console/api/catalog?n=plain');
  try { await fetch(base + '/console/api/catalog/refresh', { method: 'POST', mode: 'no-cors' }); } catch (e) {}
  try { await fetch(base + '/console/api/catalog/refresh', { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{}' }); } catch (e) {}
  document.getElementById('f').submit();
  await new Promise(function (r) { setTimeout(r, 500); });
  await fetch('/report', { method: 'POST', body: 'done' });
})();
</script></body></html>`;

/** Requests the emulator answered on the two catalog lists. */
function catalogReads(): number {
  const r = emu.stats().requests;
  const sum = (route: string) => Object.values(r[route] ?? {}).reduce((a, n) => a + n, 0);
  return sum('GET /machines') + sum('GET /machine-variables');
}

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
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--host-resolver-rules=MAP attacker.example 127.0.0.1'],
  });
});
afterAll(async () => {
  await browser?.close();
  await new Promise<void>((r) => (attacker ? attacker.close(() => r()) : r()));
  await h?.close();
  await emu?.close();
});

describe.skipIf(!available)('the console catalog in a browser: another origin cannot make the gateway read upstream', () => {
  it('cross-site <img>, form POST and no-cors fetches to the catalog start no upstream read', async () => {
    // The console read the catalog once (its build page does); the copy is now fresh.
    expect((await call(h.url, 'GET', '/console/api/catalog')).status).toBe(200);
    const reads = catalogReads();
    expect(reads).toBeGreaterThan(0);

    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`http://attacker.example:${attackerPort}/`);
      await waitFor(() => reports.length > 0, { timeoutMs: 20_000, what: 'the attack page to finish' });
    } finally {
      await context.close();
    }
    // Not one of them made the gateway read the catalog from the service again ...
    expect(catalogReads()).toBe(reads);
    // ... though it saw every attempt (they really left the browser): the images got 400, the posts 403.
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    expect(metrics).toContain('gateway_http_requests_total{route="console catalog",status="400"} 3');
    expect(metrics).toMatch(/gateway_http_requests_total\{route="console catalog refresh",status="403"\} [3-9]/);
  });
});
