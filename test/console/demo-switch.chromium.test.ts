import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { stringify as toYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile, validateConfig } from '../../src/config/load.js';
import { silentLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { runCli } from '../helpers/cli.js';
import { testConfigInput } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 24 §2 and §4 on gateways that do not run the demo: the demo's device switch is refused
 * with a reason (API and CLI) and its panel is not shown; a disabled Apply says why; the page's
 * "Loading the console…" line is gone once the console runs.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

let emu: EmulatorHandle;
let plain: GatewayHandle;
let filed: GatewayHandle;
let browser: Browser;
let dir: string;

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'demo-switch-'));
  const generator = { generator: [{ name: 'gen', variables: ['mvr_a1', 'mvr_a2'], interval: '1s' }] };
  plain = await startGateway(validateConfig(testConfigInput(emu, join(dir, 'a'), { http: { enabled: true, port: 0 }, ...generator })).config, { logger: silentLogger() });
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, toYaml(testConfigInput(emu, join(dir, 'b'), { http: { enabled: true, port: 0 }, ...generator })));
  filed = await startGateway(loadConfigFile(file).config, { configPath: file, logger: silentLogger() });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await plain?.close();
  await filed?.close();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!available)('the demo switch and Apply on a gateway that does not run the demo', () => {
  it('refuses the device switch with a reason, from the API and from edge-gateway demo device', async () => {
    const base = plain.httpUrl!;
    const list = await (await fetch(`${base}/console/api/demo`)).json();
    expect(list).toMatchObject({ demo: false, message: expect.stringContaining('does not run the demo') });
    const r = await fetch(`${base}/console/api/demo/devices/press1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ state: 'down' }) });
    expect(r.status).toBe(409);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe('not_demo');
    const cli = await runCli(['demo', 'device', 'press1', 'down', '--url', base]);
    expect(cli.code).toBe(1);
    expect(cli.err).toContain('does not run the demo');
    const usage = await runCli(['demo', 'device', 'press1', 'sideways', '--url', base]);
    expect(usage.code).toBe(2);
    expect(usage.err).toContain('say down or up, not "sideways"');
  });

  it('shows no device panel and no loading line, and says why Apply is disabled', async () => {
    const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
    await page.goto(`${plain.httpUrl}/console#/build`);
    await page.getByTestId('tab-config').click();
    await waitFor(async () => (await page.getByTestId('apply-reason').textContent())?.includes('started without a configuration file'), { timeoutMs: 20_000, what: 'the reason Apply is disabled' });
    expect(await page.getByTestId('apply-config').isDisabled()).toBe(true);
    expect(await page.getByTestId('apply-reason').textContent()).toContain('start it with --config FILE');
    expect(await page.getByTestId('demo-devices').count()).toBe(0);
    expect(await page.locator('body').innerText()).not.toContain('Loading the console');

    // With a file: a text with problems names them as the reason; a text that passes has none.
    await page.goto(`${filed.httpUrl}/console#/build`);
    await page.getByTestId('tab-config').click();
    await waitFor(async () => (await page.getByTestId('check-state').textContent()) === 'check passes', { timeoutMs: 20_000, what: 'the file checks' });
    expect(await page.getByTestId('apply-reason').count()).toBe(0);
    await page.getByTestId('config-text').fill('gateway: { name: 7 }\nbogus: true\n');
    await waitFor(async () => (await page.getByTestId('apply-reason').textContent())?.includes('the check finds'), { timeoutMs: 20_000, what: 'the check as the reason' });
    expect(await page.getByTestId('apply-config').isDisabled()).toBe(true);
  });
});
