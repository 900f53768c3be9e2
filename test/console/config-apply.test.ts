import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify as toYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { silentLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { testConfigInput } from '../helpers/gateway.js';

/**
 * The console's configuration editor over real HTTP: the file is shown with inline secrets hidden,
 * a text with problems is refused naming them by line and nothing is written, and Apply writes the
 * file and reloads the running gateway.
 */
let emu: EmulatorHandle;
let gw: GatewayHandle;
let dir: string;
let file: string;

beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
  dir = mkdtempSync(join(tmpdir(), 'console-apply-'));
  file = join(dir, 'gateway.yaml');
  writeFileSync(file, toYaml(testConfigInput(emu, dir, { http: { enabled: true, port: 0 } })));
  gw = await startGateway(loadConfigFile(file).config, { configPath: file, logger: silentLogger() });
});

afterAll(async () => {
  await gw?.close();
  await emu?.close();
  rmSync(dir, { recursive: true, force: true });
});

const put = (yaml: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) => fetch(`${gw.httpUrl}/console/api/config`, { method: 'PUT', headers, body: JSON.stringify({ yaml }) });

describe('console configuration editor', () => {
  it('shows the file with the inline client secret hidden, and keeps the secret when the hidden text is applied back', async () => {
    const before = readFileSync(file, 'utf8');
    const r = (await (await fetch(`${gw.httpUrl}/console/api/config`)).json()) as { path: string; yaml: string };
    expect(r.path).toBe(file);
    expect(r.yaml).not.toContain('demo-secret');
    expect(r.yaml).toMatch(/client_secret: "\(hidden secret [0-9a-f]{12}, kept on Apply\)"/);
    // Issue 21 §3: the placeholder posted back stands for the secret in the file.
    const res = await put(r.yaml);
    expect(res.status).toBe(200);
    expect(readFileSync(file, 'utf8')).toBe(before);
    // The marker the console showed before is refused, naming the setting.
    const old = await put(r.yaml.replace(/"\(hidden secret [^"]+\)"/, '"(hidden: written in the file)"'));
    expect(old.status).toBe(400);
    expect(((await old.json()) as { problems: Array<{ message: string }> }).problems[0].message).toMatch(/^service\.auth\.client_secret: this hidden secret is not in the configuration file/);
  });

  it('refuses a configuration with problems, by line, and leaves the file as it was', async () => {
    const before = readFileSync(file, 'utf8');
    const bad = before.replace(/flush_interval: \d+/, 'flush_interval: soon');
    const res = await put(bad);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { problems: Array<{ path: string; line: number; message: string }> };
    const line = bad.split('\n').findIndex((l) => l.includes('flush_interval: soon')) + 1;
    expect(body.problems).toContainEqual(expect.objectContaining({ path: 'uplink.flush_interval', line }));
    expect(readFileSync(file, 'utf8')).toBe(before);
    // Writes are JSON only: the guard (src/http/guard.ts) answers 403 to a client that looks like a
    // browser (Node's fetch sends Sec-Fetch-Mode) and 415 to others; either way nothing is written.
    expect([403, 415]).toContain((await put(bad, { 'content-type': 'text/plain' })).status);
    expect(readFileSync(file, 'utf8')).toBe(before);
  });

  it('applies a valid configuration: the file is replaced and the gateway reloads the new source', async () => {
    const next = `${readFileSync(file, 'utf8')}generator:\n  - name: added-from-console\n    variables: [mvr_gen_1]\n    interval: 1s\n`;
    const res = await put(next);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { written: string; changed: string[]; restarted_sources: string[] };
    expect(body.written).toBe(file);
    expect(body.restarted_sources).toContain('added-from-console');
    expect(readFileSync(file, 'utf8')).toBe(next);
    expect(gw.sources.map((s) => s.name)).toContain('added-from-console');
    expect(gw.status().config.reloads_applied).toBe(1);
  });

  it('the preview checks the mappings against the catalog: an id it does not have, a unit other than its own (the same unit passes)', async () => {
    // The console's copy of the catalog: read once (the preview never waits for the service).
    expect((await fetch(`${gw.httpUrl}/console/api/catalog`)).status).toBe(200);
    const base = readFileSync(file, 'utf8');
    const text = `${base}mqtt:\n  connections:\n    - name: packer\n      url: mqtt://127.0.0.1:1\n      subscriptions:\n        - topic: plant/packer1\n          format: json\n          values:\n            - { path: rate, variable: mvr_packer1_rate, unit: parts/h }\n            - { path: temp, variable: mvr_packer1_temperature, unit: °C }\n            - { path: typo, variable: mvr_packer1_rat }\n`;
    const r = (await (await fetch(`${gw.httpUrl}/console/api/config/preview`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ yaml: text }) })).json()) as { ok: boolean; catalog: { read_at: number | null; flags: string[] } };
    expect(r.ok).toBe(true);
    expect(r.catalog.read_at).not.toBeNull();
    expect(r.catalog.flags).toEqual([
      "mqtt.connections[0].subscriptions[0].values[2].variable: mvr_packer1_rat is not in the organisation's catalog: the service will refuse its samples (they are set aside)",
      'mqtt.connections[0].subscriptions[0].values[0].unit: "parts/h", but the organisation\'s catalog gives mvr_packer1_rate the unit "parts/min": check the mapping\'s scale and offset, then its unit',
    ]);
  });
});
