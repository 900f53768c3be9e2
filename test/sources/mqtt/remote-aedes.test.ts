import { afterEach, describe, expect, it } from 'vitest';
import type { Source } from '../../../src/core/source.js';
import { startMqttSimulator } from '../../../src/sim/mqtt-publisher.js';
import { createMqttSources } from '../../../src/sources/mqtt/index.js';
import { openTestBuffer, type TestBuffer } from '../../helpers/buffer.js';
import { holdsFor } from '../../helpers/wait.js';
import { connectClient, contexts, endClient, GatedSink, section, startAedes, startWireRecorder, waitFor, type TestAedes } from './helpers.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

async function broker(port = 0): Promise<TestAedes> {
  const b = await startAedes(port);
  cleanup.push(() => b.close());
  return b;
}

function buffer(): TestBuffer {
  const tb = openTestBuffer();
  cleanup.push(() => tb.destroy());
  return tb;
}

async function gateway(sink: GatedSink | TestBuffer['buffer'], connection: Record<string, unknown>) {
  const ctxs = contexts(sink);
  const sources = createMqttSources(section({ connections: [{ reconnect: { initial: 100, max: 500 }, ...connection }] }), ctxs.makeContext);
  for (const s of sources) await s.start();
  cleanup.push(() => Promise.all(sources.map((s) => s.close())));
  return { source: sources[0] as Source, metrics: ctxs.metrics, ctx: ctxs.contexts.get(String(connection.name))! };
}

async function publisher(url: string) {
  const c = await connectClient(url);
  cleanup.push(() => endClient(c));
  return c;
}

/** Acknowledgements (PUBACK, or PUBCOMP after PUBREC/PUBREL) the broker received from `clientId`. */
function countAcks(b: TestAedes, clientId: string): { count: () => number } {
  let n = 0;
  b.aedes.on('ack', (_packet, client) => {
    if (client?.id === clientId) n += 1;
  });
  return { count: () => n };
}

const rowsOf = (tb: TestBuffer, variable: string) => tb.rows().filter((r) => r.variable === variable);

describe('MQTT source against an aedes broker', () => {
  it('reads every payload form, with + and # wildcards', async () => {
    const b = await broker();
    const tb = buffer();
    const { source } = await gateway(tb.buffer, {
      name: 'forms',
      url: b.url,
      client_id: 'gw-forms',
      subscriptions: [
        { topic: 'plant/+/temperature', format: 'number', variable_from_topic: { level: 1, variables: { packer1: 'mvr_packer1_temperature', oven1: 'mvr_oven1_temperature' } } },
        { topic: 'plant/packer1/status', format: 'json', timestamp: { path: 'time', format: 'iso8601' }, values: [{ path: 'rate', variable: 'mvr_packer1_rate' }, { path: 'counters.rejects', variable: 'mvr_packer1_rejects' }] },
        { topic: 'vendor/#', format: 'metrics', names: { 'Mixer.Speed': 'mvr_mixer1_speed' } },
      ],
    });
    await waitFor(() => source.status().state === 'connected', { what: 'connected' });
    const pub = await publisher(b.url);
    await pub.publishAsync('plant/packer1/temperature', '41.5', { qos: 1 });
    await pub.publishAsync('plant/oven1/temperature', '180', { qos: 0 });
    await pub.publishAsync('plant/press9/temperature', '1', { qos: 1 }); // not in the table
    await pub.publishAsync('plant/packer1/status', JSON.stringify({ time: '2026-11-22T08:00:00.000Z', rate: 118.5, counters: { rejects: 3 } }), { qos: 1 });
    await pub.publishAsync('vendor/a/b/metrics', JSON.stringify({ timestamp: 1_795_000_000_000, metrics: [{ name: 'Mixer.Speed', value: 1450, datatype: 'Int32' }, { name: 'mvr_mixer1_power', value: 7.5, timestamp: 1_795_000_001_000 }] }), { qos: 2 });
    await waitFor(() => tb.rows().length === 6, { what: '6 rows' });
    expect(rowsOf(tb, 'mvr_packer1_temperature').map((r) => r.value)).toEqual([41.5]);
    expect(rowsOf(tb, 'mvr_oven1_temperature').map((r) => r.value)).toEqual([180]);
    expect(rowsOf(tb, 'mvr_packer1_rate')).toEqual([expect.objectContaining({ value: 118.5, ts: Date.UTC(2026, 10, 22, 8) })]);
    expect(rowsOf(tb, 'mvr_packer1_rejects').map((r) => r.value)).toEqual([3]);
    expect(rowsOf(tb, 'mvr_mixer1_speed')).toEqual([expect.objectContaining({ value: 1450, ts: 1_795_000_000_000 })]);
    expect(rowsOf(tb, 'mvr_mixer1_power')).toEqual([expect.objectContaining({ value: 7.5, ts: 1_795_000_001_000 })]);
    expect(source.status().samplesRefused).toEqual({ unknown_name: 1 });
  });

  it('reads Sparkplug B from the simulated oven, requesting a rebirth when it joined after the BIRTH', async () => {
    const b = await broker();
    const tb = buffer();
    // The edge node is up and has published its BIRTH certificates before the gateway connects.
    const sim = await startMqttSimulator({ url: b.url, intervalMs: 50, qos: 1 });
    cleanup.push(() => sim.close());
    await waitFor(() => sim.counts().ddata > 2);
    const { source, metrics } = await gateway(tb.buffer, {
      name: 'spb',
      url: b.url,
      client_id: 'gw-spb',
      subscriptions: [
        { topic: 'spBv1.0/plant/#', format: 'sparkplug', metrics: [{ name: 'Temperature', device: 'oven1', variable: 'mvr_oven1_temperature' }, { name: 'Gas Flow', variable: 'mvr_oven1_gas_flow' }, { name: 'State', variable: 'mvr_oven1_state' }, { name: 'Setpoint', variable: 'mvr_oven1_setpoint' }] },
        { topic: 'plant/packer1/status', format: 'json', timestamp: { path: 'ts' }, values: [{ path: 'rate', variable: 'mvr_packer1_rate' }] },
      ],
    });
    await waitFor(() => sim.counts().rebirthRequests >= 1, { what: 'rebirth request reached the edge node' });
    await waitFor(() => rowsOf(tb, 'mvr_oven1_temperature').length >= 5, { what: 'oven temperatures' });
    await waitFor(() => rowsOf(tb, 'mvr_oven1_gas_flow').length >= 5 && rowsOf(tb, 'mvr_packer1_rate').length >= 5);
    const temps = rowsOf(tb, 'mvr_oven1_temperature').map((r) => r.value);
    expect(temps.every((t) => t > 170 && t < 190)).toBe(true);
    // Data before the rebirth had aliases the gateway could not know: counted, not guessed.
    expect(source.status().samplesRefused.unknown_alias ?? 0).toBeGreaterThan(0);
    const events = Object.fromEntries((await metrics.mqttSparkplugEvents.get()).values.map((v) => [v.labels.event, v.value]));
    expect(events.rebirth_requested).toBeGreaterThanOrEqual(1);
    expect(events.nbirth).toBeGreaterThanOrEqual(1);
    const detail = source.status().detail as { subscriptions: Array<{ edge_nodes?: Array<Record<string, unknown>> }> };
    expect(detail.subscriptions[0].edge_nodes?.[0]).toMatchObject({ group: 'plant', edge_node: 'oven-ctl', online: true, devices: { oven1: 'online' } });
  });

  it('acknowledges QoS 1 and QoS 2 messages only after the commit', async () => {
    const b = await broker();
    const acks = countAcks(b, 'gw-ack');
    const tb = buffer();
    const sink = new GatedSink(tb.buffer);
    const { source } = await gateway(sink, { name: 'ack', url: b.url, client_id: 'gw-ack', subscriptions: [{ topic: 'q/1', format: 'number', qos: 1, variable: 'mvr_q1' }, { topic: 'q/2', format: 'number', qos: 2, variable: 'mvr_q2' }] });
    await waitFor(() => source.status().state === 'connected');
    sink.gate = true;
    const pub = await publisher(b.url);
    for (let i = 0; i < 5; i++) await pub.publishAsync('q/1', String(i), { qos: 1 });
    for (let i = 0; i < 3; i++) await pub.publishAsync('q/2', String(40 + i), { qos: 2 });
    // All eight wait for their commit together: QoS 2 messages are not handled one commit at a time.
    await waitFor(() => sink.heldSamples === 8, { what: 'eight messages held at the buffer' });
    // An absence: no acknowledgement while the commit is held (watched for a while, nothing to wait for).
    await holdsFor(() => acks.count() === 0 && tb.rows().length === 0, { forMs: 300, intervalMs: 20, what: 'no acknowledgement before the commit' });
    await sink.release();
    await waitFor(() => acks.count() === 8, { what: 'eight acknowledgements' });
    expect(rowsOf(tb, 'mvr_q1').map((r) => r.value)).toEqual([0, 1, 2, 3, 4]);
    expect(rowsOf(tb, 'mvr_q2').map((r) => r.value)).toEqual([40, 41, 42]);
  });

  it('sends the acknowledgements of a commit in arrival order, PUBACKs and PUBRECs interleaved, and the broker takes them', async () => {
    const b = await broker();
    const wire = await startWireRecorder(b.port);
    cleanup.push(() => wire.close());
    const acks = countAcks(b, 'gw-wire');
    // No buffer behind the gate: the release commits every message at once, so all acknowledgements
    // leave in one run, where PUBACKs and PUBRECs could be reordered.
    const sink = new GatedSink();
    const { source } = await gateway(sink, { name: 'wire', url: wire.url, client_id: 'gw-wire', subscriptions: [{ topic: 'w/1', format: 'number', qos: 1, variable: 'mvr_w1' }, { topic: 'w/2', format: 'number', qos: 2, variable: 'mvr_w2' }] });
    await waitFor(() => source.status().state === 'connected');
    sink.gate = true;
    const pub = await publisher(b.url);
    const qosOrder = [1, 1, 2, 1, 2, 2, 1, 1, 1, 2, 1];
    for (const [i, qos] of qosOrder.entries()) await pub.publishAsync(`w/${qos}`, String(i), { qos: qos as 1 | 2 });
    await waitFor(() => sink.heldSamples === qosOrder.length, { what: 'every message held at the buffer' });
    expect(wire.sent().filter((p) => p.type === 4 || p.type === 5)).toEqual([]);
    await sink.release();
    await waitFor(() => acks.count() === qosOrder.length, { what: 'every acknowledgement taken by the broker' });
    const delivered = wire.received().filter((p) => p.type === 3 && p.qos > 0);
    expect(delivered.map((p) => p.qos)).toEqual(qosOrder);
    // PUBACK (4) for QoS 1 and PUBREC (5) for QoS 2, with the packet ids, in the order the PUBLISH packets came.
    expect(wire.sent().filter((p) => p.type === 4 || p.type === 5)).toEqual(delivered.map((p) => ({ type: p.qos === 1 ? 4 : 5, qos: 0, id: p.id })));
    expect((source.status().detail as { connects: number }).connects).toBe(1);
    expect(sink.appended.map((x) => x.value)).toEqual(qosOrder.map((_, i) => i));
  });

  it('a refused commit is not acknowledged: the message comes again after the reconnect', async () => {
    const b = await broker();
    const tb = buffer();
    const sink = new GatedSink(tb.buffer);
    const { source } = await gateway(sink, { name: 'redeliver', url: b.url, client_id: 'gw-redeliver', subscriptions: [{ topic: 'r', format: 'number', qos: 1, variable: 'mvr_r' }] });
    await waitFor(() => source.status().state === 'connected');
    sink.gate = true;
    const pub = await publisher(b.url);
    for (let i = 0; i < 3; i++) await pub.publishAsync('r', String(i), { qos: 1 });
    await waitFor(() => sink.heldSamples === 3);
    sink.failHeld(Object.assign(new Error('disk gone'), { code: 'SQLITE_IOERR' }));
    await waitFor(() => source.status().lastError?.code === 'BUFFER_REFUSED');
    await waitFor(() => rowsOf(tb, 'mvr_r').length === 3, { what: 'redelivered after reconnect' });
    expect(rowsOf(tb, 'mvr_r').map((r) => r.value)).toEqual([0, 1, 2]);
  });

  it('refuse_new on a full buffer: QoS 1 messages are not acknowledged and come again once there is room; a QoS 0 one is counted lost', async () => {
    const b = await broker();
    const acks = countAcks(b, 'gw-full');
    const tb = openTestBuffer({ whenFull: 'refuse_new', maxBytes: 1_000_000 });
    cleanup.push(() => tb.destroy());
    // Past max_bytes, every append of the filling committed (the check comes before a commit).
    for (let i = 0; tb.buffer.usedBytes() <= 1_000_000; i++) await tb.buffer.append(Array.from({ length: 10_000 }, (_, k) => ({ variable: 'mvr_fill', ts: 1_700_000_000_000 + i * 10_000 + k, value: k })));
    const { source } = await gateway(tb.buffer, {
      name: 'full',
      url: b.url,
      client_id: 'gw-full',
      reconnect: { initial: 100, max: 2_000 },
      subscriptions: [{ topic: 'full/1', format: 'number', qos: 1, variable: 'mvr_full_q1' }, { topic: 'full/0', format: 'number', qos: 0, variable: 'mvr_full_q0' }],
    });
    await waitFor(() => source.status().state === 'connected');
    const pub = await publisher(b.url);
    const dropped = async () => (await tb.metrics.bufferDroppedSamples.get()).values.find((v) => v.labels.policy === 'refuse_new')?.value ?? 0;
    await pub.publishAsync('full/0', '7', { qos: 0 });
    await waitFor(async () => (await dropped()) === 1, { what: 'the QoS 0 sample refused and counted lost' });
    for (let i = 0; i < 3; i++) await pub.publishAsync('full/1', String(i), { qos: 1 });
    // Refused, so not acknowledged (issue 21 §1: before, they were acknowledged and dropped).
    await waitFor(() => source.status().lastError?.code === 'BUFFER_REFUSED' || acks.count() > 0, { what: 'the buffer answered' });
    expect(acks.count()).toBe(0);
    expect(source.status().lastError?.message).toMatch(/^refused: buffer full \(buffer\.when_full = refuse_new\)/);
    // The gateway reconnects and the broker delivers them again, and again.
    await waitFor(async () => ((await tb.metrics.bufferRefusedSamples.get()).values.find((v) => v.labels.reason === 'buffer_full')?.value ?? 0) >= 1 + 3 * 2, { timeoutMs: 30_000, what: 'QoS 1 messages refused twice' });
    expect(acks.count()).toBe(0);
    expect(rowsOf(tb, 'mvr_full_q1')).toHaveLength(0);
    // The broker and the publisher still hold them: refused, not lost.
    expect(await dropped()).toBe(1);
    // While the buffer stays full the reconnects back off (100 ms doubling to 2 s), not every 100 ms.
    const connects = () => (source.status().detail as { connects: number }).connects;
    const before = connects();
    // A rate over a window (no tight loop), watched all along.
    await holdsFor(() => connects() - before <= 5, { forMs: 4_000, intervalMs: 50, what: 'at most 5 reconnects in 4 s' });
    // The service takes the backlog: room again.
    tb.buffer.ack(tb.buffer.claimNewest(1_000_000));
    await waitFor(() => rowsOf(tb, 'mvr_full_q1').length === 3, { timeoutMs: 30_000, what: 'redelivered and committed once there is room' });
    await waitFor(() => acks.count() === 3, { what: 'acknowledged after the commit' });
    expect(rowsOf(tb, 'mvr_full_q1').map((r) => r.value)).toEqual([0, 1, 2]);
    expect(rowsOf(tb, 'mvr_full_q0')).toHaveLength(0);
    expect(await dropped()).toBe(1);
  });

  it('keeps reading after malformed messages (acknowledged, counted) and bounds pending messages', async () => {
    const b = await broker();
    const acks = countAcks(b, 'gw-bad');
    const tb = buffer();
    const sink = new GatedSink(tb.buffer);
    const { source } = await gateway(sink, { name: 'bad', url: b.url, client_id: 'gw-bad', max_pending_messages: 5, max_payload_bytes: 64, subscriptions: [{ topic: 'j', format: 'json', values: [{ path: 'v', variable: 'mvr_j' }] }] });
    await waitFor(() => source.status().state === 'connected');
    const pub = await publisher(b.url);
    await pub.publishAsync('j', '{oops', { qos: 1 });
    await pub.publishAsync('j', JSON.stringify({ v: 1, pad: 'x'.repeat(100) }), { qos: 1 });
    await pub.publishAsync('j', JSON.stringify({ v: 'n/a' }), { qos: 1 });
    await pub.publishAsync('j', JSON.stringify({ v: 2 }), { qos: 1 });
    await waitFor(() => rowsOf(tb, 'mvr_j').length === 1 && acks.count() === 4);
    expect(source.status().samplesRefused).toEqual({ malformed: 1, oversize: 1, not_numeric: 1 });

    sink.gate = true;
    for (let i = 0; i < 30; i++) await pub.publishAsync('j', JSON.stringify({ v: 100 + i }), { qos: 1 });
    await waitFor(() => sink.heldSamples === 5);
    // Back-pressure: nothing more is read while five wait (an absence, watched for a while).
    await holdsFor(() => sink.heldSamples === 5, { forMs: 300, intervalMs: 20, what: 'five held, no more read' });
    const detail = source.status().detail as { pending_messages: number };
    expect(detail.pending_messages).toBe(5); // back-pressure: mqtt.js stopped reading
    expect(sink.heldSamples).toBe(5);
    await sink.release();
    await waitFor(() => rowsOf(tb, 'mvr_j').length === 31, { what: 'all 30 after release' });
    expect(rowsOf(tb, 'mvr_j').slice(1).map((r) => r.value)).toEqual(Array.from({ length: 30 }, (_, i) => 100 + i));
  });

  it('keeps the persistent session: messages published while the gateway is stopped arrive when it comes back', async () => {
    const b = await broker();
    const tb = buffer();
    const cfg = { name: 'persist', url: b.url, client_id: 'gw-persist', subscriptions: [{ topic: 'p', format: 'number', qos: 1, variable: 'mvr_p' }] };
    const first = await gateway(tb.buffer, cfg);
    await waitFor(() => first.source.status().state === 'connected');
    await first.source.close();
    const pub = await publisher(b.url);
    for (let i = 0; i < 10; i++) await pub.publishAsync('p', String(i), { qos: 1 });
    const second = await gateway(tb.buffer, cfg);
    await waitFor(() => rowsOf(tb, 'mvr_p').length === 10, { what: 'queued messages' });
    expect(rowsOf(tb, 'mvr_p').map((r) => r.value)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect((second.source.status().detail as { session_present: boolean }).session_present).toBe(true);
  });

  it('reconnects after the broker restarts and subscribes again', async () => {
    let b = await startAedes();
    const port = b.port;
    const tb = buffer();
    const { source, metrics } = await gateway(tb.buffer, { name: 'restart', url: b.url, client_id: 'gw-restart', subscriptions: [{ topic: 'x', format: 'number', variable: 'mvr_x' }] });
    await waitFor(() => source.status().state === 'connected');
    await b.close();
    await waitFor(() => source.status().state !== 'connected', { what: 'noticed the broker is gone' });
    // Gone across at least one failed attempt: the second reconnect is scheduled after the first failed.
    const reconnects = async () => (await metrics.sourceReconnects.get()).values.reduce((n, v) => n + v.value, 0);
    await waitFor(async () => (await reconnects()) >= 2, { what: 'a reconnect attempt failed while the broker was away' });
    b = await broker(port);
    await waitFor(() => source.status().state === 'connected', { what: 'reconnected', timeoutMs: 20_000 });
    const pub = await publisher(b.url);
    await pub.publishAsync('x', '7', { qos: 1 });
    await waitFor(() => rowsOf(tb, 'mvr_x').length === 1);
    expect((source.status().detail as { connects: number }).connects).toBe(2);
  });

  it('reports an unreachable broker in status and keeps trying', async () => {
    const tb = buffer();
    const b = await startAedes();
    const port = b.port;
    await b.close(); // nothing listens there now
    const { source } = await gateway(tb.buffer, { name: 'down', url: `mqtt://127.0.0.1:${port}`, client_id: 'gw-down', subscriptions: [{ topic: 'x', format: 'number', variable: 'mvr_x' }] });
    await waitFor(() => source.status().lastError?.code === 'MQTT_UNREACHABLE', { what: 'error in status' });
    expect(source.status().state).not.toBe('connected');
    await broker(port);
    await waitFor(() => source.status().state === 'connected', { what: 'connected once the broker is up', timeoutMs: 20_000 });
  });
});
