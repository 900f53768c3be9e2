import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * Issue 21 §4 as an engineer sees it: with http.max_streams_per_client 1, a second console tab gets
 * 429 for its live stream, says so ("Too many consoles open") instead of "Connection lost", and
 * goes live by itself once the first tab is closed.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

let emu: EmulatorHandle;
let gw: TestGateway;
let browser: Browser;

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  gw = await startTestGateway(emu, { http: { enabled: true, port: 0, max_streams_per_client: 1 } });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gw?.destroy();
  await emu?.close();
});

describe.skipIf(!available)('console live stream over the per-client limit', () => {
  it('a second tab shows "Too many consoles open" and goes live when the first closes', async () => {
    const context = await browser.newContext();
    try {
      const first = await context.newPage();
      await first.goto(`${gw.handle.httpUrl}/console`);
      await expect.poll(() => first.getByTestId('link').textContent(), { timeout: 15_000 }).toBe('Live');
      const second = await context.newPage();
      await second.goto(`${gw.handle.httpUrl}/console`);
      await expect.poll(() => second.getByTestId('link').textContent(), { timeout: 15_000 }).toMatch(/Too many consoles open/);
      await first.close();
      // Retry-After is 5 s.
      await expect.poll(() => second.getByTestId('link').textContent(), { timeout: 20_000 }).toBe('Live');
    } finally {
      await context.close();
    }
  });
});
