import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { chromiumAvailable, launchChromium, panelPage } from '../helpers/chromium.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { delay, waitFor } from '../helpers/wait.js';
import { connectHmi, startRig } from './alarm-rig.js';
import { ANNOTATIONS } from './helpers.js';

/**
 * The operator page an operator can trust, in headless Chromium against a real gateway: the tile
 * says what the machine itself says (its state in the operator's words, its active OPC UA alarms
 * from a real node-opcua server), a tap while the gateway does not answer is kept on the panel
 * (also across a reload) and sent with its own time when the gateway is back, and an error goes
 * away when it no longer holds. SCREENSHOT_DIR=<dir> saves what the page looked like.
 */
const available = chromiumAvailable('the operator page (HMI) tests');
let browser: Browser;
const cleanup: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  if (!available) return;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const newPage = () => panelPage(browser, cleanup);

async function screenshot(page: Page, name: string): Promise<void> {
  const dir = process.env.SCREENSHOT_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`) });
}

const text = (page: Page, id: string) => page.getByTestId(id).textContent({ timeout: 5_000 }).catch(() => null);

describe.skipIf(!available)('operator page an operator can trust (headless Chromium)', () => {
  it("shows the machine's state in the operator's words and its active alarms, as they change", async () => {
    const rig = await startRig();
    cleanup.push(() => rig.close());
    await rig.startGateway(undefined, {
      annotations: { detectors: [{ machine: 'press1', variable: 'mvr_press1_state', condition: '!= 1', min_duration: '2s', states: { 0: 'Stopped', 1: 'Running', 2: 'Setup' } }] },
    });
    const { page } = await newPage();
    await page.goto(`${rig.gw!.handle.httpUrl}/`);
    await expect.poll(() => text(page, 'state-press1'), { timeout: 15_000 }).toBe('Running');

    // The press goes into setup: the tile says so in words, never as the PLC condition.
    rig.sim.setValue('state', 2);
    await expect.poll(() => text(page, 'state-press1'), { timeout: 15_000 }).toMatch(/^Setup \d+:\d\d$/);
    await expect.poll(() => text(page, 'auto-press1'), { timeout: 15_000 }).toMatch(/^Setup since \d\d:\d\d, as the machine reports: recorded as downtime (if it lasts 2 s|when it ends)$/);
    await expect.poll(() => text(page, 'auto-press1'), { timeout: 15_000 }).toMatch(/recorded as downtime when it ends$/);
    const tile = (await text(page, 'tile-press1')) ?? '';
    expect(tile).not.toMatch(/mvr_press1_state|!=/);

    // The press jams: the alarm shows on its tile, with its reason and whether it was acknowledged.
    const jam = rig.sim.alarms!.jam;
    jam.activate();
    await expect.poll(() => text(page, 'alarm-press1-0'), { timeout: 15_000 }).toMatch(/^Jam: Material jam at the infeedsince \d\d:\d\d · not acknowledged/);
    expect(await page.getByTestId('alarms-mixer1').count()).toBe(0);
    await screenshot(page, 'hmi-machine-state-and-alarm');
    const hmi = await connectHmi(rig.sim.endpointUrl);
    cleanup.push(() => hmi.close());
    expect(await hmi.acknowledge(jam.conditionId, jam.eventId())).toBe('Good');
    await expect.poll(() => text(page, 'alarm-press1-0'), { timeout: 15_000 }).not.toContain('not acknowledged');

    // Cleared and running again: the alarm and the stop go from the tile.
    jam.deactivate();
    rig.sim.setValue('state', 1);
    await expect.poll(() => page.getByTestId('alarms-press1').count(), { timeout: 15_000 }).toBe(0);
    await expect.poll(() => text(page, 'state-press1'), { timeout: 15_000 }).toBe('Running');
    expect(await page.getByTestId('auto-press1').count()).toBe(0);
  });

  it('keeps a tap while the gateway does not answer, across a reload, and sends it with its own time when the gateway is back', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const dir = mkdtempSync(join(tmpdir(), 'gw-hmi-kept-'));
    cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
    const start = async (port: number): Promise<TestGateway> => {
      const gw = await startTestGateway(emu, { http: { enabled: true, port }, annotations: ANNOTATIONS }, { dir });
      cleanup.push(() => gw.close());
      return gw;
    };
    let gw = await start(0);
    const url = gw.handle.httpUrl!;
    const { page } = await newPage();
    await page.goto(`${url}/`);
    await page.getByTestId('start-press1').waitFor({ state: 'visible', timeout: 15_000 });

    // The gateway stops (a restart, a power cut): the taps are kept, not refused.
    await gw.close();
    const t0 = Date.now();
    await page.getByTestId('start-press1').tap();
    await expect.poll(() => page.getByTestId('state-press1').getAttribute('data-pending'), { timeout: 15_000 }).toBe('true');
    const t1 = Date.now();
    expect(await text(page, 'kept-press1')).toMatch(/^Kept on this panel until the gateway answers: Start \d\d:\d\d:\d\d$/);
    expect(await text(page, 'msg-press1')).toBe('');
    await expect.poll(() => text(page, 'banner'), { timeout: 10_000 }).toMatch(/The gateway does not answer/);
    await page.getByTestId('reason-press1-1').tap(); // "Tool change"
    await page.getByTestId('text-press1').fill('die swap while offline');
    await delay(1_000); // a downtime of at least a second
    const t2 = Date.now();
    await page.getByTestId('stop-press1').tap();
    await expect.poll(() => text(page, 'kept-press1'), { timeout: 10_000 }).toMatch(/^Kept on this panel until the gateway answers: Start \d\d:\d\d:\d\d · Stop \d\d:\d\d:\d\d \(Tool change: die swap while offline\)$/);
    const t3 = Date.now();
    expect(await text(page, 'state-press1')).toBe('No downtime');
    await screenshot(page, 'hmi-taps-kept-offline');

    // The panel reloads while the gateway is still away (a kiosk's watchdog, a power blip): the
    // page cannot even load, but the taps are in its storage.
    await page.reload({ timeout: 5_000 }).catch(() => undefined);
    gw = await start(Number(new URL(url).port));
    // Loaded again once the gateway is back (the browser's error page may still be settling).
    await waitFor(() => page.goto(`${url}/`).then(() => true, () => false), { timeoutMs: 15_000, intervalMs: 200, what: 'the page loaded again' });
    const got = await waitFor(() => emu.annotations().find((a) => a.text === 'Tool change: die swap while offline'), { timeoutMs: 20_000, what: 'the kept downtime at the emulator' });
    expect(got.type).toBe('range');
    // Its times are the taps', not the moment they could be sent.
    const s = Date.parse(got.started_at!);
    const e = Date.parse(got.ended_at!);
    expect(s).toBeGreaterThanOrEqual(t0 - 1_000);
    expect(s).toBeLessThanOrEqual(t1);
    expect(e).toBeGreaterThanOrEqual(t2 - 1_000);
    expect(e).toBeLessThanOrEqual(t3);
    await expect.poll(() => page.getByTestId('kept-press1').count(), { timeout: 10_000 }).toBe(0);
    await expect.poll(() => text(page, 'msg-press1'), { timeout: 10_000 }).toMatch(/^Sent: downtime stopped at \d\d:\d\d:\d\d\. Delivery state in the list\.$/);
    expect(await page.getByTestId('banner').count()).toBe(0);
    expect(emu.annotations().filter((a) => a.text.startsWith('Tool change'))).toHaveLength(1);
    expect(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('edge-gateway.pending.')))).toEqual([]);
  });

  it('clears an error once it no longer holds', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const gw = await startTestGateway(emu, { http: { enabled: true, port: 0 }, annotations: ANNOTATIONS });
    cleanup.push(() => gw.destroy());
    const { page } = await newPage();
    await page.goto(`${gw.handle.httpUrl}/`);
    await page.getByTestId('start-mixer1').tap();
    await page.getByTestId('stop-mixer1').waitFor({ state: 'visible', timeout: 10_000 });
    await page.getByTestId('stop-mixer1').tap();
    await expect.poll(() => text(page, 'msg-mixer1'), { timeout: 10_000 }).toBe('Pick a reason or write a note first.');
    // A reason picked: the message was right, and is no longer.
    await page.getByTestId('reason-mixer1-0').tap();
    await expect.poll(() => text(page, 'msg-mixer1'), { timeout: 5_000 }).toBe('');
    await page.getByTestId('reason-mixer1-0').tap(); // unpicked again
    await page.getByTestId('stop-mixer1').tap();
    await expect.poll(() => text(page, 'msg-mixer1'), { timeout: 10_000 }).toBe('Pick a reason or write a note first.');
    // A note typed instead: gone too; the stop then goes through.
    await page.getByTestId('text-mixer1').fill('CIP');
    await expect.poll(() => text(page, 'msg-mixer1'), { timeout: 5_000 }).toBe('');
    await page.getByTestId('stop-mixer1').tap();
    await waitFor(() => emu.annotations().find((a) => a.text === 'CIP'), { what: 'the downtime with its note' });
  });
});
