import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OverviewResponse } from '../../src/console/api/live.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A run where ingest exceeds the budget. 20 known variables every 10 ms (2,000 samples/s) against
 * 60 requests/min × 200 (× 0.9 for the sync path: 180/s). The Overview used to say "nothing to
 * drain" while the backlog climbed, then "import jobs keep up" with none in flight; the header
 * said "uplink ok".
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

let emu: EmulatorHandle;
let gw: TestGateway;
let browser: Browser;
let port: number;

const overview = async () => (await (await fetch(`http://127.0.0.1:${port}/console/api/overview`)).json()) as OverviewResponse;

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  port = await freePort();
  gw = await startTestGateway(emu, {
    http: { enabled: true, port },
    generator: [{ name: 'fast', variables: { prefix: 'mvr_gen_', count: 20 }, interval: 10 }],
    uplink: { requests_per_minute: 60 },
    buffer: { commit_interval: 100 },
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await gw?.destroy();
  await emu?.close();
});

describe.skipIf(!available)('ingest above the sync path\'s capacity', () => {
  it('the Overview says so and what import jobs do; "growing", never "keeps up" or "nothing to drain"; the header names the limit', async () => {
    const ov = await waitFor(async () => {
      const o = await overview();
      return o.status.delivery?.above_sync_capacity && o.status.delivery.state === 'growing' ? o : null;
    }, { timeoutMs: 45_000, intervalMs: 250, what: 'ingest above capacity with a climbing backlog' });
    expect(ov.status.delivery.sync_capacity_per_s).toBeCloseTo(180, 0);
    expect(ov.status.delivery.state).toBe('growing');
    expect(ov.status.delivery.import_jobs).toBe('waiting');
    expect(ov.status.backlog_eta_s).toBeNull();
    expect(ov.status.uplink.state).toMatchObject({ state: 'rate_limited', ok: false, text: 'rate limited (the budget: 60/min)' });

    const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
    await page.goto(`http://127.0.0.1:${port}/console#/overview`);
    const problems = page.getByTestId('problems');
    await problems.getByText(/is above the sync path's capacity \(180 samples\/s/).waitFor({ timeout: 30_000 });
    expect(await problems.textContent()).toMatch(/import jobs start when the oldest unsent sample is older than uplink\.backfill\.threshold/);
    expect(await page.getByTestId('backlog-eta').textContent()).toBe('growing');
    await page.getByTestId('backlog-line').getByText(/^\+[\d,]+ in 30 s: /).waitFor({ timeout: 30_000 });
    expect(await page.getByTestId('header-uplink').textContent()).toBe('rate limited (the budget: 60/min)');
    expect(await page.getByTestId('uplink-state').textContent()).toBe('rate limited (the budget: 60/min)');
    expect(await page.getByTestId('backlog-capacity').textContent()).toMatch(/above the sync path's capacity/);
    expect(await page.locator('body').textContent()).not.toMatch(/nothing to drain|keeps? up|keeping up/);
  }, 120_000);
});
