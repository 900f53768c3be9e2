import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { stringify as toYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../src/sim/opcua-server.js';
import { testConfigInput } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { captureLogger } from '../sources/opcua/helpers.js';

/**
 * Issue 24 §3, the OPC UA part of "close the build loop", in headless Chromium against a gateway
 * started from a configuration file. Line 1 (Press 1, anonymous) is already mapped; a second
 * node-opcua server requires a user. The engineer browses it with a user name and password
 * (a wrong one first) over SignAndEncrypt, trusting its certificate from the form, expands the tree
 * one level at a time (no property nodes; units and ranges next to the values), ticks and maps
 * nodes (flags inline: not in the catalog, mapped twice), adds them to the configuration (a new
 * server entry with the user and `password: {env: OPCUA_PASSWORD}`), applies, and sees the values.
 */
const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM) || (process.env.CI ? (() => { throw new Error(`${CHROMIUM} is missing but CI is set`); })() : false);

const TOKEN = 'build-opcua-token-0123456789';
const PASSWORD = 'Commissioner-pw-7f3k9q';
const WRONG = 'Wrong-pw-x81mz4';
const USER = 'commissioner';

let emu: EmulatorHandle;
let line1: OpcuaSimulator;
let line2: OpcuaSimulator;
let gw: GatewayHandle;
let browser: Browser;
let page: Page;
let dir: string;
let file: string;
const log = captureLogger('debug');
const pageErrors: string[] = [];
/** Bodies of the console's API answers, and of the browse requests the page sent. */
const answers: string[] = [];
const browseBodies: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  if (!available) return;
  dir = mkdtempSync(join(tmpdir(), 'build-opcua-'));
  emu = await startEmulator({ port: 0 });
  line1 = await startOpcuaSimulator({ securityModes: ['None'], pkiDir: join(dir, 'line1-pki') });
  line2 = await startOpcuaSimulator({ users: [{ username: USER, password: PASSWORD }], allowAnonymous: false, pkiDir: join(dir, 'line2-pki') });
  // Read by the gateway once the configuration names it (Apply); the browse never uses it.
  process.env.OPCUA_PASSWORD = PASSWORD;
  file = join(dir, 'gateway.yaml');
  const config = testConfigInput(emu, dir, {
    log: { level: 'debug' },
    http: { enabled: true, port: 0, api_token: TOKEN, require_token_for_reads: false },
    opcua: { servers: [{ name: 'press1', endpoint: line1.endpointUrl, publishing_interval: '500ms', nodes: [{ node_id: line1.nsuNodeIds.temperature, variable: 'mvr_press1_temperature' }] }] },
  });
  writeFileSync(file, `# The plant's gateway: line 1 is mapped, line 2 is being commissioned.\n${toYaml(config)}`);
  gw = await startGateway(loadConfigFile(file).config, { configPath: file, logger: log.logger });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  page = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('request', (r) => {
    if (r.url().endsWith('/console/api/opcua/browse')) browseBodies.push(JSON.parse(r.postData() ?? '{}') as Record<string, unknown>);
  });
  page.on('response', (r) => {
    if (r.url().includes('/console/api/')) void r.text().then((t) => answers.push(t), () => undefined);
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await gw?.close();
  await line2?.close();
  await line1?.close();
  await emu?.close();
  delete process.env.OPCUA_PASSWORD;
  if (dir) rmSync(dir, { recursive: true, force: true });
  expect(pageErrors).toEqual([]);
});

const tree = () => page.getByTestId('opcua-tree');

describe.skipIf(!available)('Build → OPC UA: browse with security, map, add, apply', () => {
  it('a wrong password is refused naming the user, never the password; the certificate is trusted from the form', async () => {
    await page.goto(`${gw.httpUrl}/console#/build`);
    // The configuration editor checks the file at once (a POST): the page asks for the token.
    await page.getByTestId('token-input').fill(TOKEN);
    await page.getByTestId('token-save').click();
    await page.getByTestId('opcua-endpoint').fill(line2.endpointUrl);
    await page.getByTestId('opcua-user').fill(USER);
    await page.getByTestId('opcua-password').fill(WRONG);
    await page.getByTestId('opcua-browse').click();
    const refused = await waitFor(() => page.getByTestId('build-error').textContent(), { timeoutMs: 60_000, what: 'the browse error' });
    expect(refused).toMatch(new RegExp(`the OPC UA server ${line2.endpointUrl.replace(/\./g, '\\.')} refused the user "${USER}" \\(BadUserAccessDenied\\): check the user name and its password`));
    expect(refused).not.toContain(WRONG);
    expect(await page.locator('[data-testid="opcua-tree"]').count()).toBe(0);

    // SignAndEncrypt: the console's trust folder does not know the server yet, and says what to do.
    await page.getByTestId('opcua-password').fill(PASSWORD);
    await page.getByTestId('opcua-security-mode').selectOption('SignAndEncrypt');
    await page.getByTestId('opcua-security-policy').selectOption('Aes256_Sha256_RsaPss');
    await page.getByTestId('opcua-browse').click();
    await expect.poll(() => page.getByTestId('build-error').textContent(), { timeout: 60_000 }).toMatch(/is not trusted\. To trust it, move ".*rejected.*\.pem" to ".*console\/pki\/trusted\/certs\/", or tick "Trust the server certificate" and browse again/);
    await page.getByTestId('opcua-trust').check();
    await page.getByTestId('opcua-browse').click();
    await tree().waitFor({ timeout: 60_000 });
    expect(await page.getByTestId('opcua-connected').textContent()).toBe(`${line2.endpointUrl} · SignAndEncrypt/Aes256_Sha256_RsaPss · user ${USER}`);

    // The password went only into the browse requests: not into any answer, not into the log.
    expect(browseBodies.map((b) => b.password)).toEqual([WRONG, PASSWORD, PASSWORD]);
    await waitFor(() => answers.some((a) => a.includes('BadUserAccessDenied')), { what: 'the refusal among the answers' });
    for (const a of answers) for (const secret of [WRONG, PASSWORD]) expect(a).not.toContain(secret);
    const logged = log.text();
    expect(logged).toContain('local API error');
    expect(logged).toContain(`refused the user \\"${USER}\\"`);
    expect(logged).not.toContain(WRONG);
    expect(logged).not.toContain(PASSWORD);
  }, 180_000);

  it('the tree is loaded one level at a time, without property nodes; units and ranges are shown', async () => {
    // The first answer is the children of the Objects folder only.
    expect(browseBodies.at(-1)).toMatchObject({ root: 'i=85', depth: 1 });
    await page.getByTestId('node-Press1').waitFor();
    expect(await page.locator('[data-testid^="node-Press1/"]').count()).toBe(0);
    const before = browseBodies.length;
    await page.getByTestId('expand-Press1').click();
    await page.getByTestId('node-Press1/Temperature').waitFor({ timeout: 60_000 });
    // One request for the expansion, for Press1's children, by the namespace URI.
    expect(browseBodies.slice(before)).toHaveLength(1);
    expect(browseBodies.at(-1)).toMatchObject({ root: 'nsu=urn:edge-gateway:sim:press1;s=Press1', path: 'Press1', depth: 1, user: USER, security_mode: 'SignAndEncrypt' });
    // EngineeringUnits and EURange are properties: shown as the unit and range, not as nodes.
    await expect.poll(() => page.getByTestId('value-Press1/Temperature').textContent()).toMatch(/^Double = [\d.]+ °C {2}\(0 to 200\)$/);
    expect(await page.getByTestId('value-Press1/Pressure').textContent()).toMatch(/ bar {2}\(0 to 400\)$/);
    expect(await tree().textContent()).not.toMatch(/EURange|EngineeringUnits/);
    // An AnalogItem with only properties is a leaf; a historized one has its HA Configuration
    // below it and is both expandable and tickable.
    expect(await page.getByTestId('expand-Press1/TemperatureSetpoint').count()).toBe(0);
    expect(await page.getByTestId('tick-Press1/Temperature').isEnabled()).toBe(true);
    await page.getByTestId('expand-Press1/Temperature').click();
    await page.getByTestId('node-Press1/Temperature/HA Configuration').waitFor({ timeout: 60_000 });
    expect(await tree().textContent()).not.toMatch(/EURange|EngineeringUnits/);
    expect(await page.getByTestId('tick-Press1/RecipeName').isDisabled()).toBe(true); // a String
    // Collapsing keeps what was loaded: no request.
    const loaded = browseBodies.length;
    await page.getByTestId('expand-Press1/Temperature').click();
    await expect.poll(() => page.getByTestId('node-Press1/Temperature/HA Configuration').count()).toBe(0);
    expect(browseBodies.length).toBe(loaded);
  }, 120_000);

  it('flags inline an id already mapped, one chosen twice and one not in the catalog, and counts them on the button', async () => {
    await page.getByTestId('tick-Press1/Temperature').check();
    // Guessed from the catalog (Press 1's), and already mapped by line 1's server in the running configuration.
    await expect.poll(() => page.getByTestId('map-Press1/Temperature').inputValue()).toBe('mvr_press1_temperature');
    await expect.poll(() => page.getByTestId('flag-Press1/Temperature').textContent(), { timeout: 20_000 }).toMatch(/^⚠ already mapped by press1$/);
    await page.getByTestId('tick-Press1/Pressure').check();
    await page.getByTestId('tick-Press1/Speed').check();
    expect(await page.getByTestId('map-Press1/Speed').inputValue()).toBe('mvr_press1_speed');
    expect(await page.getByTestId('flag-Press1/Pressure').count()).toBe(0);
    await page.getByTestId('map-Press1/Speed').fill('mvr_press1_pressure');
    await expect.poll(() => page.getByTestId('flag-Press1/Speed').textContent()).toMatch(/chosen for 2 ticked nodes/);
    expect(await page.getByTestId('flag-Press1/Pressure').textContent()).toMatch(/chosen for 2 ticked nodes/);
    expect(await page.getByTestId('add-opcua').textContent()).toBe('Add 3 nodes to the configuration (3 flagged)');
    await page.getByTestId('map-Press1/Speed').fill('mvr_press2_speed');
    await expect.poll(() => page.getByTestId('flag-Press1/Speed').textContent()).toMatch(/not in the organisation's catalog/);
    expect(await page.getByTestId('flag-Press1/Pressure').count()).toBe(0);
    expect(await page.getByTestId('add-opcua').textContent()).toBe('Add 3 nodes to the configuration (2 flagged)');
    expect(await page.getByTestId('flag-summary').textContent()).toMatch(/2 of 3 mappings flagged/);
    await page.getByTestId('map-Press1/Speed').fill('mvr_press1_speed');
    await expect.poll(() => page.getByTestId('add-opcua').textContent()).toBe('Add 3 nodes to the configuration (1 flagged)');
  }, 60_000);

  it('adds the selection as a new server with its security and user, applies it, and the values arrive', async () => {
    expect(await page.getByTestId('password-hint').textContent()).toMatch(/user commissioner with password: \{env: OPCUA_PASSWORD\}: the password is never written\. Set OPCUA_PASSWORD/);
    await page.getByTestId('opcua-server-name').fill('press2');
    await page.getByTestId('add-opcua').click();
    // The Configuration tab opens with the merged text and the diff of what was added.
    const addedBox = page.getByTestId('added-to-config');
    await expect.poll(() => addedBox.textContent(), { timeout: 20_000 }).toMatch(/Added 2 mappings to opcua\.servers\[1\] \(new\)/);
    expect(await page.getByTestId('added-skipped').textContent()).toMatch(/mvr_press1_temperature is already mapped/);
    const added = (await addedBox.getByTestId('config-diff').textContent())!;
    for (const line of [
      '+    - name: press2',
      `+      endpoint: ${line2.endpointUrl}`,
      '+      security_mode: SignAndEncrypt',
      '+      security_policy: Aes256_Sha256_RsaPss',
      `+        username: ${USER}`,
      '+        password: { env: OPCUA_PASSWORD }',
      '+        - node_id: nsu=urn:edge-gateway:sim:press1;s=Press1.Pressure # Press1/Pressure (Double, bar)',
      '+          variable: mvr_press1_pressure',
      // The server's EngineeringUnits as the node's unit setting.
      '+          unit: bar',
      '+          variable: mvr_press1_speed',
    ])
      expect(added).toContain(line);
    // Back on the tree, an id just added to the text is flagged as mapped there (not applied yet).
    await page.getByTestId('tab-opcua').click();
    await page.getByTestId('tick-Press1/Pressure').check();
    expect(await page.getByTestId('flag-Press1/Pressure').textContent()).toBe('⚠ already mapped in the configuration being edited (added, not applied yet)');
    await page.getByTestId('tick-Press1/Pressure').uncheck();
    await page.getByTestId('tab-config').click();
    const text = await page.getByTestId('config-text').inputValue();
    expect(text).toContain("# The plant's gateway: line 1 is mapped, line 2 is being commissioned.");
    for (const secret of [PASSWORD, WRONG]) expect(text).not.toContain(secret);

    // The gateway's source keeps its own trust folder (per server, under the data directory): the
    // engineer trusts line 2's certificate there, as the source's first error would say.
    const trusted = join(gw.config.gateway.data_dir, 'sources', 'press2', 'opcua', 'pki', 'trusted', 'certs');
    mkdirSync(trusted, { recursive: true });
    copyFileSync(line2.certificateFile, join(trusted, 'line2.pem'));

    await expect.poll(() => page.getByTestId('check-state').textContent(), { timeout: 30_000 }).toBe('check passes');
    await page.getByTestId('apply-config').click();
    await page.getByTestId('config-preview').waitFor({ timeout: 20_000 });
    expect(await page.getByTestId('secret-changes').textContent()).toMatch(/opcua\.servers\[1\]\.user\.password: env OPCUA_PASSWORD/);
    await page.getByTestId('confirm-apply').click();
    await expect.poll(() => page.getByTestId('apply-note').textContent(), { timeout: 30_000 }).toMatch(new RegExp(`^Written to ${file.replace(/[.]/g, '\\.')}`));
    const written = readFileSync(file, 'utf8');
    expect(written).toContain('password: { env: OPCUA_PASSWORD }');
    expect(written).not.toContain(PASSWORD);

    // The gateway reloaded: line 2's values arrive on the Variables page.
    await waitFor(() => gw.status().sources.find((s) => s.name === 'press2')?.state === 'connected', { timeoutMs: 60_000, what: 'press2 connected' });
    await page.getByTestId('nav-variables').click();
    for (const id of ['mvr_press1_pressure', 'mvr_press1_speed']) {
      await waitFor(
        async () => {
          const t = await page.getByTestId(`value-${id}`).textContent({ timeout: 1_000 }).catch(() => null);
          return t && t !== '–' ? t : null;
        },
        { timeoutMs: 60_000, what: `a value of ${id}` },
      );
    }
  }, 180_000);

  it('when the catalog cannot be read, says the ids cannot be checked instead of flagging them', async () => {
    const other = await (await browser.newContext({ viewport: { width: 1440, height: 900 } })).newPage();
    other.on('pageerror', (e) => pageErrors.push(e.message));
    // The gateway's answer when the service cannot be read (console/catalog.ts), for this page only.
    await other.route('**/console/api/catalog', (r) => r.fulfill({ status: 502, json: { error: { code: 'catalog_unavailable', message: 'the tracking service is unreachable' } } }));
    await other.goto(`${gw.httpUrl}/console#/build`);
    await other.getByTestId('token-input').fill(TOKEN);
    await other.getByTestId('token-save').click();
    await expect.poll(() => other.getByTestId('catalog-state').textContent(), { timeout: 20_000 }).toBe(
      "The organisation's catalog could not be read (the tracking service is unreachable): the ids cannot be checked against it; type them.",
    );
    await other.getByTestId('opcua-endpoint').fill(line1.endpointUrl);
    await other.getByTestId('opcua-browse').click();
    await other.getByTestId('expand-Press1').click({ timeout: 60_000 });
    await other.getByTestId('tick-Press1/PartCount').check({ timeout: 60_000 });
    // No catalog to guess from: a placeholder, and no "not in the catalog" flag for it or a typed id.
    expect(await other.getByTestId('map-Press1/PartCount').inputValue()).toBe('mvr_CHANGE_ME_press1_partcount');
    await other.getByTestId('map-Press1/PartCount').fill('mvr_press1_parts_made');
    expect(await other.getByTestId('flag-Press1/PartCount').count()).toBe(0);
    expect(await other.getByTestId('add-opcua').textContent()).toBe('Add 1 node to the configuration');
    await other.close();
  }, 120_000);
});
