import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A gateway listening beyond localhost with http.api_token: a console write (requeue) is refused
 * with 401, the page asks for the token once, sends it as `Authorization: Bearer`, and keeps it in
 * the tab's sessionStorage for the next write.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

let emu: EmulatorHandle;
let gw: TestGateway;
let gwReads: TestGateway;
let readsPort: number;
let browser: Browser;
let port: number;

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  port = await freePort();
  gw = await startTestGateway(emu, {
    // Reads open, writes with the token: the write path's 401 → prompt → retry is what is tested.
    http: { enabled: true, host: '0.0.0.0', port, api_token: 'console-token-0123456789', require_token_for_reads: false },
    // Not in the emulator's catalog: refused upstream and set aside.
    generator: [{ name: 'gen', variables: ['mvr_not_in_catalog'], interval: '500ms' }],
  });
  readsPort = await freePort();
  // The default with a token: reads need it too (issue 12 §2), so the console asks at load.
  gwReads = await startTestGateway(emu, {
    http: { enabled: true, host: '0.0.0.0', port: readsPort, api_token: 'console-token-0123456789' },
    generator: [{ name: 'gen', variables: ['mvr_not_in_catalog'], interval: '500ms' }],
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gw?.destroy();
  await gwReads?.destroy();
  await emu?.close();
});

describe.skipIf(!available)('console writes with an API token', () => {
  it('asks for the token on 401, retries with it, and keeps it for the tab', async () => {
    await waitFor(() => gw.handle.status().set_aside.samples >= 1, { timeoutMs: 30_000, what: 'samples set aside' });
    const page = await (await browser.newContext()).newPage();
    const auth: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST') auth.push(r.headers().authorization ?? '(none)');
    });
    await page.goto(`http://127.0.0.1:${port}/console#/set-aside`);
    await page.getByTestId('requeue-all').click();
    await page.getByTestId('token-input').waitFor({ timeout: 10_000 });
    await page.getByTestId('token-input').fill('console-token-0123456789');
    await page.getByTestId('token-save').click();
    await expect.poll(() => page.getByTestId('set-aside-note').textContent(), { timeout: 10_000 }).toMatch(/samples back in the queue/);
    expect(auth).toEqual(['(none)', 'Bearer console-token-0123456789']);
    expect(await page.evaluate(() => sessionStorage.getItem('edge-gateway.console.token'))).toBe('console-token-0123456789');
    // The next write goes with the token at once: no prompt.
    await waitFor(() => gw.handle.status().set_aside.samples >= 1, { timeoutMs: 30_000, what: 'set aside again' });
    await page.reload();
    await page.getByTestId('requeue-all').click();
    await expect.poll(() => auth.length, { timeout: 10_000 }).toBe(3);
    expect(auth[2]).toBe('Bearer console-token-0123456789');
    expect(await page.getByTestId('token-input').count()).toBe(0);
  });

  it('asks for the token at load when reads need it, then shows the page', async () => {
    await waitFor(() => gwReads.handle.status().set_aside.samples >= 1, { timeoutMs: 30_000, what: 'samples set aside' });
    const page = await (await browser.newContext()).newPage();
    await page.goto(`http://127.0.0.1:${readsPort}/console#/set-aside`);
    await page.getByTestId('token-input').waitFor({ timeout: 15_000 });
    expect(await page.getByTestId('requeue-all').count()).toBe(0);
    await page.getByTestId('token-input').fill('console-token-0123456789');
    await page.getByTestId('token-save').click();
    await page.getByTestId('requeue-all').waitFor({ timeout: 15_000 });
    expect(await page.evaluate(() => sessionStorage.getItem('edge-gateway.console.token'))).toBe('console-token-0123456789');
  });
});
