import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import type { Sample, SampleSink } from '../../../src/core/sample.js';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { delay, waitFor } from '../../helpers/wait.js';
import { makeSource, tmpPki, type Harness } from './helpers.js';
import { startSimulatorProcess } from './skewed-simulator.js';
import { startTcpProxy } from './tcp-proxy.js';

// A full collection on demand (what --expose-gc gives), to measure what stays reachable.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const simPki = tmpPki('opcua-items-sim-');
const clientPki = tmpPki('opcua-items-client-');
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const BULK = 20;

async function sim(port?: number, extra: Parameters<typeof startOpcuaSimulator>[0] = {}): Promise<OpcuaSimulator> {
  const s = await startOpcuaSimulator({ port, pkiDir: simPki, bulkVariables: BULK, updateIntervalMs: 100, securityModes: ['None'], historize: false, ...extra });
  cleanup.push(() => s.close());
  return s;
}

function start(endpoint: string, nodeIdOf: (i: number) => string, n = BULK, extra: Record<string, unknown> = {}, sink?: SampleSink): Harness {
  const h = makeSource(
    {
      endpoint,
      security_mode: 'None',
      publishing_interval: 200,
      sampling_interval: 100,
      // 30 s: the repair is node-opcua's (and the items the gateway's), not the watchdog's rebuild.
      watchdog_multiplier: 150,
      reconnect: { initial_delay: 300, max_delay: 2_000 },
      nodes: Array.from({ length: n }, (_, i) => ({ node_id: nodeIdOf(i + 1), variable: `mvr_bulk_${i + 1}` })),
      ...extra,
    },
    { pkiDir: clientPki, ...(sink ? { sink } : {}) },
  );
  cleanup.push(() => h.close());
  void h.source.start();
  return h;
}

const monitored = (h: Harness) => h.source.status().detail?.nodes_monitored;
const reconnected = (h: Harness) => (h.source.status().detail?.recoveries as Record<string, number>).reconnected ?? 0;
const itemsOnServer = (s: OpcuaSimulator) => Object.values(s.monitoredItemStats().itemsBySession).reduce((t, k) => t + k, 0);
const flowingAfter = (h: Harness, variable: string, t: number, n = 3) =>
  waitFor(() => h.sink.of(variable).filter((s) => s.ts > t).length >= n, { timeoutMs: 45_000, what: `${variable} flowing again` });

describe('OPC UA monitored items, created by the gateway (issue 25)', () => {
  it('after a network cut node-opcua keeps the subscription, and the items are not created a second time (no value twice)', async () => {
    const server = await sim();
    const proxy = await startTcpProxy(server.port);
    cleanup.push(() => proxy.close());
    const h = start(proxy.url('/UA/Press1'), (i) => server.bulkNodeId(i));
    await waitFor(() => monitored(h) === BULK, { timeoutMs: 45_000, what: `${BULK} nodes monitored` });
    await flowingAfter(h, `mvr_bulk_${BULK}`, 0);
    const callsBefore = server.monitoredItemStats().createCalls;

    proxy.cut();
    const cutAt = Date.now();
    await delay(3_000);
    proxy.restore();
    await waitFor(() => reconnected(h) >= 1, { timeoutMs: 45_000, what: 'node-opcua repaired the connection' });
    await waitFor(() => h.source.status().state === 'connected', { timeoutMs: 20_000, what: 'state connected' });
    const restoredAt = Date.now();
    await flowingAfter(h, `mvr_bulk_${BULK}`, restoredAt, 5);

    expect(server.monitoredItemStats().createCalls, 'CreateMonitoredItems calls after the repair').toBe(callsBefore);
    expect(itemsOnServer(server)).toBe(BULK);
    expect(monitored(h)).toBe(BULK);
    // An item created twice would deliver every value twice: one sample per source timestamp.
    for (const v of ['mvr_bulk_1', `mvr_bulk_${BULK}`]) {
      const ts = h.sink.of(v).filter((s) => s.ts > cutAt).map((s) => s.ts);
      expect(new Set(ts).size, `${v}: samples with the same source timestamp`).toBe(ts.length);
    }
  }, 120_000);

  it('after a server restart node-opcua re-creates the subscription and the gateway its items, split to MaxMonitoredItemsPerCall', async () => {
    const limits = { maxMonitoredItemsPerCall: 6, maxNodesPerRead: 100 };
    const first = await sim(undefined, { operationLimits: limits });
    const h = start(first.endpointUrl, (i) => first.bulkNodeId(i));
    await waitFor(() => monitored(h) === BULK, { timeoutMs: 45_000, what: `${BULK} nodes monitored` });
    await first.close();
    const stoppedAt = Date.now();
    await delay(1_500);
    const second = await sim(first.port, { operationLimits: limits });
    await waitFor(() => reconnected(h) >= 1, { timeoutMs: 45_000, what: 'node-opcua repaired the session' });
    for (const i of [1, BULK]) await flowingAfter(h, `mvr_bulk_${i}`, stoppedAt + 1_500, 1);

    const st = second.monitoredItemStats();
    expect(st.createCalls).toBe(Math.ceil(BULK / limits.maxMonitoredItemsPerCall));
    expect(st.maxItemsPerCall).toBeLessThanOrEqual(limits.maxMonitoredItemsPerCall);
    expect(st.callsOverLimit).toBe(0);
    expect(itemsOnServer(second)).toBe(BULK);
    expect(monitored(h)).toBe(BULK);
    expect((h.source.status().detail?.recoveries as Record<string, number>).watchdog ?? 0).toBe(0);
    expect(h.log.lines.some((l) => l.msg === 'OPC UA monitored items created again: the server had lost the subscription (restarted)' && l.items === BULK)).toBe(true);
  }, 120_000);

  it('a monitored item costs the gateway ~220 bytes of heap (binding, node config, state), not a node-opcua object graph as well (~1,030 bytes before)', async () => {
    // The server in its own process: its own per-item objects (several KB each) are not in this heap.
    const MAX = 6_000;
    const server = await startSimulatorProcess({ bulkVariables: MAX, updateIntervalMs: 1_000, securityModes: ['None'], historize: false, pkiDir: tmpPki('opcua-items-proc-') });
    cleanup.push(() => server.close());
    // Counts values without keeping them.
    const counting = (): SampleSink & { n: number } => {
      const sink = { n: 0, append: async (s: readonly Sample[]) => void (sink.n += s.length) };
      return sink;
    };
    /** Heap held once `n` items are monitored and values flow, over the heap before the source started. */
    const heldFor = async (n: number): Promise<number> => {
      const sink = counting();
      gc();
      const before = process.memoryUsage().heapUsed;
      const h = start(server.endpointUrl, (i) => server.bulkNodeIds[i - 1], n, { sampling_interval: 1_000, publishing_interval: 500, history: { backfill: 'off' } }, sink);
      await waitFor(() => monitored(h) === n, { timeoutMs: 60_000, what: `${n} nodes monitored` });
      await waitFor(() => sink.n >= 2 * n, { timeoutMs: 30_000, what: `values of ${n} nodes` });
      gc();
      const held = process.memoryUsage().heapUsed - before;
      await h.close();
      return held;
    };
    // Two sizes, so the client's own fixed cost (client, session, certificates) cancels out; a
    // first run beforehand, so code compiled and caches filled once are not counted either.
    await heldFor(200);
    const small = await heldFor(1_000);
    const large = await heldFor(MAX);
    const perItem = (large - small) / (MAX - 1_000);
    expect(perItem, `heap per monitored item, bytes (1,000 items: ${Math.round(small / 1024)} KB, ${MAX}: ${Math.round(large / 1024)} KB)`).toBeLessThan(450);
  }, 180_000);
});
