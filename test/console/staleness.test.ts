import { afterEach, describe, expect, it } from 'vitest';
import type { VariableDetailResponse, VariablesResponse } from '../../src/console/api/variables.js';
import type { GatewayStatus } from '../../src/console/api/live.js';
import { linksOf, qualityOf } from '../../src/console/web/quality.js';
import { fmtAgo } from '../../src/web/format.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { startAedes } from '../sources/mqtt/helpers.js';

/**
 * Issue 24 §1: staleness follows the variable's kind. A state variable that reports only on change
 * (MQTT, an OPC UA subscription) was flagged stale after a minute without a change.
 */
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

describe('staleness by kind (issue 24 §1)', () => {
  it('the page shows a variable through its link: stale from when its source or its device went down, else as stored', () => {
    const status = {
      sources: [
        { name: 'press', downSince: 5_000, detail: {} },
        { name: 'modbus', downSince: null, detail: { devices: [{ name: 'Mixer 1', down_since: 7_000 }, { name: 'Mixer 2', down_since: null }] } },
      ],
    } as unknown as GatewayStatus;
    const links = linksOf(status);
    // An on-change value stored good hours ago is good while its link is up ...
    expect(qualityOf({ quality: 'good', quality_since: 1, source: 'modbus', device: 'Mixer 2' }, links)).toEqual({ quality: 'good', since: 1 });
    // ... and stale from the moment its link went down (source or device), not by age.
    expect(qualityOf({ quality: 'good', quality_since: 1, source: 'press', device: null }, links)).toEqual({ quality: 'stale', since: 5_000 });
    expect(qualityOf({ quality: 'bad', quality_since: 1, source: 'modbus', device: 'Mixer 1' }, links)).toEqual({ quality: 'stale', since: 7_000 });
    // Stale before the link went down: since then. No value yet stays that.
    expect(qualityOf({ quality: 'stale', quality_since: 2_000, source: 'press', device: null }, links)).toEqual({ quality: 'stale', since: 2_000 });
    expect(qualityOf({ quality: 'none', quality_since: null, source: 'press', device: null }, links)).toEqual({ quality: 'none', since: null });
  });

  it('"just now", never "now ago"', () => {
    expect(fmtAgo(200)).toBe('just now');
    expect(fmtAgo(42_000)).toBe('42 s ago');
  });

  it('/console/api/variables says which variables report on change: MQTT and OPC UA subscriptions yes, generators and polls no', async () => {
    const b = await startAedes();
    cleanup.push(() => b.close());
    const port = await freePort();
    const closed = await freePort();
    const gw = await startTestGateway(
      { baseUrl: `http://127.0.0.1:${closed}/tracking/v1`, authUrl: `http://127.0.0.1:${closed}` },
      {
        http: { enabled: true, port },
        generator: [{ name: 'gen', variables: ['mvr_periodic'], interval: '1s' }],
        mqtt: { connections: [{ name: 'line', url: b.url, client_id: 'gw-stale', subscriptions: [{ topic: 'state/door', format: 'number', variable: 'mvr_door_state' }] }] },
        opcua: { servers: [{ name: 'press', endpoint: 'opc.tcp://127.0.0.1:1/', nodes: [{ node_id: 'ns=1;s=State', variable: 'mvr_press_state' }] }, { name: 'poller', endpoint: 'opc.tcp://127.0.0.1:1/', mode: 'polling', nodes: [{ node_id: 'ns=1;s=Rate', variable: 'mvr_press_rate' }] }] },
      },
    );
    cleanup.push(() => gw.destroy());
    const vars = await waitFor(async () => {
      const r = (await (await fetch(`http://127.0.0.1:${port}/console/api/variables`)).json()) as VariablesResponse;
      return r.variables.length >= 4 ? r.variables : null;
    }, { what: 'the variables list' });
    const onChange = Object.fromEntries(vars.map((v) => [v.id, v.on_change]));
    expect(onChange).toEqual({ mvr_periodic: false, mvr_door_state: true, mvr_press_state: true, mvr_press_rate: false });
    // Quality as stored: the generator's value is good once it ticked; nothing came from the others yet.
    const quality = await waitFor(async () => {
      const r = (await (await fetch(`http://127.0.0.1:${port}/console/api/variables`)).json()) as VariablesResponse;
      const q = Object.fromEntries(r.variables.map((v) => [v.id, v.quality]));
      return q.mvr_periodic === 'good' ? q : null;
    }, { what: 'the generator value good' });
    expect(quality).toEqual({ mvr_periodic: 'good', mvr_door_state: 'none', mvr_press_state: 'none', mvr_press_rate: 'none' });
    expect(Object.fromEntries(vars.map((v) => [v.id, v.source]))).toEqual({ mvr_periodic: 'gen', mvr_door_state: 'line', mvr_press_state: 'press', mvr_press_rate: 'poller' });
    // A variable's page: its settings and mapping entry, found in the configuration when asked (variable-index.ts).
    const detail = (await (await fetch(`http://127.0.0.1:${port}/console/api/variables/mvr_press_rate`)).json()) as VariableDetailResponse;
    expect(detail).toMatchObject({ source: 'poller', kind: 'opcua', settings: ['opcua.servers[1].nodes[0].variable'], config: { node_id: 'ns=1;s=Rate', variable: 'mvr_press_rate' } });
    expect(detail.config_yaml).toContain('ns=1;s=Rate');
  }, 60_000);
});
