import { afterEach, describe, expect, it } from 'vitest';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { waitFor } from '../../helpers/wait.js';
import { makeSource, tmpPki, type Harness } from './helpers.js';

const simPki = tmpPki('opcua-recheck-sim-');
const clientPki = tmpPki('opcua-recheck-client-');
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const BULK = 40;
/** AttributeIds.DataType (Part 6 §A.1): the gateway's node check reads it for every node it checks. */
const DATA_TYPE = 14;

async function sim(port?: number): Promise<OpcuaSimulator> {
  const s = await startOpcuaSimulator({ port, pkiDir: simPki, bulkVariables: BULK, updateIntervalMs: 100, securityModes: ['None'], historize: false });
  cleanup.push(() => s.close());
  return s;
}

describe('OPC UA rebuild after a server restart (issue 25)', () => {
  it('checks again only the nodes it refused, not every node, when the namespace array is unchanged', async () => {
    const first = await sim();
    const missing = `${first.bulkNodeId(1)}_missing`;
    const nodes = [...Array.from({ length: BULK }, (_, i) => ({ node_id: first.bulkNodeId(i + 1), variable: `mvr_bulk_${i + 1}` })), { node_id: missing, variable: 'mvr_missing' }];
    const h: Harness = makeSource(
      { endpoint: first.endpointUrl, security_mode: 'None', publishing_interval: 200, sampling_interval: 100, watchdog_multiplier: 10, reconnect: { initial_delay: 300, max_delay: 1_000 }, nodes },
      { pkiDir: clientPki },
    );
    cleanup.push(() => h.close());
    void h.source.start();
    const invalidIds = () => ((h.source.status().detail?.invalid_nodes ?? []) as Array<{ node_id: string }>).map((n) => n.node_id);
    await waitFor(() => h.source.status().detail?.nodes_monitored === BULK, { timeoutMs: 45_000, what: `${BULK} nodes monitored` });
    expect(invalidIds()).toEqual([missing]);
    // The first connect checks every configured node.
    expect(first.attributeReads().get(DATA_TYPE)).toBe(BULK + 1);

    // The server goes away for longer than the watchdog (2 s): the link is rebuilt from scratch.
    await first.close();
    await waitFor(() => ((h.source.status().detail?.recoveries ?? {}) as Record<string, number>).watchdog >= 1, { timeoutMs: 30_000, what: 'the watchdog rebuilding the link' });
    const second = await sim(first.port);
    const restartedAt = Date.now();
    await waitFor(() => h.source.status().detail?.nodes_monitored === BULK, { timeoutMs: 60_000, what: 'every node monitored on the new server' });
    await waitFor(() => h.sink.of(`mvr_bulk_${BULK}`).some((s) => s.ts > restartedAt), { timeoutMs: 30_000, what: 'values from the new server' });

    // Same namespace array: only the refused node was read again (it is still refused, with its reason).
    expect(second.attributeReads().get(DATA_TYPE)).toBe(1);
    expect(invalidIds()).toEqual([missing]);
  }, 150_000);
});
