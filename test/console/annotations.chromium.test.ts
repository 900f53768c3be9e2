import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startHarness, waitFor, type Harness } from '../annotations/helpers.js';

/**
 * The console's Annotations page against a gateway with annotations configured: one annotation the
 * emulator stores (delivered) and one it refuses (§2.3: a machine variable of another site), each
 * shown with its state, and the refused one with the service's message.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

let h: Harness;
let browser: Browser;

beforeAll(async () => {
  if (!available) return;
  h = await startHarness();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

describe.skipIf(!available)('console: annotations page', () => {
  it('lists delivered and refused annotations with the service\'s message', async () => {
    const good = await call(h.url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: 'Console sees this one', machine_variables: ['mvr_press1_speed'] });
    const bad = await call(h.url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: 'Wrong site from the console test', machine_variables: ['mvr_lathe1_speed'] });
    expect(good.status).toBe(201);
    expect(bad.status).toBe(201);
    await waitFor(async () => {
      const list = await call(h.url, 'GET', '/api/annotations');
      return list.body.counts.delivered === 1 && list.body.counts.refused === 1;
    }, { timeoutMs: 30_000, what: 'one delivered and one refused annotation' });

    const page = await (await browser.newContext()).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${h.url}/console#/annotations`);
    const table = page.getByTestId('annotations-table');
    await table.waitFor({ timeout: 15_000 });
    const goodRow = table.locator('tr', { hasText: 'Console sees this one' });
    const badRow = table.locator('tr', { hasText: 'Wrong site from the console test' });
    await expect.poll(() => goodRow.textContent(), { timeout: 10_000 }).toMatch(/delivered/);
    expect(await goodRow.textContent()).toMatch(/instant/);
    await expect.poll(() => badRow.textContent(), { timeout: 10_000 }).toMatch(/refused/);
    expect(await badRow.textContent()).toMatch(/not available at site/);
    expect(errors).toEqual([]);
  });
});
