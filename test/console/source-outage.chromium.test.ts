import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { startAedes, type TestAedes } from '../sources/mqtt/helpers.js';

/**
 * Issue 24 §1 on the Overview: "down since" restarted at every retry and errors had no time. An
 * MQTT broker that goes away while the gateway retries every 100-300 ms, then comes back.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

let broker: TestAedes;
let gw: TestGateway;
let browser: Browser;
let port: number;

beforeAll(async () => {
  if (!available) return;
  broker = await startAedes();
  port = await freePort();
  const closed = await freePort();
  gw = await startTestGateway(
    { baseUrl: `http://127.0.0.1:${closed}/tracking/v1`, authUrl: `http://127.0.0.1:${closed}` },
    { http: { enabled: true, port }, mqtt: { connections: [{ name: 'line', url: broker.url, client_id: 'gw-outage', reconnect: { initial: 100, max: 300 }, subscriptions: [{ topic: 'x', format: 'number', variable: 'mvr_x' }] }] } },
  );
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await gw?.destroy();
  await broker?.close().catch(() => undefined);
});

describe.skipIf(!available)('a source outage on the Overview', () => {
  it('"down for … (since T)" keeps T across retries; the error has its time; both clear on recovery', async () => {
    const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
    await page.goto(`http://127.0.0.1:${port}/console#/overview`);
    await page.getByTestId('state-line').filter({ hasText: 'connected' }).waitFor({ timeout: 30_000 });
    const brokerPort = broker.port;
    await broker.close();
    const problem = page.getByTestId('problems').locator('li').filter({ hasText: /^line \(mqtt\) is down for/ });
    await problem.waitFor({ timeout: 30_000 });
    const since = () => problem.textContent().then((t) => /\(since ([^,]+), now/.exec(t ?? '')?.[1] ?? null);
    const first = await since();
    expect(first).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
    // Several retries later (every 100-300 ms), the same start of the outage.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await since()).toBe(first);
    expect(await problem.textContent()).toMatch(/: .+ \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\)$/);
    expect(await page.locator('body').textContent()).not.toMatch(/now ago/);

    broker = await startAedes(brokerPort);
    await waitFor(() => gw.handle.status().sources[0].state === 'connected', { what: 'reconnected', timeoutMs: 20_000 });
    await page.getByTestId('problems').locator('li').filter({ hasText: /^line \(mqtt\)/ }).waitFor({ state: 'detached', timeout: 30_000 });
    expect(gw.handle.status().sources[0].lastError).toBeNull();
    expect(await page.getByTestId('source-line').locator('.err-cell').textContent()).toBe('');
  }, 120_000);
});
