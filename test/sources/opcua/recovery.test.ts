import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { delay, waitFor } from '../../helpers/wait.js';
import { makeSource, metricValue, tmpPki, type Harness } from './helpers.js';
import { startSimulatorProcess } from './skewed-simulator.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

// The simulator keeps its certificate in this folder, so a restarted server has the same identity
// (as a real PLC does) and the client's trust list stays valid.
const simPki = tmpPki('opcua-rec-sim-');
const clientPki = tmpPki('opcua-rec-client-');
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

async function sim(port?: number, extra: Parameters<typeof startOpcuaSimulator>[0] = {}): Promise<OpcuaSimulator> {
  const s = await startOpcuaSimulator({ port, pkiDir: simPki, updateIntervalMs: 100, users: [{ username: 'gateway', password: 'secret-1' }], ...extra });
  cleanup.push(() => s.close());
  return s;
}

function start(raw: Record<string, unknown>): Harness {
  const h = makeSource({ publishing_interval: 200, sampling_interval: 100, reconnect: { initial_delay: 300, max_delay: 2_000 }, ...raw }, { pkiDir: clientPki });
  cleanup.push(() => h.close());
  void h.source.start();
  return h;
}

const flowingAfter = (h: Harness, variable: string, t: number, n = 3) =>
  waitFor(() => h.sink.of(variable).filter((s) => s.ts > t).length >= n, { timeoutMs: 45_000, what: `${variable} flowing again` });

describe('OPC UA recovery without operator action', () => {
  it('resumes after the server is stopped and a new one starts on the same port (secure session, node-opcua repair)', async () => {
    const first = await sim();
    mkdirSync(join(clientPki, 'trusted', 'certs'), { recursive: true });
    copyFileSync(first.certificateFile, join(clientPki, 'trusted', 'certs', 'sim.pem'));
    const h = start({
      endpoint: first.endpointUrl,
      security_mode: 'SignAndEncrypt',
      user: { type: 'username', username: 'gateway', password: 'secret-1' },
      watchdog_multiplier: 150, // 30 s: leave the repair to node-opcua in this test
      nodes: [{ node_id: first.nodeIds.temperature, variable: 'mvr_press1_temperature' }, { node_id: first.nodeIds.count, variable: 'mvr_press1_count' }],
    });
    await flowingAfter(h, 'mvr_press1_temperature', 0);
    await first.close();
    const stoppedAt = Date.now();
    await delay(1_500);
    const second = await sim(first.port);
    await flowingAfter(h, 'mvr_press1_temperature', stoppedAt + 1_500);
    await flowingAfter(h, 'mvr_press1_count', stoppedAt + 1_500, 1);
    expect(second.sessionCount()).toBeGreaterThanOrEqual(1);
    const st = h.source.status();
    expect(st.state).toBe('connected');
    expect((st.detail?.recoveries as Record<string, number>).reconnected).toBeGreaterThanOrEqual(1);
    expect(await metricValue(h.metrics, 'gateway_opcua_session_recoveries_total', { source: 'press1' })).toBeGreaterThanOrEqual(1);
  });

  it('reports no nodes monitored while the server is away and every node again once node-opcua re-created the items (issue 25)', async () => {
    const BULK = 20;
    const first = await sim(undefined, { bulkVariables: BULK });
    const h = start({
      endpoint: first.endpointUrl,
      watchdog_multiplier: 150, // 30 s: the repair is node-opcua's (connection_lost, then connection_reestablished)
      nodes: Array.from({ length: BULK }, (_, i) => ({ node_id: first.bulkNodeId(i + 1), variable: `mvr_bulk_${i + 1}` })),
    });
    await flowingAfter(h, 'mvr_bulk_1', 0);
    const monitored = () => h.source.status().detail?.nodes_monitored;
    const gauge = () => metricValue(h.metrics, 'gateway_opcua_monitored_nodes', { source: 'press1' });
    expect(monitored()).toBe(BULK);
    await first.close();
    const stoppedAt = Date.now();
    await waitFor(() => h.source.status().state === 'connecting', { timeoutMs: 20_000, what: 'the connection loss noticed' });
    // Nothing is monitored on a server that is gone: the status and the gauge say so.
    expect(monitored()).toBe(0);
    expect(await gauge()).toBe(0);
    await delay(1_500);
    await sim(first.port, { bulkVariables: BULK });
    await waitFor(() => ((h.source.status().detail?.recoveries as Record<string, number>).reconnected ?? 0) >= 1, { timeoutMs: 45_000, what: 'node-opcua repaired the session' });
    await flowingAfter(h, `mvr_bulk_${BULK}`, stoppedAt + 1_500, 1);
    expect((h.source.status().detail?.recoveries as Record<string, number>).watchdog ?? 0).toBe(0);
    expect(monitored()).toBe(BULK);
    expect(await gauge()).toBe(BULK);
  }, 120_000);

  it('counts only the items the restarted server accepted again (node-opcua only logs the others)', async () => {
    const BULK = 20;
    const first = await sim(undefined, { bulkVariables: BULK });
    const h = start({ endpoint: first.endpointUrl, watchdog_multiplier: 150, nodes: Array.from({ length: BULK }, (_, i) => ({ node_id: first.bulkNodeId(i + 1), variable: `mvr_bulk_${i + 1}` })) });
    await flowingAfter(h, 'mvr_bulk_1', 0);
    await first.close();
    const stoppedAt = Date.now();
    await delay(1_500);
    // The PLC program changed while it was down: its last 5 variables are gone (BadNodeIdUnknown).
    await sim(first.port, { bulkVariables: BULK - 5 });
    await waitFor(() => ((h.source.status().detail?.recoveries as Record<string, number>).reconnected ?? 0) >= 1, { timeoutMs: 45_000, what: 'node-opcua repaired the session' });
    await flowingAfter(h, `mvr_bulk_${BULK - 5}`, stoppedAt + 1_500, 1);
    expect(h.source.status().detail?.nodes_monitored).toBe(BULK - 5);
    expect(await metricValue(h.metrics, 'gateway_opcua_monitored_nodes', { source: 'press1' })).toBe(BULK - 5);
  }, 120_000);

  it('a gateway whose own event loop is blocked longer than the watchdog keeps a healthy session (no false trip, issue 21 §2)', async () => {
    // The server in another process keeps publishing while this one is blocked.
    const server = await startSimulatorProcess({ pkiDir: tmpPki('opcua-rec-block-sim-'), updateIntervalMs: 100 });
    cleanup.push(() => server.close());
    const h = start({ endpoint: server.endpointUrl, watchdog_multiplier: 10, nodes: [{ node_id: server.nodeIds.temperature, variable: 'mvr_press1_temperature' }] });
    await flowingAfter(h, 'mvr_press1_temperature', 0);
    const timeout = h.source.status().detail?.watchdog_timeout_ms as number;
    expect(timeout).toBe(2_000);
    // A synchronous job twice as long as the watchdog (a huge answer decoded, a big commit).
    await new Promise<void>((resolve) =>
      setTimeout(() => {
        const until = performance.now() + 2 * timeout;
        while (performance.now() < until);
        resolve();
      }, 10),
    );
    const unblocked = Date.now();
    await flowingAfter(h, 'mvr_press1_temperature', unblocked, 5);
    await delay(timeout);
    expect((h.source.status().detail?.recoveries as Record<string, number>).watchdog ?? 0).toBe(0);
    expect(h.source.status().state).toBe('connected');
  }, 90_000);

  it('"down since" stays put across the retries of a stopped server and clears once connected (issue 24 §1)', async () => {
    const first = await sim();
    const h = start({ endpoint: first.endpointUrl, watchdog_multiplier: 10, nodes: [{ node_id: first.nodeIds.temperature, variable: 'mvr_press1_temperature' }] });
    await flowingAfter(h, 'mvr_press1_temperature', 0);
    expect(h.source.status().downSince).toBeNull();
    const stoppedAt = Date.now();
    await first.close();
    const down = await waitFor(() => h.source.status().downSince ?? null, { timeoutMs: 20_000, what: 'downSince set' });
    expect(down).toBeGreaterThanOrEqual(stoppedAt - 1);
    // Several reconnect attempts (each changes the state and its `since`); downSince does not move.
    const states = new Set<string>();
    const sinces = new Set<number>();
    const retries = () => metricValue(h.metrics, 'gateway_source_reconnects_total', { source: 'press1' });
    const r0 = await retries();
    await waitFor(
      async () => {
        const st = h.source.status();
        states.add(st.state);
        sinces.add(st.since);
        expect(st.downSince).toBe(down);
        return (await retries()) >= r0 + 3 && sinces.size >= 2;
      },
      { timeoutMs: 40_000, intervalMs: 20, what: 'three reconnect attempts while the server is away' },
    );
    await sim(first.port);
    await flowingAfter(h, 'mvr_press1_temperature', Date.now());
    await waitFor(() => h.source.status().downSince === null && h.source.status().lastError === null, { timeoutMs: 20_000, what: 'downSince and the error cleared' });
  }, 90_000);

  it('resumes after a longer outage through the watchdog and its own reconnect loop', async () => {
    const first = await sim();
    const h = start({ endpoint: first.endpointUrl, watchdog_multiplier: 10, nodes: [{ node_id: first.nodeIds.temperature, variable: 'mvr_press1_temperature' }] });
    await flowingAfter(h, 'mvr_press1_temperature', 0);
    await first.close();
    const stoppedAt = Date.now();
    await waitFor(() => (h.source.status().detail?.recoveries as Record<string, number>).watchdog >= 1, { timeoutMs: 20_000, what: 'watchdog trip' });
    expect(h.source.status().detail?.nodes_monitored).toBe(0);
    // While it is down the error says why, with its time; once connected again it is cleared (issue 24 §1).
    const down = await waitFor(() => h.source.status().lastError, { timeoutMs: 20_000, what: 'the outage as the source error' });
    expect(down.code).toMatch(/OPCUA_(WATCHDOG|UNREACHABLE)/);
    expect(down.at).toBeGreaterThanOrEqual(stoppedAt);
    await delay(1_000);
    await sim(first.port);
    await flowingAfter(h, 'mvr_press1_temperature', stoppedAt);
    expect(h.source.status().state).toBe('connected');
    await waitFor(() => h.source.status().lastError === null, { timeoutMs: 20_000, what: 'the error cleared after the reconnect' });
  });

  it('resumes after the network is cut for a few seconds', async () => {
    const server = await sim();
    const proxy: TcpProxy = await startTcpProxy(server.port);
    cleanup.push(() => proxy.close());
    const h = start({ endpoint: proxy.url('/UA/Press1'), watchdog_multiplier: 25, nodes: [{ node_id: server.nodeIds.temperature, variable: 'mvr_press1_temperature' }] });
    await flowingAfter(h, 'mvr_press1_temperature', 0);
    proxy.cut();
    const cutAt = Date.now();
    await delay(3_000);
    proxy.restore();
    await flowingAfter(h, 'mvr_press1_temperature', cutAt + 3_000);
    // Values flow again; the reported state follows once node-opcua has finished its repair.
    await waitFor(() => h.source.status().state === 'connected', { timeoutMs: 20_000, what: `state connected (is ${h.source.status().state})` });
  });

  it('rebuilds a connection that stays open but carries nothing (watchdog)', async () => {
    const server = await sim();
    const proxy: TcpProxy = await startTcpProxy(server.port);
    cleanup.push(() => proxy.close());
    const h = start({ endpoint: proxy.url('/UA/Press1'), watchdog_multiplier: 10, request_timeout: 60_000, nodes: [{ node_id: server.nodeIds.temperature, variable: 'mvr_press1_temperature' }] });
    await flowingAfter(h, 'mvr_press1_temperature', 0);
    proxy.blackhole();
    const holeAt = Date.now();
    await waitFor(() => (h.source.status().detail?.recoveries as Record<string, number>).watchdog >= 1, { timeoutMs: 20_000, what: 'watchdog trip' });
    expect(Date.now() - holeAt).toBeGreaterThanOrEqual(1_500);
    expect(h.log.text()).toMatch(/no data and no keep-alive from opc\.tcp:\/\/127\.0\.0\.1:\d+\/UA\/Press1 for \d+ s/);
    proxy.restore();
    await flowingAfter(h, 'mvr_press1_temperature', Date.now());
    expect(await metricValue(h.metrics, 'gateway_opcua_session_recoveries_total', { source: 'press1', how: 'watchdog' })).toBeGreaterThanOrEqual(1);
  });

  it('keeps retrying a server that is down at start-up and connects when it appears', async () => {
    const port = (await import('../../../src/sim/opcua-server.js')).findFreePort;
    const p = await port();
    const h = start({ endpoint: `opc.tcp://127.0.0.1:${p}/UA/Press1`, nodes: [{ node_id: 'ns=2;s=Press1.Temperature', variable: 'mvr_press1_temperature' }] });
    const err = await waitFor(() => h.source.status().lastError, { what: 'unreachable error' });
    expect(err.code).toBe('OPCUA_UNREACHABLE');
    expect(err.message).toContain(`cannot reach the OPC UA server opc.tcp://127.0.0.1:${p}/UA/Press1`);
    await sim(p);
    await flowingAfter(h, 'mvr_press1_temperature', 0);
  });
});
