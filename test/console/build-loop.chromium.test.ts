import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
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
 * Issue 24 §3, "close the build loop", in Chromium against a running gateway started from a
 * configuration file, a real Modbus TCP device and the emulator's catalog: the probe starts on the
 * configured device, picked cells become mapping lines (flagged inline) merged into the editor's
 * text and applied (the file keeps its mode and comments, the gateway reads the new values); the
 * editor's line numbers follow its scroll and each problem leads to its line; mappings go out to
 * a CSV file and come back in with every bad row named.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

let emu: EmulatorHandle;
let mixer: ModbusSimulator;
let boiler: ModbusSimulator;
let gw: GatewayHandle;
let browser: Browser;
let page: Page;
let dir: string;
let file: string;
const pageErrors: string[] = [];

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  mixer = await startModbusSimulator({ port: 0, demo: false });
  boiler = await startModbusSimulator({ port: 0, demo: false });
  dir = mkdtempSync(join(tmpdir(), 'build-loop-'));
  file = join(dir, 'gateway.yaml');
  // The hand-written part: flow entries with aligned comments, as config/demo.yaml writes them.
  writeFileSync(
    file,
    `# Line 3 gateway: written by hand, keep this comment\n${toYaml(testConfigInput(emu, dir, { http: { enabled: true, port: 0 } }))}
modbus:
  name: modbus
  reconnect: { initial_delay: 300ms, max_delay: 1s }
  devices:
    - name: mixer1
      host: 127.0.0.1
      port: ${mixer.port}
      unit_id: 1
      poll_interval: 300ms
      registers:
        - { variable: mvr_mixer1_temperature, table: holding, address: 0, type: float32 }   # °C
        - { variable: mvr_mixer1_speed,       table: holding, address: 2, type: uint16 }    # rpm
`,
  );
  chmodSync(file, 0o600);
  gw = await startGateway(loadConfigFile(file).config, { configPath: file, logger: silentLogger() });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  page = await (await browser.newContext({ viewport: { width: 1440, height: 900 }, acceptDownloads: true })).newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await gw?.close();
  await mixer?.close();
  await boiler?.close();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  expect(pageErrors).toEqual([]);
});

/** The flags under a mapping line ('' when it has none: the element is then not there, and is not waited for). */
const flags = (p: Page, at: string) => p.getByTestId(`pick-flags-${at}`).allTextContents().then((t) => t.join(''));

async function probe(p: Page, table: string, address: number, count: number): Promise<void> {
  await p.getByTestId('probe-table-select').selectOption(table);
  await p.getByTestId('probe-address').fill(String(address));
  await p.locator('label', { hasText: 'Count' }).locator('input').fill(String(count));
  await p.getByTestId('probe-run').click();
  await p.getByTestId(table === 'coil' || table === 'discrete_input' ? `bit-${address}` : `cell-${address}-uint16-ABCD`).waitFor({ timeout: 15_000 });
}

/** The editor's line `line` as the page shows it: where its number sits in the gutter and where its text sits in the textarea. */
function linePositions(p: Page, line: number) {
  return p.evaluate((n) => {
    const ta = document.querySelector('[data-testid="config-text"]') as HTMLTextAreaElement;
    const gutter = document.querySelector('[data-testid="config-gutter"]') as HTMLPreElement;
    const node = gutter.firstChild as Text;
    const at = node.data.indexOf(`\n${n}\n`) + 1;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + String(n).length);
    const number = range.getBoundingClientRect();
    const box = ta.getBoundingClientRect();
    const style = getComputedStyle(ta);
    const lh = parseFloat(style.lineHeight);
    const textTop = box.top + ta.clientTop + parseFloat(style.paddingTop) + (n - 1) * lh - ta.scrollTop;
    const visible = textTop >= box.top + ta.clientTop && textTop + lh <= box.top + ta.clientTop + ta.clientHeight;
    return { numberTop: number.top, numberHeight: number.height, textTop, lh, visible, scrollTop: ta.scrollTop };
  }, line);
}

describe.skipIf(!available)('closing the build loop in the console', () => {
  it('probe: starts on the configured device; picked cells become flagged mapping lines, added to mixer1 and applied', async () => {
    mixer.setValue('holding', 10, 12.5, 'float32', 'CDAB');
    mixer.setValue('holding', 12, 98765, 'uint32', 'ABCD');
    mixer.setBits('coil', 0, [0, 1, 0, 0]);
    await page.goto(`${gw.httpUrl}/console#/build`);
    await page.getByTestId('tab-modbus').click();
    // Prefilled with the running configuration's device.
    await expect.poll(() => page.getByTestId('probe-device').inputValue(), { timeout: 10_000 }).toBe(`tcp://127.0.0.1:${mixer.port}`);
    expect(await page.getByTestId('probe-configured').inputValue()).toBe('mixer1');
    expect(await page.getByTestId('probe-unit').inputValue()).toBe('1');

    // A register mixer1 reads already: flagged as such.
    await probe(page, 'holding', 0, 4);
    await page.getByTestId('cell-0-float32-ABCD').click();
    await expect.poll(() => flags(page, 'holding-0')).toMatch(/holding registers 0-1 is read already as mvr_mixer1_temperature \(float32\)/);
    await page.getByTestId('cell-0-float32-ABCD').click(); // clicked again: dropped
    await expect.poll(() => page.getByTestId('probe-picks').count()).toBe(0);

    await probe(page, 'holding', 8, 8);
    expect(await page.getByTestId('cell-10-float32-CDAB').textContent()).toBe('12.5');
    await page.getByTestId('cell-10-float32-CDAB').click();
    await expect.poll(() => flags(page, 'holding-10')).toBe('type the machine variable (mvr_…)');
    expect(await page.getByTestId('add-modbus').isDisabled()).toBe(true);
    await page.getByTestId('pick-var-holding-10').fill('mvr_mixer1_speed');
    await expect.poll(() => flags(page, 'holding-10'), { timeout: 10_000 }).toMatch(/already mapped \(modbus\.devices\[0\]\.registers\[1\]\.variable\)/);
    await page.getByTestId('pick-var-holding-10').fill('mvr_mixer1_pwr');
    await expect.poll(() => flags(page, 'holding-10'), { timeout: 10_000 }).toMatch(/not in the organisation's catalog/);
    await page.getByTestId('pick-var-holding-10').fill('mvr_mixer1_power');
    await expect.poll(() => flags(page, 'holding-10')).toBe('');
    // A uint32 read as ABCD, scaled: 98765 × 0.1.
    expect(await page.getByTestId('cell-12-uint32-ABCD').textContent()).toBe('98765');
    await page.getByTestId('cell-12-uint32-ABCD').click();
    await page.getByTestId('pick-var-holding-12').fill('mvr_mixer1_energy');
    await page.getByTestId('pick-scale-holding-12').fill('0.1');
    // A coil: a bit becomes a bool mapping line.
    await probe(page, 'coil', 0, 4);
    await page.getByTestId('bit-1').click();
    await page.getByTestId('pick-var-coil-1').fill('mvr_mixer1_running');
    await expect.poll(() => page.getByTestId('add-modbus').textContent()).toBe('Add 3 registers to the configuration');
    await page.getByTestId('add-modbus').click();

    // The editor opens on the merged text: mixer1 extended, in the style of its lines, each with its unit.
    await expect.poll(() => page.getByTestId('added-to-config').textContent(), { timeout: 10_000 }).toMatch(/Added 3 mappings to modbus\.devices\[0\]/);
    const diff = (await page.getByTestId('added-to-config').getByTestId('config-diff').textContent())!;
    // Keys at the columns of the aligned keys above.
    // Each with the catalog's unit as its unit setting (checked by Apply's preview), not as a comment.
    expect(diff).toContain('+        - { variable: mvr_mixer1_power,       table: holding, address: 10, type: float32, byte_order: CDAB, unit: kW }\n');
    expect(diff).toContain('+        - { variable: mvr_mixer1_energy,      table: holding, address: 12, type: uint32, scale: 0.1, unit: kWh }\n');
    expect(diff).toContain('+        - { variable: mvr_mixer1_running,     table: coil,    address: 1, unit: bool }\n');
    expect(diff).not.toMatch(/^-/m);

    // Apply: the diff first, then the file, which keeps its mode and comments; the gateway reads the new registers.
    await expect.poll(() => page.getByTestId('check-state').textContent(), { timeout: 30_000 }).toBe('check passes');
    await page.getByTestId('apply-config').click();
    await page.getByTestId('config-preview').waitFor({ timeout: 20_000 });
    expect(await page.getByTestId('config-preview').getByTestId('config-diff').textContent()).toContain('+        - { variable: mvr_mixer1_power');
    // The units written are the catalog's: nothing to flag against it.
    expect(await page.getByTestId('catalog-flags').count()).toBe(0);
    await page.getByTestId('confirm-apply').click();
    await expect.poll(() => page.getByTestId('apply-note').textContent(), { timeout: 20_000 }).toMatch(new RegExp(`^Written to ${file}`));
    const written = readFileSync(file, 'utf8');
    expect((statSync(file).mode & 0o777).toString(8)).toBe('600');
    expect(written.startsWith('# Line 3 gateway: written by hand, keep this comment\n')).toBe(true);
    expect(written).toContain('        - { variable: mvr_mixer1_speed,       table: holding, address: 2, type: uint16 }    # rpm\n');
    const value = async (id: string) => ((await (await fetch(`${gw.httpUrl}/console/api/variables/${id}`)).json()) as { value: number | null }).value;
    await waitFor(async () => (await value('mvr_mixer1_power')) === 12.5 && Math.abs(((await value('mvr_mixer1_energy')) ?? 0) - 9876.5) < 1e-6 && (await value('mvr_mixer1_running')) === 1, { timeoutMs: 30_000, what: 'the gateway reading the applied registers' });
  }, 120_000);

  it('probe: an unconfigured device is typed in, named, and created by Add', async () => {
    boiler.setValue('input', 4, -215, 'int16');
    await page.getByTestId('tab-modbus').click();
    await page.getByTestId('probe-configured').selectOption('');
    await page.getByTestId('probe-device').fill(`tcp://127.0.0.1:${boiler.port}`);
    await probe(page, 'input', 4, 2);
    expect(await page.getByTestId('cell-4-int16-ABCD').textContent()).toBe('-215');
    await page.getByTestId('cell-4-int16-ABCD').click();
    await page.getByTestId('pick-var-input-4').fill('mvr_lathe1_speed');
    await page.getByTestId('pick-scale-input-4').fill('x');
    await expect.poll(() => flags(page, 'input-4')).toContain('scale is not a number');
    expect(await page.getByTestId('add-modbus').isDisabled()).toBe(true);
    await page.getByTestId('pick-scale-input-4').fill('0.1');
    await page.getByTestId('probe-device-name').fill('boiler');
    await page.getByTestId('add-modbus').click();
    await expect.poll(() => page.getByTestId('added-to-config').textContent(), { timeout: 10_000 }).toMatch(/Added 1 mapping to modbus\.devices\[1\] \(new\)/);
    const diff = (await page.getByTestId('added-to-config').getByTestId('config-diff').textContent())!;
    expect(diff).toContain(`+    - name: boiler\n+      transport: tcp\n+      host: 127.0.0.1\n+      port: ${boiler.port}\n+      unit_id: 1\n+      registers:\n+        - variable: mvr_lathe1_speed\n+          table: input\n+          address: 4\n+          type: int16\n+          scale: 0.1\n+          unit: rpm\n`);
  }, 60_000);

  it('editor: line numbers follow the scroll of a 300-line text, and a problem leads to its line', async () => {
    await page.getByTestId('tab-config').click();
    const editor = page.getByTestId('config-text');
    const base = readFileSync(file, 'utf8');
    const filler = Array.from({ length: 300 - base.split('\n').length }, (_, i) => `# note ${i + 1}`).join('\n');
    // 300 lines; the bad value on the last line but a few.
    const text = `${filler}\n${base.replace(/flush_interval: \d+/, 'flush_interval: soon')}`;
    expect(text.split('\n').length).toBe(300);
    await editor.fill(text);
    await editor.evaluate((ta: HTMLTextAreaElement) => {
      ta.scrollTop = ta.scrollHeight;
    });
    await expect.poll(async () => (await linePositions(page, 300)).visible).toBe(true);
    for (const n of [300, 290, 281]) {
      // The number sits on its line: centred in the same 18 px row. The gutter follows the scroll
      // event, which a busy machine may deliver a few frames late: polled, not read once.
      await expect
        .poll(async () => {
          const at = await linePositions(page, n);
          return at.visible ? Math.abs(at.numberTop + at.numberHeight / 2 - (at.textTop + at.lh / 2)) : Infinity;
        }, { message: `number ${n} beside its line`, timeout: 10_000 })
        .toBeLessThan(3);
    }

    const bad = text.split('\n').findIndex((l) => l.includes('flush_interval: soon')) + 1;
    await editor.evaluate((ta: HTMLTextAreaElement) => {
      ta.scrollTop = 0;
    });
    await expect.poll(async () => (await linePositions(page, bad)).visible).toBe(false);
    await page.getByTestId(`problem-line-${bad}`).click({ timeout: 15_000 });
    const start = text.split('\n').slice(0, bad - 1).join('\n').length + 1;
    expect(await editor.evaluate((ta: HTMLTextAreaElement) => [ta.selectionStart, ta.selectionEnd, document.activeElement === ta])).toEqual([start, start + text.split('\n')[bad - 1].length, true]);
    // The gutter follows the scroll that the click caused: polled, as above.
    await expect
      .poll(async () => {
        const at = await linePositions(page, bad);
        return at.visible ? Math.abs(at.numberTop + at.numberHeight / 2 - (at.textTop + at.lh / 2)) : Infinity;
      }, { message: `number ${bad} beside its line after the problem link` })
      .toBeLessThan(3);
    // Back to the file as it is.
    await editor.fill(readFileSync(file, 'utf8'));
  }, 60_000);

  it('CSV: export every mapping, add rows in the spreadsheet, import: good rows added, bad ones named by row and field', async () => {
    await page.getByTestId('tab-config').click();
    await expect.poll(() => page.getByTestId('check-state').textContent(), { timeout: 30_000 }).toBe('check passes');
    const downloading = page.waitForEvent('download');
    await page.getByTestId('export-csv').click();
    const download = await downloading;
    expect(download.suggestedFilename()).toBe('mappings.csv');
    const exported = readFileSync((await download.path())!, 'utf8');
    expect(exported.charCodeAt(0)).toBe(0xfeff);
    const lines = exported.slice(1).split('\r\n');
    expect(lines[0]).toBe('kind,source,variable,node_id,table,address,type,bit,byte_order,scale,offset,unit,comment,endpoint,security_mode,transport,host,port,path,unit_id,topic,format,key');
    expect(lines).toContain(`modbus,mixer1,mvr_mixer1_power,,holding,10,float32,,CDAB,,,kW,,,,tcp,127.0.0.1,${mixer.port},,1,,,`);
    expect(lines.filter((l) => l.startsWith('modbus,mixer1,'))).toHaveLength(5);
    await expect.poll(() => page.getByTestId('csv-note').textContent()).toBe('Exported 5 mappings to mappings.csv.');

    // Edited in a spreadsheet: rows added at the end, saved with the byte order mark and CRLF.
    const edited = `\uFEFF${lines.filter((l) => l !== '').join('\r\n')}\r\n${[
      'modbus,mixer1,mvr_mixer1_level,,input,0,int16,,,0.1,,%,"level, 0.1 %",,,,,,,,,,', // row 7: added, with its unit
      'modbus,mixer1,mvr_mixer1_temp2,,holding,x,float32,,,,,,,,,,,,,,,,', // row 8: bad address
      'modbus,mixer1,mvr_press1_speed,,holdng,20,uint16,,,,,,,,,,,,,,,,', // row 9: unknown table
      'modbus,mixer1,mvr_mixer1_speed,,holding,30,uint16,,,,,,,,,,,,,,,,', // row 10: the variable of row 3 again
      'opcua,press1,mvr_press1_temperature,"nsu=urn:edge-gateway:sim:press1;s=Press1.Temperature",,,,,,,,,"Press1/Temperature, °C",opc.tcp://127.0.0.1:4841/UA/Press1,None,,,,,,,,', // row 11: a new server
    ].join('\r\n')}\r\n`;
    await page.getByTestId('import-csv-file').setInputFiles({ name: 'mappings.csv', mimeType: 'text/csv', buffer: Buffer.from(edited, 'utf8') });
    await expect.poll(() => page.getByTestId('import-summary').textContent(), { timeout: 10_000 }).toMatch(/^mappings\.csv: 10 rows, 2 added, 0 changed, 5 already in the configuration, 3 left out/);
    const problems = (await page.getByTestId('import-problems').locator('li').allTextContents()).map((t) => t.trim());
    expect(problems).toEqual([
      'row 8 · address "x": "x" is not an address (use a number, hex like "0x0064", or a Modicon reference like "40001")',
      'row 9 · table "holdng": is not one of coil, discrete_input, holding, input',
      'row 10 · variable "mvr_mixer1_speed": duplicate: mvr_mixer1_speed is also on row 3',
    ]);
    const after = await page.getByTestId('config-text').inputValue();
    // The unit column becomes the unit setting (quoted where YAML needs it), the comment stays a comment.
    expect(after).toContain('        - { variable: mvr_mixer1_level,       table: input,   address: 0, type: int16, scale: 0.1, unit: "%" } # level, 0.1 %\n');
    expect(after).toContain('mvr_mixer1_speed,       table: holding, address: 2,');
    expect(after).toMatch(/\nopcua:\n {2}servers:\n {4}- name: press1\n {6}endpoint: opc\.tcp:\/\/127\.0\.0\.1:4841\/UA\/Press1\n/);
    // Nothing is written until Apply; the merged text passes the check.
    expect(readFileSync(file, 'utf8')).not.toContain('mvr_mixer1_level');
    await expect.poll(() => page.getByTestId('check-state').textContent(), { timeout: 30_000 }).toBe('check passes');
  }, 90_000);
});
