import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AttributeIds, MonitoringMode, OPCUAClient, TimestampsToReturn } from 'node-opcua';
import { openBufferDatabase } from '../../../src/store/file/database.js';
import { GapLedger } from '../../../src/buffer/gaps.js';
import { systemClock } from '../../../src/core/clock.js';
import { createMetrics } from '../../../src/core/metrics.js';
import type { Sample } from '../../../src/core/sample.js';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import type { NodeBinding } from '../../../src/sources/opcua/decode.js';
import { HistoryBackfill } from '../../../src/sources/opcua/history.js';
import { entriesPerCall, readServerOperationLimits } from '../../../src/sources/opcua/operation-limits.js';
import { waitFor } from '../../helpers/wait.js';
import { captureLogger, makeSource, tmpPki, type Harness } from './helpers.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../../../src/runtime/store-schemas.js';

/**
 * Issue 25: a server's operation limits (Part 5 §6.3.11, ServerCapabilities.OperationLimits) are
 * read at connect and every Read, CreateMonitoredItems and HistoryRead is split to fit them. A
 * node-opcua server answers a call beyond them with BadTooManyOperations and does none of it;
 * before, the gateway sent 1,000 monitored items and 1,500 attribute reads per call whatever the
 * server allowed, so a server with small limits (embedded PLC servers) never got past the connect.
 */
const cleanup: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const NODES = 120;
const LIMITS = { maxMonitoredItemsPerCall: 25, maxNodesPerRead: 40, maxNodesPerHistoryReadData: 4 };

async function smallLimitServer(extra: Parameters<typeof startOpcuaSimulator>[0] = {}): Promise<OpcuaSimulator> {
  const sim = await startOpcuaSimulator({ pkiDir: tmpPki('oplimits-sim-'), bulkVariables: NODES, operationLimits: LIMITS, ...extra });
  cleanup.push(() => sim.close());
  return sim;
}

function startSource(sim: OpcuaSimulator, raw: Record<string, unknown>): Harness {
  const h = makeSource({ endpoint: sim.endpointUrl, nodes: Array.from({ length: NODES }, (_, i) => ({ node_id: sim.bulkNodeId(i + 1), variable: `mvr_bulk_${i + 1}` })), ...raw }, { pkiDir: tmpPki('oplimits-client-') });
  cleanup.push(() => h.close());
  void h.source.start();
  return h;
}

async function everyVariableRead(h: Harness): Promise<void> {
  await waitFor(() => h.source.status().state === 'connected', { timeoutMs: 90_000, what: `the source connected (now ${h.source.status().state}: ${h.source.status().lastError?.message ?? ''})` });
  expect(h.source.status().detail?.nodes_monitored).toBe(NODES);
  expect(h.source.status().detail?.invalid_nodes ?? []).toEqual([]);
  await waitFor(() => new Set(h.sink.samples.map((s) => s.variable)).size === NODES, { timeoutMs: 60_000, what: `a value of each of the ${NODES} nodes` });
}

/** A plain node-opcua client session on `endpointUrl`, closed after the test. */
async function bareSession(endpointUrl: string) {
  const client = OPCUAClient.create({ endpointMustExist: false, connectionStrategy: { maxRetry: 1 } });
  await client.connect(endpointUrl);
  cleanup.push(() => client.disconnect());
  const session = await client.createSession();
  cleanup.push(() => session.close().catch(() => undefined));
  return session;
}

describe('OPC UA operation limits (Part 5 §6.3.11)', () => {
  it('reads the server limits once per session', async () => {
    const sim = await smallLimitServer();
    const session = await bareSession(sim.endpointUrl);
    expect(await readServerOperationLimits(session)).toEqual(LIMITS);
  }, 120_000);

  it('splits the connect-time Read and CreateMonitoredItems to the server limits (subscription mode)', async () => {
    const sim = await smallLimitServer();
    const h = startSource(sim, { publishing_interval: 200, sampling_interval: 100 });
    await everyVariableRead(h);
    // The server saw the split: ceil(120 / 25) calls, none beyond its limit.
    expect(sim.monitoredItemStats()).toMatchObject({ createCalls: Math.ceil(NODES / LIMITS.maxMonitoredItemsPerCall), itemsRequested: NODES, maxItemsPerCall: LIMITS.maxMonitoredItemsPerCall, callsOverLimit: 0 });
    // What the gateway read is in its status (the operator's answer to "why so many calls").
    expect(h.source.status().detail?.operation_limits).toEqual({ max_nodes_per_read: LIMITS.maxNodesPerRead, max_monitored_items_per_call: LIMITS.maxMonitoredItemsPerCall, max_nodes_per_history_read_data: LIMITS.maxNodesPerHistoryReadData });
  }, 180_000);

  it('the simulator counts CreateMonitoredItems calls and the items each session holds, a call beyond its limit included', async () => {
    const sim = await smallLimitServer();
    const session = await bareSession(sim.endpointUrl);
    const sub = await session.createSubscription2({ requestedPublishingInterval: 500, publishingEnabled: true });
    const items = (from: number, n: number) => Array.from({ length: n }, (_, i) => ({ itemToMonitor: { nodeId: sim.bulkNodeId(from + i), attributeId: AttributeIds.Value }, monitoringMode: MonitoringMode.Reporting, requestedParameters: { clientHandle: from + i, samplingInterval: 500, queueSize: 1, discardOldest: true } }));
    const ok = await session.createMonitoredItems({ subscriptionId: sub.subscriptionId, timestampsToReturn: TimestampsToReturn.Both, itemsToCreate: items(1, LIMITS.maxMonitoredItemsPerCall) });
    expect(ok.results?.every((r) => r.statusCode.isGood())).toBe(true);
    await expect(session.createMonitoredItems({ subscriptionId: sub.subscriptionId, timestampsToReturn: TimestampsToReturn.Both, itemsToCreate: items(30, LIMITS.maxMonitoredItemsPerCall + 1) })).rejects.toThrow(/BadTooManyOperations/);
    const st = sim.monitoredItemStats();
    expect(st).toMatchObject({ createCalls: 2, itemsRequested: 2 * LIMITS.maxMonitoredItemsPerCall + 1, maxItemsPerCall: LIMITS.maxMonitoredItemsPerCall + 1, callsOverLimit: 1, callSizes: [LIMITS.maxMonitoredItemsPerCall, LIMITS.maxMonitoredItemsPerCall + 1] });
    expect(Object.values(st.itemsBySession)).toEqual([LIMITS.maxMonitoredItemsPerCall]);
  }, 120_000);

  it('splits the cyclic Read to MaxNodesPerRead (polling mode)', async () => {
    const sim = await smallLimitServer();
    const h = startSource(sim, { mode: 'polling', polling_interval: 500 });
    await everyVariableRead(h);
    expect(h.source.status().lastError).toBeNull();
  }, 180_000);

  it('splits the AccessLevel Read and HistoryRead of a backfill to the server limits', async () => {
    const toMs = Date.now() - 1_000;
    const fromMs = toMs - 10_000;
    const count = 12;
    const sim = await smallLimitServer({ bulkVariables: 0, historizedBulk: { count, fromMs, toMs, stepMs: 1_000 } });
    const session = await bareSession(sim.endpointUrl);
    const limits = await readServerOperationLimits(session);

    const dir = mkdtempSync(join(tmpdir(), 'oplimits-hist-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const log = captureLogger('info');
    const { db } = openBufferDatabase(join(dir, 'buffer.db'), { schemas: GATEWAY_SCHEMAS, synchronous: 'normal', logger: log.logger });
    cleanup.push(() => db.close());
    const metrics = createMetrics();
    const gaps = new GapLedger(gatewayStore(db).owner('gaps'), metrics);
    const gap = gaps.open({ source: 'plc', variables: null, from: fromMs, to: toMs, reason: 'source_disconnected', filled: 'pending' }, Date.now());
    const appends: Sample[] = [];
    const bindings: NodeBinding[] = Array.from({ length: count }, (_, i) => {
      const nodeId = sim.histNodeId(i + 1);
      return { index: i, configuredId: nodeId, nodeId, variable: `mvr_hist_${i + 1}`, scale: 1, offset: 0, timestamp: 'source', uncertain: 'forward', samplingInterval: 1_000, queueSize: 1 };
    });
    const history = new HistoryBackfill({
      source: 'plc',
      path: 'opcua.servers[0]',
      settings: { backfill: 'auto', max_window: 86_400_000, values_per_request: 1_000, max_values_per_gap: 1_000_000 },
      ctx: { lastCommitted: { get: () => fromMs - 1 }, gaps },
      sink: { append: async (samples) => void appends.push(...samples) },
      logger: log.logger,
      metrics,
      clock: systemClock,
      firstValueTimeoutMs: 10_000,
    });
    cleanup.push(() => history.end());
    history.begin(session, bindings, limits);
    for (const b of bindings) history.noteLive(b.index, toMs + 1);
    const settled = await waitFor(() => {
      const g = gaps.get(gap.id)!;
      return g.filled === 'pending' ? undefined : g;
    }, { timeoutMs: 60_000, what: 'the gap settled' });
    expect(settled.filled).toBe('yes');
    expect(new Set(appends.map((s) => s.variable)).size).toBe(count);
    expect(appends.length).toBe(count * 11); // fromMs .. toMs, one value a second
  }, 120_000);

  it('entriesPerCall: our chunk, lowered to the server limit counted in operations, never below one', () => {
    expect(entriesPerCall(1_000, 0)).toBe(1_000);
    expect(entriesPerCall(1_000, 25)).toBe(25);
    expect(entriesPerCall(500, 40, 3)).toBe(13);
    expect(entriesPerCall(500, 10_000, 3)).toBe(500);
    expect(entriesPerCall(500, 2, 3)).toBe(1);
  });
});
