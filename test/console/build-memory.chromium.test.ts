import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { stringify as toYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { silentLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { testConfigInput } from '../helpers/gateway.js';
import { chromiumAvailable, launchChromium } from '../helpers/chromium.js';

/**
 * The build loop with a memory, in Chromium against a gateway started from a file and the
 * emulator's catalog: #/build loaded directly browses the configured OPC UA server; a CSV import
 * that changes an existing mapping lists the change and makes it only on confirm, and flags an id
 * the catalog does not know; Apply keeps a version of the file (time, user agent, what changed)
 * and a rollback to an earlier version shows its diff, then writes it back once confirmed.
 */
const available = chromiumAvailable('the build loop with a memory');

let emu: EmulatorHandle;
let gw: GatewayHandle;
let browser: Browser;
let page: Page;
let dir: string;
let file: string;
let original: string;
const pageErrors: string[] = [];

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  const deadOpcua = await freePort();
  const deadModbus = await freePort();
  dir = mkdtempSync(join(tmpdir(), 'build-memory-'));
  file = join(dir, 'gateway.yaml');
  original = `${toYaml(testConfigInput(emu, dir, { http: { enabled: true, port: 0 } }))}
opcua:
  servers:
    - name: press7
      endpoint: opc.tcp://127.0.0.1:${deadOpcua}/UA/Press7
      nodes:
        - { node_id: "ns=2;s=Press7.Temperature", variable: mvr_press1_temperature }
modbus:
  devices:
    - name: mixer1
      host: 127.0.0.1
      port: ${deadModbus}
      registers:
        - { variable: mvr_mixer1_temperature, table: holding, address: 0, type: float32 }   # °C
        - { variable: mvr_mixer1_level,       table: input,   address: 0, type: int16, scale: 0.1 }   # %
`;
  writeFileSync(file, original);
  gw = await startGateway(loadConfigFile(file).config, { configPath: file, logger: silentLogger() });
  browser = await launchChromium();
  page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await gw?.close();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  expect(pageErrors).toEqual([]);
});

const editorText = () => page.getByTestId('config-text').inputValue();

describe.skipIf(!available)('a build loop with a memory', () => {
  it('#/build loaded directly browses the configured OPC UA server, not opc.tcp://127.0.0.1:4840', async () => {
    await page.goto(`${gw.httpUrl}/console#/build`);
    await expect.poll(() => page.getByTestId('opcua-endpoint').inputValue(), { timeout: 20_000 }).toBe(gw.config.opcua.servers[0].endpoint);
    expect(await page.getByTestId('opcua-endpoint').inputValue()).not.toBe('opc.tcp://127.0.0.1:4840');
  });

  it('a CSV import lists a change to an existing mapping and makes it on confirm; an id the catalog lacks and a unit other than its own are flagged', async () => {
    // The console's copy of the catalog (the Build page reads it when it opens).
    expect((await fetch(`${gw.httpUrl}/console/api/catalog`)).status).toBe(200);
    await page.getByTestId('tab-config').click();
    await expect.poll(editorText, { timeout: 20_000 }).toContain('mvr_mixer1_level');
    const csv = 'kind,source,variable,table,address,type,scale,unit\r\nmodbus,mixer1,mvr_mixer1_level,input,0,int16,0.2,%\r\nmodbus,mixer1,mvr_mixer1_power,holding,2,float32,,W\r\nmodbus,mixer1,mvr_mixer1_nosuch,holding,4,uint16,,\r\n';
    await page.getByTestId('import-csv-file').setInputFiles({ name: 'tags.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await expect.poll(() => page.getByTestId('import-summary').textContent(), { timeout: 30_000 }).toContain('tags.csv: 3 rows, 2 added, 0 changed');
    expect(await page.getByTestId('import-changes-note').textContent()).toBe('1 row would change a mapping the text already has; the change is not in the text until you make it:');
    expect(await page.getByTestId('import-changes').textContent()).toContain('mixer1 input 0, int16 ABCD, scale 0.1 → mixer1 input 0, int16 ABCD, scale 0.2, unit %');
    expect(await page.getByTestId('import-catalog').textContent()).toContain("mvr_mixer1_nosuch: not in the organisation's catalog");
    // The catalog gives mvr_mixer1_power kW: a row in W is flagged (and still taken); the flags in row order.
    expect((await page.getByTestId('import-catalog').locator('li').allTextContents()).map((t) => t.trim())).toEqual([
      'row 3 · mvr_mixer1_power: unit "W", but the organisation\'s catalog gives "kW" (check the scale and offset, then the unit)',
      "row 4 · mvr_mixer1_nosuch: not in the organisation's catalog; the service will refuse its samples (create it there, or fix the id)",
    ]);
    // Added at once; the change waits for its confirmation.
    expect(await editorText()).toContain('        - { variable: mvr_mixer1_power,       table: holding, address: 2, type: float32, unit: W }');
    expect(await editorText()).toContain('scale: 0.1 }');
    await page.getByTestId('import-make-changes').click();
    await expect.poll(() => page.getByTestId('import-summary').textContent(), { timeout: 30_000 }).toContain('2 added, 1 changed');
    expect(await editorText()).toContain('        - { variable: mvr_mixer1_level,       table: input,   address: 0, type: int16, scale: 0.2, unit: "%" } # %');
  });

  it('Apply keeps a version with its user agent and what changed; a rollback shows its diff and writes the file back when confirmed', async () => {
    await expect.poll(() => page.getByTestId('check-state').textContent(), { timeout: 30_000 }).toBe('check passes');
    await page.getByTestId('apply-config').click();
    await page.getByTestId('confirm-apply').click();
    await expect.poll(() => page.getByTestId('apply-note').textContent(), { timeout: 30_000 }).toMatch(/^Written to .*gateway\.yaml \(version 2 in its history\)\. Changed: modbus/);
    expect(readFileSync(file, 'utf8')).toContain('scale: 0.2, unit: "%" }');
    // Version 1 is the file as it was before the console first wrote it.
    await expect.poll(() => page.getByTestId('history-2').textContent(), { timeout: 20_000 }).toMatch(/console apply.*HeadlessChrome\/[\d.]+.*changed modbus/);
    expect(await page.getByTestId('history-1').textContent()).toContain('before console apply');
    expect(await page.getByTestId('history-2').textContent()).toContain('(the file now)');
    await page.getByTestId('history-show-2').click();
    await expect.poll(() => page.getByTestId('history-shown').textContent(), { timeout: 20_000 }).toContain('+        - { variable: mvr_mixer1_power');
    await page.getByTestId('history-rollback-1').click();
    await expect.poll(() => page.getByTestId('rollback-preview').textContent(), { timeout: 20_000 }).toContain('-        - { variable: mvr_mixer1_power');
    expect(readFileSync(file, 'utf8')).toContain('mvr_mixer1_power');
    await page.getByTestId('rollback-confirm').click();
    await expect.poll(() => page.getByTestId('apply-note').textContent(), { timeout: 30_000 }).toMatch(/^Rolled back to version 1 \(kept as version 3\)\. Changed: modbus/);
    expect(readFileSync(file, 'utf8')).toBe(original);
    await expect.poll(editorText, { timeout: 20_000 }).not.toContain('mvr_mixer1_power');
    await expect.poll(() => page.getByTestId('history-3').textContent(), { timeout: 20_000 }).toMatch(/console rollback \(rollback to version 1\).*HeadlessChrome.*\(the file now\)|\(the file now\).*console rollback \(rollback to version 1\)/);
    expect(gw.config.modbus!.devices[0].registers.map((r) => r.variable)).toEqual(['mvr_mixer1_temperature', 'mvr_mixer1_level']);
  });
});
