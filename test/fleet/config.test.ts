import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { runCli } from '../helpers/cli.js';
import { validateConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/core/errors.js';
import { testConfigInput } from '../helpers/gateway.js';

const emu = { baseUrl: 'http://127.0.0.1:1/tracking/v1', authUrl: 'http://127.0.0.1:1' };
const problems = (sections: Record<string, unknown>): string[] => {
  try {
    validateConfig(testConfigInput(emu, '/tmp/x', sections));
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
};

describe('fleet settings', () => {
  it('accepts a plant broker with defaults', () => {
    const { config } = validateConfig(testConfigInput(emu, '/tmp/x', { fleet: { mqtt: { url: 'mqtt://broker:1883' } }, uplink: { budget_sharing: { mode: 'fleet' } } }));
    expect(config.fleet?.mqtt).toMatchObject({ prefix: 'edge-gateway/fleet', interval: 10_000, keepalive: 15_000 });
    expect(config.uplink.budget_sharing).toEqual({ mode: 'fleet', group: 'default', announce_interval: 2_000, lease: 15_000, max_gateways: 32 });
  });

  it('names the setting and the value of every mistake', () => {
    expect(problems({ uplink: { budget_sharing: { mode: 'fleet' } } })).toEqual([expect.stringMatching(/^uplink\.budget_sharing\.mode: "fleet" needs the plant broker: set fleet\.mqtt\.url/)]);
    const p = problems({ fleet: { mqtt: { url: 'http://broker:1883', prefix: 'a/+/b', interval: '100ms' } }, uplink: { budget_sharing: { mode: 'shared', group: 'a b' } } });
    expect(p.join('\n')).toMatch(/fleet\.mqtt\.url: .*scheme "http" is not one of mqtt, mqtts, ws, wss/);
    expect(p.join('\n')).toMatch(/fleet\.mqtt\.prefix: .*without wildcards/);
    expect(p.join('\n')).toMatch(/fleet\.mqtt\.interval/);
    expect(p.join('\n')).toMatch(/uplink\.budget_sharing\.mode/);
    expect(p.join('\n')).toMatch(/uplink\.budget_sharing\.group/);
    expect(problems({ fleet: { mqtt: { url: 'mqtt://user:pw@broker:1883' } } }).join('\n')).toMatch(/fleet\.mqtt\.url: must not contain a user name or password/);
    expect(problems({ fleet: { mqtt: { url: 'mqtt://broker:1883' } }, uplink: { budget_sharing: { mode: 'fleet', max_gateways: 1 } } })).toEqual(['uplink.budget_sharing.max_gateways: 1 is below the minimum of 2']);
  });

  it('`check` shows the fleet settings without the password', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-fleet-check-'));
    try {
      const file = join(dir, 'gw.yaml');
      const raw = testConfigInput(emu, dir, { gateway: { name: 'line-7' }, uplink: { budget_sharing: { mode: 'fleet', group: 'nat-b' } }, fleet: { mqtt: { url: 'mqtt://broker:1883', username: 'gw', password: { env: 'TEST_FLEET_PW' } } } });
      writeFileSync(file, stringify(raw));
      const r = await runCli(['check', '--config', file], { env: { TEST_FLEET_PW: 'sekrit-fleet-pw' } });
      expect(r.code).toBe(0);
      expect(r.out).toMatch(/budget share +fleet: 1400 requests\/min for every gateway of group nat-b together \(at most 32 counted; this one never below 43\/min\)/);
      expect(r.out).toMatch(/fleet +status to mqtt:\/\/broker:1883 under edge-gateway\/fleet\/line-7\/ every 10 s \(user gw\)/);
      expect(r.out + r.err).not.toContain('sekrit-fleet-pw');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
