import { type Browser, type Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, panelPage } from '../helpers/chromium.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { holdsFor } from '../helpers/wait.js';
import { delay, startHarness, stored, waitFor, type Harness } from './helpers.js';

/**
 * The operator page end to end in headless Chromium (Debian's `chromium`, which `.ci/run`
 * installs): real clicks on the page served by a real gateway, annotations checked at the emulator.
 */
const available = chromiumAvailable('the operator page (HMI) test');

let emu: EmulatorHandle;
let browser: Browser;
const cleanup: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await emu?.close();
});
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function open(options: Parameters<typeof startHarness>[0] = {}, waitForTiles = true): Promise<{ h: Harness; page: Page }> {
  const h = await startHarness({ emu, ...options });
  cleanup.push(() => h.close());
  // A fresh context is a fresh profile: empty localStorage, no token.
  const { page } = await panelPage(browser, cleanup);
  await page.goto(`${h.url}/`);
  if (waitForTiles) await page.getByTestId('start-press1').waitFor({ state: 'visible', timeout: 15_000 });
  return { h, page };
}

describe.skipIf(!available)('operator page (HMI) in headless Chromium', () => {
  it('start, wait, stop: a range annotation with the right times and text arrives at the emulator', async () => {
    const { page } = await open();
    // Fits a 1024x600 panel: the tiles are side by side, the buttons are big enough to hit.
    const start = (await page.getByTestId('start-press1').boundingBox())!;
    expect(start.height).toBeGreaterThanOrEqual(52);
    const mixer = (await page.getByTestId('tile-mixer1').boundingBox())!;
    expect(mixer.x + mixer.width).toBeLessThanOrEqual(1024);
    expect(mixer.y).toBeLessThan(300);

    const t0 = Date.now();
    await page.getByTestId('start-press1').tap();
    await expect.poll(() => page.getByTestId('state-press1').textContent(), { timeout: 10_000 }).toMatch(/^DOWN /);
    const t1 = Date.now();
    await delay(1_500);
    await page.getByTestId('reason-press1-1').tap(); // "Tool change"
    await page.getByTestId('text-press1').fill('die swap');
    const t2 = Date.now();
    await page.getByTestId('stop-press1').tap();
    await expect.poll(() => page.getByTestId('state-press1').textContent(), { timeout: 10_000 }).toBe('No downtime');
    const t3 = Date.now();

    const got = await waitFor(() => emu.annotations().find((a) => a.text === 'Tool change: die swap'), { what: 'the range at the emulator' });
    const s = Date.parse(got.started_at!);
    const e = Date.parse(got.ended_at!);
    expect(got.type).toBe('range');
    expect(s).toBeGreaterThanOrEqual(t0);
    expect(s).toBeLessThanOrEqual(t1);
    expect(e).toBeGreaterThanOrEqual(t2);
    expect(e).toBeLessThanOrEqual(t3);
    expect(e - s).toBeGreaterThanOrEqual(1_500);
    expect(got.machine_variables).toEqual([{ id: 'mvr_press1_state' }, { id: 'mvr_press1_speed' }]);
    // The list shows the entry as delivered.
    await expect.poll(() => page.getByTestId(`badge-${got.external_id}`).textContent(), { timeout: 10_000 }).toBe('Delivered');
  });

  it('survives a reload during an open downtime: same start, the picked reason and typed text come back', async () => {
    const { page } = await open();
    await page.getByTestId('start-mixer1').tap();
    await expect.poll(() => page.getByTestId('state-mixer1').getAttribute('data-started'), { timeout: 10_000 }).toMatch(/^\d+$/);
    const started = Number(await page.getByTestId('state-mixer1').getAttribute('data-started'));
    await page.getByTestId('reason-mixer1-0').tap(); // "Cleaning"
    await page.getByTestId('text-mixer1').fill('CIP cycle');
    await delay(1_000);

    await page.reload();
    await expect.poll(() => page.getByTestId('state-mixer1').getAttribute('data-started'), { timeout: 10_000 }).toBe(String(started));
    await expect.poll(() => page.getByTestId('state-mixer1').textContent()).toMatch(/^DOWN 0:0[1-9]/);
    expect(await page.getByTestId('reason-mixer1-0').getAttribute('class')).toContain('sel');
    expect(await page.getByTestId('text-mixer1').inputValue()).toBe('CIP cycle');

    await page.getByTestId('stop-mixer1').tap();
    const got = await waitFor(() => emu.annotations().find((a) => a.text === 'Cleaning: CIP cycle'));
    expect(Date.parse(got.started_at!)).toBe(started);
    expect(got.machine_variables).toEqual([{ id: 'mvr_mixer1_running' }]);
  });

  it('keeps a reason tapped in the very turn the reason buttons appear (CI once lost it)', async () => {
    const { page } = await open();
    // Taps "Cleaning" from a MutationObserver, in the microtask right after the render that shows
    // the downtime and its buttons: before any deferred effect of that render could run. A restore that ran later
    // found no draft and reset the pick.
    await page.evaluate(() => {
      const observer = new MutationObserver(() => {
        // The render that shows the downtime (its start time) also shows the buttons.
        const state = document.querySelector('[data-testid="state-mixer1"]');
        const b = document.querySelector<HTMLButtonElement>('[data-testid="reason-mixer1-0"]');
        if (!b || !state?.getAttribute('data-started')) return;
        observer.disconnect();
        b.click();
        (window as unknown as { tapped: boolean }).tapped = true;
      });
      observer.observe(document.body, { childList: true, subtree: true, attributes: true, characterData: true });
    });
    await page.getByTestId('start-mixer1').tap();
    await expect.poll(() => page.evaluate(() => (window as unknown as { tapped?: boolean }).tapped === true), { timeout: 10_000 }).toBe(true);
    // Held across the deferred effects, and saved as the draft (a reload brings it back).
    await holdsFor(async () => (await page.getByTestId('reason-mixer1-0').getAttribute('class'))?.includes('sel') === true, { forMs: 1_000, what: 'the picked reason' });
    await page.reload();
    await expect.poll(() => page.getByTestId('reason-mixer1-0').getAttribute('class'), { timeout: 10_000 }).toContain('sel');
    await page.getByTestId('discard-mixer1').tap();
    await page.getByTestId('discard-mixer1').tap();
    await expect.poll(() => page.getByTestId('state-mixer1').textContent(), { timeout: 10_000 }).toBe('No downtime');
  });

  it('asks for a reason before stopping, and can discard a downtime started by mistake', async () => {
    const { page } = await open();
    await page.getByTestId('start-press1').tap();
    await page.getByTestId('stop-press1').waitFor({ state: 'visible' });
    await page.getByTestId('stop-press1').tap();
    await expect.poll(() => page.getByTestId('msg-press1').textContent(), { timeout: 10_000 }).toBe('Pick a reason or write a note first.');
    await page.getByTestId('discard-press1').tap();
    expect(await page.getByTestId('discard-press1').textContent()).toBe('Tap again');
    await page.getByTestId('discard-press1').tap();
    await expect.poll(() => page.getByTestId('state-press1').textContent(), { timeout: 10_000 }).toBe('No downtime');
    await holdsFor(() => emu.annotations().filter((a) => a.text.startsWith('reason')).length === 0, { forMs: 500, what: 'no discarded downtime upstream' });
  });

  it('shows entries as queued (offline) while the service is down, then delivered', async () => {
    const { page } = await open();
    emu.setFaults({ outage_seconds: 4 });
    try {
      await page.getByTestId('start-press1').tap();
      await page.getByTestId('reason-press1-2').tap(); // "Breakdown"
      await page.getByTestId('stop-press1').tap();
      const entry = page.locator('[data-testid^="entry-"]').first();
      await expect.poll(async () => (await entry.locator('.badge').textContent()) ?? '', { timeout: 15_000 }).toBe('Queued (offline)');
      await expect.poll(() => page.getByTestId('link').textContent(), { timeout: 15_000 }).toMatch(/Offline · 1 queued/);
      await expect.poll(async () => (await entry.locator('.badge').textContent()) ?? '', { timeout: 45_000 }).toBe('Delivered');
      const id = (await entry.getAttribute('data-testid'))!.slice('entry-'.length);
      expect(stored(emu, id)).toHaveLength(1);
    } finally {
      emu.clearFaults();
    }
  });

  it('asks for the API token at load when reads need it, shows the machines, and keeps it for writes', async () => {
    const { page } = await open({ sections: { http: { enabled: true, port: 0, host: '0.0.0.0', api_token: 'hmi-token-7-abcdefgh' } } }, false);
    // http.require_token_for_reads is on by default with a token: the page's data needs it.
    await page.getByTestId('token-input').waitFor({ state: 'visible', timeout: 15_000 });
    expect(await page.getByTestId('start-press1').count()).toBe(0);
    await page.getByTestId('token-input').fill('hmi-token-7-abcdefgh');
    await page.getByTestId('token-save').tap();
    await page.getByTestId('start-press1').waitFor({ state: 'visible', timeout: 15_000 });
    await page.getByTestId('start-press1').tap();
    await expect.poll(() => page.getByTestId('state-press1').textContent(), { timeout: 10_000 }).toMatch(/^DOWN /);
    expect(await page.getByTestId('token-input').isVisible()).toBe(false);
    await page.reload();
    await page.getByTestId('reason-press1-0').tap();
    await page.getByTestId('stop-press1').tap();
    await expect.poll(() => page.getByTestId('state-press1').textContent(), { timeout: 10_000 }).toBe('No downtime');
    expect(await page.getByTestId('token-input').isVisible()).toBe(false);
    await waitFor(() => emu.annotations().find((a) => a.text === 'Material shortage'));
  });

  it('asks once for the API token at the first write when reads are open, and keeps it', async () => {
    const { page } = await open({ sections: { http: { enabled: true, port: 0, host: '0.0.0.0', api_token: 'hmi-token-7-abcdefgh', require_token_for_reads: false } } });
    await page.getByTestId('start-press1').tap();
    await page.getByTestId('token-input').waitFor({ state: 'visible', timeout: 10_000 });
    await page.getByTestId('token-input').fill('hmi-token-7-abcdefgh');
    await page.getByTestId('token-save').tap();
    // The pending start goes through with the token.
    await expect.poll(() => page.getByTestId('state-press1').textContent(), { timeout: 10_000 }).toMatch(/^DOWN /);
    await page.reload();
    await page.getByTestId('reason-press1-0').tap();
    await page.getByTestId('stop-press1').tap();
    await expect.poll(() => page.getByTestId('state-press1').textContent(), { timeout: 10_000 }).toBe('No downtime');
    expect(await page.getByTestId('token-input').isVisible()).toBe(false);
    await waitFor(() => emu.annotations().find((a) => a.text === 'Material shortage'));
  });
});
