import { afterEach, describe, expect, it } from 'vitest';
import { GapLedger } from '../../../src/buffer/gaps.js';
import type { Sample } from '../../../src/core/sample.js';
import { openTestBuffer } from '../../helpers/buffer.js';
import { waitFor } from '../../helpers/wait.js';
import { makeSource, MemorySink, metricValue, tmpPki } from './helpers.js';
import { startSimulatorProcess, type SkewedSimulator } from './skewed-simulator.js';

/** A sink whose commits can be stalled: appends wait until `release()`, as a buffer that does not keep up. */
class StallableSink extends MemorySink {
  private gate: Promise<void> | null = null;
  private open: (() => void) | null = null;
  stall(): void {
    this.gate = new Promise((r) => (this.open = r));
  }
  release(): void {
    this.open?.();
    this.gate = null;
  }
  override async append(samples: readonly Sample[]): Promise<void> {
    while (this.gate) await this.gate;
    await super.append(samples);
  }
}

interface Detail {
  pending_samples: number;
  values_lost: number;
  flow: { holding: boolean; held_ms_total: number; server_queue_ms: number | null; publish_requests: number } | null;
  nodes_monitored: number;
}

/**
 * Degrading without loss, against a node-opcua server in its own process: when the
 * buffer does not keep up, the gateway holds its Publish requests back and the server's
 * monitored-item queues keep the values, instead of taking them and refusing them; what is lost
 * anyway (the server discarded it) is counted in the dropped total, the status and a gap.
 */
describe('OPC UA backpressure', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanup.length > 0) await cleanup.pop()!().catch(() => undefined);
  });
  const gatewaySubscription = async (sim: SkewedSimulator) => (await sim.stats()).subscriptions.find((s) => s.session.startsWith('edge-gateway'));

  it('holds Publish requests back while the buffer is stalled, so the server queues the values and none is refused', async () => {
    const sim = await startSimulatorProcess({ pkiDir: tmpPki('backpressure-sim-'), bulkVariables: 200, historize: false });
    cleanup.push(() => sim.close());
    const sink = new StallableSink();
    // 200 items sampled every 100 ms: 2,000 values/s. The gateway holds at most 1,000 for its
    // commit; the server's queues (100 samplings) hold 10 s.
    const h = makeSource({
      endpoint: sim.endpointUrl,
      security_mode: 'None',
      publishing_interval: '100ms',
      sampling_interval: '100ms',
      queue_size: 100,
      max_pending_samples: 1_000,
      nodes: sim.bulkNodeIds.map((node_id, i) => ({ node_id, variable: `mvr_bulk_${i + 1}` })),
    }, { pkiDir: tmpPki(), sink });
    cleanup.push(() => h.close());
    await h.source.start();
    await waitFor(() => sink.samples.length >= 2_000, { timeoutMs: 60_000, what: 'values flowing' });
    const detail = () => h.source.status().detail as unknown as Detail;

    // The buffer stops committing for 4 s: 8,000 values, eight times what the gateway may hold.
    sink.stall();
    const stalledAt = Date.now();
    let fewestRequests = Infinity;
    let mostPending = 0;
    let mostQueuedAtServer = 0;
    while (Date.now() - stalledAt < 4_000) {
      const s = await gatewaySubscription(sim);
      fewestRequests = Math.min(fewestRequests, s?.queuedPublishRequests ?? Infinity);
      mostQueuedAtServer = Math.max(mostQueuedAtServer, s?.queuedInItems ?? 0);
      mostPending = Math.max(mostPending, detail().pending_samples);
      await new Promise((r) => setTimeout(r, 50));
    }
    sink.release();

    // Everything the server kept arrives; nothing was refused, discarded or lost. (While 2,000
    // values a second keep flowing the gateway's queue is rarely empty at a given look: the values
    // the server sent are counted below instead.)
    await waitFor(async () => {
      const s = await gatewaySubscription(sim);
      return s !== undefined && s.queuedInItems + s.pendingNotifications < 400;
    }, { timeoutMs: 120_000, what: 'the server backlog delivered' });
    expect(h.source.status().samplesRefused, 'values refused while the buffer was stalled').toEqual({});
    // It held its Publish requests back: none left at the server, the values kept in its queues.
    expect(fewestRequests, 'Publish requests queued at the server during the stall, at the fewest').toBe(0);
    expect(mostQueuedAtServer, 'values the server kept for the gateway meanwhile').toBeGreaterThan(2_000);
    expect(mostPending).toBeLessThanOrEqual(1_000);
    expect(detail().values_lost).toBe(0);
    expect(detail().flow?.server_queue_ms).toBe(10_000);
    expect((await gatewaySubscription(sim))!.queueOverflows).toBe(0);
    expect(await metricValue(h.metrics, 'gateway_opcua_queue_overflows_total')).toBe(0);
    expect(detail().flow!.held_ms_total).toBeGreaterThanOrEqual(3_000);
    // No watchdog trip: the silence was the gateway's own.
    expect((detail() as unknown as { recoveries: Record<string, number> }).recoveries).toEqual({});
    // Every value the server sent the gateway so far arrived (none refused on the way in).
    const sent = (await gatewaySubscription(sim))!.notificationsSent;
    await waitFor(() => sink.samples.length >= sent, { timeoutMs: 60_000, what: `the ${sent} values the server sent` });
  }, 300_000);

  it('counts the values a full server queue discarded (Overflow bit) in the dropped total, the status and a gap of their variables', async () => {
    const sim = await startSimulatorProcess({ pkiDir: tmpPki('overflow-loss-sim-'), bulkVariables: 20, historize: false });
    cleanup.push(() => sim.close());
    const buf = openTestBuffer();
    cleanup.push(() => buf.destroy());
    const gaps = new GapLedger(buf.store.owner('gaps'));
    // Sampled every 100 ms into queues of 3: 300 ms of values fit.
    const h = makeSource({
      endpoint: sim.endpointUrl,
      security_mode: 'None',
      publishing_interval: '100ms',
      sampling_interval: '100ms',
      queue_size: 3,
      watchdog_multiplier: 100,
      history: { backfill: 'off' },
      nodes: sim.bulkNodeIds.map((node_id, i) => ({ node_id, variable: `mvr_bulk_${i + 1}` })),
    }, { pkiDir: tmpPki(), sink: buf.buffer, history: { lastCommitted: buf.buffer.lastCommitted, gaps } });
    cleanup.push(() => h.close());
    await h.source.start();
    await waitFor(() => buf.buffer.stats().committedTotal >= 200, { timeoutMs: 60_000, what: 'values flowing' });
    const before = (await gatewaySubscription(sim))!.queueOverflows;

    // The event loop blocked 3 s, ten times what a queue holds: the server keeps sampling into full
    // queues and discards the oldest values (Publish requests cannot help while nothing is read).
    const until = Date.now() + 3_000;
    while (Date.now() < until) {
      /* the gateway's event loop is blocked */
    }

    const lost = await waitFor(() => {
      const n = (h.source.status().detail as unknown as Detail).values_lost;
      return n > 0 ? n : 0;
    }, { timeoutMs: 30_000, what: 'values_lost above 0' });
    const discarded = (await gatewaySubscription(sim))!.queueOverflows - before;
    const flagged = await metricValue(h.metrics, 'gateway_opcua_queue_overflows_total');
    expect(discarded).toBeGreaterThan(0);
    // Estimated from the time since each node's previous value and its sampling interval: at least
    // one per flagged value, and (every value of these nodes changes at each sampling) about what
    // the server discarded.
    expect(lost).toBeGreaterThanOrEqual(flagged);
    expect(lost).toBeGreaterThanOrEqual(discarded * 0.5);
    expect(lost).toBeLessThanOrEqual(discarded * 2 + 20);
    expect(await metricValue(h.metrics, 'gateway_source_values_lost_total', { reason: 'server_overflow' })).toBe(lost);
    expect(buf.buffer.stats().droppedTotal, 'the status dropped_total counts them').toBe(lost);
    // One gap for the episode once it has been quiet, naming the variables that lost values.
    const gap = await waitFor(() => gaps.list({ state: 'all' }).find((g) => g.reason === 'values_lost'), { timeoutMs: 30_000, what: 'a values_lost gap' });
    expect(gap.to).not.toBeNull();
    expect(gap.to! - gap.from).toBeGreaterThanOrEqual(1_000);
    expect(gap.variables?.length ?? 20).toBeGreaterThan(0);
    expect(gap.variables ?? []).toEqual(expect.arrayContaining([expect.stringMatching(/^mvr_bulk_\d+$/)]));
    expect(h.log.lines.some((l) => l.code === 'OPCUA_VALUES_LOST')).toBe(true);
  }, 120_000);
});
