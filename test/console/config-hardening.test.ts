import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { stringify as toYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { createLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { testConfigInput } from '../helpers/gateway.js';
import { startRecordingBroker, type RecordingBroker } from '../helpers/recording-broker.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 21 §3, the console's configuration editor against real gateways over HTTP and a real MQTT
 * broker (aedes) standing in for "any host": what Apply may send where, what the editor shows,
 * what a dry-run check leaves behind in the log redaction, and how the file is written.
 */

const TOKEN = 'config-hardening-token-0123456789';
const API_KEY = 'the-api-key-9f8e7d6c5b4a';
const TLS_PASSPHRASE = 'tls-passphrase-literal-1a2b3c';
const BROKER_PASSWORD = 'broker-password-literal-4d5e6f';

let emu: EmulatorHandle;
let dir: string;
const cleanup: Array<() => Promise<void> | void> = [];

type Broker = RecordingBroker;

async function startBroker(): Promise<Broker> {
  const broker = await startRecordingBroker();
  cleanup.push(() => broker.close());
  return broker;
}

/** Log lines of a gateway, as written. */
function captureLog(): { logger: ReturnType<typeof createLogger>; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter((l) => l.length > 0));
      cb();
    },
  });
  return { logger: createLogger({ level: 'info', format: 'json', destination }), lines };
}

interface Gw {
  handle: GatewayHandle;
  file: string;
  lines: string[];
}

/** A gateway started from a file, as `run` starts it, with its log captured. */
async function startFromFile(name: string, sections: Record<string, unknown>, text?: (yaml: string) => string): Promise<Gw> {
  const sub = join(dir, name);
  const file = join(dir, `${name}.yaml`);
  const yaml = toYaml(testConfigInput(emu, sub, { gateway: { name, data_dir: join(sub, 'data'), status_interval: 0 }, log: { level: 'info', format: 'json' }, ...sections }));
  writeFileSync(file, text ? text(yaml) : yaml);
  const { logger, lines } = captureLog();
  const handle = await startGateway(loadConfigFile(file).config, { configPath: file, logger });
  cleanup.push(() => handle.close());
  return { handle, file, lines };
}

function call(gw: Gw, method: string, path: string, body?: unknown, token?: string) {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token) headers.authorization = `Bearer ${token}`;
  return fetch(`${gw.handle.httpUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
}

const mqttConnection = (name: string, url: string, password: unknown) => `  connections:\n    - name: ${name}\n      url: ${url}\n      username: gw\n      password: ${typeof password === 'string' ? JSON.stringify(password) : `{ ${Object.entries(password as Record<string, string>).map(([k, v]) => `${k}: ${v}`).join(', ')} }`}\n      reconnect: { initial: 100ms, max: 500ms }\n      subscriptions:\n        - { topic: "plant/${name}/#", format: number, variable: mvr_${name.replace(/-/g, '_')} }\n`;

let brokerA: Broker;
let brokerB: Broker;
let open: Gw; // loopback, no api_token
let guarded: Gw; // loopback, api_token

beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'config-hardening-'));
  brokerA = await startBroker();
  brokerB = await startBroker();
  process.env.H21_API_KEY = API_KEY;
  process.env.H21_LATER_UNSET = 'set-at-start-value-77';
  // The open gateway: an MQTT connection with a secret written in the file, and one whose TLS key
  // passphrase is written in the file (its broker is not there; it retries in the background).
  open = await startFromFile('open', { http: { enabled: true, port: 0 } }, (y) =>
    `# Line 3 gateway: keep this comment\n${y}mqtt:\n${mqttConnection('line', brokerA.url, BROKER_PASSWORD)}    - name: secure\n      url: mqtts://127.0.0.1:9\n      tls: { passphrase: "${TLS_PASSPHRASE}" }   # the key's passphrase\n      reconnect: { initial: 5s, max: 30s }\n      subscriptions: [ { topic: "plant/secure/#", format: number, variable: mvr_secure } ]\n`,
  );
  guarded = await startFromFile('guarded', { http: { enabled: true, port: 0, api_token: TOKEN } }, (y) => `${y}mqtt:\n${mqttConnection('line', brokerA.url, { env: 'H21_LATER_UNSET' })}`);
  await waitFor(() => brokerA.passwords.includes(BROKER_PASSWORD), { timeoutMs: 30_000, what: 'the open gateway connected to broker A' });
}, 90_000);

afterAll(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
  await emu?.close();
  delete process.env.H21_API_KEY;
  delete process.env.H21_LATER_UNSET;
  rmSync(dir, { recursive: true, force: true });
});

describe('Apply: secrets go nowhere new without a token and a confirmed diff', () => {
  it('without an api_token, refuses a new connection carrying an {env} or {file} secret, and writes nothing', async () => {
    const before = readFileSync(open.file, 'utf8');
    const secretFile = join(dir, 'some-secret.txt');
    writeFileSync(secretFile, 'contents-of-any-file\n');
    for (const password of [{ env: 'H21_API_KEY' }, { file: secretFile }]) {
      const next = before.replace('  connections:\n', mqttConnection('exfil', brokerB.url, password));
      const res = await call(open, 'PUT', '/console/api/config', { yaml: next });
      const body = (await res.json()) as { error: { code: string; message: string }; secret_changes: Array<{ setting: string; destination: string; reason: string }> };
      expect(res.status).toBe(403);
      expect(body.error.code).toBe('secret_change_refused');
      expect(body.secret_changes).toEqual([{ setting: 'mqtt.connections[0].password', secret: 'env' in password ? 'env H21_API_KEY' : `file ${secretFile}`, destination: brokerB.url, reason: 'new secret reference' }]);
      expect(body.error.message).toContain('http.api_token is not set');
    }
    expect(readFileSync(open.file, 'utf8')).toBe(before);
    expect(open.handle.sources.map((s) => s.name)).not.toContain('exfil');
    expect(brokerB.passwords).toEqual([]);
  });

  it('without an api_token, refuses pointing a secret written in the file at another host', async () => {
    const before = readFileSync(open.file, 'utf8');
    const shown = ((await (await call(open, 'GET', '/console/api/config')).json()) as { yaml: string }).yaml;
    expect(shown).toContain(brokerA.url);
    // The text as written, and the text as the editor shows it (the secret hidden, its placeholder moved along).
    for (const text of [before, shown]) {
      const res = await call(open, 'PUT', '/console/api/config', { yaml: text.replace(brokerA.url, brokerB.url) });
      expect(res.status).toBe(403);
      const body = (await res.json()) as { secret_changes: unknown[] };
      expect(body.secret_changes).toEqual([{ setting: 'mqtt.connections[0].password', secret: 'a secret written in the file', destination: brokerB.url, reason: 'existing secret sent to a new destination' }]);
    }
    expect(readFileSync(open.file, 'utf8')).toBe(before);
    expect(brokerB.passwords).toEqual([]);
  });

  it('with an api_token, answers 409 with the diff, and applies only with the confirmation of that diff', async () => {
    const before = readFileSync(guarded.file, 'utf8');
    const next = before.replace('  connections:\n', mqttConnection('added', brokerB.url, { env: 'H21_API_KEY' }));
    const first = await call(guarded, 'PUT', '/console/api/config', { yaml: next }, TOKEN);
    expect(first.status).toBe(409);
    const shown = (await first.json()) as { error: { code: string }; diff: string; confirm: string; secret_changes: unknown[] };
    expect(shown.error.code).toBe('confirm_required');
    expect(shown.diff).toContain('+      password: { env: H21_API_KEY }');
    expect(shown.diff).toContain(`+      url: ${brokerB.url}`);
    expect(shown.secret_changes).toEqual([{ setting: 'mqtt.connections[0].password', secret: 'env H21_API_KEY', destination: brokerB.url, reason: 'new secret reference' }]);
    expect(readFileSync(guarded.file, 'utf8')).toBe(before);
    // The preview says the same without trying.
    const preview = (await (await call(guarded, 'POST', '/console/api/config/preview', { yaml: next }, TOKEN)).json()) as { confirm: string; refused: boolean };
    expect(preview).toMatchObject({ confirm: shown.confirm, refused: false });
    // A confirmation of another diff is not one of this diff.
    const wrong = await call(guarded, 'PUT', '/console/api/config', { yaml: next, confirm: '0123456789abcdef' }, TOKEN);
    expect(wrong.status).toBe(409);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe('diff_changed');
    expect(brokerB.passwords).toEqual([]);
    const ok = await call(guarded, 'PUT', '/console/api/config', { yaml: next, confirm: shown.confirm }, TOKEN);
    expect(ok.status).toBe(200);
    expect(readFileSync(guarded.file, 'utf8')).toBe(next);
    await waitFor(() => brokerB.passwords.includes(API_KEY), { timeoutMs: 30_000, what: 'the confirmed connection at broker B' });
  });

  it('validates as run does: a secret whose variable is not set is refused, and the file is kept', async () => {
    const before = readFileSync(guarded.file, 'utf8');
    delete process.env.H21_LATER_UNSET;
    try {
      const next = `${before}generator:\n  - { name: gen-unset, variables: [mvr_gen_1], interval: 1s }\n`;
      const res = await call(guarded, 'PUT', '/console/api/config', { yaml: next }, TOKEN);
      expect(res.status).toBe(400);
      const body = (await res.json()) as { problems: Array<{ path: string; line: number; message: string }> };
      const line = next.split('\n').findIndex((l) => l.includes('password: { env: H21_LATER_UNSET }')) + 1;
      expect(body.problems).toContainEqual({ path: 'mqtt.connections[1].password', line, message: 'mqtt.connections[1].password: environment variable H21_LATER_UNSET is not set (nor H21_LATER_UNSET_FILE)' });
      expect(readFileSync(guarded.file, 'utf8')).toBe(before);
      expect(guarded.handle.sources.map((s) => s.name)).not.toContain('gen-unset');
    } finally {
      process.env.H21_LATER_UNSET = 'set-at-start-value-77';
    }
  });
});

describe('what the editor shows', () => {
  it('hides every secret written in the file, the TLS passphrase too, and keeps them when the text is applied back', async () => {
    const shown = ((await (await call(open, 'GET', '/console/api/config')).json()) as { yaml: string }).yaml;
    for (const secret of [TLS_PASSPHRASE, BROKER_PASSWORD, 'demo-secret']) expect(shown).not.toContain(secret);
    expect(shown).toMatch(/tls: \{ passphrase: "\(hidden secret [0-9a-f]{12}, kept on Apply\)" \} {3}# the key's passphrase/);
    const before = readFileSync(open.file, 'utf8');
    const next = `${shown}generator:\n  - { name: gen-round-trip, variables: [mvr_gen_1], interval: 1s }\n`;
    const res = await call(open, 'PUT', '/console/api/config', { yaml: next });
    expect(res.status).toBe(200);
    // The file is the old one plus the new lines: secrets, comments and formatting as they were.
    expect(readFileSync(open.file, 'utf8')).toBe(`${before}generator:\n  - { name: gen-round-trip, variables: [mvr_gen_1], interval: 1s }\n`);
    expect(open.handle.sources.map((s) => s.name)).toContain('gen-round-trip');
  });

  it('on 0.0.0.0 without an api_token, refuses reads of the configuration and variables, and says so at start', async () => {
    const wide = await startFromFile('wide', { http: { enabled: true, host: '0.0.0.0', port: 0 } });
    for (const path of ['/console/api/config', '/console/api/variables', '/console/api/variables/mvr_gen_1', '/console/api/events']) {
      const res = await call(wide, 'GET', path);
      expect({ path, status: res.status }).toEqual({ path, status: 403 });
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('reads_disabled');
    }
    expect(wide.lines.some((l) => l.includes('http.api_token is not set: every write, and the console\'s reads of the configuration and of variable values, are refused'))).toBe(true);
  });
});

describe('the dry-run check and the log', () => {
  it('registers no secret of a checked text: a password of "msg":" leaves later log lines JSON', async () => {
    const base = readFileSync(open.file, 'utf8');
    const many = Array.from({ length: 300 }, (_, i) => `    - { name: c${i}, url: "mqtt://127.0.0.1:1", password: "dry-run-secret-${i}-x", subscriptions: [ { topic: "t/${i}", format: number, variable: mvr_c${i} } ] }`).join('\n');
    const text = base.replace('mqtt:\n  connections:\n', `mqtt:\n  connections:\n    - { name: quote, url: "mqtt://127.0.0.1:1", password: '"msg":"', subscriptions: [ { topic: "q/#", format: number, variable: mvr_q } ] }\n${many}\n`);
    const res = await call(open, 'POST', '/console/api/config/check', { yaml: text });
    expect(res.status).toBe(200);
    const from = open.lines.length;
    open.handle.logger.info({ note: 'dry-run-secret-7-x stays readable' }, 'after the check');
    const after = open.lines.slice(from);
    expect(after).toHaveLength(1);
    const line = JSON.parse(after[0]) as { msg: string; note: string };
    expect(line.msg).toBe('after the check');
    expect(line.note).toBe('dry-run-secret-7-x stays readable');
  });

  it('an applied secret of "msg":" is redacted inside strings, and every line stays JSON', async () => {
    const next = readFileSync(guarded.file, 'utf8').replace('  connections:\n', `  connections:\n    - { name: quote, url: "${brokerA.url}", username: gw, password: '"msg":"', subscriptions: [ { topic: "q/#", format: number, variable: mvr_q } ] }\n`);
    const res = await call(guarded, 'PUT', '/console/api/config', { yaml: next }, TOKEN);
    expect(res.status).toBe(200);
    await waitFor(() => brokerA.passwords.includes('"msg":"'), { timeoutMs: 30_000, what: 'the applied connection' });
    const from = guarded.lines.length;
    guarded.handle.logger.info({ note: 'a peer echoed "msg":" back', pid2: 1234 }, 'echo');
    const line = JSON.parse(guarded.lines[from]) as { msg: string; note: string };
    expect(line.msg).toBe('echo');
    expect(line.note).toBe('a peer echoed [redacted] back');
    for (const l of guarded.lines) expect(() => JSON.parse(l)).not.toThrow();
  });
});

describe('writing the file', () => {
  it('keeps the file mode and owner', async () => {
    chmodSync(open.file, 0o600);
    const owner = process.getuid?.() === 0 ? 4321 : (process.getuid?.() ?? 0);
    if (process.getuid?.() === 0) chownSync(open.file, owner, owner);
    const res = await call(open, 'PUT', '/console/api/config', { yaml: `${readFileSync(open.file, 'utf8')}# applied from the console\n` });
    expect(res.status).toBe(200);
    const st = statSync(open.file);
    expect((st.mode & 0o777).toString(8)).toBe('600');
    expect(st.uid).toBe(owner);
    expect(readFileSync(open.file, 'utf8')).toContain(TLS_PASSPHRASE);
  });
});
