import { describe, expect, it } from 'vitest';
import { parseCondition, holds } from '../../src/annotations/condition.js';
import { contentExternalId, detectorExternalId, newExternalId } from '../../src/annotations/external-id.js';
import { requestBody } from '../../src/annotations/model.js';
import { validateAnnotationInput, type ValidationContext } from '../../src/annotations/validate.js';
import { validateConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/core/errors.js';
import { INVALID_CASES, instant, range, T0, T1 } from './cases.js';

const ctx: ValidationContext = {
  defaultSite: { external_id: 'plant-demo' },
  machines: new Map([['press1', { machineVariables: ['mvr_press1_state'] }]]),
};

describe('annotation validation (§2.3)', () => {
  for (const c of INVALID_CASES) {
    it(`refuses: ${c.name} → ${c.field}`, () => {
      const r = validateAnnotationInput(c.body, ctx);
      expect(r.ok).toBe(false);
      if (r.ok) return;
      const p = r.problems.find((x) => x.field === c.field);
      expect(p, JSON.stringify(r.problems)).toBeDefined();
      if (c.message) expect(p!.message).toMatch(c.message);
    });
  }

  it('reports every problem at once', () => {
    const r = validateAnnotationInput({ type: 'range', started_at: T1, ended_at: T0, text: '', machine_variables: [{ id: 'x' }], external_id: 'a b' }, ctx);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => p.field).sort()).toEqual(['ended_at', 'external_id', 'machine_variables[0].id', 'text']);
  });

  it('accepts an instant: trims text, converts offsets to epoch ms, defaults the site', () => {
    const r = validateAnnotationInput({ type: 'instant', occurred_at: '2026-03-01T09:00:00.123+01:00', text: '  Tool change  ', machine_variables: [{ id: 'mvr_a' }, 'mvr_b'] }, ctx);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.occurredAt).toBe(Date.parse('2026-03-01T08:00:00.123Z'));
    expect(r.value.text).toBe('Tool change');
    expect(r.value.machineVariables).toEqual(['mvr_a', 'mvr_b']);
    expect(r.value.site).toEqual({ external_id: 'plant-demo' });
    expect(r.value.externalId).toBeNull();
  });

  it('accepts exactly 5000 characters, 100 variables, an empty variable list, epoch ms and a 100-character external_id', () => {
    const r = validateAnnotationInput(
      { type: 'range', started_at: 1_767_225_600_000, ended_at: 1_767_225_600_001, text: 'y'.repeat(5000), machine_variables: Array.from({ length: 100 }, (_, i) => ({ id: `mvr_v${i}` })), external_id: 'A-z_0'.repeat(20) },
      ctx,
    );
    expect(r.ok).toBe(true);
    expect(validateAnnotationInput({ ...instant, machine_variables: [] }, ctx).ok).toBe(true);
  });

  it('fills machine_variables from a configured machine', () => {
    const r = validateAnnotationInput({ type: 'instant', occurred_at: T0, text: 'x', machine: 'press1' }, ctx);
    expect(r.ok && r.value.machineVariables).toEqual(['mvr_press1_state']);
    expect(r.ok && r.value.machine).toBe('press1');
  });

  it('sends ISO 8601 UTC with Z and milliseconds, and always the external_id', () => {
    const r = validateAnnotationInput({ ...range, started_at: '2026-03-01T09:00:00+01:00', ended_at: 1_772_355_600_500 }, ctx);
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    const body = requestBody({ ...r.value, externalId: 'gw-1', origin: 'api' });
    expect(body).toEqual({
      type: 'range',
      started_at: '2026-03-01T08:00:00.000Z',
      ended_at: '2026-03-01T09:00:00.500Z',
      text: 'Breakdown',
      machine_variables: [{ id: 'mvr_press1_state' }],
      site: { external_id: 'plant-demo' },
      external_id: 'gw-1',
    });
  });
});

describe('external ids (§2.1)', () => {
  const PATTERN = /^[A-Za-z0-9\-_]+$/;
  it('are prefixed with the gateway name, match the pattern and fit 100 characters', () => {
    const name = 'a'.repeat(40);
    for (const id of [newExternalId(name), detectorExternalId(name, 'press1|mvr_press1_state|== 0', Date.now()), contentExternalId(name, Buffer.from('{}'))]) {
      expect(id.startsWith(`${name}-`)).toBe(true);
      expect(id).toMatch(PATTERN);
      expect(id.length).toBeLessThanOrEqual(100);
    }
    expect(newExternalId('gw')).not.toBe(newExternalId('gw'));
    expect(detectorExternalId('gw', 'r', 5)).toBe(detectorExternalId('gw', 'r', 5));
    expect(contentExternalId('gw', 'a')).toBe(contentExternalId('gw', 'a'));
    expect(contentExternalId('gw', 'a')).not.toBe(contentExternalId('gw', 'b'));
  });
});

describe('detector conditions', () => {
  it('parses and evaluates', () => {
    expect(parseCondition('== 0')).toEqual({ op: '==', value: 0, text: '== 0' });
    expect(parseCondition('0')?.text).toBe('== 0');
    expect(parseCondition('!=1')?.text).toBe('!= 1');
    expect(parseCondition(' >= -2.5 ')?.text).toBe('>= -2.5');
    for (const bad of ['', 'zero', '=> 1', '== ', '== 1 2', '== NaN']) expect(parseCondition(bad)).toBeNull();
    const c = parseCondition('< 2')!;
    expect(holds(c, 1)).toBe(true);
    expect(holds(c, 2)).toBe(false);
    expect(holds(parseCondition('!= 1')!, 2)).toBe(true);
  });
});

describe('annotations config', () => {
  const base = {
    service: { base_url: 'http://127.0.0.1:9/tracking/v1', auth_url: 'http://127.0.0.1:9', organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'gw', client_secret: 'x' } },
  };
  const problems = (annotations: unknown): string[] => {
    try {
      validateConfig({ ...base, annotations });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).problems;
    }
    throw new Error('expected the config to be refused');
  };

  it('applies defaults', () => {
    const { config } = validateConfig({ ...base, annotations: { site: { id: 'ste_demo1' }, machines: [{ key: 'press1' }], detectors: [{ machine: 'press1', variable: 'mvr_press1_state', condition: '== 0' }] } });
    const a = config.annotations!;
    expect(a.site).toEqual({ id: 'ste_demo1' });
    expect(a.reasons.length).toBeGreaterThan(0);
    expect(a.detectors[0].min_duration).toBe(60_000);
    expect(a.detectors[0].condition.text).toBe('== 0');
    expect(a.hmi.enabled).toBe(true);
    expect(validateConfig(base).config.annotations).toBeUndefined();
  });

  it('names the setting and the bad value', () => {
    expect(problems({ site: { id: 'ste_a', external_id: 'b' } }).join('\n')).toMatch(/annotations\.site: .*not both/);
    expect(problems({ site: {} }).join('\n')).toMatch(/annotations\.site: /);
    expect(problems({ site: { id: 'ste_a' }, machines: [{ key: 'a b' }] }).join('\n')).toMatch(/annotations\.machines\[0\]\.key: "a b"/);
    expect(problems({ site: { id: 'ste_a' }, machines: [{ key: 'a' }, { key: 'a' }] }).join('\n')).toMatch(/annotations\.machines\[1\]\.key: "a" is used twice/);
    expect(problems({ site: { id: 'ste_a' }, machines: [{ key: 'a' }], detectors: [{ machine: 'b', variable: 'mvr_x', condition: '== 0' }] }).join('\n')).toMatch(
      /annotations\.detectors\[0\]\.machine: "b" is not a configured machine/,
    );
    expect(problems({ site: { id: 'ste_a' }, machines: [{ key: 'a' }], detectors: [{ machine: 'a', variable: 'mvr_x', condition: 'stopped' }] }).join('\n')).toMatch(
      /annotations\.detectors\[0\]\.condition: "stopped" is not a condition/,
    );
    expect(problems({ site: { id: 'ste_a' }, machines: [{ key: 'a' }], detectors: [{ machine: 'a', variable: 'mvr_x', condition: '!= 1', states: { 0: 'Stopped', run: 'Running' } }] }).join('\n')).toMatch(
      /annotations\.detectors\[0\]\.states\.run: "run" is not a number \(the keys are the values of the variable, e\.g\. 0, 1, 2\)/,
    );
    expect(problems({ site: { id: 'ste_a' }, machines: [{ key: 'a' }], detectors: [{ machine: 'a', variable: 'mvr_x', condition: '!= 1', states: { 2: '' } }] }).join('\n')).toMatch(/annotations\.detectors\[0\]\.states\.2: /);
    expect(problems({ site: { id: 'ste_a' }, mqtt: { url: 'http://broker' } }).join('\n')).toMatch(/annotations\.mqtt\.url: .*scheme "http"/);
    expect(problems({ site: { id: 'ste_a' }, mqtt: { url: 'mqtt://u:p@broker' } }).join('\n')).toMatch(/annotations\.mqtt\.url: .*user name or password/);
    expect(problems({ site: { id: 'ste_a' }, mqtt: { url: 'mqtt://b', topic: 'a/#/b' } }).join('\n')).toMatch(/annotations\.mqtt\.topic: /);
    expect(problems({ site: { id: 'ste_a' }, colour: 1 }).join('\n')).toMatch(/annotations\.colour: unknown setting/);
    expect(problems({ site: { id: 'ste_a' }, machines: [{ key: 'a', machine_variables: Array.from({ length: 101 }, (_, i) => `mvr_${i}`) }] }).join('\n')).toMatch(/machine_variables/);
  });
});
