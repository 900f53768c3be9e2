import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmulatorHandle } from '../../src/emulator/index.js';
import { waitFor } from '../helpers/wait.js';
import { client, getToken, withEmulator } from './helpers.js';

/**
 * Issue 21 §5 in a real browser: a web page open on a developer's machine (attacker.example,
 * resolved to 127.0.0.1) tries every way a page can POST to the emulator without a preflight:
 * no-cors fetches with text/plain and without a body, an auto-submitted form and a beacon, to
 * /_emulator/reset and /_emulator/faults. Before the fix each of them wiped the emulator or
 * switched on an outage under a running test.
 */
const CHROMIUM = '/usr/bin/chromium';

function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.CI) throw new Error(`${CHROMIUM} is missing but CI is set: the browser tests must run in CI (apt-get install chromium)`);
  console.warn(`\n*** SKIPPING the emulator CSRF test in Chromium: ${CHROMIUM} is not installed (apt-get install chromium) ***\n`);
  return false;
}
const available = chromiumAvailable();

let em: EmulatorHandle;
let browser: Browser;
let attacker: Server;
let attackerPort = 0;
const reports: string[] = [];

const ATTACK_PAGE = (e: string) => `<!doctype html><html><body>
<form id="f" method="POST" action="${e}/_emulator/reset" target="sink"><input name="tokens" value="true"></form>
<iframe name="sink"></iframe>
<script>
(async function () {
  var e = ${JSON.stringify(e)};
  var results = [];
  async function attempt(name, fn) { try { await fn(); results.push(name + ':sent'); } catch (x) { results.push(name + ':blocked'); } }
  await attempt('faults-text', function () { return fetch(e + '/_emulator/faults', { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{"outage_seconds":600}' }); });
  await attempt('reset-text', function () { return fetch(e + '/_emulator/reset', { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{"tokens":true,"faults":true}' }); });
  await attempt('reset-empty', function () { return fetch(e + '/_emulator/reset', { method: 'POST', mode: 'no-cors' }); });
  await attempt('beacon-reset', function () { if (!navigator.sendBeacon(e + '/_emulator/reset', '')) throw new Error('not queued'); });
  document.getElementById('f').submit();
  await new Promise(function (r) { setTimeout(r, 1000); });
  await fetch('/report', { method: 'POST', body: results.join(',') });
})();
</script></body></html>`;

beforeAll(async () => {
  if (!available) return;
  em = await withEmulator();
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
    res.end(ATTACK_PAGE(em.authUrl));
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
  await em?.close();
});

describe.skipIf(!available)('the emulator in a browser: another site cannot wipe it or set faults', () => {
  it('no-cors fetches, a form and a beacon from another origin change nothing', async () => {
    const token = await getToken(em);
    const c = client(em, token);
    expect((await c.batch([{ timestamp: '2026-01-01T08:00:00.000Z', machine_variable_id: 'mvr_press1_speed', value: 1 }])).status).toBe(200);

    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`http://attacker.example:${attackerPort}/`);
      await waitFor(() => reports.length > 0, { timeoutMs: 20_000, what: 'the attack page to finish' });
    } finally {
      await context.close();
    }
    // The attempts left the browser (opaque answers: "sent" is all a page learns) ...
    expect(reports[0]).toContain('faults-text:sent');
    expect(reports[0]).toContain('reset-text:sent');
    // ... and the emulator kept its data, its token and its (absent) faults.
    expect(em.valueCounts()).toEqual({ mvr_press1_speed: 1 });
    expect(em.faults()).toMatchObject({ outage_seconds: 0 });
    expect((await c.get('/machines?limit=1')).status).toBe(200);
  });
});
