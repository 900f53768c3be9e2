import type { MqttClient } from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import type { Source } from '../../../src/core/source.js';
import type { QualityTable } from '../../../src/core/quality.js';
import { sparkplugCodec } from '../../../src/sources/mqtt/decoders/sparkplug.js';
import { createMqttSources } from '../../../src/sources/mqtt/index.js';
import type { EmbeddedBrokerSource } from '../../../src/sources/mqtt/broker-source.js';
import { connectClient, contexts, endClient, GatedSink, section, startAedes, waitFor } from './helpers.js';

/**
 * Quality per variable over MQTT, through the embedded broker (aedes) with real MQTT clients:
 * Sparkplug B 3.0 chapter 5's stale rule (an NDEATH, the edge node's will, makes every metric of the
 * node and its devices stale; a DDEATH those of the device), an OPC-style Quality property, and a
 * plain publisher's last will (`last_will`).
 */
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

async function embedded(connection: Record<string, unknown>) {
  const sink = new GatedSink();
  const ctxs = contexts(sink);
  const sources = createMqttSources(section({ broker: { enabled: true, host: '127.0.0.1', port: 0, allow_anonymous: true }, connections: [{ name: 'line', url: 'embedded', ...connection }] }), ctxs.makeContext);
  for (const s of sources) await s.start();
  cleanup.push(() => Promise.all(sources.map((s) => s.close())));
  const broker = sources[0] as EmbeddedBrokerSource;
  await waitFor(() => broker.status().state === 'connected', { what: 'broker listening' });
  const quality = ctxs.contexts.get('line')!.stats.quality;
  return { url: `mqtt://127.0.0.1:${broker.broker.address!.port}`, source: sources[1] as Source, quality, sink, metrics: ctxs.metrics };
}

function q(t: QualityTable, id: string): string {
  t.age(Date.now());
  const slot = t.slotOf(id);
  return slot < 0 ? 'absent' : t.reading(slot).quality;
}

const payload = (p: Parameters<typeof sparkplugCodec.encodePayload>[0]) => Buffer.from(sparkplugCodec.encodePayload(p));

/** A Sparkplug B edge node "press-ctl" with device "press1", its NDEATH registered as its will. */
async function edgeNode(url: string): Promise<MqttClient> {
  const bdSeq = 3;
  const client = await connectClient(url, { clientId: 'edge-press-ctl', will: { topic: 'spBv1.0/plant/NDEATH/press-ctl', payload: payload({ timestamp: Date.now(), metrics: [{ name: 'bdSeq', type: 'UInt64', value: bdSeq }] }), qos: 1, retain: false } });
  cleanup.push(() => endClient(client));
  const now = Date.now();
  await client.publishAsync('spBv1.0/plant/NBIRTH/press-ctl', payload({ timestamp: now, seq: 0, metrics: [{ name: 'bdSeq', type: 'UInt64', value: bdSeq }, { name: 'Uptime', alias: 1, type: 'Int32', value: 5 }] }), { qos: 0 });
  await client.publishAsync(
    'spBv1.0/plant/DBIRTH/press-ctl/press1',
    payload({ timestamp: now, seq: 1, metrics: [{ name: 'Temperature', alias: 2, type: 'Float', value: 21.5 }, { name: 'Pressure', alias: 3, type: 'Double', value: 2.5 }] }),
    { qos: 0 },
  );
  return client;
}

const SPARKPLUG = {
  subscriptions: [
    {
      format: 'sparkplug',
      topic: 'spBv1.0/plant/#',
      request_rebirth: false,
      metrics: [
        { name: 'Uptime', variable: 'mvr_press_uptime', node_only: true },
        { name: 'Temperature', variable: 'mvr_press_temperature' },
        { name: 'Pressure', variable: 'mvr_press_pressure' },
      ],
    },
  ],
};

describe('MQTT quality per variable (embedded broker)', () => {
  it('Sparkplug: good from BIRTH and DATA; a DDEATH makes the device\'s metrics stale; the NDEATH will every metric of the node', async () => {
    const e = await embedded(SPARKPLUG);
    expect(q(e.quality, 'mvr_press_temperature')).toBe('none');
    const node = await edgeNode(e.url);
    await waitFor(() => ['mvr_press_uptime', 'mvr_press_temperature', 'mvr_press_pressure'].every((id) => q(e.quality, id) === 'good'), { what: 'all good after the births' });

    await node.publishAsync('spBv1.0/plant/DDEATH/press-ctl/press1', payload({ timestamp: Date.now(), seq: 2 }), { qos: 0 });
    await waitFor(() => q(e.quality, 'mvr_press_temperature') === 'stale' && q(e.quality, 'mvr_press_pressure') === 'stale', { what: 'the device\'s metrics stale after DDEATH' });
    expect(q(e.quality, 'mvr_press_uptime')).toBe('good');
    // The connection to the broker is fine: stale comes from the protocol, not the link.
    expect(e.source.status().state).toBe('connected');
    expect(e.source.status().variables).toMatchObject({ total: 3, good: 1, stale: 2 });

    await node.publishAsync('spBv1.0/plant/DBIRTH/press-ctl/press1', payload({ timestamp: Date.now(), seq: 3, metrics: [{ name: 'Temperature', alias: 2, type: 'Float', value: 22 }, { name: 'Pressure', alias: 3, type: 'Double', value: 2.6 }] }), { qos: 0 });
    await waitFor(() => q(e.quality, 'mvr_press_temperature') === 'good', { what: 'good again after the DBIRTH' });

    // The edge node's connection dies: the broker publishes its will, the NDEATH.
    node.stream.destroy();
    await waitFor(() => ['mvr_press_uptime', 'mvr_press_temperature', 'mvr_press_pressure'].every((id) => q(e.quality, id) === 'stale'), { what: 'every metric stale after the NDEATH', timeoutMs: 15_000 });
    expect(e.source.status().variables).toMatchObject({ total: 3, stale: 3 });
  }, 60_000);

  it('Sparkplug: a Quality property below 192 makes the metric bad (below 64) or uncertain; the value is not stored', async () => {
    const e = await embedded(SPARKPLUG);
    const node = await edgeNode(e.url);
    await waitFor(() => q(e.quality, 'mvr_press_pressure') === 'good', { what: 'good' });
    const quality = (v: number) => ({ Quality: { type: 'Int32' as const, value: v } });
    await node.publishAsync(
      'spBv1.0/plant/DDATA/press-ctl/press1',
      payload({ timestamp: Date.now(), seq: 2, metrics: [{ alias: 2, type: 'Float', value: 99, properties: quality(0) }, { alias: 3, type: 'Double', value: 98, properties: quality(64) }] }),
      { qos: 0 },
    );
    await waitFor(() => q(e.quality, 'mvr_press_temperature') === 'bad' && q(e.quality, 'mvr_press_pressure') === 'uncertain', { what: 'bad and uncertain' });
    expect(e.sink.appended.some((s) => s.value === 99 || s.value === 98)).toBe(false);
  }, 60_000);

  it('a publisher\'s last will makes the variables of its subscription stale until its next value', async () => {
    const e = await embedded({
      subscriptions: [
        { format: 'json', topic: 'plant/press1/data', last_will: { topic: 'plant/press1/status' }, values: [{ path: 'speed', variable: 'mvr_speed' }] },
        { format: 'number', topic: 'plant/oven/temp', variable: 'mvr_oven' },
      ],
    });
    const press = await connectClient(e.url, { clientId: 'press1-plc', will: { topic: 'plant/press1/status', payload: Buffer.from('offline'), qos: 1, retain: false } });
    cleanup.push(() => endClient(press));
    const oven = await connectClient(e.url, { clientId: 'oven-plc' });
    cleanup.push(() => endClient(oven));
    await press.publishAsync('plant/press1/status', 'online', { qos: 1 });
    await press.publishAsync('plant/press1/data', JSON.stringify({ speed: 12 }), { qos: 1 });
    await oven.publishAsync('plant/oven/temp', '180', { qos: 1 });
    await waitFor(() => q(e.quality, 'mvr_speed') === 'good' && q(e.quality, 'mvr_oven') === 'good', { what: 'both good' });
    press.stream.destroy();
    await waitFor(() => q(e.quality, 'mvr_speed') === 'stale', { what: 'stale after the last will', timeoutMs: 15_000 });
    expect(q(e.quality, 'mvr_oven')).toBe('good');
    // "online" is not a value, and nothing of the will was stored.
    expect(e.sink.appended.map((s) => s.variable).sort()).toEqual(['mvr_oven', 'mvr_speed']);
    const again = await connectClient(e.url, { clientId: 'press1-plc-2' });
    cleanup.push(() => endClient(again));
    await again.publishAsync('plant/press1/data', JSON.stringify({ speed: 13 }), { qos: 1 });
    await waitFor(() => q(e.quality, 'mvr_speed') === 'good', { what: 'good with the next value' });
  }, 60_000);

  it('Sparkplug: a host that lost its broker keeps the metrics stale after it is back, until the edge node sends them again', async () => {
    let broker = await startAedes();
    const port = broker.port;
    cleanup.push(() => broker.close());
    const ctxs = contexts(new GatedSink());
    const [source] = createMqttSources(section({ connections: [{ name: 'line', url: broker.url, client_id: 'gw-quality-host', reconnect: { initial: 100, max: 300 }, ...SPARKPLUG }] }), ctxs.makeContext);
    await source.start();
    cleanup.push(() => source.close());
    const quality = ctxs.contexts.get('line')!.stats.quality;
    await waitFor(() => source.status().state === 'connected', { what: 'connected' });
    const node = await edgeNode(broker.url);
    await waitFor(() => q(quality, 'mvr_press_temperature') === 'good', { what: 'good' });
    // A clean DISCONNECT: the broker discards the edge node's will, no NDEATH comes.
    await node.endAsync();
    await broker.close();
    await waitFor(() => source.status().state !== 'connected' && q(quality, 'mvr_press_temperature') === 'stale', { what: 'stale while the broker is away' });
    broker = await startAedes(port);
    await waitFor(() => source.status().state === 'connected', { what: 'reconnected', timeoutMs: 15_000 });
    expect(q(quality, 'mvr_press_temperature')).toBe('stale');
    expect(q(quality, 'mvr_press_uptime')).toBe('stale');
    const again = await edgeNode(broker.url);
    await waitFor(() => q(quality, 'mvr_press_temperature') === 'good' && q(quality, 'mvr_press_uptime') === 'good', { what: 'good after the rebirth' });
    await endClient(again);
  }, 60_000);
});
