import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { waitFor } from '../../helpers/wait.js';
import { makeSource, tmpPki, type Harness } from './helpers.js';

// A full collection on demand (what --expose-gc gives), to see what is still reachable.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const simPki = tmpPki('opcua-release-sim-');
const clientPki = tmpPki('opcua-release-client-');
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const BULK = 200;

async function sim(port?: number): Promise<OpcuaSimulator> {
  const s = await startOpcuaSimulator({ port, pkiDir: simPki, bulkVariables: BULK, updateIntervalMs: 100, securityModes: ['None'], historize: false });
  cleanup.push(() => s.close());
  return s;
}

/** What a link holds, seen only through a FinalizationRegistry (a WeakRef deref would keep it alive for the turn). */
function watchCollection(objects: Record<string, object>): () => string[] {
  const collected = new Set<string>();
  const registry = new FinalizationRegistry<string>((name) => collected.add(name));
  for (const [name, o] of Object.entries(objects)) registry.register(o, name);
  const names = Object.keys(objects);
  // The registry must stay reachable itself, or its callbacks never run.
  return () => (registry ? names.filter((n) => !collected.has(n)) : names);
}

describe('OPC UA link memory (issue 25)', () => {
  it('lets go of a broken link (client, session, subscription and its monitored items) while the source waits to reconnect', async () => {
    const first = await sim();
    const nodes = Array.from({ length: BULK }, (_, i) => ({ node_id: first.bulkNodeId(i + 1), variable: `mvr_bulk_${i + 1}` }));
    const h: Harness = makeSource(
      { endpoint: first.endpointUrl, security_mode: 'None', publishing_interval: 200, sampling_interval: 100, watchdog_multiplier: 10, reconnect: { initial_delay: 20_000, max_delay: 40_000 }, nodes },
      { pkiDir: clientPki },
    );
    cleanup.push(() => h.close());
    void h.source.start();
    await waitFor(() => h.source.status().detail?.nodes_monitored === BULK, { timeoutMs: 45_000, what: `${BULK} nodes monitored` });

    // Taken in a function of its own, so no local of this test keeps them.
    const stillAlive = (() => {
      // The bindings are not watched: they are the checked nodes, kept on purpose for the next
      // link (a rebuild re-checks only the refused ones, rebuild-recheck.test.ts).
      const link = (h.source as unknown as { link: { client: object; session: object; subscription: { subscription: object } } }).link;
      return watchCollection({ client: link.client, session: link.session, subscription: link.subscription.subscription });
    })();

    // The server goes away and stays away: the watchdog condemns the link, the source retries.
    await first.close();
    await waitFor(() => (h.source.status().detail?.recoveries as Record<string, number>).watchdog >= 1, { timeoutMs: 30_000, what: 'watchdog trip' });
    // Torn down, waiting to retry (16–24 s: the backoff's first step with its jitter).
    await waitFor(() => h.source.status().detail?.next_retry_ms, { timeoutMs: 30_000, what: 'the source waiting to retry' });
    let alive: string[] = [];
    await waitFor(
      async () => {
        gc();
        // FinalizationRegistry callbacks run in a task of their own after the collection.
        await new Promise((r) => setTimeout(r, 20));
        alive = stillAlive();
        return alive.length === 0;
      },
      { timeoutMs: 8_000, intervalMs: 500, what: "the broken link's objects collected while the source waits to retry" },
    ).catch(() => undefined);
    expect(alive, 'still reachable after the link was torn down').toEqual([]);
    expect(h.source.status().detail?.nodes_monitored).toBe(0);
    expect(h.source.status().detail?.next_retry_ms, 'still in the same wait').not.toBeNull();

    // And the source still recovers once the server is back.
    await sim(first.port);
    await waitFor(() => h.source.status().detail?.nodes_monitored === BULK, { timeoutMs: 90_000, what: 'every node monitored again' });
  }, 150_000);
});
