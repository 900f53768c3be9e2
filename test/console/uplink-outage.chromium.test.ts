import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * An outage of the tracking service on the console, as the demo's terminal prints it: since when it
 * is unreachable, the backlog and its oldest sample meanwhile, and after it the catch-up time. The
 * card used to say "no estimate yet", the problem did not say since when, and the catch-up was not
 * shown at all.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

let emu: EmulatorHandle;
let gw: TestGateway;
let browser: Browser;
let port: number;

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  port = await freePort();
  gw = await startTestGateway(emu, { http: { enabled: true, port }, generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: 20 }, interval: 100 }] });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await gw?.destroy();
  await emu?.close();
});

describe.skipIf(!available)('an outage of the tracking service on the console', () => {
  it('says since when, the backlog and its oldest sample, then how long the catch-up took', async () => {
    await waitFor(() => (emu.valueCounts().mvr_gen_1 ?? 0) > 10, { timeoutMs: 20_000, what: 'delivering' });
    const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
    await page.goto(`http://127.0.0.1:${port}/console#/overview`);
    await page.getByTestId('header-uplink').getByText('delivering everything').waitFor({ timeout: 30_000 });
    emu.setFaults({ outage_seconds: 25 });
    const problems = page.getByTestId('problems');
    await problems.getByText(/The tracking service is unreachable since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(\d+ s\): [\d,]+ samples wait, the oldest \d+ s old; every sample is kept/).waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('header-uplink').textContent()).toMatch(/^unreachable since \d{4}-\d\d-\d\dT[\d:.]+Z$/);
    expect(await page.getByTestId('header-uplink').getAttribute('data-state')).toBe('unreachable');
    const line = page.getByTestId('uplink-outage');
    await line.getByText(/^Last outage [\d-]+ [\d:]+Z–[\d-]+ [\d:]+Z \(\d+ s\): backlog up to [\d,]+, oldest \d+ s; caught up \d+ s after the service came back\.$/).waitFor({ timeout: 90_000 });
    const st = gw.handle.status();
    expect(st.uplink.outage).toMatchObject({ state: 'over' });
    expect(st.uplink.outage!.backlog_peak).toBeGreaterThan(2_000);
    await page.getByTestId('header-uplink').getByText('delivering everything').waitFor({ timeout: 30_000 });
  }, 150_000);
});
