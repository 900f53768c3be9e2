import { DataChangeNotification, DataType, DataValue, MonitoredItemNotification, NotificationMessage, StatusCodes } from 'node-opcua';
import { afterEach, describe, expect, it } from 'vitest';
import { publishRequestsFor, valuesPerInterval } from '../../../src/sources/opcua/publish-pipeline.js';
import { countMessage, SequenceTracker } from '../../../src/sources/opcua/subscription-reader.js';
import { delay, waitFor } from '../../helpers/wait.js';
import { makeSource, metricValue, tmpPki } from './helpers.js';
import { startSimulatorProcess, type SkewedSimulator } from './skewed-simulator.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/**
 * Issue 25: where OPC UA values go under load, against a node-opcua server in its own process (so
 * that blocking this process's event loop does not stop the server).
 */
describe('OPC UA subscription under load', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    while (cleanup.length > 0) await cleanup.pop()!().catch(() => undefined);
  });

  const gatewaySubscription = async (sim: SkewedSimulator) => (await sim.stats()).subscriptions.find((s) => s.session.startsWith('edge-gateway'));

  it('counts the values the server discarded from full monitored-item queues (Overflow bit) while the event loop was blocked, and logs it once', async () => {
    const sim = await startSimulatorProcess({ pkiDir: tmpPki('overflow-sim-'), bulkVariables: 20, historize: false });
    cleanup.push(() => sim.close());
    // Sampled every 100 ms into queues of 3, published every 100 ms: 300 ms of values fit.
    const h = makeSource({
      endpoint: sim.endpointUrl,
      security_mode: 'None',
      publishing_interval: '100ms',
      sampling_interval: '100ms',
      queue_size: 3,
      watchdog_multiplier: 100,
      nodes: sim.bulkNodeIds.map((node_id, i) => ({ node_id, variable: `mvr_bulk_${i + 1}` })),
    }, { pkiDir: tmpPki() });
    cleanup.push(() => h.close());
    await h.source.start();
    await waitFor(() => h.sink.samples.length >= 200, { timeoutMs: 60_000, what: 'values flowing' });
    const before = (await gatewaySubscription(sim))!.queueOverflows;

    // Blocked for 3 s, 10× what a queue holds: the server answers the Publish requests it has
    // queued, then keeps sampling into full queues and discards the oldest values.
    const until = Date.now() + 3_000;
    while (Date.now() < until) {
      /* the gateway's event loop is blocked */
    }

    const counted = await waitFor(async () => {
      const n = await metricValue(h.metrics, 'gateway_opcua_queue_overflows_total', { source: 'press1' });
      return n > 0 ? n : 0;
    }, { timeoutMs: 30_000, what: 'gateway_opcua_queue_overflows_total above 0' });
    const discarded = (await gatewaySubscription(sim))!.queueOverflows - before;
    expect(discarded, 'values the server discarded for the gateway').toBeGreaterThan(0);
    // Each flagged value stands for at least one discarded value of its node (Part 4 §5.12.1.5).
    expect(counted).toBeLessThanOrEqual(discarded);
    const warnings = h.log.lines.filter((l) => l.code === 'OPCUA_QUEUE_OVERFLOW');
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0].msg)).toContain('queue_size');
    // Values received are counted too (the stage before decoding).
    expect(await metricValue(h.metrics, 'gateway_opcua_values_received_total', { source: 'press1' })).toBeGreaterThanOrEqual(h.sink.samples.length);
  }, 120_000);

  it('keeps enough Publish requests queued at the server for one publishing interval of values, and again after node-opcua repaired a cut connection', async () => {
    const sim = await startSimulatorProcess({ pkiDir: tmpPki('pipeline-sim-'), bulkVariables: 1_000, historize: false });
    cleanup.push(() => sim.close());
    const proxy: TcpProxy = await startTcpProxy(sim.port);
    cleanup.push(() => proxy.close());
    // 1,000 nodes sampled 10× per publishing interval into queues of 10: 10,000 values per
    // Publish cycle, 1,000 per response from node-opcua: 10 requests needed, 12 kept.
    const h = makeSource({
      endpoint: proxy.url('/UA/Press1'),
      security_mode: 'None',
      publishing_interval: '1s',
      sampling_interval: '100ms',
      queue_size: 10,
      nodes: sim.bulkNodeIds.map((node_id, i) => ({ node_id, variable: `mvr_bulk_${i + 1}` })),
    }, { pkiDir: tmpPki() });
    cleanup.push(() => h.close());
    await h.source.start();
    await waitFor(() => (h.source.status().detail as { nodes_monitored: number }).nodes_monitored === 1_000, { timeoutMs: 90_000, what: '1,000 items monitored' });
    // node-opcua's client alone keeps 5; the server sees the gateway's 12 between two Publish cycles.
    const queued = (what: string) =>
      waitFor(async () => {
        const s = await gatewaySubscription(sim);
        return s && s.queuedPublishRequests >= 12 ? s.queuedPublishRequests : 0;
      }, { timeoutMs: 30_000, intervalMs: 100, what });
    expect(await queued('12 Publish requests queued at the server')).toBeLessThanOrEqual(12 + 5);
    expect((h.source.status().detail as { publish_requests: number }).publish_requests).toBe(12);

    // The requests queued on the broken connection are lost with it; node-opcua re-sends its own
    // five after the repair, the gateway the rest.
    const received = h.sink.samples.length;
    proxy.cut();
    await delay(3_000);
    proxy.restore();
    await waitFor(() => ((h.source.status().detail as { recoveries: Record<string, number> }).recoveries.reconnected ?? 0) >= 1, { timeoutMs: 60_000, what: 'the connection repaired by node-opcua' });
    await waitFor(() => h.sink.samples.length > received + 10_000, { timeoutMs: 60_000, what: 'values flowing after the repair' });
    expect(await queued('12 Publish requests queued at the server after the repair')).toBeGreaterThanOrEqual(12);
  }, 180_000);
});

describe('OPC UA publish accounting (units)', () => {
  it('sizes the Publish pipeline to one publishing interval of values, from what the server revised, at 1,000 per response, between node-opcua\'s 5 and 100', () => {
    const many = (n: number, samplingInterval: number, queueSize: number) => Array.from({ length: n }, () => ({ samplingInterval, queueSize }));
    const requests = (n: number, sampling: number, queue: number, perResponse?: number) => publishRequestsFor(valuesPerInterval(many(n, sampling, queue), 1_000), perResponse);
    expect(requests(100, 1_000, 10)).toBe(5);
    expect(requests(10_000, 1_000, 10)).toBe(12);
    expect(requests(30_000, 1_000, 10)).toBe(32);
    expect(requests(100_000, 1_000, 10)).toBe(100);
    // Sampled 10× per publishing interval, but no more than the queue holds.
    expect(requests(1_000, 100, 10)).toBe(12);
    expect(requests(1_000, 100, 3)).toBe(5);
    // Sampled slower than published: 300,000 items every 5 s are 60,000 values an interval, not 300,000.
    expect(requests(300_000, 5_000, 10)).toBe(62);
    expect(requests(20_000, 10_000, 10)).toBe(5);
    // Exception-based (sampling 0): one change per interval is assumed.
    expect(requests(8_000, 0, 10)).toBe(10);
    // A server that answers 5,000 values per response needs fewer requests.
    expect(requests(100_000, 1_000, 10, 5_000)).toBe(22);
  });

  it('counts values, Overflow bits, skipped and repeated sequence numbers of NotificationMessages', () => {
    const value = (overflow: boolean) => new DataValue({ value: { dataType: DataType.Double, value: 1 }, statusCode: overflow ? StatusCodes.GoodWithOverflowBit : StatusCodes.Good });
    const message = (sequenceNumber: number, overflows: boolean[]) =>
      new NotificationMessage({ sequenceNumber, notificationData: overflows.length === 0 ? [] : [new DataChangeNotification({ monitoredItems: overflows.map((o, i) => new MonitoredItemNotification({ clientHandle: i, value: value(o) })) })] });
    const seq = new SequenceTracker();
    expect(countMessage(message(1, []), seq)).toEqual({ values: 0, overflows: 0, missedMessages: 0 }); // first keep-alive: next is 1
    expect(countMessage(message(1, [false, true, false]), seq)).toEqual({ values: 3, overflows: 1, missedMessages: 0 });
    expect(countMessage(message(2, [false]), seq)).toEqual({ values: 1, overflows: 0, missedMessages: 0 });
    expect(countMessage(message(3, []), seq)).toEqual({ values: 0, overflows: 0, missedMessages: 0 }); // keep-alive: next is 3
    expect(countMessage(message(6, [true, true]), seq)).toEqual({ values: 2, overflows: 2, missedMessages: 3 }); // 3, 4 and 5 never came
    // A message that comes twice (republished after a repair while the server also sent it): its values are not handed on again.
    expect(countMessage(message(2, [false, true]), seq)).toEqual({ values: 0, overflows: 0, missedMessages: 0, repeated: true });
    expect(countMessage(message(7, [false]), seq)).toEqual({ values: 1, overflows: 0, missedMessages: 0 });
    // A re-created subscription (a new subscription id) starts again at 1: not a loss, not a repeat.
    seq.reset();
    expect(countMessage(message(1, [false]), seq)).toEqual({ values: 1, overflows: 0, missedMessages: 0 });
  });
});
