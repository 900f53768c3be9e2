import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { StatusCodes } from 'node-opcua';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { waitFor } from '../../helpers/wait.js';
import { makeSource, metricValue, tmpPki, type Harness } from './helpers.js';

/**
 * Quality per variable from a real node-opcua server: the StatusCode's severity of each value
 * (Part 4 §7.39) becomes the variable's quality whether or not the value is forwarded, and a server
 * that stops makes every variable stale at once, from the connection's own loss (not the watchdog's
 * trip seconds later).
 */
const clientPki = tmpPki('opcua-quality-client-');
const open: Harness[] = [];
const sims: OpcuaSimulator[] = [];

afterEach(async () => {
  for (const h of open.splice(0)) await h.close();
});
afterAll(async () => {
  for (const s of sims) await s.close().catch(() => undefined);
});

async function sim(): Promise<OpcuaSimulator> {
  const s = await startOpcuaSimulator({ pkiDir: tmpPki('opcua-quality-sim-'), updateIntervalMs: 200 });
  sims.push(s);
  return s;
}

function start(s: OpcuaSimulator, raw: Record<string, unknown>): Harness {
  const h = makeSource({ endpoint: s.endpointUrl, publishing_interval: 100, sampling_interval: 50, reconnect: { initial_delay: 200, max_delay: 1_000 }, ...raw }, { pkiDir: clientPki });
  open.push(h);
  void h.source.start();
  return h;
}

const slot = (h: Harness, id: string) => h.stats.quality.slotOf(id);
const quality = (h: Harness, id: string) => {
  h.stats.quality.age(Date.now());
  return h.stats.quality.reading(slot(h, id)).quality;
};

describe('OPC UA quality per variable', () => {
  it('Bad and Uncertain status codes make the variable bad and uncertain; Good again makes it good', async () => {
    const s = await sim();
    s.pauseUpdates();
    const h = start(s, {
      nodes: [
        { node_id: s.nodeIds.temperature, variable: 'mvr_temp' },
        { node_id: s.nodeIds.pressure, variable: 'mvr_pressure', uncertain: 'refuse' },
        { node_id: s.nodeIds.speed, variable: 'mvr_speed' },
      ],
    });
    await waitFor(() => h.source.status().state === 'connected', { what: 'connected' });
    await waitFor(() => quality(h, 'mvr_temp') === 'good' && quality(h, 'mvr_speed') === 'good', { what: 'initial values good' });

    s.setValue('temperature', 20, { status: StatusCodes.BadSensorFailure });
    s.setValue('pressure', 3, { status: StatusCodes.UncertainLastUsableValue });
    s.setValue('speed', 4, { status: 'Uncertain' });
    await waitFor(() => quality(h, 'mvr_temp') === 'bad', { what: 'temperature bad' });
    await waitFor(() => quality(h, 'mvr_pressure') === 'uncertain', { what: 'pressure uncertain (refused, still uncertain)' });
    await waitFor(() => quality(h, 'mvr_speed') === 'uncertain', { what: 'speed uncertain (forwarded)' });
    // What happens upstream is unchanged: Bad refused, Uncertain as configured.
    expect(h.sink.of('mvr_temp').some((x) => x.value === 20)).toBe(false);
    expect(h.sink.of('mvr_pressure').some((x) => x.value === 3)).toBe(false);
    await waitFor(() => h.sink.of('mvr_speed').some((x) => x.value === 4), { what: 'uncertain speed forwarded' });
    expect(h.source.status().variables).toMatchObject({ total: 3, bad: 1, uncertain: 2, good: 0 });
    expect(await metricValue(h.metrics, 'gateway_source_variables', { source: 'press1', quality: 'bad' })).toBe(1);
    expect(await metricValue(h.metrics, 'gateway_source_variables', { source: 'press1', quality: 'uncertain' })).toBe(2);

    s.setValue('temperature', 21);
    await waitFor(() => quality(h, 'mvr_temp') === 'good', { what: 'temperature good again' });
    const since = h.stats.quality.stored(slot(h, 'mvr_temp')).since!;
    expect(Date.now() - since).toBeLessThan(30_000);
  }, 60_000);

  it('a node the server does not have is bad from the start; the others are good', async () => {
    const s = await sim();
    const h = start(s, { nodes: [{ node_id: s.nodeIds.temperature, variable: 'mvr_temp' }, { node_id: 'ns=1;s=Press1.DoesNotExist', variable: 'mvr_missing' }] });
    await waitFor(() => h.source.status().state === 'degraded', { what: 'degraded by the invalid node' });
    await waitFor(() => quality(h, 'mvr_temp') === 'good', { what: 'good value' });
    expect(quality(h, 'mvr_missing')).toBe('bad');
  }, 60_000);

  it('a stopped server makes every variable stale within a few seconds, down since the connection was lost', async () => {
    const s = await sim();
    // At the default settings the watchdog trips after ~11 s: only the transport's own event can say it sooner.
    const h = start(s, { publishing_interval: 1_000, nodes: [{ node_id: s.nodeIds.temperature, variable: 'mvr_temp' }, { node_id: s.nodeIds.state, variable: 'mvr_state' }] });
    await waitFor(() => h.source.status().state === 'connected' && quality(h, 'mvr_temp') === 'good' && quality(h, 'mvr_state') === 'good', { what: 'connected and good', timeoutMs: 30_000 });
    const stoppedAt = Date.now();
    await s.close();
    await waitFor(() => h.source.status().variables?.stale === 2, { what: 'both variables stale', timeoutMs: 5_000, intervalMs: 50 });
    const st = h.source.status();
    expect(st.downSince).not.toBeNull();
    expect(st.downSince! - stoppedAt).toBeLessThan(3_000);
    expect(st.state).not.toBe('connected');
    const reading = h.stats.quality.reading(slot(h, 'mvr_state'));
    expect(reading).toEqual({ quality: 'stale', since: st.downSince });
    // The stored quality underneath is what the server last said: good again once it is back.
    expect(h.stats.quality.stored(slot(h, 'mvr_state')).quality).toBe('good');
  }, 60_000);
});
