import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Aedes } from 'aedes';
import mqtt, { type MqttClient } from 'mqtt';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { call, startHarness, stored, waitFor, type Harness } from './helpers.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** An in-process aedes broker on TCP, standing in for the plant's broker. */
interface TestBroker {
  url: string;
  /** Whether some client's subscription to `filter` is registered (messages on it are routed from now on). */
  subscribed(filter: string): boolean;
  close(): Promise<void>;
}

async function startBroker(): Promise<TestBroker> {
  const aedes = await Aedes.createBroker();
  const filters = new Set<string>();
  aedes.on('subscribe', (subs) => {
    for (const s of subs) filters.add(s.topic);
  });
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    aedes.handle(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `mqtt://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const broker: TestBroker = {
    url,
    subscribed: (filter) => filters.has(filter),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => aedes.close(() => r()));
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  cleanup.push(() => broker.close());
  return broker;
}

async function publisher(url: string): Promise<MqttClient> {
  const c = await mqtt.connectAsync(url, { reconnectPeriod: 0, clientId: `plc-${Math.random().toString(16).slice(2)}` });
  cleanup.push(() => c.endAsync(true));
  return c;
}

async function emulator(): Promise<EmulatorHandle> {
  const emu = await startEmulator({ port: 0 });
  cleanup.push(() => emu.close());
  return emu;
}

const TOPIC = 'plant/line3/annotations';

interface TriggerStatus {
  connected: boolean;
  last_error: string | null;
  messages: Record<string, number>;
  last_problem: { outcome: string; message: string } | null;
}
const triggerStatus = (h: Harness) => (h.gw.handle.status().annotations as { mqtt_trigger: TriggerStatus }).mqtt_trigger;

async function harnessWithTrigger(broker: TestBroker, emu: EmulatorHandle, extra: { dir?: string; logger?: pino.Logger; clientId?: string } = {}): Promise<Harness> {
  const h = await startHarness({ emu, dir: extra.dir, annotations: { mqtt: { url: broker.url, topic: TOPIC, reconnect: 200, ...(extra.clientId ? { client_id: extra.clientId } : {}) } } });
  await waitFor(() => triggerStatus(h).connected && broker.subscribed(TOPIC), { what: 'trigger connected and subscribed' });
  return h;
}

describe('MQTT trigger', () => {
  it('starts and stops a downtime from a PLC message: the range arrives with the reason and text', async () => {
    const broker = await startBroker();
    const emu = await emulator();
    const h = await harnessWithTrigger(broker, emu);
    cleanup.push(() => h.close());
    const plc = await publisher(broker.url);
    const startAt = Date.now() - 120_000;
    await plc.publishAsync(TOPIC, JSON.stringify({ action: 'start', machine: 'press1', reason: 'Breakdown', at: new Date(startAt).toISOString() }), { qos: 1 });
    await waitFor(() => h.gw.handle.annotations!.service.openDowntime('press1'), { what: 'downtime open' });
    await plc.publishAsync(TOPIC, JSON.stringify({ action: 'stop', machine: 'press1', text: 'hydraulic leak' }), { qos: 1 });
    const got = await waitFor(() => emu.annotations()[0]);
    expect(got).toMatchObject({ type: 'range', started_at: new Date(startAt).toISOString(), text: 'Breakdown: hydraulic leak', machine_variables: [{ id: 'mvr_press1_state' }, { id: 'mvr_press1_speed' }] });
    const list = await call(h.url, 'GET', '/api/annotations');
    expect(list.body.annotations[0].origin).toBe('mqtt');
    expect(triggerStatus(h).messages).toMatchObject({ ok: 2 });
  });

  it('takes a full annotation, and a redelivered copy of the same message does not create a second one', async () => {
    const broker = await startBroker();
    const emu = await emulator();
    const h = await harnessWithTrigger(broker, emu);
    cleanup.push(() => h.close());
    const plc = await publisher(broker.url);
    const msg = JSON.stringify({ type: 'instant', occurred_at: '2026-03-01T10:00:00.000Z', text: 'Batch 4711 started', machine_variables: [{ id: 'mvr_mixer1_level' }] });
    await plc.publishAsync(TOPIC, msg, { qos: 1 });
    await plc.publishAsync(TOPIC, msg, { qos: 1 });
    await waitFor(() => triggerStatus(h).messages.ok + triggerStatus(h).messages.duplicate === 2);
    expect(triggerStatus(h).messages).toMatchObject({ ok: 1, duplicate: 1 });
    await waitFor(() => emu.annotations().length === 1);
    // Nothing else waits in the outbox: the redelivered copy made no second annotation.
    await waitFor(() => h.gw.handle.annotations!.store.counts().delivered === 1, { what: 'the annotation marked delivered' });
    expect(h.gw.handle.annotations!.store.counts()).toMatchObject({ queued: 0, delivered: 1, refused: 0 });
    expect(emu.annotations()).toHaveLength(1);
    expect(emu.annotations()[0]).toMatchObject({ text: 'Batch 4711 started', occurred_at: '2026-03-01T10:00:00.000Z' });
    expect(emu.annotations()[0].external_id).toMatch(/^test-gw-mqtt-[0-9a-f]{32}$/);
  });

  it('counts malformed, invalid and oversize messages by outcome, never crashes, and keeps working', async () => {
    const broker = await startBroker();
    const emu = await emulator();
    const h = await startHarness({ emu, annotations: { mqtt: { url: broker.url, topic: 'plant/+/annotations', max_payload_bytes: 1_000 } } });
    cleanup.push(() => h.close());
    await waitFor(() => triggerStatus(h).connected && broker.subscribed('plant/+/annotations'), { what: 'trigger connected and subscribed' });
    const plc = await publisher(broker.url);
    const bad: Array<[string | Buffer, string]> = [
      ['not json at all', 'malformed'],
      [Buffer.from([0xff, 0xfe, 0x00, 0x01]), 'malformed'],
      ['[1, 2, 3]', 'malformed'],
      ['"start"', 'malformed'],
      ['{"hello": "world"}', 'malformed'],
      ['{"action": "explode", "machine": "press1"}', 'malformed'],
      ['{"action": "start", "machine": "lathe9"}', 'invalid'],
      ['{"action": "start", "machine": "press1", "at": "yesterday"}', 'invalid'],
      ['{"type": "instant", "occurred_at": "2026-03-01T10:00:00Z", "text": "  ", "machine_variables": []}', 'invalid'],
      ['{"type": "range", "started_at": "2026-03-01T10:00:00Z", "ended_at": "2026-03-01T09:00:00Z", "text": "x", "machine_variables": []}', 'invalid'],
      [JSON.stringify({ type: 'instant', occurred_at: '2026-03-01T10:00:00Z', text: 'x'.repeat(2_000), machine_variables: [] }), 'oversize'],
      ['{"action": "stop", "machine": "mixer1", "reason": "x"}', 'duplicate'], // nothing open: ignored, not an error
    ];
    for (const [payload] of bad) await plc.publishAsync('plant/line3/annotations', payload, { qos: 1 });
    for (let i = 0; i < 30; i++) await plc.publishAsync('plant/line4/annotations', `garbage ${i}`, { qos: 0 });
    const expected = { malformed: 6 + 30, invalid: 4, oversize: 1, duplicate: 1 };
    await waitFor(() => {
      const m = triggerStatus(h).messages;
      return m.malformed === expected.malformed && m.invalid === expected.invalid && m.oversize === 1 && m.duplicate === 1;
    }, { what: `counts ${JSON.stringify(expected)}` });
    expect(triggerStatus(h).last_problem?.message).toMatch(/garbage 29|not JSON/);
    const metric = await h.gw.handle.metrics.annotationTriggerMessages.get();
    expect(metric.values.find((v) => v.labels.outcome === 'malformed')?.value).toBe(36);

    // Still alive and working.
    await plc.publishAsync('plant/line3/annotations', JSON.stringify({ action: 'start', machine: 'mixer1' }), { qos: 1 });
    await waitFor(() => h.gw.handle.annotations!.service.openDowntime('mixer1'));
    expect((await call(h.url, 'GET', '/healthz')).status).toBe(200);
    expect(emu.annotations()).toHaveLength(0);
  });

  it('logs a flood of malformed messages only once a minute per kind', async () => {
    const broker = await startBroker();
    const emu = await emulator();
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, new Writable({ write: (chunk, _e, cb) => (chunk.toString().split('\n').filter(Boolean).forEach((l: string) => lines.push(JSON.parse(l))), cb()) }));
    const { startTestGateway } = await import('../helpers/gateway.js');
    const gw = await startTestGateway(emu, { http: { enabled: false }, annotations: { site: { id: 'ste_demo1' }, mqtt: { url: broker.url, topic: TOPIC } } }, { logger });
    cleanup.push(() => gw.destroy());
    await waitFor(() => (gw.handle.status().annotations as { mqtt_trigger: TriggerStatus }).mqtt_trigger.connected && broker.subscribed(TOPIC), { what: 'trigger connected and subscribed' });
    const plc = await publisher(broker.url);
    for (let i = 0; i < 50; i++) await plc.publishAsync(TOPIC, `{broken ${i}`, { qos: 1 });
    await waitFor(() => (gw.handle.status().annotations as { mqtt_trigger: TriggerStatus }).mqtt_trigger.messages.malformed === 50);
    const warnings = lines.filter((l) => typeof l.msg === 'string' && (l.msg as string).includes('is not JSON'));
    expect(warnings).toHaveLength(1);
  });

  it('gets messages published while the gateway was stopped (persistent session, QoS 1)', async () => {
    const broker = await startBroker();
    const emu = await emulator();
    const dir = mkdtempSync(join(tmpdir(), 'gw-trigger-'));
    cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
    const a = await harnessWithTrigger(broker, emu, { dir, clientId: 'line3-annotations' });
    await a.gw.close();
    const plc = await publisher(broker.url);
    await plc.publishAsync(TOPIC, JSON.stringify({ action: 'start', machine: 'press1', reason: 'Tool change' }), { qos: 1 });
    const b = await startHarness({ emu, dir, annotations: { mqtt: { url: broker.url, topic: TOPIC, client_id: 'line3-annotations' } } });
    cleanup.push(() => b.gw.close());
    const open = await waitFor(() => b.gw.handle.annotations!.service.openDowntime('press1'), { what: 'the start published while stopped' });
    expect(open.reason).toBe('Tool change');
  });

  it('starts without the broker and reports it; the local API works meanwhile', async () => {
    const emu = await emulator();
    const h = await startHarness({ emu, annotations: { mqtt: { url: 'mqtt://127.0.0.1:1', topic: TOPIC, reconnect: 500 } } });
    cleanup.push(() => h.close());
    await waitFor(() => triggerStatus(h).last_error, { what: 'a connection error' });
    expect(triggerStatus(h).connected).toBe(false);
    const r = await call(h.url, 'POST', '/api/machines/press1/downtime/start', {});
    expect(r.status).toBe(201);
  });
});
