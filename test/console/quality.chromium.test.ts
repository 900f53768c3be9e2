import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StatusCodes } from 'node-opcua';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { freePort, startModbusSimulator, type ModbusSimulator } from '../../src/sim/modbus-device.js';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../src/sim/opcua-server.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { chromiumAvailable, launchChromium } from '../helpers/chromium.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Quality per variable in the console, against real servers: a node-opcua server and a Modbus TCP
 * server feed a running gateway; Chromium shows the Variables page. A stopped OPC UA server's tags
 * turn stale within 5 s (the source's down-since comes from the connection's own loss), a Bad
 * StatusCode shows as bad with what happens upstream, the Overview names the Modbus device that
 * went away (not the protocol) and its row says disconnected, not connecting.
 * Screenshots go to $QUALITY_SCREENSHOTS (default: a temp folder).
 */
const available = chromiumAvailable('the quality of values on the console');
const SHOTS = process.env.QUALITY_SCREENSHOTS ?? join(tmpdir(), 'quality-screenshots');

let emu: EmulatorHandle;
let opcua: OpcuaSimulator;
let modbus: ModbusSimulator;
let gw: TestGateway;
let browser: Browser;
let page: Page;
let port: number;

const TAGS = ['mvr_press1_temperature', 'mvr_press1_pressure', 'mvr_press1_state'];

beforeAll(async () => {
  if (!available) return;
  mkdirSync(SHOTS, { recursive: true });
  emu = await startEmulator({ port: 0 });
  opcua = await startOpcuaSimulator({ pkiDir: join(tmpdir(), `quality-chromium-sim-${process.pid}`), updateIntervalMs: 500 });
  modbus = await startModbusSimulator({ port: 0, demo: false });
  modbus.setRegister('holding', 0, 42);
  port = await freePort();
  gw = await startTestGateway(emu, {
    http: { enabled: true, port },
    opcua: {
      servers: [
        {
          name: 'press1',
          endpoint: opcua.endpointUrl,
          security_mode: 'None',
          trust_on_first_use: true,
          publishing_interval: 500,
          nodes: [
            { node_id: opcua.nodeIds.temperature, variable: TAGS[0], unit: '°C' },
            { node_id: opcua.nodeIds.pressure, variable: TAGS[1] },
            { node_id: opcua.nodeIds.state, variable: TAGS[2] },
          ],
        },
      ],
    },
    modbus: { name: 'modbus', reconnect: { initial_delay: 200, max_delay: 500 }, devices: [{ name: 'mixer1', host: '127.0.0.1', port: modbus.port, poll_interval: 200, timeout: 300, registers: [{ variable: 'mvr_mixer1_speed', table: 'holding', address: 0 }] }] },
  });
  await waitFor(() => gw.handle.status().sources.every((s) => s.state === 'connected'), { timeoutMs: 60_000, what: 'both sources connected' });
  browser = await launchChromium();
  page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await gw?.destroy();
  await opcua?.close().catch(() => undefined);
  await modbus?.close().catch(() => undefined);
  await emu?.close();
});

const pill = (id: string) => page.getByTestId(`quality-${id}`);

describe.skipIf(!available)('quality on the console', () => {
  it('a Bad StatusCode shows bad, with what happens upstream; units with values', async () => {
    await page.goto(`http://127.0.0.1:${port}/console#/variables`);
    for (const id of [...TAGS, 'mvr_mixer1_speed']) await expect.poll(() => pill(id).textContent(), { timeout: 30_000 }).toBe('good');
    await expect.poll(() => page.getByTestId(`value-${TAGS[0]}`).textContent(), { timeout: 15_000 }).toMatch(/°C$/);
    opcua.pauseUpdates();
    opcua.setValue('pressure', 1, { status: StatusCodes.BadSensorFailure });
    await expect.poll(() => pill(TAGS[1]).textContent(), { timeout: 15_000 }).toBe('bad');
    expect(await page.getByTestId('quality-notes').textContent()).toMatch(/Bad.*Never sent/);
    await page.getByTestId('filter-bad').click();
    await expect.poll(() => page.locator('[data-testid^="quality-mvr_"]').count()).toBe(1);
    await page.screenshot({ path: join(SHOTS, 'variables-bad.png') });
    await page.getByTestId('filter-all').click();
    opcua.setValue('pressure', 2);
    opcua.resumeUpdates();
    await expect.poll(() => pill(TAGS[1]).textContent(), { timeout: 15_000 }).toBe('good');
  }, 90_000);

  it('a stopped OPC UA server\'s tags turn stale within 5 s; the Modbus ones stay good', async () => {
    await expect.poll(() => page.getByTestId('filter-stale').textContent(), { timeout: 15_000 }).toBe('Stale 0');
    const stoppedAt = Date.now();
    await opcua.close();
    for (const id of TAGS) await expect.poll(() => pill(id).textContent(), { timeout: Math.max(500, 5_000 - (Date.now() - stoppedAt)), intervals: [100] }).toBe('stale');
    expect(Date.now() - stoppedAt).toBeLessThan(5_000);
    expect(await pill('mvr_mixer1_speed').textContent()).toBe('good');
    expect(await page.getByTestId('filter-stale').textContent()).toBe('Stale 3');
    await page.screenshot({ path: join(SHOTS, 'variables-stale.png') });
    // The Overview counts them on the source's row, with a down-since from the loss itself.
    await page.goto(`http://127.0.0.1:${port}/console#/overview`);
    await expect.poll(() => page.getByTestId('quality-counts-press1').textContent(), { timeout: 10_000 }).toBe('3 stale');
    const problem = page.getByTestId('problems').locator('li').filter({ hasText: /^press1 \(opcua\) is down for/ });
    await problem.waitFor({ timeout: 10_000 });
    const since = /since (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)Z/.exec((await problem.textContent()) ?? '')?.[1];
    expect(since).toBeDefined();
    expect(Math.abs(Date.parse(`${since!.replace(' ', 'T')}Z`) - stoppedAt)).toBeLessThan(3_000);
    await page.screenshot({ path: join(SHOTS, 'overview-opcua-down.png') });
  }, 90_000);

  it('a Modbus device that goes away: the problem names the device, its row says disconnected, not connecting', async () => {
    await modbus.close();
    const problem = page.getByTestId('problems').locator('li').filter({ hasText: /^mixer1 \(Modbus device unit 1 at tcp:\/\/127\.0\.0\.1:\d+\) is down for/ });
    await problem.waitFor({ timeout: 15_000 });
    expect(await page.getByTestId('device-state-mixer1').textContent()).toBe('disconnected');
    expect(await page.getByTestId('problems').textContent()).not.toMatch(/modbus \(modbus\)/);
    await expect.poll(() => page.getByTestId('device-quality-mixer1').textContent(), { timeout: 10_000 }).toBe('1 stale');
    await page.screenshot({ path: join(SHOTS, 'overview-device-down.png'), fullPage: true });
    // Its variable on the Variables page: stale through its device's link, under its source and device.
    await page.goto(`http://127.0.0.1:${port}/console#/variables`);
    await expect.poll(() => pill('mvr_mixer1_speed').textContent(), { timeout: 10_000 }).toBe('stale');
    expect(await page.getByTestId('var-mvr_mixer1_speed').locator('span').nth(1).textContent()).toBe('modbus · mixer1');
  }, 60_000);
});
