import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { VariableIndex } from '../../src/console/variable-index.js';
import { testConfigInput } from '../helpers/gateway.js';

function config() {
  return validateConfig(
    testConfigInput({ baseUrl: 'http://127.0.0.1:1/tracking/v1', authUrl: 'http://127.0.0.1:1' }, '/tmp/unused', {
      generator: [{ name: 'gen', variables: ['mvr_gen'] }],
      opcua: {
        servers: [
          { name: 'plc', endpoint: 'opc.tcp://127.0.0.1:4840', nodes: [{ node_id: 'ns=1;s=A', variable: 'mvr_a' }, { node_id: 'ns=1;s=B', variable: 'mvr_b', scale: 2 }] },
          { name: 'poll', endpoint: 'opc.tcp://127.0.0.1:4841', mode: 'polling', nodes: [{ node_id: 'ns=1;s=P', variable: 'mvr_p' }] },
        ],
      },
      mqtt: { connections: [{ name: 'm', url: 'mqtt://127.0.0.1:1883', subscriptions: [{ topic: 'a/one', format: 'number', variable: 'mvr_num' }] }] },
      annotations: {
        site: { external_id: 'plant-demo' },
        // mvr_a and mvr_only are named by annotations first; mvr_a also by an OPC UA node.
        machines: [{ key: 'press1', name: 'Press 1', machine_variables: ['mvr_only', 'mvr_a'] }],
        detectors: [],
      },
    }),
  ).config;
}

describe('console variable index', () => {
  it('gives each mapped variable its source, kind, reporting mode and machine, in order of first use', () => {
    const index = new VariableIndex(config());
    expect([...index.keys()]).toEqual(['mvr_gen', 'mvr_a', 'mvr_b', 'mvr_p', 'mvr_num', 'mvr_only']);
    expect(index.source('mvr_a')).toEqual({ source: 'plc', kind: 'opcua', onChange: true });
    expect(index.source('mvr_p')).toEqual({ source: 'poll', kind: 'opcua', onChange: false });
    expect(index.source('mvr_num')).toEqual({ source: 'm', kind: 'mqtt', onChange: true });
    expect(index.source('mvr_gen')).toEqual({ source: 'gen', kind: 'generator', onChange: false });
    // Named by annotations only: mapped, but no source.
    expect(index.source('mvr_only')).toEqual({ source: null, kind: null, onChange: false });
    expect(index.source('mvr_unknown')).toBeUndefined();
    expect(index.machineOf('mvr_a')).toBe('Press 1');
    expect(index.machineOf('mvr_b')).toBeNull();
  });

  it('shares one source object among the variables of a source, not one per variable (issue 25: 100,000 nodes)', () => {
    const index = new VariableIndex(config());
    expect(index.source('mvr_a')).toBe(index.source('mvr_b'));
  });

  it("finds one variable's settings and mapping entry when asked", () => {
    const index = new VariableIndex(config());
    expect(index.info('mvr_a')).toEqual({
      id: 'mvr_a',
      source: 'plc',
      kind: 'opcua',
      onChange: true,
      machine: 'Press 1',
      settings: ['opcua.servers[0].nodes[0].variable', 'annotations.machines[0].machine_variables[1]'],
      config: expect.objectContaining({ node_id: 'ns=1;s=A', variable: 'mvr_a' }),
    });
    expect(index.info('mvr_b')?.config).toEqual(expect.objectContaining({ node_id: 'ns=1;s=B', scale: 2 }));
    expect(index.info('mvr_only')).toEqual({ id: 'mvr_only', source: null, kind: null, onChange: false, machine: 'Press 1', settings: ['annotations.machines[0].machine_variables[0]'], config: null });
    expect(index.info('mvr_unknown')).toBeUndefined();
  });
});
