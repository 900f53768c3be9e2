import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OverviewResponse } from '../../src/console/api/live.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A 5,000-variable run with unknown variables against a running gateway. The emulator's fixture
 * knows mvr_gen_1..20; the generator maps mvr_gen_1..5000, so 4,980 are unknown, and the emulator
 * words its refusals tersely (fault refusal_wording: another implementation of §7). The Overview
 * must say so in one problem, the header, the Uplink card, /status, the status line and the
 * metrics say "delivering 20 of 5,000 variables (4,980 unknown to the service)", the known 20 are
 * delivered, the rest set aside, and the uplink does not flap.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);
const COUNT = 5_000;

let emu: EmulatorHandle;
let gw: TestGateway;
let browser: Browser;
let port: number;
let transitions = 0;
let watch: NodeJS.Timeout | undefined;
let started = 0;

const overview = async () => (await (await fetch(`http://127.0.0.1:${port}/console/api/overview`)).json()) as OverviewResponse;

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0, faults: { refusal_wording: 'terse' } });
  port = await freePort();
  started = performance.now();
  gw = await startTestGateway(emu, { http: { enabled: true, port }, generator: [{ name: 'gen', variables: { prefix: 'mvr_gen_', count: COUNT }, interval: '1s' }], buffer: { commit_interval: 200 } });
  let last = gw.handle.health.condition;
  watch = setInterval(() => {
    const c = gw.handle.health.condition;
    if (c !== last) transitions++;
    last = c;
  }, 5);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 120_000);

afterAll(async () => {
  clearInterval(watch);
  await browser?.close();
  await gw?.destroy();
  await emu?.close();
});

describe.skipIf(!available)('5,000 mapped variables, 4,980 unknown to the service', () => {
  it('the Overview shows one problem naming them; known delivered, unknown set aside, no flapping', async () => {
    const ov = await waitFor(async () => {
      const o = await overview();
      return o.status.uplink.unknown_variables?.count === 4_980 ? o : null;
    }, { timeoutMs: 45_000, intervalMs: 250, what: '4,980 unknown variables in the console overview' });
    const identifiedS = (performance.now() - started) / 1000;
    expect(ov.status.uplink.condition).toBe('ok');
    expect(ov.status.uplink.unknown_variables.by_source).toEqual({ gen: 4_980 });

    await waitFor(() => Array.from({ length: 20 }, (_, i) => `mvr_gen_${i + 1}`).every((v) => (emu.valueCounts()[v] ?? 0) >= 2), { timeoutMs: 30_000, what: 'the 20 known variables delivered' });
    await waitFor(async () => (await overview()).status.set_aside.samples >= 4_980 * 2, { timeoutMs: 30_000, what: 'unknown samples set aside' });

    const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
    await page.goto(`http://127.0.0.1:${port}/console#/overview`);
    const problems = page.getByTestId('problems');
    await problems.getByText(/4,980 variables are unknown to the organisation's catalog: mvr_gen_\d+/).waitFor({ timeout: 30_000 });
    const text = (await problems.textContent()) ?? '';
    expect(text).toMatch(/fix the mapping or create them/);
    expect(text).toMatch(/4,980 from gen/);
    expect(text).toMatch(/The request payload is invalid\./);
    // One problem for it, not a second "samples set aside" line.
    expect(await problems.locator('li').filter({ hasText: /unknown to the organisation's catalog/ }).count()).toBe(1);
    expect(await problems.locator('li').filter({ hasText: /were refused by the service and set aside/ }).count()).toBe(0);
    expect(await page.getByTestId('uplink-unknown').textContent()).toContain('4,980 variables refused as unknown');
    const words = 'delivering 20 of 5,000 variables (4,980 unknown to the service)';
    expect(await page.getByTestId('header-uplink').textContent()).toBe(words);
    expect(await page.getByTestId('uplink-state').textContent()).toBe(words);
    expect(ov.status.uplink.state).toMatchObject({ state: 'partial', ok: false, text: words });
    expect(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).toMatch(/gateway_uplink_status\{state="partial"\} 1/);

    const batch = emu.stats().requests['POST /machine-data/batch'] ?? {};
    console.log(`identified 4,980 unknown in ${identifiedS.toFixed(1)} s; batches 200: ${batch['200'] ?? 0}, 400: ${batch['400'] ?? 0}; uplink transitions ${transitions}; buffer ${gw.handle.buffer.stats().rows} rows`);
    expect(batch['400'] ?? 0).toBeLessThan(60);
    expect(transitions).toBe(0);
    expect(gw.handle.buffer.stats().rows).toBeLessThan(20_000);
  }, 150_000);
});
