import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { stringify as toYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { silentLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { testConfigInput } from '../helpers/gateway.js';
import { startRecordingBroker, type RecordingBroker } from '../helpers/recording-broker.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 21 §3 in the browser: the configuration editor never receives a secret written in the file
 * (the TLS key passphrase included), and Apply shows the diff and the secrets an edit sends
 * somewhere new, and applies only after the engineer confirms that diff.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

const TOKEN = 'config-editor-token-0123456789';
const TLS_PASSPHRASE = 'ui-tls-passphrase-5x6y7z';
const BROKER_PASSWORD = 'ui-broker-password-8q9r';
const UI_KEY = 'ui-env-secret-value-3c4d';

let emu: EmulatorHandle;
let gw: GatewayHandle;
let brokerA: RecordingBroker;
let brokerB: RecordingBroker;
let browser: Browser;
let dir: string;
let file: string;

beforeAll(async () => {
  if (!available) return;
  emu = await startEmulator({ port: 0 });
  brokerA = await startRecordingBroker();
  brokerB = await startRecordingBroker();
  process.env.H21_UI_KEY = UI_KEY;
  dir = mkdtempSync(join(tmpdir(), 'config-editor-'));
  file = join(dir, 'gateway.yaml');
  const yaml = toYaml(testConfigInput(emu, dir, { http: { enabled: true, port: 0, api_token: TOKEN, require_token_for_reads: false } }));
  writeFileSync(
    file,
    `${yaml}mqtt:
  connections:
    - name: line
      url: ${brokerA.url}
      username: gw
      password: ${BROKER_PASSWORD}   # written in the file
      subscriptions: [ { topic: "plant/line/#", format: number, variable: mvr_line } ]
    - name: secure
      url: mqtts://127.0.0.1:9
      tls: { passphrase: "${TLS_PASSPHRASE}" }
      reconnect: { initial: 5s, max: 30s }
      subscriptions: [ { topic: "plant/secure/#", format: number, variable: mvr_secure } ]
`,
  );
  gw = await startGateway(loadConfigFile(file).config, { configPath: file, logger: silentLogger() });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await gw?.close();
  await brokerA?.close();
  await brokerB?.close();
  await emu?.close();
  delete process.env.H21_UI_KEY;
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!available)('the configuration editor', () => {
  it('never shows a secret, shows the diff and the secret sent somewhere new, and applies after confirmation', async () => {
    const page = await (await browser.newContext()).newPage();
    const bodies: string[] = [];
    page.on('response', (r) => {
      if (r.url().includes('/console/api/')) void r.text().then((t) => bodies.push(t), () => undefined);
    });
    await page.goto(`${gw.httpUrl}/console#/build`);
    // The editor is mounted with the page and checks the file at once; the check is a write
    // (POST), so the page asks for the token first.
    await page.getByTestId('token-input').fill(TOKEN);
    await page.getByTestId('token-save').click();
    await page.getByTestId('tab-config').click();
    const editor = page.getByTestId('config-text');
    await waitFor(async () => (await editor.inputValue()).includes('connections:'), { timeoutMs: 20_000, what: 'the configuration in the editor' });
    const shown = await editor.inputValue();
    expect(shown).not.toContain(TLS_PASSPHRASE);
    expect(shown).not.toContain(BROKER_PASSWORD);
    expect(shown).toMatch(/tls: \{ passphrase: "\(hidden secret [0-9a-f]{12}, kept on Apply\)" \}/);
    expect(shown).toContain('# written in the file');

    await waitFor(async () => (await page.getByTestId('check-state').textContent()) === 'check passes', { timeoutMs: 30_000, what: 'the check of the file to pass' });

    // Add a connection to another broker that carries a secret from the gateway's environment.
    const checked = page.waitForResponse((r) => r.url().endsWith('/console/api/config/check') && (r.request().postData() ?? '').includes('H21_UI_KEY'), { timeout: 30_000 });
    await editor.fill(shown.replace('  connections:\n', `  connections:\n    - name: added\n      url: ${brokerB.url}\n      username: gw\n      password: { env: H21_UI_KEY }\n      subscriptions: [ { topic: "plant/added/#", format: number, variable: mvr_added } ]\n`));
    expect(((await (await checked).json()) as { ok: boolean }).ok).toBe(true);
    await page.getByTestId('apply-config').click();
    await page.getByTestId('config-preview').waitFor({ timeout: 20_000 });
    const changes = await page.getByTestId('secret-changes').textContent();
    expect(changes).toContain('mqtt.connections[0].password: env H21_UI_KEY');
    expect(changes).toContain(brokerB.url);
    const diff = await page.getByTestId('config-diff').textContent();
    expect(diff).toContain('+      password: { env: H21_UI_KEY }');
    expect(diff).not.toContain(TLS_PASSPHRASE);
    expect(readFileSync(file, 'utf8')).not.toContain('name: added');
    expect(brokerB.passwords).toEqual([]);
    await page.getByTestId('confirm-apply').click();
    await waitFor(async () => (await page.getByTestId('apply-note').textContent())?.startsWith(`Written to ${file}`), { timeoutMs: 20_000, what: 'the apply note' });
    await waitFor(() => brokerB.passwords.includes(UI_KEY), { timeoutMs: 30_000, what: 'the added connection at broker B' });
    // The hidden secrets were kept in the file, and none ever reached the browser.
    const written = readFileSync(file, 'utf8');
    expect(written).toContain(`tls: { passphrase: "${TLS_PASSPHRASE}" }`);
    expect(written).toContain(`password: ${BROKER_PASSWORD}   # written in the file`);
    await waitFor(() => bodies.length >= 4, { what: 'responses recorded' });
    for (const b of bodies) for (const secret of [TLS_PASSPHRASE, BROKER_PASSWORD, UI_KEY]) expect(b).not.toContain(secret);
  }, 120_000);
});
