import { OPCUAClient } from 'node-opcua';
import { afterEach, describe, expect, it } from 'vitest';
import type { GapLedger } from '../../../src/buffer/gaps.js';
import { systemClock } from '../../../src/core/clock.js';
import { createMetrics } from '../../../src/core/metrics.js';
import { startOpcuaSimulator } from '../../../src/sim/opcua-server.js';
import type { NodeBinding } from '../../../src/sources/opcua/decode.js';
import { HistoryBackfill } from '../../../src/sources/opcua/history.js';
import { waitFor } from '../../helpers/wait.js';
import { captureLogger, MemorySink, tmpPki } from './helpers.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

describe('OPC UA history status at scale (issue 25)', () => {
  it('names at most 20 nodes without history in the status and counts them all (not a list of every node)', async () => {
    const NODES = 45;
    const sim = await startOpcuaSimulator({ pkiDir: tmpPki('opcua-hstatus-sim-'), bulkVariables: NODES, securityModes: ['None'], historize: false });
    cleanup.push(() => sim.close());
    const client = OPCUAClient.create({ endpointMustExist: false, connectionStrategy: { maxRetry: 1 } });
    await client.connect(sim.endpointUrl);
    cleanup.push(() => client.disconnect());
    const session = await client.createSession();
    const bindings: NodeBinding[] = Array.from({ length: NODES }, (_, i) => ({
      index: i, configuredId: sim.bulkNodeId(i + 1), nodeId: sim.bulkNodeId(i + 1), variable: `mvr_bulk_${i + 1}`,
      scale: 1, offset: 0, timestamp: 'source', uncertain: 'forward', samplingInterval: 1_000, queueSize: 1,
    }));
    const log = captureLogger();
    // No gap open or pending: the backfill only checks which nodes keep history.
    const gaps = { openGap: () => null, pending: () => [], get: () => undefined, setFilled: () => undefined } as unknown as GapLedger;
    const history = new HistoryBackfill({
      source: 'press1', path: 'opcua.servers[0]', settings: { backfill: 'auto', max_window: 3_600_000, values_per_request: 1_000, max_values_per_gap: 100_000 },
      ctx: { lastCommitted: { get: () => null }, gaps }, sink: new MemorySink(), logger: log.logger, metrics: createMetrics(), clock: systemClock, firstValueTimeoutMs: 1_000,
    });
    history.begin(session, bindings);
    await waitFor(() => log.lines.some((l) => l.code === 'OPCUA_NO_HISTORY'), { timeoutMs: 30_000, what: 'the nodes without history noted' });
    const status = history.status();
    expect(status.nodes_without_history_count).toBe(NODES);
    expect(status.nodes_without_history).toEqual(bindings.slice(0, 20).map((b) => b.variable));
    history.end();
  });
});
