import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { delay, waitFor } from '../../helpers/wait.js';
import { makeSource, metricValue, tmpPki, type Harness } from './helpers.js';

// One simulator and one client PKI for the whole file: certificate generation is the slow part.
let sim: OpcuaSimulator;
const clientPki = tmpPki('opcua-reading-client-');
const open: Harness[] = [];

beforeAll(async () => {
  sim = await startOpcuaSimulator({ pkiDir: tmpPki('opcua-reading-sim-'), updateIntervalMs: 200 });
});
afterAll(async () => {
  await sim?.close();
});
afterEach(async () => {
  for (const h of open.splice(0)) await h.close();
  sim.resumeUpdates();
});

function start(raw: Record<string, unknown>, clock?: { now(): number; monotonic(): number }): Harness {
  const h = makeSource({ endpoint: sim.endpointUrl, publishing_interval: 100, sampling_interval: 50, ...raw }, { pkiDir: clientPki, clock });
  open.push(h);
  void h.source.start();
  return h;
}

const connected = (h: Harness) => waitFor(() => ['connected', 'degraded'].includes(h.source.status().state), { what: 'source connected' });

describe('OPC UA source reading from the simulator', () => {
  it('forwards changing values, maps booleans to 0/1 and applies scale and offset', async () => {
    const h = start({
      nodes: [
        { node_id: sim.nodeIds.temperature, variable: 'mvr_press1_temperature' },
        { node_id: sim.nodeIds.running, variable: 'mvr_running' },
        { node_id: sim.nodeIds.setpoint, variable: 'mvr_setpoint', scale: 2, offset: 1 },
      ],
    });
    await connected(h);
    expect(h.source.status().state).toBe('connected');
    await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 3, { what: 'temperature samples' });
    const temps = h.sink.of('mvr_press1_temperature');
    expect(new Set(temps.map((s) => s.value)).size).toBeGreaterThan(1);
    for (const s of temps) expect(Number.isFinite(s.value)).toBe(true);

    sim.setValue('running', false);
    await waitFor(() => h.sink.of('mvr_running').some((s) => s.value === 0), { what: 'running = 0' });
    sim.setValue('running', true);
    await waitFor(() => h.sink.of('mvr_running').some((s) => s.value === 1), { what: 'running = 1' });

    sim.setValue('setpoint', 21.5);
    await waitFor(() => h.sink.of('mvr_setpoint').some((s) => s.value === 44), { what: 'scaled setpoint 21.5*2+1' });
    await waitFor(() => h.stats.snapshot().samplesRead > 0, { what: 'samples counted' });
  });

  it('stamps values with the source, server or gateway time as configured', async () => {
    sim.pauseUpdates();
    const skew = 3 * 3_600_000; // the gateway clock is 3 h ahead, so gateway time is recognisable
    const clock = { now: () => Date.now() + skew, monotonic: () => performance.now() };
    const h = start(
      {
        nodes: [
          { node_id: sim.nodeIds.temperature, variable: 'mvr_src', timestamp: 'source' },
          { node_id: sim.nodeIds.pressure, variable: 'mvr_srv', timestamp: 'server' },
          { node_id: sim.nodeIds.speed, variable: 'mvr_gw', timestamp: 'gateway' },
        ],
      },
      clock,
    );
    await connected(h);
    const sourceTime = new Date(Date.now() - 3_600_000); // one hour ago, as a PLC with a buffered value would say
    const before = Date.now();
    sim.setValue('temperature', 71.25, { sourceTimestamp: sourceTime });
    sim.setValue('pressure', 201.5, { sourceTimestamp: sourceTime });
    sim.setValue('speed', 999, { sourceTimestamp: sourceTime });
    const src = await waitFor(() => h.sink.of('mvr_src').find((s) => s.value === 71.25), { what: 'source-stamped value' });
    const srv = await waitFor(() => h.sink.of('mvr_srv').find((s) => s.value === 201.5), { what: 'server-stamped value' });
    const gw = await waitFor(() => h.sink.of('mvr_gw').find((s) => s.value === 999), { what: 'gateway-stamped value' });
    const after = Date.now();
    expect(src.ts).toBe(sourceTime.getTime());
    expect(srv.ts).toBeGreaterThanOrEqual(before - 50);
    expect(srv.ts).toBeLessThanOrEqual(after + 50);
    expect(gw.ts).toBeGreaterThanOrEqual(before + skew);
    expect(gw.ts).toBeLessThanOrEqual(after + skew + 50);
  });

  it('suppresses changes inside an absolute or percent deadband', async () => {
    sim.setValue('setpoint', 10);
    sim.setValue('temperature', 20);
    sim.pauseUpdates();
    const h = start({
      nodes: [
        { node_id: sim.nodeIds.setpoint, variable: 'mvr_abs', deadband: { type: 'absolute', value: 1 } },
        // EURange of Temperature is 0..200, so 1 % is 2.0 (Part 8 §6.2)
        { node_id: sim.nodeIds.temperature, variable: 'mvr_pct', deadband: { type: 'percent', value: 1 } },
      ],
    });
    await connected(h);
    await waitFor(() => h.sink.of('mvr_abs').length === 1 && h.sink.of('mvr_pct').length === 1, { what: 'initial values' });
    for (const [abs, pct] of [[10.3, 20.5], [10.6, 21.5], [10.9, 19], [11.5, 23]]) {
      sim.setValue('setpoint', abs);
      sim.setValue('temperature', pct);
      await delay(300);
    }
    await waitFor(() => h.sink.of('mvr_abs').length >= 2 && h.sink.of('mvr_pct').length >= 2, { what: 'changes beyond the deadband' });
    await delay(500);
    expect(h.sink.of('mvr_abs').map((s) => s.value)).toEqual([10, 11.5]);
    expect(h.sink.of('mvr_pct').map((s) => s.value)).toEqual([20, 23]);
  });

  it('reports a bad node id, a String node and an array node, and keeps the others flowing', async () => {
    const h = start({
      nodes: [
        { node_id: 'ns=2;s=Press1.DoesNotExist', variable: 'mvr_missing' },
        { node_id: sim.nodeIds.temperature, variable: 'mvr_press1_temperature' },
        { node_id: sim.nodeIds.label, variable: 'mvr_label' },
        { node_id: sim.nodeIds.vector, variable: 'mvr_vector' },
        { node_id: sim.nodeIds.pressure, variable: 'mvr_press1_pressure' },
      ],
    });
    await connected(h);
    await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 2 && h.sink.of('mvr_press1_pressure').length >= 2, { what: 'valid nodes flowing' });
    const st = h.source.status();
    expect(st.state).toBe('degraded');
    const invalid = st.detail?.invalid_nodes as Array<{ node_id: string; variable: string; reason: string }>;
    expect(invalid.map((n) => n.node_id)).toEqual(['ns=2;s=Press1.DoesNotExist', sim.nodeIds.label, sim.nodeIds.vector]);
    expect(invalid[0].reason).toMatch(/does not exist.*BadNodeIdUnknown/);
    expect(invalid[1].reason).toMatch(/String is not numeric/);
    expect(invalid[2].reason).toMatch(/array/);
    expect(st.detail?.nodes_monitored).toBe(2);
    expect(st.samplesRefused.invalid_node).toBe(3);
    expect(await metricValue(h.metrics, 'gateway_opcua_invalid_nodes', { source: 'press1' })).toBe(3);
    expect(await metricValue(h.metrics, 'gateway_opcua_monitored_nodes', { source: 'press1' })).toBe(2);
    const warn = h.log.lines.find((l) => String(l.msg).includes('Press1.DoesNotExist'));
    expect(warn?.msg).toMatch(/opcua\.servers\[0\]\.nodes\[0\]\.node_id: "ns=2;s=Press1.DoesNotExist" \(mvr_missing\) is skipped/);
    expect(h.sink.of('mvr_label')).toHaveLength(0);
  });

  it('resolves nsu= node ids against the namespace array and names an unknown namespace URI', async () => {
    const h = start({
      nodes: [
        { node_id: sim.nsuNodeIds.temperature, variable: 'mvr_press1_temperature' },
        { node_id: 'nsu=urn:not-there;s=Press1.Speed', variable: 'mvr_speed' },
      ],
    });
    await connected(h);
    await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 2, { what: 'nsu node flowing' });
    const invalid = h.source.status().detail?.invalid_nodes as Array<{ reason: string }>;
    expect(invalid).toHaveLength(1);
    expect(invalid[0].reason).toMatch(/namespace URI "urn:not-there" is not in the server's namespace array/);
  });

  it('does not forward Bad values and counts them; Uncertain values follow the setting', async () => {
    sim.pauseUpdates();
    const h = start({
      nodes: [
        { node_id: sim.nodeIds.setpoint, variable: 'mvr_fwd', uncertain: 'forward' },
        { node_id: sim.nodeIds.temperature, variable: 'mvr_refuse', uncertain: 'refuse' },
      ],
    });
    await connected(h);
    await waitFor(() => h.sink.of('mvr_fwd').length >= 1 && h.sink.of('mvr_refuse').length >= 1, { what: 'initial values' });
    sim.setValue('setpoint', 66.5, { status: 'Bad' });
    await waitFor(() => h.stats.snapshot().samplesRefused.bad_status === 1, { what: 'bad status counted' });
    sim.setValue('setpoint', 67.5, { status: 'Uncertain' });
    sim.setValue('temperature', 55.5, { status: 'Uncertain' });
    await waitFor(() => h.sink.of('mvr_fwd').some((s) => s.value === 67.5), { what: 'uncertain forwarded' });
    await waitFor(() => h.stats.snapshot().samplesRefused.uncertain_status === 1, { what: 'uncertain refused' });
    expect(h.sink.samples.some((s) => s.value === 66.5)).toBe(false);
    expect(h.sink.of('mvr_refuse').some((s) => s.value === 55.5)).toBe(false);
    expect(await metricValue(h.metrics, 'gateway_source_samples_refused_total', { source: 'press1', reason: 'bad_status' })).toBe(1);
  });

  it('refuses a live value whose SourceTimestamp is more than 24 h ahead or before 2000 (bad_timestamp, the MQTT rule); 23 h ahead passes (issue 21 §5)', async () => {
    sim.pauseUpdates();
    const h = start({ nodes: [{ node_id: sim.nodeIds.temperature, variable: 'mvr_src', timestamp: 'source' }] });
    await connected(h);
    await waitFor(() => h.sink.of('mvr_src').length >= 1, { what: 'initial value' });
    const ahead25h = new Date(Date.now() + 25 * 3_600_000);
    sim.setValue('temperature', 81.5, { sourceTimestamp: ahead25h });
    await waitFor(() => h.stats.snapshot().samplesRefused.bad_timestamp === 1, { what: 'the value stamped 25 h ahead refused' });
    sim.setValue('temperature', 82.5, { sourceTimestamp: new Date(Date.UTC(1999, 11, 31)) });
    await waitFor(() => h.stats.snapshot().samplesRefused.bad_timestamp === 2, { what: 'the value stamped 1999 refused' });
    const ahead23h = new Date(Date.now() + 23 * 3_600_000);
    sim.setValue('temperature', 83.5, { sourceTimestamp: ahead23h });
    const ok = await waitFor(() => h.sink.of('mvr_src').find((s) => s.value === 83.5), { what: 'the value stamped 23 h ahead' });
    expect(ok.ts).toBe(ahead23h.getTime());
    expect(h.sink.samples.some((s) => s.value === 81.5 || s.value === 82.5)).toBe(false);
    const line = h.log.lines.find((l) => l.reason === 'bad_timestamp');
    expect(line?.detail).toBe(`SourceTimestamp ${ahead25h.toISOString()} is more than 24 h in the future (PLC clock wrong?)`);
    expect(await metricValue(h.metrics, 'gateway_source_samples_refused_total', { source: 'press1', reason: 'bad_timestamp' })).toBe(2);
  });

  it('polls on an interval, forwarding changes and not repeating unchanged values', async () => {
    sim.pauseUpdates();
    sim.setValue('setpoint', 30);
    const h = start({
      mode: 'polling',
      polling_interval: 100,
      nodes: [{ node_id: sim.nodeIds.setpoint, variable: 'mvr_poll' }, { node_id: sim.nodeIds.count, variable: 'mvr_count' }],
    });
    await connected(h);
    await waitFor(() => h.sink.of('mvr_poll').length >= 1, { what: 'first poll' });
    await delay(600); // ~6 polls of an unchanged value
    expect(h.sink.of('mvr_poll')).toHaveLength(1);
    sim.setValue('setpoint', 31);
    await waitFor(() => h.sink.of('mvr_poll').some((s) => s.value === 31), { what: 'changed value polled' });
    expect(await metricValue(h.metrics, 'gateway_source_requests_total', { source: 'press1', outcome: 'ok' })).toBeGreaterThan(3);
  });
});
