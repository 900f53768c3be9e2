import mqtt, { type MqttClient } from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import type { EmbeddedBrokerSource } from '../../src/sources/mqtt/broker-source.js';
import { startTestGateway, testConfigInput, type TestGateway } from '../helpers/gateway.js';
import { captureLines } from '../helpers/log.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Accepted data is never pushed out by something else (issue 35 §1): uplink down,
 * buffer.max_bytes 16 MB, thousands of large annotations on the annotations MQTT trigger topic
 * through the gateway's own embedded broker. The annotation outbox used to count against the
 * samples' bound, so drop_oldest deleted unsent samples to make room for annotations (25,305 in the
 * issue). The outbox has its own space now (src/store/README.md S5).
 */

const TOPIC = 'plant/line3/annotations';
/** No tracking service answers here: everything stays in the buffer and the outbox. */
const DOWN = { baseUrl: 'http://127.0.0.1:9/tracking/v1', authUrl: 'http://127.0.0.1:9/oauth/token' };

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

interface TriggerStatus {
  connected: boolean;
  messages: Record<string, number>;
}
const trigger = (gw: TestGateway) => (gw.handle.status().annotations as { mqtt_trigger: TriggerStatus } | undefined)?.mqtt_trigger;
const handled = (gw: TestGateway) => Object.values(trigger(gw)?.messages ?? {}).reduce((a, n) => a + n, 0);
const droppedSamples = async (gw: TestGateway) => (await gw.handle.metrics.bufferDroppedSamples.get()).values.reduce((a, v) => a + v.value, 0);

/** A gateway reading 200 generated variables every 100 ms, with its embedded broker, the uplink down; then the trigger on that broker. */
async function floodedGateway(extra: Record<string, unknown> = {}) {
  const log = captureLines();
  const sections = {
    buffer: { max_bytes: '16MB', synchronous: 'normal', commit_interval: 20 },
    generator: [{ name: 'line', variables: { prefix: 'mvr_gen_', count: 200 }, interval: 100 }],
    mqtt: { broker: { enabled: true, host: '127.0.0.1', port: 0, allow_anonymous: true, max_queued_messages: 10_000 } },
    log: { level: 'warn' },
    ...extra,
  };
  const gw = await startTestGateway(DOWN, sections, { logger: log.logger });
  cleanup.push(() => gw.destroy());
  const broker = gw.handle.sources.find((s) => s.name === 'mqtt-broker') as EmbeddedBrokerSource;
  const address = await waitFor(() => broker.broker.address, { what: 'embedded broker listening' });
  const url = `mqtt://127.0.0.1:${address.port}`;
  // The trigger on the gateway's own broker (annotations reload in place).
  const { config } = validateConfig(testConfigInput(DOWN, gw.dir, { ...sections, annotations: { site: { external_id: 'plant-demo' }, mqtt: { url, topic: TOPIC, reconnect: 200 } } }));
  await gw.handle.reload(config);
  await waitFor(() => trigger(gw)?.connected, { what: 'annotation trigger connected to the embedded broker' });
  const plc: MqttClient = await mqtt.connectAsync(url, { clientId: 'hmi-flood', reconnectPeriod: 0 });
  cleanup.push(() => plc.endAsync(true));
  return { gw, plc, log };
}

/** `n` annotations of ~4.8 kB each, published QoS 1, `inFlight` at a time. */
async function flood(plc: MqttClient, n: number, inFlight = 50): Promise<void> {
  const filler = 'Downtime report: '.padEnd(4_700, 'x');
  for (let i = 0; i < n; i += inFlight) {
    await Promise.all(
      Array.from({ length: Math.min(inFlight, n - i) }, (_, k) =>
        plc.publishAsync(TOPIC, JSON.stringify({ type: 'instant', occurred_at: new Date().toISOString(), text: `${filler} #${i + k}`, machine_variables: [] }), { qos: 1 }),
      ),
    );
  }
}

describe('an annotation flood never pushes samples out (issue 35 §1)', () => {
  it('5,000 annotations of 4.8 kB on the MQTT trigger, uplink down, max_bytes 16 MB: no sample dropped', async () => {
    const { gw, plc } = await floodedGateway();
    await waitFor(() => gw.handle.buffer.stats().rows > 20_000, { timeoutMs: 60_000, what: 'a backlog of samples' });
    const before = gw.handle.buffer.stats().rows;
    await flood(plc, 5_000);
    await waitFor(() => handled(gw) >= 5_000, { timeoutMs: 240_000, what: 'the trigger to handle every message' });
    // Not one unsent sample was deleted for them, and the backlog only grew.
    expect(await droppedSamples(gw)).toBe(0);
    expect(gw.handle.status().buffer.dropped_total).toBe(0);
    expect(gw.handle.buffer.stats().rows).toBeGreaterThan(before);
    // The outbox holds them all (24 MB, more than the samples' bound): its space is its own.
    expect(trigger(gw)?.messages.ok).toBe(5_000);
    expect(gw.handle.annotations?.store.counts().queued).toBe(5_000);
    const annotationsBytes = gw.handle.status().store!.owners.find((o) => o.owner === 'annotations')!.bytes;
    expect(annotationsBytes).toBeGreaterThan(16_000_000);
    expect(gw.handle.buffer.usedBytes()).toBeLessThan(16_000_000);
  }, 360_000);

  it('at its own bound the outbox refuses new annotations: counted and logged on MQTT, HTTP 507 with the reason; still no sample dropped', async () => {
    const { gw, plc, log } = await floodedGateway({ store: { annotations_max_bytes: '2MB' }, http: { enabled: true, host: '127.0.0.1', port: 0 } });
    await flood(plc, 1_000);
    await waitFor(() => handled(gw) >= 1_000, { timeoutMs: 240_000, what: 'the trigger to handle every message' });
    const messages = trigger(gw)!.messages;
    expect(messages.ok + messages.store_full).toBe(1_000);
    expect(messages.store_full).toBeGreaterThan(500);
    expect((await gw.handle.metrics.annotationTriggerMessages.get()).values.find((v) => v.labels.outcome === 'store_full')?.value).toBe(messages.store_full);
    expect((await gw.handle.metrics.storeRefusedWrites.get()).values.find((v) => v.labels.owner === 'annotations')?.value).toBe(messages.store_full);
    // Logged, at most a line a minute for the reason, not one per message.
    const said = log.lines.filter((l) => /refused: the annotation was NOT saved: no room for a new annotation: the annotations space is full/.test(String(l.msg)));
    expect(said.length).toBeGreaterThanOrEqual(1);
    expect(said.length).toBeLessThanOrEqual(2);
    // The API says why, with the bound named.
    const res = await fetch(`${gw.handle.httpUrl}/api/annotations`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'instant', occurred_at: new Date().toISOString(), text: 'Shift handover', machine_variables: [] }) });
    expect(res.status).toBe(507);
    const body = (await res.json()) as { error: { code: string; message: string; max_bytes: number } };
    expect(body.error.code).toBe('outbox_full');
    expect(body.error.message).toMatch(/store\.annotations_max_bytes is 2\.0 MB/);
    expect(body.error.max_bytes).toBe(2_000_000);
    expect(gw.handle.annotations?.store.counts().queued).toBe(messages.ok);
    expect(await droppedSamples(gw)).toBe(0);
  }, 360_000);
});
