import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_FIXTURE, startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { CATALOG_EXIT, catalogExit, compareCatalog, renderCatalogReport } from '../../src/commands/catalog-check.js';
import { runCli } from '../helpers/cli.js';

/**
 * `edge-gateway check --online` through the CLI against the real emulator. The fixture is the demo
 * one plus enough machines and variables that both lists take several pages (the service gives at
 * most 50 per page), and the variables the config maps include one on the last page.
 */

const EXTRA_VARIABLES = Array.from({ length: 70 }, (_, i) => ({ id: `mvr_zz_extra_${String(i + 1).padStart(3, '0')}`, name: `extra ${i + 1}`, machine: 'mch_gen1', unit: '' }));
const EXTRA_MACHINES = Array.from({ length: 50 }, (_, i) => ({ id: `mch_zz_${String(i + 1).padStart(2, '0')}`, name: `Spare ${i + 1}`, site: 'ste_demo1' }));
const FIXTURE = { ...DEMO_FIXTURE, machines: [...DEMO_FIXTURE.machines, ...EXTRA_MACHINES], machine_variables: [...DEMO_FIXTURE.machine_variables, ...EXTRA_VARIABLES] };
/** Variables of org_demo: 40 of the demo fixture and the 70 extra ones; machines: 6 and 50. */
const ORG_VARIABLES = 110;
const ORG_MACHINES = 56;

let emu: EmulatorHandle;
let dir: string;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, fixture: FIXTURE });
  dir = mkdtempSync(join(tmpdir(), 'gw-check-online-'));
});
afterAll(async () => {
  await emu?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Options {
  baseUrl?: string;
  authUrl?: string;
  organisation?: string;
  auth?: string;
  extraJsonValue?: string;
  /** `unit` of the mapping of mvr_packer1_rate (the catalog gives parts/min). */
  rateUnit?: string;
}

let files = 0;
function configFile(o: Options = {}): string {
  const extra = o.extraJsonValue ? `, { path: extra, variable: ${o.extraJsonValue} }` : '';
  const text = `
service:
  base_url: ${o.baseUrl ?? emu.baseUrl}
  auth_url: ${o.authUrl ?? emu.authUrl}
  organisation_id: ${o.organisation ?? 'org_demo'}
  auth: ${o.auth ?? '{ mode: client_credentials, client_id: demo-gateway }'}
generator:
  - { name: gen, variables: [mvr_gen_1, mvr_zz_extra_070] }
mqtt:
  connections:
    - name: packer
      url: mqtt://127.0.0.1:1883
      subscriptions:
        - { topic: plant/packer1, format: json, values: [ { path: rate, variable: mvr_packer1_rate${o.rateUnit ? `, unit: "${o.rateUnit}"` : ''} }${extra} ] }
annotations:
  site: { external_id: plant-demo }
  machines: [ { key: press1, machine_variables: [mvr_press1_state] } ]
  detectors: [ { machine: press1, variable: mvr_press1_state, condition: "== 0" } ]
`;
  const f = join(dir, `gw-${++files}.yaml`);
  writeFileSync(f, text);
  return f;
}

const goodSecret = { GATEWAY_CLIENT_SECRET: 'demo-secret' };

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('edge-gateway check --online', () => {
  it('walks every page of both lists and marks each mapped variable ok, listing the unmapped ones; exit 0', async () => {
    const before = emu.stats().requests;
    const r = await runCli(['check', '--config', configFile(), '--online'], { env: goodSecret });
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain('configuration is valid');
    expect(r.out).toContain('credentials   ok: token issued to client demo-gateway (secret from env GATEWAY_CLIENT_SECRET)');
    expect(r.out).toContain(`organisation  ${ORG_MACHINES} machines (2 pages), ${ORG_VARIABLES} machine variables (3 pages)`);
    // On the last page of variables; the machine name comes from the machine list.
    expect(r.out).toMatch(/^ok\s+mvr_zz_extra_070\s+Synthetic generator\s+generator\[0\]\.variables\[1\]$/m);
    expect(r.out).toMatch(/^ok\s+mvr_packer1_rate\s+Packer 1 \(MQTT JSON\)\s+mqtt\.connections\[0\]\.subscriptions\[0\]\.values\[0\]\.variable$/m);
    // One variable used by two settings lists both.
    expect(r.out).toMatch(/^ok\s+mvr_press1_state\s+Press 1 \(OPC UA\)\s+annotations\.machines\[0\]\.machine_variables\[0\], annotations\.detectors\[0\]\.variable$/m);
    expect(r.out).toMatch(/^unmapped\s+mvr_oven1_gas_flow\s+Oven 1 \(Sparkplug B\)\s+-$/m);
    expect(r.out).not.toMatch(/^missing/m);
    // Another organisation's variables never show.
    expect(r.out).not.toContain('mvr_other1_speed');
    const unmapped = r.out.split('\n').filter((l) => l.startsWith('unmapped')).length;
    expect(unmapped).toBe(ORG_VARIABLES - 4);
    expect(r.out).toContain(`mapped 4 machine variables: 4 found, none missing; ${ORG_VARIABLES - 4} of the organisation's ${ORG_VARIABLES} machine variables not mapped`);
    const after = emu.stats().requests;
    const delta = (route: string) => (after[route]?.['200'] ?? 0) - (before[route]?.['200'] ?? 0);
    expect(delta('GET /machine-variables')).toBe(3);
    expect(delta('GET /machines')).toBe(2);
  });

  it('names the settings that use a missing variable; exit 3', async () => {
    const r = await runCli(['check', '--config', configFile({ extraJsonValue: 'mvr_packer1_typo' }), '--online'], { env: goodSecret });
    expect(r.code).toBe(3);
    const lines = r.out.split('\n');
    // Missing rows come first, before the ok ones.
    const firstRow = lines.findIndex((l) => /^(ok|missing|unmapped)\s/.test(l));
    expect(lines[firstRow]).toMatch(/^missing\s+mvr_packer1_typo\s+-\s+mqtt\.connections\[0\]\.subscriptions\[0\]\.values\[1\]\.variable$/);
    expect(r.out).toContain('mapped 5 machine variables: 4 found, 1 MISSING in the organisation');
  });

  it('a mapping\'s unit other than the catalog\'s is named with its setting; exit 5', async () => {
    const r = await runCli(['check', '--config', configFile({ rateUnit: 'parts/h' }), '--online'], { env: goodSecret });
    expect(r.code).toBe(5);
    expect(r.out).toMatch(/^unit_mismatch\s+mvr_packer1_rate\s+Packer 1 \(MQTT JSON\)\s+parts\/h \(catalog: parts\/min\)\s+mqtt\.connections/m);
    expect(r.out).toContain('4 found, none missing, 1 with a UNIT other than the catalog\'s');
    expect(r.out).toContain('mqtt.connections[0].subscriptions[0].values[0].unit: "parts/h", but the organisation\'s catalog gives mvr_packer1_rate the unit "parts/min"');
  });

  it('compares units as written; the same unit is ok; a missing variable decides the exit code first', () => {
    const catalog = { machines: new Map([['mch_p', 'Press']]), variables: [{ id: 'mvr_a', name: 'a', machineId: 'mch_p', unit: '°C' }, { id: 'mvr_b', name: 'b', machineId: 'mch_p', unit: '' }], pages: { machines: 1, machine_variables: 1 } };
    const mapped = (units: Array<[string, string]>, extra: string[] = []) => ({
      variables: new Map([['mvr_a', ['x.variable']], ['mvr_b', ['y.variable']], ...extra.map((id): [string, string[]] => [id, ['z.variable']])]),
      openEnded: [],
      units: new Map(units.map(([id, unit]) => [id, [{ unit, setting: `${id}.unit` }]])),
    });
    const same = compareCatalog(mapped([['mvr_a', '°C'], ['mvr_b', 'bar']]), catalog);
    expect(same.counts).toMatchObject({ ok: 2, unit_mismatch: 0 });
    expect(catalogExit(same)).toBe(CATALOG_EXIT.ok);
    expect(renderCatalogReport(same)).toMatch(/^ok\s+mvr_a\s+Press\s+°C\s+x\.variable$/m);
    const other = compareCatalog(mapped([['mvr_a', 'degC']]), catalog);
    expect(other.rows[0]).toMatchObject({ state: 'unit_mismatch', variable: 'mvr_a', unit: 'degC', catalogUnit: '°C', unitSettings: ['mvr_a.unit'] });
    expect(catalogExit(other)).toBe(CATALOG_EXIT.unit_mismatch);
    expect(catalogExit(compareCatalog(mapped([['mvr_a', 'degC']], ['mvr_missing']), catalog))).toBe(CATALOG_EXIT.missing);
  });

  it('reports refused client credentials by setting and secret origin, never the secret; exit 4', async () => {
    const before = emu.stats().requests['GET /machine-variables'];
    const secret = 'S3CRET-wrong-7c1d';
    const r = await runCli(['check', '--config', configFile(), '--online'], { env: { GATEWAY_CLIENT_SECRET: secret } });
    expect(r.code).toBe(4);
    expect(r.err).toContain('the token service refused the client credentials (HTTP 401)');
    expect(r.err).toContain('service.auth.client_id (demo-gateway) and service.auth.client_secret (from env GATEWAY_CLIENT_SECRET)');
    expect(r.out + r.err).not.toContain(secret);
    // No list was asked for with refused credentials.
    expect(emu.stats().requests['GET /machine-variables']).toEqual(before);
  });

  it('reports a refused API key by setting; exit 4', async () => {
    const secret = 'S3CRET-apikey-5e2a';
    const r = await runCli(['check', '--config', configFile({ auth: '{ mode: api_key }' }), '--online'], { env: { GATEWAY_API_KEY: secret } });
    expect(r.code).toBe(4);
    expect(r.err).toMatch(/GET \/machines: the tracking service refused the credential \(HTTP 401.*\)\. Check service\.auth\.api_key \(from env GATEWAY_API_KEY\)/);
    expect(r.out + r.err).not.toContain(secret);
  });

  it('reports an organisation the credentials may not use; exit 4', async () => {
    const r = await runCli(['check', '--config', configFile({ organisation: 'org_other' }), '--online'], { env: goodSecret });
    expect(r.code).toBe(4);
    expect(r.err).toContain('the tracking service refuses organisation org_other for these credentials (HTTP 403');
    expect(r.err).toContain('Check service.organisation_id');
  });

  it('reports an unreachable service with the settings to check; exit 1', async () => {
    const port = await freePort();
    const r = await runCli(['check', '--config', configFile({ baseUrl: `http://127.0.0.1:${port}/tracking/v1`, authUrl: `http://127.0.0.1:${port}` }), '--online'], { env: goodSecret });
    expect(r.code).toBe(1);
    expect(r.err).toContain(`token endpoint http://127.0.0.1:${port}/oauth2/token unreachable`);
    expect(r.err).toContain('ECONNREFUSED');
    expect(r.err).toContain(`check service.auth_url (http://127.0.0.1:${port})`);
  });

  it('gives up on a list that keeps failing, after retrying; exit 1', async () => {
    emu.setFaults({ error_rate: 1, status: 503, paths: ['/machine-variables'] });
    try {
      const r = await runCli(['check', '--config', configFile(), '--online'], { env: goodSecret });
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/GET \/machine-variables: the tracking service failed \(HTTP 503/);
    } finally {
      emu.clearFaults();
    }
    expect(emu.stats().requests['GET /machine-variables']?.['503']).toBeGreaterThanOrEqual(3);
  });
});
