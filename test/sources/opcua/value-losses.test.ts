import { describe, expect, it } from 'vitest';
import { GapLedger } from '../../../src/buffer/gaps.js';
import { silentLogger } from '../../../src/core/logger.js';
import { ValueLosses } from '../../../src/sources/opcua/value-losses.js';
import { buffersDestroyedAfterEach } from '../../helpers/buffer.js';
import { waitFor } from '../../helpers/wait.js';

const openTestBuffer = buffersDestroyedAfterEach();
const T0 = Date.UTC(2026, 10, 28, 8);

/** ValueLosses on a real buffer and gap ledger, with a monotonic clock the test moves. */
function losses() {
  const b = openTestBuffer();
  const gaps = new GapLedger(b.store.owner('gaps'), b.metrics);
  let mono = 0;
  const clock = { now: () => T0 + 60_000, monotonic: () => mono };
  const l = new ValueLosses({ source: 'plant', path: 'opcua.servers[0]', nodes: 3, sink: b.buffer, gaps, metrics: b.metrics, logger: silentLogger(), clock });
  const lostMetric = async (reason: string) => Number(new RegExp(`gateway_source_values_lost_total\\{source="plant",kind="opcua",reason="${reason}"\\} (\\d+)`).exec(await b.metrics.registry.metrics())?.[1] ?? 0);
  return { b, gaps, l, lostMetric, advance: (ms: number) => (mono += ms) };
}

describe('values lost before the buffer (OPC UA)', () => {
  it('an Overflow bit counts the samplings missed since the node\'s previous value (at least one); a refused value counts one; both in the dropped total, the metric and one gap naming the variables', async () => {
    const { b, gaps, l, lostMetric } = losses();
    // Node 0 delivered at T0, then a value with the Overflow bit 5 samplings (1 s) later: 4 were discarded.
    l.seen(0, T0);
    l.overflowed(0, 'mvr_a', T0 + 5_000, 1_000);
    // Node 1 never delivered before: one value at least.
    l.overflowed(1, 'mvr_b', T0 + 2_000, 1_000);
    l.refused('mvr_c', T0 + 3_000);
    expect(l.totalLost).toBe(6);
    expect(await lostMetric('server_overflow')).toBe(5);
    expect(await lostMetric('buffer_full')).toBe(1);
    expect(b.buffer.stats().droppedTotal).toBe(6);
    l.flush();
    const rows = gaps.list({ state: 'all' }).map((g) => gaps.view(g));
    expect(rows).toEqual([expect.objectContaining({ source: 'plant', variables: ['mvr_a', 'mvr_b', 'mvr_c'], from: T0, to: T0 + 5_000, reason: 'values_lost', filled: 'no' })]);
  });

  it('an episode ends as a gap once no value was lost for 5 s; the next loss starts another', async () => {
    const { gaps, l, advance } = losses();
    l.refused('mvr_a', T0);
    advance(1_000);
    l.refused('mvr_a', T0 + 1_000);
    expect(gaps.list({ state: 'all' })).toEqual([]);
    advance(5_000);
    await waitFor(() => gaps.list({ state: 'all' }).length === 1, { timeoutMs: 10_000, what: 'the quiet episode written as a gap' });
    l.refused('mvr_b', T0 + 9_000);
    l.flush();
    expect(gaps.list({ state: 'all' }).map((g) => gaps.view(g)).map((g) => [g.variables, g.from, g.to])).toEqual(
      expect.arrayContaining([[['mvr_a'], T0, T0 + 1_000], [['mvr_b'], T0 + 9_000, T0 + 9_000]]),
    );
  });
});
