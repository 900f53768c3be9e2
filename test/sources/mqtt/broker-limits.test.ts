import { connect, type Socket } from 'node:net';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { connectClient, endClient, startEmbeddedBroker, waitFor } from './helpers.js';

/** Issue 12 §1: the embedded broker keeps a PLC reachable and its memory bounded under abuse. */

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const startBroker = (broker: Record<string, unknown>) => startEmbeddedBroker(broker, cleanup);

function idleSockets(port: number, count: number): Promise<Socket[]> {
  const list: Socket[] = [];
  cleanup.push(async () => list.forEach((s) => s.destroy()));
  return Promise.all(
    Array.from({ length: count }, () => {
      const s = connect(port, '127.0.0.1');
      list.push(s);
      s.on('error', () => undefined);
      return new Promise<Socket>((r) => s.once('connect', () => r(s)));
    }),
  );
}

/** One connection attempt without retries: 'connected' (then ended) or 'closed' without a CONNACK. */
function tryConnect(url: string, options: IClientOptions): Promise<'connected' | 'closed'> {
  return new Promise((resolve) => {
    const c = mqtt.connect(url, { reconnectPeriod: 0, connectTimeout: 5_000, ...options });
    c.once('connect', () => c.end(true, () => resolve('connected')));
    c.once('close', () => c.end(true, () => resolve('closed')));
    c.on('error', () => undefined);
  });
}

/** A PLC connecting once, no retries: its client, or an error when the broker closed the connection first. */
function plcConnects(url: string, options: IClientOptions): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const c = mqtt.connect(url, { reconnectPeriod: 0, connectTimeout: 5_000, ...options });
    c.on('error', () => undefined);
    c.once('connect', () => resolve(c));
    c.once('close', () => {
      if (!c.connected) c.end(true, () => reject(new Error('the broker closed the PLC\'s connection without a CONNACK')));
    });
  });
}

const dropped = async (metrics: Awaited<ReturnType<typeof startBroker>>['metrics'], reason: string) =>
  (await metrics.brokerMessagesDropped.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

describe('embedded broker limits', () => {
  it('lets a PLC with the right password in at once while idle unauthenticated sockets fill the broker', async () => {
    const b = await startBroker({ max_clients: 100, max_unauthenticated: 10, connect_deadline: '30s' });
    const idle = await idleSockets(b.port, 60);
    // Everything beyond max_unauthenticated was closed, oldest first.
    await waitFor(() => idle.filter((s) => !s.destroyed && s.readyState === 'open').length <= 10, { what: 'idle sockets shed to max_unauthenticated' });
    const t0 = performance.now();
    const plc = await connectClient(b.url, { username: 'plc', password: 'right-pass-1' });
    cleanup.push(() => endClient(plc));
    expect(performance.now() - t0).toBeLessThan(3_000);
    expect(plc.connected).toBe(true);
    expect(b.src.status().detail).toMatchObject({ refused: { unauthenticated_limit: expect.any(Number) } });
    expect(b.log.text()).toContain('max_unauthenticated reached');
  });

  it('max_clients 50: 50 idle sockets that never send CONNECT do not keep a PLC with the right password out (issue 21 §6)', async () => {
    // max_unauthenticated (64) is above max_clients: only the client limit can trigger. The idle
    // sockets and the PLC share one address here, so the per-address limits are lifted.
    const b = await startBroker({ max_clients: 50, max_unauthenticated_per_address: 64, connect_deadline: '30s' });
    const idle = await idleSockets(b.port, 50);
    await waitFor(() => (b.src.status().detail as { unauthenticated: number }).unauthenticated === 50, { what: 'the broker holding 50 idle connections' });
    const t0 = performance.now();
    const plc = await plcConnects(b.url, { username: 'plc', password: 'right-pass-1' });
    cleanup.push(() => endClient(plc));
    expect(plc.connected).toBe(true);
    expect(performance.now() - t0).toBeLessThan(3_000);
    // The oldest idle socket gave way; the others are still open (the limit holds: 49 + the PLC).
    await waitFor(() => idle[0].destroyed || idle[0].readyState === 'closed', { what: 'the oldest idle socket closed' });
    expect(idle.slice(1).filter((s) => s.readyState === 'open')).toHaveLength(49);
    expect(b.src.status().detail).toMatchObject({ clients: 1, unauthenticated: 49, refused: { client_limit: 1 } });
    expect(b.log.text()).toContain('mqtt.broker.max_clients reached');

    // However fast idle sockets keep coming, each newcomer pushes out an idle one, never the PLC.
    await idleSockets(b.port, 120);
    await plc.publishAsync('plant/ok', '1', { qos: 1 });
    expect(plc.connected).toBe(true);
  });

  it('refuses a newcomer only when max_clients authenticated clients are connected, and never closes one of them', async () => {
    const b = await startBroker({ max_clients: 3, connect_deadline: '30s' });
    const plcs = [];
    for (let i = 0; i < 3; i++) {
      const c = await connectClient(b.url, { username: 'plc', password: 'right-pass-1', clientId: `plc-${i}` });
      cleanup.push(() => endClient(c));
      plcs.push(c);
    }
    // Full of authenticated clients: an idle socket and a fourth PLC are refused.
    const [late] = await idleSockets(b.port, 1);
    await new Promise((r) => (late.readyState === 'closed' ? r(null) : late.once('close', r)));
    expect(await tryConnect(b.url, { username: 'plc', password: 'right-pass-1', clientId: 'plc-3' })).toBe('closed');
    expect(plcs.every((c) => c.connected)).toBe(true);
    expect(b.src.status().detail).toMatchObject({ clients: 3, refused: { too_many_clients: 2 } });

    // One leaves, an idle socket takes the slot; the next PLC still gets in (the idle one gives way).
    await endClient(plcs.pop());
    await waitFor(() => (b.src.status().detail as { clients: number }).clients === 2, { what: 'a PLC gone' });
    const [squatter] = await idleSockets(b.port, 1);
    const next = await plcConnects(b.url, { username: 'plc', password: 'right-pass-1', clientId: 'plc-4' });
    cleanup.push(() => endClient(next));
    await new Promise((r) => (squatter.readyState === 'closed' ? r(null) : squatter.once('close', r)));
    expect(plcs.every((c) => c.connected) && next.connected).toBe(true);
  });

  it('closes a connection that trickles its CONNECT (slow loris) at connect_deadline, however steadily bytes arrive', async () => {
    const b = await startBroker({ connect_deadline: '1s' });
    const [s] = await idleSockets(b.port, 1);
    // A CONNECT (MQTT 3.1.1 §3.1) with user name and password, sent one byte every 100 ms: it
    // would take ~5 s to complete.
    const user = Buffer.from('plc');
    const pass = Buffer.from('right-pass-1');
    const str = (b: Buffer) => Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
    const variable = Buffer.from([0x00, 0x04, 0x4d, 0x51, 0x54, 0x54, 0x04, 0xc2, 0x00, 0x3c]);
    const payload = Buffer.concat([str(Buffer.from('slow')), str(user), str(pass)]);
    const packet = Buffer.concat([Buffer.from([0x10, variable.length + payload.length]), variable, payload]);
    let sent = 0;
    const timer = setInterval(() => {
      if (sent < packet.length && !s.destroyed) s.write(packet.subarray(sent, ++sent));
    }, 100);
    cleanup.push(async () => clearInterval(timer));
    const t0 = performance.now();
    await new Promise((r) => s.once('close', r));
    clearInterval(timer);
    expect(performance.now() - t0).toBeLessThan(4_000);
    expect(sent).toBeLessThan(packet.length);
  });

  it('closes a connection that sends no CONNECT within connect_deadline', async () => {
    const b = await startBroker({ connect_deadline: '1s' });
    const [s] = await idleSockets(b.port, 1);
    const t0 = performance.now();
    await new Promise((r) => s.once('close', r));
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThan(500);
    expect(waited).toBeLessThan(10_000);
  });

  it('keeps at most max_retained retained topics, still replacing and deleting existing ones', async () => {
    const b = await startBroker({ max_retained: 3 });
    const pub = await connectClient(b.url, { username: 'plc', password: 'right-pass-1' });
    cleanup.push(() => endClient(pub));
    for (let i = 0; i < 5; i++) await pub.publishAsync(`r/${i}`, `v${i}`, { qos: 1, retain: true });
    await pub.publishAsync('r/0', 'v0-new', { qos: 1, retain: true }); // replace: allowed
    expect(await dropped(b.metrics, 'retained_limit')).toBe(2);
    const sub = await connectClient(b.url, { username: 'plc', password: 'right-pass-1' });
    cleanup.push(() => endClient(sub));
    const got = new Map<string, string>();
    sub.on('message', (t, p) => got.set(t, p.toString()));
    await sub.subscribeAsync('r/#', { qos: 1 });
    await waitFor(() => got.size === 3, { what: 'three retained messages' });
    expect(Object.fromEntries(got)).toEqual({ 'r/0': 'v0-new', 'r/1': 'v1', 'r/2': 'v2' });
    // Deleting one frees a slot.
    await pub.publishAsync('r/1', '', { qos: 1, retain: true });
    await pub.publishAsync('r/9', 'v9', { qos: 1, retain: true });
    expect(await dropped(b.metrics, 'retained_limit')).toBe(2);
    expect(b.src.status().detail).toMatchObject({ dropped: { retained_limit: 2 }, stored: { retained: 3 } });
  });

  it('queues at most max_queued_messages for an offline persistent session and counts the rest', async () => {
    const b = await startBroker({ max_queued_messages: 50 });
    const opts = { username: 'plc', password: 'right-pass-1', clientId: 'hmi-1', clean: false };
    const sub = await connectClient(b.url, opts);
    await sub.subscribeAsync('q/#', { qos: 1 });
    await endClient(sub);
    const pub = await connectClient(b.url, { username: 'plc', password: 'right-pass-1' });
    cleanup.push(() => endClient(pub));
    for (let i = 0; i < 200; i++) await pub.publishAsync('q/x', String(i), { qos: 1 });
    expect(await dropped(b.metrics, 'queue_limit')).toBe(150);
    // The subscriber comes back and receives the 50 oldest; acknowledging them frees the queue.
    const got: string[] = [];
    const back = await connectClient(b.url, { ...opts });
    cleanup.push(() => endClient(back));
    back.on('message', (_t, p) => got.push(p.toString()));
    await waitFor(() => got.length === 50, { what: '50 queued messages' });
    expect(got[0]).toBe('0');
    await waitFor(() => (b.src.status().detail as { stored: { queued: number } }).stored.queued === 0, { what: 'queue emptied by the acknowledgements' });
    // Online, acknowledged messages never hit the limit.
    for (let i = 0; i < 200; i++) await pub.publishAsync('q/x', `live${i}`, { qos: 1 });
    await waitFor(() => got.length === 250, { what: '200 live messages' });
    expect(await dropped(b.metrics, 'queue_limit')).toBe(150);
  });
});
