import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Source } from '../../../src/core/source.js';
import { startMqttSimulator } from '../../../src/sim/mqtt-publisher.js';
import { createMqttSources } from '../../../src/sources/mqtt/index.js';
import { openTestBuffer, type TestBuffer } from '../../helpers/buffer.js';
import { holdsFor } from '../../helpers/wait.js';
import { captureLogger, connectClient, contexts, endClient, GatedSink, makeCertificates, mosquittoAvailable, removeDir, section, startMosquitto, startWireRecorder, waitFor, type Certificates, type Mosquitto } from './helpers.js';

const HAVE_MOSQUITTO = mosquittoAvailable();

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

function buffer(): TestBuffer {
  const tb = openTestBuffer();
  cleanup.push(() => tb.destroy());
  return tb;
}

async function gateway(sink: GatedSink | TestBuffer['buffer'], connection: Record<string, unknown>) {
  const log = captureLogger();
  const ctxs = contexts(sink, log.logger);
  const sources = createMqttSources(section({ connections: [{ reconnect: { initial: 100, max: 1_000 }, ...connection }] }), ctxs.makeContext);
  for (const s of sources) await s.start();
  cleanup.push(() => Promise.all(sources.map((s) => s.close())));
  return { source: sources[0] as Source, log };
}

const rowsOf = (tb: TestBuffer, variable: string) => tb.rows().filter((r) => r.variable === variable);
const GW_PASSWORD = 'gw-Secret-42';

describe.skipIf(!HAVE_MOSQUITTO)('MQTT source against mosquitto', () => {
  let certs: Certificates;
  let mq: Mosquitto;

  beforeAll(async () => {
    certs = makeCertificates();
    mq = await startMosquitto({ users: { gw: GW_PASSWORD, plc: 'plc-pw' }, tls: certs, websocket: true });
  });
  afterAll(async () => {
    await mq?.stop();
    if (mq) removeDir(mq.dir);
    if (certs) removeDir(certs.dir);
  });

  it('refuses a wrong password with a plain-words error that does not show the password', async () => {
    const tb = buffer();
    const { source, log } = await gateway(tb.buffer, { name: 'badpw', url: mq.url, client_id: 'gw-badpw', username: 'gw', password: 'not-the-password', subscriptions: [{ topic: 'x', format: 'number', variable: 'mvr_x' }] });
    await waitFor(() => source.status().lastError, { what: 'connection refused' });
    expect(source.status().lastError?.code).toMatch(/^MQTT_(AUTH_REFUSED|NOT_AUTHORIZED)$/);
    expect(source.status().state).not.toBe('connected');
    expect(log.text()).not.toContain('not-the-password');
    expect(JSON.stringify(source.status())).not.toContain('not-the-password');
  });

  it('reads JSON, metrics and Sparkplug B with username/password, QoS 0/1/2 and wildcards', async () => {
    const tb = buffer();
    const sim = await startMqttSimulator({ url: mq.url, username: 'plc', password: 'plc-pw', intervalMs: 50, qos: 2 });
    cleanup.push(() => sim.close());
    const { source } = await gateway(tb.buffer, {
      name: 'plant',
      url: mq.url,
      client_id: 'gw-plant',
      username: 'gw',
      password: GW_PASSWORD,
      subscriptions: [
        { topic: 'plant/packer1/status', format: 'json', qos: 2, timestamp: { path: 'ts' }, values: [{ path: 'rate', variable: 'mvr_packer1_rate' }, { path: 'rejects', variable: 'mvr_packer1_rejects' }] },
        { topic: 'spBv1.0/plant/#', format: 'sparkplug', metrics: [{ name: 'Temperature', variable: 'mvr_oven1_temperature' }, { name: 'Gas Flow', variable: 'mvr_oven1_gas_flow' }] },
        { topic: 'vendor/+/metrics', format: 'metrics', qos: 0, names: { Speed: 'mvr_mixer1_speed' } },
      ],
    });
    await waitFor(() => source.status().state === 'connected');
    const plc = await connectClient(mq.url, { username: 'plc', password: 'plc-pw' });
    cleanup.push(() => endClient(plc));
    await plc.publishAsync('vendor/mixer1/metrics', JSON.stringify({ metrics: [{ name: 'Speed', value: 1450, timestamp: '2026-11-22T08:00:00Z', datatype: 'Int32' }] }), { qos: 0 });
    await waitFor(() => rowsOf(tb, 'mvr_mixer1_speed').length === 1);
    await waitFor(() => rowsOf(tb, 'mvr_packer1_rate').length >= 10 && rowsOf(tb, 'mvr_oven1_temperature').length >= 10, { what: 'simulator data', timeoutMs: 30_000 });
    // QoS 2, with payload timestamps: every packer message exactly once, in order.
    const rate = rowsOf(tb, 'mvr_packer1_rate');
    expect(new Set(rate.map((r) => r.ts)).size).toBe(rate.length);
    expect(rate.map((r) => r.ts)).toEqual([...rate.map((r) => r.ts)].sort((a, b) => a - b));
    expect(rowsOf(tb, 'mvr_mixer1_speed')[0]).toMatchObject({ value: 1450, ts: Date.UTC(2026, 10, 22, 8) });
  });

  it('connects over TLS with a CA and a client certificate, and refuses an untrusted broker', async () => {
    const tb = buffer();
    const url = `mqtts://127.0.0.1:${mq.tlsPort}`;
    const { source } = await gateway(tb.buffer, { name: 'tls', url, client_id: 'gw-tls', tls: { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey }, subscriptions: [{ topic: 'secure/#', format: 'number', variable: 'mvr_secure' }] });
    await waitFor(() => source.status().state === 'connected', { what: 'TLS connection' });
    const pub = await connectClient(url, { ca: readFileSync(certs.ca), cert: readFileSync(certs.clientCert), key: readFileSync(certs.clientKey) });
    cleanup.push(() => endClient(pub));
    await pub.publishAsync('secure/a', '1.5', { qos: 1 });
    await waitFor(() => rowsOf(tb, 'mvr_secure').length === 1);

    const wrongCa = await gateway(tb.buffer, { name: 'tls-wrong-ca', url, client_id: 'gw-tls-2', tls: { ca: certs.otherCa, cert: certs.clientCert, key: certs.clientKey }, subscriptions: [{ topic: 'secure/#', format: 'number', variable: 'mvr_secure' }] });
    await waitFor(() => wrongCa.source.status().lastError, { what: 'TLS refusal' });
    expect(wrongCa.source.status().lastError?.code).toBe('MQTT_TLS_ERROR');
    expect(wrongCa.source.status().state).not.toBe('connected');

    const noClientCert = await gateway(tb.buffer, { name: 'tls-no-cert', url, client_id: 'gw-tls-3', tls: { ca: certs.ca }, subscriptions: [{ topic: 'secure/#', format: 'number', variable: 'mvr_secure' }] });
    await waitFor(() => noClientCert.source.status().lastError, { what: 'refused without a client certificate' });
    expect(noClientCert.source.status().state).not.toBe('connected');
  });

  it('reads over WebSocket', async () => {
    const tb = buffer();
    const url = `ws://127.0.0.1:${mq.wsPort}`;
    const { source } = await gateway(tb.buffer, { name: 'ws', url, client_id: 'gw-ws', username: 'gw', password: GW_PASSWORD, subscriptions: [{ topic: 'ws/+', format: 'number', variable_from_topic: { level: 1, variables: { a: 'mvr_ws_a' } } }] });
    await waitFor(() => source.status().state === 'connected');
    const pub = await connectClient(mq.url, { username: 'plc', password: 'plc-pw' });
    cleanup.push(() => endClient(pub));
    await pub.publishAsync('ws/a', '3', { qos: 1 });
    await waitFor(() => rowsOf(tb, 'mvr_ws_a').length === 1);
  });

  it('MQTT 5: keeps the session (session expiry) and limits messages in flight (receive maximum)', async () => {
    const tb = buffer();
    const sink = new GatedSink(tb.buffer);
    const cfg = { name: 'v5', url: mq.url, client_id: 'gw-v5', protocol_version: 5, max_pending_messages: 5, username: 'gw', password: GW_PASSWORD, subscriptions: [{ topic: 'v5/x', format: 'number', qos: 1, variable: 'mvr_v5' }] };
    const first = await gateway(sink, cfg);
    await waitFor(() => first.source.status().state === 'connected');
    await first.source.close();
    const pub = await connectClient(mq.url, { username: 'plc', password: 'plc-pw' });
    cleanup.push(() => endClient(pub));
    for (let i = 0; i < 20; i++) await pub.publishAsync('v5/x', String(i), { qos: 1 });
    sink.gate = true;
    const second = await gateway(sink, cfg);
    await waitFor(() => sink.heldSamples === 5, { what: 'five in flight' });
    // Receive Maximum 5 at the broker, max_pending_messages 5 in the source: no sixth (an absence, watched for a while).
    await holdsFor(() => sink.heldSamples === 5, { forMs: 500, intervalMs: 20, what: 'five in flight, no more' });
    await sink.release();
    await waitFor(() => rowsOf(tb, 'mvr_v5').length === 20, { what: 'all 20 queued messages' });
    expect(rowsOf(tb, 'mvr_v5').map((r) => r.value)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect((second.source.status().detail as { session_present: boolean }).session_present).toBe(true);
  });

  it('MQTT 5: acknowledgements of a commit leave in arrival order and mosquitto takes them (PUBACK without reason code)', async () => {
    const wire = await startWireRecorder(mq.port);
    cleanup.push(() => wire.close());
    // No buffer behind the gate: the release commits every message at once, so all acknowledgements
    // leave in one run, where PUBACKs and PUBRECs could be reordered.
    const sink = new GatedSink();
    const { source } = await gateway(sink, { name: 'v5-wire', url: wire.url, client_id: 'gw-v5-wire', protocol_version: 5, username: 'gw', password: GW_PASSWORD, subscriptions: [{ topic: 'v5w/1', format: 'number', qos: 1, variable: 'mvr_v5w1' }, { topic: 'v5w/2', format: 'number', qos: 2, variable: 'mvr_v5w2' }] });
    await waitFor(() => source.status().state === 'connected');
    sink.gate = true;
    const pub = await connectClient(mq.url, { username: 'plc', password: 'plc-pw' });
    cleanup.push(() => endClient(pub));
    const qosOrder = [1, 2, 1, 1, 2, 1];
    for (const [i, qos] of qosOrder.entries()) await pub.publishAsync(`v5w/${qos}`, String(i), { qos: qos as 1 | 2 });
    await waitFor(() => sink.heldSamples === qosOrder.length, { what: 'every message held at the buffer' });
    await sink.release();
    await waitFor(() => wire.sent().filter((p) => p.type === 4 || p.type === 5).length === qosOrder.length, { what: 'every acknowledgement sent' });
    const delivered = wire.received().filter((p) => p.type === 3 && p.qos > 0);
    expect(wire.sent().filter((p) => p.type === 4 || p.type === 5)).toEqual(delivered.map((p) => ({ type: p.qos === 1 ? 4 : 5, qos: 0, id: p.id })));
    // A PUBACK mosquitto could not parse would end the connection; one more message proves it still flows.
    await pub.publishAsync('v5w/1', '99', { qos: 1 });
    await waitFor(() => sink.appended.some((x) => x.value === 99), { what: 'a message after the acknowledgements' });
    expect((source.status().detail as { connects: number }).connects).toBe(1);
    expect(sink.appended.map((x) => `${x.variable}=${x.value}`)).toEqual(['mvr_v5w1=0', 'mvr_v5w2=1', 'mvr_v5w1=2', 'mvr_v5w1=3', 'mvr_v5w2=4', 'mvr_v5w1=5', 'mvr_v5w1=99']);
  });

  it('reconnects after mosquitto restarts and subscribes again (the session died with the broker)', async () => {
    const own = await startMosquitto();
    cleanup.push(async () => {
      await own.stop();
      removeDir(own.dir);
    });
    const tb = buffer();
    const { source } = await gateway(tb.buffer, { name: 'restart', url: own.url, client_id: 'gw-mq-restart', subscriptions: [{ topic: 'x', format: 'number', variable: 'mvr_x' }] });
    await waitFor(() => source.status().state === 'connected');
    await own.stop('SIGKILL');
    await waitFor(() => source.status().state !== 'connected');
    await own.restart();
    await waitFor(() => source.status().state === 'connected', { timeoutMs: 20_000, what: 'reconnected' });
    await waitFor(() => (source.status().detail as { connects: number }).connects === 2);
    const pub = await connectClient(own.url);
    cleanup.push(() => endClient(pub));
    await waitFor(async () => {
      await pub.publishAsync('x', '1', { qos: 1 });
      return rowsOf(tb, 'mvr_x').length > 0;
    }, { what: 'data after the restart', intervalMs: 300 });
  });
});
