import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { stringify as toYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { silentLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { startModbusSimulator, type ModbusSimulator } from '../../src/sim/modbus-device.js';
import { testConfigInput } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 24 §4 on the Variables page of a running gateway: ids in natural order, the catalog's
 * unit next to each value, and a variable's configuration shown as the YAML written in the file.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

let emu: EmulatorHandle;
let gw: GatewayHandle;
let modbus: ModbusSimulator;
let browser: Browser;
let page: Page;
let dir: string;

const SPEED_ENTRY = `- variable: mvr_mixer1_speed   # the drive's speed
  table: holding
  address: 2                  # 40003 in the manual
  type: uint16`;

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  modbus = await startModbusSimulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'variables-commissioning-'));
  const file = join(dir, 'gateway.yaml');
  const base = toYaml(testConfigInput(emu, dir, { http: { enabled: true, port: 0 }, generator: [{ name: 'gen', variables: ['mvr_gen_10', 'mvr_gen_2', 'mvr_gen_1', 'mvr_gen_11'], interval: '500ms' }] }));
  writeFileSync(
    file,
    `${base}modbus:
  devices:
    - name: mixer1
      transport: tcp
      host: 127.0.0.1
      port: ${modbus.port}
      unit_id: 1
      poll_interval: 500ms
      registers:
        - { variable: mvr_mixer1_temperature, table: holding, address: 0, type: float32 }   # °C
${SPEED_ENTRY.split('\n').map((l) => `        ${l}`).join('\n')}
`,
  );
  gw = await startGateway(loadConfigFile(file).config, { configPath: file, logger: silentLogger() });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await gw?.close();
  await modbus?.close();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!available)('the Variables page', () => {
  it('lists ids in natural order and shows the catalog unit next to each value', async () => {
    await page.goto(`${gw.httpUrl}/console#/variables`);
    await waitFor(async () => (await page.locator('[data-testid^="var-mvr_gen_"]').count()) === 4, { timeoutMs: 20_000, what: 'the generated variables' });
    const order = await page.locator('[data-testid^="var-mvr_gen_"]').evaluateAll((els) => els.map((e) => e.getAttribute('data-testid')));
    expect(order).toEqual(['var-mvr_gen_1', 'var-mvr_gen_2', 'var-mvr_gen_10', 'var-mvr_gen_11']);
    // The units come from the organisation's catalog (the emulator's demo fixture: rpm, °C).
    await waitFor(async () => (await page.getByTestId('value-mvr_mixer1_speed').textContent())?.endsWith(' rpm'), { timeoutMs: 30_000, what: 'the unit of mvr_mixer1_speed' });
    expect(await page.getByTestId('value-mvr_mixer1_temperature').textContent()).toMatch(/ °C$/);
  });

  it("shows a variable's configuration as the YAML written in the file", async () => {
    await page.goto(`${gw.httpUrl}/console#/variables/mvr_mixer1_speed`);
    await waitFor(async () => (await page.getByTestId('detail-config').count()) === 1, { timeoutMs: 20_000, what: 'the detail' });
    // The entry's own lines, comments included, moved to the left margin together.
    expect(await page.getByTestId('detail-config').textContent()).toBe(SPEED_ENTRY.replace(/^- /, '').replace(/\n  /g, '\n'));
    await waitFor(async () => (await page.getByTestId('detail-value').textContent())?.endsWith(' rpm'), { timeoutMs: 20_000, what: 'the unit in the detail' });
    await page.goto(`${gw.httpUrl}/console#/variables/mvr_mixer1_temperature`);
    await waitFor(async () => (await page.getByTestId('detail-config').textContent())?.includes('variable: mvr_mixer1_temperature'), { timeoutMs: 20_000, what: 'the flow entry' });
    expect(await page.getByTestId('detail-config').textContent()).toBe('{ variable: mvr_mixer1_temperature, table: holding, address: 0, type: float32 }   # °C');
  });
});
