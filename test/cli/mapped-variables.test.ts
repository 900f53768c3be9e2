import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { mappedVariables } from '../../src/sources/mapped-variables.js';
import { testConfigInput } from '../helpers/gateway.js';

describe('mapped machine variables of a configuration', () => {
  it('collects every section and subscription form, with the settings that name each variable', () => {
    const { config } = validateConfig(
      testConfigInput({ baseUrl: 'http://127.0.0.1:1/tracking/v1', authUrl: 'http://127.0.0.1:1' }, '/tmp/unused', {
        generator: [
          { name: 'list', variables: ['mvr_a', 'mvr_shared'] },
          { name: 'range', variables: { prefix: 'mvr_r_', count: 3 } },
        ],
        opcua: { servers: [{ name: 'plc', endpoint: 'opc.tcp://127.0.0.1:4840', nodes: [{ node_id: 'ns=1;s=T', variable: 'mvr_opc' }] }] },
        modbus: { devices: [{ name: 'mixer', host: '127.0.0.1', registers: [{ variable: 'mvr_mb', table: 'holding', address: 0 }] }] },
        mqtt: {
          connections: [
            {
              name: 'm',
              url: 'mqtt://127.0.0.1:1883',
              subscriptions: [
                { topic: 'a/one', format: 'number', variable: 'mvr_num' },
                { topic: 'b/+/x', format: 'number', variable_from_topic: { level: 1, variables: { packer1: 'mvr_p1', 'pack.2': 'mvr_p2' } } },
                { topic: 'c', format: 'json', values: [{ path: 'rate', variable: 'mvr_json' }] },
                { topic: 'd', format: 'metrics', names: { 'Line.Rate': 'mvr_metric' } },
                { topic: 'spBv1.0/plant/#', format: 'sparkplug', metrics: [{ name: 'Temperature', variable: 'mvr_spb' }] },
              ],
            },
          ],
        },
        annotations: {
          site: { external_id: 'plant-demo' },
          machines: [{ key: 'press1', machine_variables: ['mvr_shared'] }],
          detectors: [{ machine: 'press1', variable: 'mvr_state', condition: '== 0', machine_variables: ['mvr_shared', 'mvr_extra'] }],
        },
      }),
    );
    const m = mappedVariables(config);
    expect(Object.fromEntries(m.variables)).toEqual({
      mvr_a: ['generator[0].variables[0]'],
      mvr_shared: ['generator[0].variables[1]', 'annotations.machines[0].machine_variables[0]', 'annotations.detectors[0].machine_variables[0]'],
      mvr_r_1: ['generator[1].variables'],
      mvr_r_2: ['generator[1].variables'],
      mvr_r_3: ['generator[1].variables'],
      mvr_opc: ['opcua.servers[0].nodes[0].variable'],
      mvr_mb: ['modbus.devices[0].registers[0].variable'],
      mvr_num: ['mqtt.connections[0].subscriptions[0].variable'],
      mvr_p1: ['mqtt.connections[0].subscriptions[1].variable_from_topic.variables.packer1'],
      mvr_p2: ['mqtt.connections[0].subscriptions[1].variable_from_topic.variables["pack.2"]'],
      mvr_json: ['mqtt.connections[0].subscriptions[2].values[0].variable'],
      mvr_metric: ['mqtt.connections[0].subscriptions[3].names["Line.Rate"]'],
      mvr_spb: ['mqtt.connections[0].subscriptions[4].metrics[0].variable'],
      mvr_state: ['annotations.detectors[0].variable'],
      mvr_extra: ['annotations.detectors[0].machine_variables[1]'],
    });
    // Metrics and Sparkplug subscriptions also store metrics named mvr_... without an entry.
    expect(m.openEnded).toEqual(['mqtt.connections[0].subscriptions[3]', 'mqtt.connections[0].subscriptions[4]']);
  });
});
