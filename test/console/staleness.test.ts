import { afterEach, describe, expect, it } from 'vitest';
import type { VariableDetailResponse, VariablesResponse } from '../../src/console/api/variables.js';
import { isStale, STALE_MS } from '../../src/console/web/staleness.js';
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
  it('an on-change value is never stale; a periodic one is after a minute; never seen is stale', () => {
    const now = 10_000_000;
    expect(isStale({ ts: now - 3 * 3_600_000, on_change: true }, now)).toBe(false);
    expect(isStale({ ts: now - STALE_MS - 1, on_change: false }, now)).toBe(true);
    expect(isStale({ ts: now - 1_000, on_change: false }, now)).toBe(false);
    expect(isStale({ ts: null, on_change: true }, now)).toBe(true);
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
    expect(Object.fromEntries(vars.map((v) => [v.id, v.source]))).toEqual({ mvr_periodic: 'gen', mvr_door_state: 'line', mvr_press_state: 'press', mvr_press_rate: 'poller' });
    // A variable's page: its settings and mapping entry, found in the configuration when asked (variable-index.ts).
    const detail = (await (await fetch(`http://127.0.0.1:${port}/console/api/variables/mvr_press_rate`)).json()) as VariableDetailResponse;
    expect(detail).toMatchObject({ source: 'poller', kind: 'opcua', settings: ['opcua.servers[1].nodes[0].variable'], config: { node_id: 'ns=1;s=Rate', variable: 'mvr_press_rate' } });
    expect(detail.config_yaml).toContain('ns=1;s=Rate');
  }, 60_000);
});
