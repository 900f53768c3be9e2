import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPCUAClient, type ClientSession } from 'node-opcua';
import { openBufferDatabase } from '../../../src/store/file/database.js';
import { GapLedger } from '../../../src/buffer/gaps.js';
import { systemClock } from '../../../src/core/clock.js';
import { createMetrics } from '../../../src/core/metrics.js';
import type { Sample } from '../../../src/core/sample.js';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import type { NodeBinding } from '../../../src/sources/opcua/decode.js';
import { HistoryBackfill, type HistorySettings } from '../../../src/sources/opcua/history.js';
import { waitFor } from '../../helpers/wait.js';
import { captureLogger, tmpPki } from './helpers.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../../../src/runtime/store-schemas.js';

/**
 * Issue 21 §2, the caps of the historical backfill (src/sources/opcua/history.ts) against a real
 * node-opcua server, with a real gap ledger: values per node and gap (history.max_values_per_gap),
 * and the values of one answer handed to the buffer at once (of a server that ignores
 * numValuesPerNode but whose answer fits max_message_size).
 */
const cleanup: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function sessionTo(sim: OpcuaSimulator): Promise<ClientSession> {
  const client = OPCUAClient.create({ endpointMustExist: false, connectionStrategy: { maxRetry: 1 } });
  await client.connect(sim.endpointUrl);
  cleanup.push(() => client.disconnect());
  const session = await client.createSession();
  cleanup.push(() => session.close().catch(() => undefined));
  return session;
}

/** Backfills one node over [from, to] (a closed pending gap in a real ledger); returns the gap as settled and every append. */
async function backfill(sim: OpcuaSimulator, nodeId: string, from: number, to: number, settings: Partial<HistorySettings>) {
  const dir = mkdtempSync(join(tmpdir(), 'hist-caps-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const log = captureLogger('info');
  const { db } = openBufferDatabase(join(dir, 'buffer.db'), { schemas: GATEWAY_SCHEMAS, synchronous: 'normal', logger: log.logger });
  cleanup.push(() => db.close());
  const metrics = createMetrics();
  const gaps = new GapLedger(gatewayStore(db).owner('gaps'), metrics);
  const gap = gaps.open({ source: 'plc', variables: null, from, to, reason: 'source_disconnected', filled: 'pending' }, Date.now());
  const appends: Sample[][] = [];
  const binding: NodeBinding = { index: 0, configuredId: nodeId, nodeId, variable: 'mvr_x', scale: 1, offset: 0, timestamp: 'source', uncertain: 'forward', samplingInterval: 1_000, queueSize: 1 };
  const history = new HistoryBackfill({
    source: 'plc',
    path: 'opcua.servers[0]',
    settings: { backfill: 'auto', max_window: 86_400_000, values_per_request: 1_000, max_values_per_gap: 1_000_000, ...settings },
    ctx: { lastCommitted: { get: () => from - 1 }, gaps },
    sink: { append: async (samples) => void appends.push([...samples]) },
    logger: log.logger,
    metrics,
    clock: systemClock,
    firstValueTimeoutMs: 10_000,
  });
  cleanup.push(() => history.end());
  history.begin(await sessionTo(sim), [binding]);
  history.noteLive(0, to + 1);
  const settled = await waitFor(() => {
    const g = gaps.get(gap.id)!;
    return g.filled === 'pending' ? undefined : g;
  }, { timeoutMs: 60_000, what: 'the gap settled' });
  return { gap: settled, appends, log, status: history.status() };
}

describe('OPC UA historical backfill caps (issue 21 §2)', () => {
  it('stops a node after history.max_values_per_gap values, releases the continuation point, and marks the gap partial', async () => {
    const toMs = Date.now() - 1_000;
    const fromMs = toMs - 60_000;
    // 6,001 values, one every 10 ms, in the node's history already.
    const sim = await startOpcuaSimulator({ pkiDir: tmpPki('hist-caps-sim-'), historizedBulk: { count: 1, fromMs, toMs, stepMs: 10 } });
    cleanup.push(() => sim.close());
    const { gap, appends, log } = await backfill(sim, sim.histNodeId(1), fromMs, toMs, { values_per_request: 1_000, max_values_per_gap: 2_500 });
    const values = appends.flat();
    // Pages of 1,000 until 2,500 were taken (the third page in part), then the continuation point released.
    expect(values).toHaveLength(2_500);
    expect(values.at(-1)!.ts).toBe(fromMs + 2_499 * 10);
    expect(gap.filled).toBe('partial');
    expect(gap.note).toBe('reading stopped after 2500 values or 30 pages per node (history.max_values_per_gap) for 1 node(s): mvr_x');
    expect(log.lines.filter((l) => l.code === 'OPCUA_HISTORY_INCOMPLETE')).toHaveLength(1);
    // The server holds no continuation point for the session any more (Part 4 §5.10.3): released.
    expect(sim.continuationPoints()).toBe(0);
    // Without the cap the whole range is read.
    const all = await backfill(sim, sim.histNodeId(1), fromMs, toMs, { values_per_request: 1_000, max_values_per_gap: 1_000_000 });
    expect(all.gap.filled).toBe('yes');
    expect(all.appends.flat().length).toBe(6_001);
  }, 120_000);

  it('an answer of a server that ignores numValuesPerNode, within max_message_size, is taken whole and handed to the buffer in slices of at most 10,000', async () => {
    const sim = await startOpcuaSimulator({ pkiDir: tmpPki('hist-caps-sim-'), misbehave: { hugeHistory: 30_000 } });
    cleanup.push(() => sim.close());
    const toMs = Date.now() - 1_000;
    const fromMs = toMs - 60_000;
    const { gap, appends } = await backfill(sim, sim.misbehaviour!.nodeIds.hugeHistory!, fromMs, toMs, { values_per_request: 1_000 });
    // Asked for 1,000, given 30,000 (about 600 kB, under 4 MiB): one request, nothing asked twice.
    expect(sim.misbehaviour!.counters.historyReads).toBe(1);
    expect(sim.misbehaviour!.events[0]).toMatchObject({ kind: 'history_read', numValuesPerNode: 1_000, values: 30_000 });
    expect(appends.flat()).toHaveLength(30_000);
    // Before: one append (one buffer commit) of 30,000.
    expect(Math.max(...appends.map((a) => a.length))).toBeLessThanOrEqual(10_000);
    expect(gap.filled).toBe('yes');
  }, 120_000);
});
