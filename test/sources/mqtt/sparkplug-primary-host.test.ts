import type { MqttClient } from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { validateConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/core/errors.js';
import type { Source } from '../../../src/core/source.js';
import { OVEN_METRICS, startMqttSimulator } from '../../../src/sim/mqtt-publisher.js';
import { PrimaryHostWatch } from '../../../src/sim/sparkplug-host-watch.js';
import { sparkplugCodec } from '../../../src/sources/mqtt/decoders/sparkplug.js';
import { createMqttSources } from '../../../src/sources/mqtt/index.js';
import { openTestBuffer, type TestBuffer } from '../../helpers/buffer.js';
import { connectClient, contexts, delay, endClient, GatedSink, section, startAedes, waitFor, type TestAedes } from './helpers.js';

/**
 * The gateway as Sparkplug B 3.0 Primary Host Application (primary_host_id): its STATE birth, the
 * Will the broker publishes when the connection dies, the death before a clean stop, the answer to
 * an offline STATE for its id, and store-and-forward (is_historical) data from an edge node.
 */
const HOST = 'gw-test-host';
const STATE_TOPIC = `spBv1.0/STATE/${HOST}`;

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

async function broker(): Promise<TestAedes> {
  const b = await startAedes();
  cleanup.push(() => b.close());
  return b;
}

async function gateway(url: string, sink: GatedSink | TestBuffer['buffer'] = new GatedSink(), over: Record<string, unknown> = {}) {
  const ctxs = contexts(sink);
  const sources = createMqttSources(
    section({ connections: [{ name: 'spb', url, client_id: 'gw-primary-host', clean: true, reconnect: { initial: 100, max: 500 }, primary_host_id: HOST, subscriptions: [{ format: 'sparkplug', topic: 'spBv1.0/plant/#', payload_variables: ['mvr_*'] }], ...over }] }),
    ctxs.makeContext,
  );
  const source = sources[0] as Source;
  await source.start();
  let closed = false;
  cleanup.push(async () => {
    if (!closed) await source.close();
  });
  return {
    source,
    metrics: ctxs.metrics,
    close: async () => {
      closed = true;
      await source.close();
    },
  };
}

interface StateSeen {
  online: boolean;
  timestamp: number;
  retain: boolean;
}

/** A client that records every STATE message for HOST (retained ones included, flagged). */
async function stateWatcher(url: string): Promise<{ client: MqttClient; seen: StateSeen[] }> {
  const client = await connectClient(url, { clientId: `watcher-${Math.random().toString(16).slice(2)}` });
  cleanup.push(() => endClient(client));
  const seen: StateSeen[] = [];
  client.on('message', (topic, payload, packet) => {
    if (topic !== STATE_TOPIC) return;
    const v = JSON.parse(payload.toString()) as { online: boolean; timestamp: number };
    seen.push({ online: v.online, timestamp: v.timestamp, retain: packet.retain });
  });
  await client.subscribeAsync(STATE_TOPIC, { qos: 1 });
  return { client, seen };
}

async function events(metrics: Awaited<ReturnType<typeof gateway>>['metrics']): Promise<Record<string, number>> {
  return Object.fromEntries((await metrics.mqttSparkplugEvents.get()).values.map((v) => [String(v.labels.event), v.value]));
}

describe('Sparkplug Primary Host Application (primary_host_id)', () => {
  it('publishes its birth STATE retained at QoS 1 after connecting, with the timestamp of its CONNECT Will', async () => {
    const b = await broker();
    let will: { topic: string; payload: Buffer; qos: number; retain: boolean } | null = null;
    let published: { qos: number; retain: boolean } | null = null;
    b.aedes.on('client', (c) => {
      if (c.id === 'gw-primary-host') will = (c as unknown as { will: typeof will }).will;
    });
    b.aedes.on('publish', (packet, c) => {
      if (c?.id === 'gw-primary-host' && packet.topic === STATE_TOPIC) published = { qos: packet.qos, retain: packet.retain };
    });
    const before = Date.now();
    const gw = await gateway(b.url);
    await waitFor(() => published, { what: 'the birth STATE at the broker' });
    expect(published).toEqual({ qos: 1, retain: true });
    expect(gw.source.status().detail).toMatchObject({ primary_host: { host_id: HOST, online: true } });
    // A client that subscribes later gets the birth as the retained message of the topic.
    const watcher = await stateWatcher(b.url);
    await waitFor(() => watcher.seen.length > 0, { what: 'the retained STATE' });
    const birth = watcher.seen[0];
    expect(birth).toMatchObject({ online: true, retain: true });
    expect(birth.timestamp).toBeGreaterThanOrEqual(before);
    // The Will: online false, same timestamp, QoS 1, retained (tck-id-host-topic-phid-birth-payload-timestamp).
    expect(will).not.toBeNull();
    const w = will as unknown as { topic: string; payload: Buffer; qos: number; retain: boolean };
    expect({ topic: w.topic, qos: w.qos, retain: w.retain, payload: JSON.parse(w.payload.toString()) }).toEqual({ topic: STATE_TOPIC, qos: 1, retain: true, payload: { online: false, timestamp: birth.timestamp } });
  });

  it.each([true, false])('a connection dropped without DISCONNECT makes the broker publish online:false with the birth\'s timestamp; the reconnect births again (clean: %s)', async (clean) => {
    const b = await broker();
    const watcher = await stateWatcher(b.url);
    const gw = await gateway(b.url, new GatedSink(), { clean });
    await waitFor(() => watcher.seen.some((s) => s.online), { what: 'the birth' });
    const birth = watcher.seen.find((s) => s.online)!;
    // The broker's side of the gateway's socket dies (as when the gateway process is SIGKILLed).
    const server = (b.aedes as unknown as { clients: Record<string, { conn: { destroy(): void } }> }).clients['gw-primary-host'];
    server.conn.destroy();
    const death = await waitFor(() => watcher.seen.find((s) => !s.online), { what: 'the Will (online:false)' });
    expect(death.timestamp).toBe(birth.timestamp);
    // The gateway reconnects with a new CONNECT: a new, later timestamp in its new birth.
    const again = await waitFor(() => watcher.seen.find((s) => s.online && s.timestamp > birth.timestamp), { what: 'a new birth after the reconnect' });
    expect(again.timestamp).toBeGreaterThan(death.timestamp);
    expect((await events(gw.metrics)).state_birth).toBe(2);
    // clean: false reconnects into the kept session (no new SUBSCRIBE of the data topics): the birth still follows.
    expect(gw.source.status().detail).toMatchObject({ session_present: !clean, connects: 2 });
  });

  it('a clean stop publishes online:false before disconnecting, and does not answer its own death', async () => {
    const b = await broker();
    const watcher = await stateWatcher(b.url);
    const gw = await gateway(b.url);
    const birth = await waitFor(() => watcher.seen.find((s) => s.online), { what: 'the birth' });
    await gw.close();
    const death = await waitFor(() => watcher.seen.find((s) => !s.online), { what: 'the death STATE' });
    expect(death.timestamp).toBeGreaterThanOrEqual(birth.timestamp);
    // The retained STATE is now the death: a newcomer sees the host offline.
    const late = await stateWatcher(b.url);
    await waitFor(() => late.seen.length > 0, { what: 'the retained STATE' });
    expect(late.seen).toEqual([{ online: false, timestamp: death.timestamp, retain: true }]);
    expect(watcher.seen.filter((s) => s.online)).toHaveLength(1);
    expect(await events(gw.metrics)).toMatchObject({ state_birth: 1, state_death: 1 });
  });

  it('answers an offline STATE for its id (forged, or an earlier connection\'s Will) with its birth again', async () => {
    const b = await broker();
    const watcher = await stateWatcher(b.url);
    const gw = await gateway(b.url);
    const birth = await waitFor(() => watcher.seen.find((s) => s.online), { what: 'the birth' });
    const other = await connectClient(b.url, { clientId: 'someone-else' });
    cleanup.push(() => endClient(other));
    await other.publishAsync(STATE_TOPIC, JSON.stringify({ online: false, timestamp: birth.timestamp }), { qos: 1, retain: true });
    await waitFor(() => watcher.seen.filter((s) => s.online).length === 2, { what: 'the birth published again' });
    const last = watcher.seen[watcher.seen.length - 1];
    // Same timestamp as the connection's Will (tck-id-message-flow-hid-sparkplug-state-message-delivered).
    expect(last).toMatchObject({ online: true, timestamp: birth.timestamp });
    // The retained STATE is online again for edge nodes connecting later.
    const late = await stateWatcher(b.url);
    await waitFor(() => late.seen.length > 0, { what: 'the retained STATE' });
    expect(late.seen[0]).toMatchObject({ online: true, timestamp: birth.timestamp });
    expect((await events(gw.metrics)).state_republished).toBe(1);
  });

  it('publishes its birth before anything else: a Rebirth request for early data follows it', async () => {
    // The first message a host publishes is its birth (tck-id-host-topic-phid-birth-message): data from
    // an unknown edge node arriving at once must not make an NCMD overtake it.
    const b = await broker();
    const order: string[] = [];
    b.aedes.on('publish', (packet, c) => {
      if (c?.id === 'gw-primary-host') order.push(packet.topic);
    });
    const edge = await connectClient(b.url, { clientId: 'edge-early' });
    cleanup.push(() => endClient(edge));
    await gateway(b.url);
    await waitFor(() => order.includes(STATE_TOPIC), { what: 'the birth' });
    await edge.publishAsync('spBv1.0/plant/DDATA/n1/d1', Buffer.from(sparkplugCodec.encodePayload({ timestamp: Date.now(), seq: 5, metrics: [{ alias: 3, type: 'Double', value: 1 }] })), { qos: 0 });
    await waitFor(() => order.includes('spBv1.0/plant/NCMD/n1'), { what: 'the rebirth request' });
    expect(order[0]).toBe(STATE_TOPIC);
  });

  it('stores store-and-forward (is_historical) metrics under their own, older timestamps, without a sequence complaint', async () => {
    const b = await broker();
    const tb = openTestBuffer();
    cleanup.push(() => tb.destroy());
    const gw = await gateway(b.url, tb.buffer);
    const edge = await connectClient(b.url, { clientId: 'edge-saf' });
    cleanup.push(() => endClient(edge));
    const enc = (p: Parameters<typeof sparkplugCodec.encodePayload>[0]) => Buffer.from(sparkplugCodec.encodePayload(p));
    const now = Date.now();
    // Values kept while the host was offline: 3 and 2 minutes ago, sent after the BIRTH of the new session.
    const old1 = now - 180_000;
    const old2 = now - 120_000;
    await edge.publishAsync('spBv1.0/plant/NBIRTH/saf', enc({ timestamp: now, seq: 0, metrics: [{ name: 'bdSeq', type: 'UInt64', value: 0 }] }), { qos: 0 });
    await edge.publishAsync('spBv1.0/plant/DBIRTH/saf/d1', enc({ timestamp: now, seq: 1, metrics: [{ name: 'mvr_saf_level', alias: 1, type: 'Double', value: 30, timestamp: now }] }), { qos: 0 });
    await edge.publishAsync('spBv1.0/plant/DDATA/saf/d1', enc({ timestamp: now, seq: 2, metrics: [{ alias: 1, type: 'Double', value: 10, timestamp: old1, isHistorical: true }, { alias: 1, type: 'Double', value: 20, timestamp: old2, isHistorical: true }] }), { qos: 0 });
    await edge.publishAsync('spBv1.0/plant/DDATA/saf/d1', enc({ timestamp: now + 1, seq: 3, metrics: [{ alias: 1, type: 'Double', value: 31, timestamp: now + 1 }] }), { qos: 0 });
    await waitFor(() => tb.rows().filter((r) => r.variable === 'mvr_saf_level').length === 4, { what: 'four stored values' });
    const rows = tb.rows().filter((r) => r.variable === 'mvr_saf_level').map((r) => [r.ts, r.value]).sort((x, y) => x[0] - y[0]);
    expect(rows).toEqual([[old1, 10], [old2, 20], [now, 30], [now + 1, 31]]);
    const ev = await events(gw.metrics);
    expect(ev.seq_gap ?? 0).toBe(0);
    expect(ev.rebirth_requested ?? 0).toBe(0);
  });

  it('refuses a host id that is not one topic level, and primary_host_id where it cannot work, naming the setting and the value', () => {
    const service = { base_url: 'http://127.0.0.1:9/tracking/v1', auth_url: 'http://127.0.0.1:9', organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'gw', client_secret: 'x' } };
    const spb = { format: 'sparkplug', topic: 'spBv1.0/plant/#' };
    const problems = (connection: Record<string, unknown>): string[] => {
      try {
        validateConfig({ service, mqtt: { broker: { enabled: true, allow_anonymous: true }, connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [spb], ...connection }] } });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as ConfigError).problems;
      }
      throw new Error('expected the config to be refused');
    };
    expect(problems({ primary_host_id: 'scada/1' })).toEqual(['mqtt.connections[0].primary_host_id: "scada/1" contains "/": a host id is one topic level (spBv1.0/STATE/<host id>) and must not contain "/", "+", "#" or U+0000']);
    expect(problems({ primary_host_id: 'a+#' })).toEqual(['mqtt.connections[0].primary_host_id: "a+#" contains "+", "#": a host id is one topic level (spBv1.0/STATE/<host id>) and must not contain "/", "+", "#" or U+0000']);
    expect(problems({ primary_host_id: '' })).toEqual(['mqtt.connections[0].primary_host_id: "" is empty; set the Sparkplug Host Application id (the last level of spBv1.0/STATE/<host id>)']);
    expect(problems({ primary_host_id: 'h1', subscriptions: [{ format: 'number', topic: 'a/b', variable: 'mvr_x' }] })).toEqual(['mqtt.connections[0].primary_host_id: "h1": a Primary Host Application needs a subscription with format: sparkplug on this connection']);
    expect(problems({ primary_host_id: 'h1', url: 'embedded' })[0]).toMatch(/^mqtt\.connections\[0\]\.primary_host_id: does not apply to url: embedded/);
    // A good one passes.
    const { config } = validateConfig({ service, mqtt: { connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [spb], primary_host_id: 'edge-gw Line 3' }] } });
    expect(config.mqtt!.connections[0].primary_host_id).toBe('edge-gw Line 3');
  });

  it('with the simulated edge node: no BIRTH before the host is online, values kept while it is away arrive with their own timestamps', async () => {
    const b = await broker();
    const tb = openTestBuffer();
    cleanup.push(() => tb.destroy());
    const sim = await startMqttSimulator({ url: b.url, intervalMs: 0, packer: false, primaryHostId: HOST });
    cleanup.push(() => sim.close());
    const oven = { subscriptions: [{ format: 'sparkplug', topic: 'spBv1.0/plant/#', metrics: OVEN_METRICS.map((m) => ({ name: m.name, variable: m.variable })) }] };
    const temperatures = () => new Set(tb.rows().filter((r) => r.variable === 'mvr_oven1_temperature').map((r) => r.ts));
    // No host yet: the edge node keeps its value instead of publishing it.
    const t1 = Date.now();
    await sim.tick();
    expect(sim.counts()).toMatchObject({ nbirth: 0, ddata: 0, stored: 1 });
    const first = await gateway(b.url, tb.buffer, oven);
    await waitFor(() => sim.counts().forwarded === 1, { what: 'the stored value forwarded after the BIRTH' });
    expect(sim.counts()).toMatchObject({ nbirth: 1, dbirth: 1 });
    await waitFor(() => temperatures().size === 2, { what: 'DBIRTH value and the forwarded one' });
    expect([...temperatures()].some((ts) => ts >= t1 && ts <= t1 + 1_000)).toBe(true);
    // A clean stop of the gateway: death STATE, the edge node stores again.
    await first.close();
    await waitFor(() => sim.primaryHostOnline() === false, { what: 'the edge node to see the host offline' });
    const kept: number[] = [];
    for (let i = 0; i < 3; i++) {
      await delay(5);
      kept.push(Date.now());
      await sim.tick();
    }
    expect(sim.counts()).toMatchObject({ stored: 4, ddata: 0 });
    // The gateway back: BIRTH again, the three kept values as is_historical DDATA, none lost.
    await gateway(b.url, tb.buffer, oven);
    await waitFor(() => sim.counts().forwarded === 4, { what: 'the three kept values forwarded' });
    expect(sim.counts().nbirth).toBe(2);
    await waitFor(() => temperatures().size === 6, { what: 'two DBIRTH values and four forwarded ones' });
    for (const t of kept) expect([...temperatures()].some((ts) => ts >= t && ts <= t + 1_000)).toBe(true);
  });

  it('the simulated edge node ignores an offline STATE older than the last online one and births again for a new host session', () => {
    const w = new PrimaryHostWatch(HOST);
    const st = (online: boolean, timestamp: number) => Buffer.from(JSON.stringify({ online, timestamp }));
    expect(w.onState(st(false, 100))).toBeNull();
    expect(w.onState(st(true, 200))).toBe('online');
    // The Will of the host's previous connection (older timestamp) arriving late: ignored.
    expect(w.onState(st(false, 100))).toBeNull();
    expect(w.hostOnline).toBe(true);
    // The same birth again (a republished one): nothing to do.
    expect(w.onState(st(true, 200))).toBeNull();
    // A newer birth without the offline in between: a new host session, birth again.
    expect(w.onState(st(true, 300))).toBe('online');
    expect(w.onState(st(false, 300))).toBe('offline');
    expect(w.onState(Buffer.from('OFFLINE'))).toBeNull();
    expect(w.hostOnline).toBe(false);
  });
});
