import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEMO_FIXTURE } from '../../src/emulator/demo-fixture.js';
import { generateFixture, loadFixture, validateFixture } from '../../src/emulator/index.js';
import { client, getToken, item, withEmulator } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'emulator-fixture-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const minimal = {
  clients: [{ client_id: 'c', client_secret: 's', organisations: ['org_a'] }],
  organisations: [{ id: 'org_a', name: 'A' }],
  sites: [{ id: 'ste_a', external_id: 'a', organisation: 'org_a' }],
  machines: [{ id: 'mch_a', name: 'M', site: 'ste_a' }],
  machine_variables: [{ id: 'mvr_a', name: 'V', machine: 'mch_a', unit: 'bar' }],
};

function problems(input: unknown): string[] {
  try {
    validateFixture(input);
  } catch (err) {
    return (err as { problems: string[] }).problems;
  }
  return [];
}

describe('fixture', () => {
  it('the demo fixture is valid and indexed', () => {
    const f = loadFixture();
    expect(f.variables.size).toBe(DEMO_FIXTURE.machine_variables.length);
    expect(f.variables.get('mvr_press1_speed')).toMatchObject({ machineId: 'mch_press1', siteId: 'ste_demo1', organisationId: 'org_demo' });
    expect(f.organisations.get('org_demo')!.sitesByExternalId.get('plant-demo')!.id).toBe('ste_demo1');
  });

  it('loads JSON and YAML files', async () => {
    const json = join(dir, 'f.json');
    writeFileSync(json, JSON.stringify(minimal));
    const yaml = join(dir, 'f.yaml');
    writeFileSync(yaml, `organisations:\n  - {id: org_y, name: Y}\nsites:\n  - {id: ste_y, external_id: null, organisation: org_y}\nmachines:\n  - {id: mch_y, name: M, site: ste_y}\nmachine_variables:\n  - {id: mvr_y, name: V, machine: mch_y}\napi_keys:\n  - {key: k, organisation: org_y, sites: [ste_y]}\n`);
    expect(loadFixture(json).variables.has('mvr_a')).toBe(true);
    const y = loadFixture(yaml);
    expect(y.variables.get('mvr_y')!.unit).toBe('');
    const em = await withEmulator({ fixture: yaml });
    try {
      expect((await client(em, 'k', 'org_y').batch([item('mvr_y', '2026-01-01T00:00:00.000Z', 1)])).status).toBe(200);
    } finally {
      await em.close();
    }
  });

  it('names the file, path and value of every problem', () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"organisations": [');
    expect(() => loadFixture(bad)).toThrow(/^fixture .*bad\.json: not valid JSON/);
    expect(() => loadFixture(join(dir, 'missing.yaml'))).toThrow(/cannot be read/);
    expect(problems({})).toEqual(['fixture: organisations: required setting is missing']);
    expect(problems({ ...minimal, sites: [{ id: 'ste_a', external_id: 'a', organisation: 'org_a', region: 'eu' }] })).toEqual(['fixture: sites[0].region: unknown setting']);
    expect(
      [...problems({
        ...minimal,
        clients: [{ client_id: 'c', client_secret: 's', organisations: ['org_x'] }],
        api_keys: [{ key: 'k', organisation: 'org_a', sites: ['ste_zz'] }],
        machines: [...minimal.machines, { id: 'mch_b', name: 'B', site: 'ste_nope' }, { id: 'mch_a', name: 'dup', site: 'ste_a' }],
        machine_variables: [...minimal.machine_variables, { id: 'mvr_b', name: 'B', machine: 'mch_nope', unit: '' }],
      })].sort(),
    ).toEqual([
      'fixture: machines[1].site: unknown site "ste_nope"',
      'fixture: machines[2].id: duplicate id "mch_a"',
      'fixture: machine_variables[1].machine: unknown machine "mch_nope"',
      'fixture: clients[0].organisations[0]: unknown organisation "org_x"',
      'fixture: api_keys[0].sites[0]: unknown site "ste_zz"',
    ].sort());
  });

  it('an API key site must belong to the key organisation; site external ids are unique per organisation', () => {
    expect(
      problems({
        ...minimal,
        organisations: [...minimal.organisations, { id: 'org_b', name: 'B' }],
        sites: [...minimal.sites, { id: 'ste_b', external_id: 'b', organisation: 'org_b' }, { id: 'ste_a2', external_id: 'a', organisation: 'org_a' }],
        api_keys: [{ key: 'k', organisation: 'org_a', sites: ['ste_b'] }],
      }),
    ).toEqual(['fixture: sites[2].external_id: "a" is already used in organisation "org_a"', 'fixture: api_keys[0].sites[0]: site "ste_b" belongs to organisation "org_b", not "org_a"']);
  });

  it('startEmulator refuses an invalid fixture', async () => {
    await expect(withEmulator({ fixture: { organisations: [] } as never })).rejects.toThrow(/organisations: needs at least 1 entry/);
  });

  it('generateFixture builds large fixtures whose lookups are Map hits', () => {
    const t0 = performance.now();
    const f = generateFixture({ organisations: 2, sitesPerOrganisation: 3, machinesPerSite: 10, variablesPerMachine: 100 });
    const idx = loadFixture(f);
    expect(idx.variables.size).toBe(6000);
    expect(idx.organisations.get('org_1')!.variables).toHaveLength(3000);
    expect(idx.organisations.get('org_1')!.variables[0].id).toBe('mvr_1_1_01_001');
    expect(idx.clients.get('client-org_1')!.secret).toBe('secret-org_1');
    expect(performance.now() - t0).toBeLessThan(5000);
  });
});
