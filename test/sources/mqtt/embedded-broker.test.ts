import { createServer } from 'node:net';
import mqtt from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import type { Source } from '../../../src/core/source.js';
import { startMqttSimulator } from '../../../src/sim/mqtt-publisher.js';
import { EmbeddedBroker, createMqttSources } from '../../../src/sources/mqtt/index.js';
import type { EmbeddedBrokerSource } from '../../../src/sources/mqtt/broker-source.js';
import { openTestBuffer, type TestBuffer } from '../../helpers/buffer.js';
import { holdsFor } from '../../helpers/wait.js';
import { captureLogger, connectClient, contexts, endClient, freePort, GatedSink, section, waitFor } from './helpers.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

function buffer(): TestBuffer {
  const tb = openTestBuffer();
  cleanup.push(() => tb.destroy());
  return tb;
}

const PASSWORD = 'Pl4nt-Br0ker-secret';

async function startEmbedded(sink: GatedSink | TestBuffer['buffer'], broker: Record<string, unknown>, connections: Array<Record<string, unknown>> = []) {
  const log = captureLogger();
  const ctxs = contexts(sink, log.logger);
  const sources = createMqttSources(section({ broker: { enabled: true, host: '127.0.0.1', port: 0, ...broker }, connections }), ctxs.makeContext);
  for (const s of sources) await s.start();
  cleanup.push(() => Promise.all(sources.map((s) => s.close())));
  const brokerSource = sources[0] as EmbeddedBrokerSource;
  await waitFor(() => brokerSource.status().state === 'connected' || brokerSource.status().lastError, { what: 'broker started or failed' });
  const address = brokerSource.broker.address;
  return { sources, brokerSource, broker: brokerSource.broker as EmbeddedBroker, url: address ? `mqtt://127.0.0.1:${address.port}` : '', address, metrics: ctxs.metrics, log, connection: sources[1] as Source | undefined };
}

const rowsOf = (tb: TestBuffer, variable: string) => tb.rows().filter((r) => r.variable === variable);

describe('embedded MQTT broker', () => {
  it('authenticates publishers by user name and password, never logging the password', async () => {
    const tb = buffer();
    const e = await startEmbedded(tb.buffer, { username: 'plc', password: PASSWORD });
    await expect(connectClient(e.url, { username: 'plc', password: 'wrong' })).rejects.toMatchObject({ code: 4 });
    await expect(connectClient(e.url)).rejects.toMatchObject({ code: 4 });
    const ok = await connectClient(e.url, { username: 'plc', password: PASSWORD });
    expect(ok.connected).toBe(true);
    await endClient(ok);
    const refused = (await e.metrics.brokerConnectionsRefused.get()).values.find((v) => v.labels.reason === 'bad_credentials');
    expect(refused?.value).toBe(2);
    expect(e.brokerSource.status().detail).toMatchObject({ authentication: 'password', refused: { bad_credentials: 2 } });
    expect(e.log.text()).toContain('bad user name or password');
    expect(e.log.text()).not.toContain(PASSWORD);
    expect(JSON.stringify(e.brokerSource.status())).not.toContain(PASSWORD);
  });

  it('disconnects a client that sends a packet larger than max_packet_size and stores nothing of it', async () => {
    const tb = buffer();
    const e = await startEmbedded(tb.buffer, { allow_anonymous: true, max_packet_size: 1024 }, [{ name: 'in', url: 'embedded', subscriptions: [{ topic: 'big/#', format: 'number', variable: 'mvr_big' }] }]);
    const big = await connectClient(e.url);
    const closed = new Promise<void>((r) => big.once('close', () => r()));
    big.publish('big/x', '1'.repeat(4_000), { qos: 1 });
    await closed;
    await waitFor(async () => (await e.metrics.brokerConnectionsRefused.get()).values.some((v) => v.labels.reason === 'packet_too_large'));
    await endClient(big);
    // A well-behaved client is not affected.
    const small = await connectClient(e.url);
    await small.publishAsync('big/y', '12', { qos: 1 });
    await endClient(small);
    await waitFor(() => rowsOf(tb, 'mvr_big').length === 1);
    expect(rowsOf(tb, 'mvr_big').map((r) => r.value)).toEqual([12]);
  });

  it('feeds url: embedded connections in-process and acknowledges a QoS 1 publisher only after the commit', async () => {
    const tb = buffer();
    const sink = new GatedSink(tb.buffer);
    const e = await startEmbedded(sink, { allow_anonymous: true }, [
      {
        name: 'plcs',
        url: 'embedded',
        subscriptions: [
          { topic: 'line3/+/temperature', format: 'number', qos: 1, variable_from_topic: { level: 1, variables: { packer1: 'mvr_packer1_temperature' } } },
          { topic: 'line3/packer1/status', format: 'json', qos: 1, values: [{ path: 'rate', variable: 'mvr_packer1_rate' }] },
          { topic: 'line3/fast', format: 'number', qos: 0, variable: 'mvr_fast' },
        ],
      },
    ]);
    await waitFor(() => e.connection?.status().state === 'connected');
    const plc = await connectClient(e.url, { clientId: 'plc-1', clean: false });
    cleanup.push(() => endClient(plc));
    sink.gate = true;
    let acked = false;
    const pub = plc.publishAsync('line3/packer1/temperature', '41.5', { qos: 1 }).then(() => (acked = true));
    await waitFor(() => sink.heldSamples === 1);
    // The PLC still holds the message: not committed yet (an absence, watched for a while).
    await holdsFor(() => !acked, { forMs: 300, intervalMs: 20, what: 'no PUBACK to the PLC before the commit' });
    await sink.release();
    await pub;
    expect(rowsOf(tb, 'mvr_packer1_temperature').map((r) => r.value)).toEqual([41.5]);
    // QoS 0 on a QoS 0 subscription does not wait; JSON works the same way in-process.
    await plc.publishAsync('line3/fast', '1', { qos: 0 });
    await plc.publishAsync('line3/packer1/status', JSON.stringify({ rate: 99 }), { qos: 1 });
    await waitFor(() => rowsOf(tb, 'mvr_packer1_rate').length === 1 && rowsOf(tb, 'mvr_fast').length === 1);
    expect(e.connection?.status().samplesRead).toBe(3);
  });

  it('a buffer that refuses the samples makes the broker drop the publisher without acknowledging; it resends after reconnecting', async () => {
    const tb = buffer();
    const sink = new GatedSink(tb.buffer);
    const e = await startEmbedded(sink, { allow_anonymous: true }, [{ name: 'plcs', url: 'embedded', subscriptions: [{ topic: 'r', format: 'number', qos: 1, variable: 'mvr_r' }] }]);
    // A PLC-like client: persistent session, reconnects, resends unacknowledged messages (MQTT §4.4).
    const plc = mqtt.connect(e.url, { clientId: 'plc-resend', clean: false, reconnectPeriod: 200 });
    cleanup.push(() => endClient(plc));
    await new Promise<void>((r) => plc.once('connect', () => r()));
    sink.gate = true;
    const pub = plc.publishAsync('r', '5', { qos: 1 });
    await waitFor(() => sink.heldSamples === 1);
    sink.failHeld(new Error('buffer is closed'));
    await pub; // resolves once the resent message is acknowledged
    expect(rowsOf(tb, 'mvr_r').map((r) => r.value)).toEqual([5]);
    expect(e.connection?.status().lastError?.code).toBe('BUFFER_REFUSED');
  });

  it('carries Sparkplug B from an edge node publishing to the embedded broker, rebirth requests included', async () => {
    const tb = buffer();
    const e = await startEmbedded(tb.buffer, { username: 'plc', password: PASSWORD }, [
      { name: 'spb', url: 'embedded', subscriptions: [{ topic: 'spBv1.0/plant/#', format: 'sparkplug', metrics: [{ name: 'Temperature', variable: 'mvr_oven1_temperature' }, { name: 'Setpoint', variable: 'mvr_oven1_setpoint' }] }] },
    ]);
    // Started after the simulator has published its BIRTH: only a rebirth lets the gateway read its aliases.
    const spSource = e.sources[1];
    await spSource.close();
    const sim = await startMqttSimulator({ url: e.url, username: 'plc', password: PASSWORD, intervalMs: 50 });
    cleanup.push(() => sim.close());
    await waitFor(() => sim.counts().ddata > 2);
    await spSource.start();
    await waitFor(() => sim.counts().rebirthRequests >= 1, { what: 'rebirth request' });
    await waitFor(() => rowsOf(tb, 'mvr_oven1_temperature').length >= 3 && rowsOf(tb, 'mvr_oven1_setpoint').length >= 1);
    expect(rowsOf(tb, 'mvr_oven1_setpoint')[0].value).toBe(180);
  });

  it('accepts MQTT over WebSocket', async () => {
    const tb = buffer();
    const wsPort = await freePort();
    const e = await startEmbedded(tb.buffer, { allow_anonymous: true, websocket: { port: wsPort, path: '/mqtt' } }, [{ name: 'hmi', url: 'embedded', subscriptions: [{ topic: 'hmi/#', format: 'number', variable: 'mvr_hmi' }] }]);
    expect(e.address?.websocket).toMatchObject({ port: wsPort, path: '/mqtt' });
    const hmi = await connectClient(`ws://127.0.0.1:${wsPort}/mqtt`);
    await hmi.publishAsync('hmi/setpoint', '3', { qos: 1 });
    await endClient(hmi);
    await waitFor(() => rowsOf(tb, 'mvr_hmi').length === 1);
  });

  it('reports a port in use in status and starts listening once it is free', async () => {
    const tb = buffer();
    const port = await freePort();
    const squatter = createServer();
    await new Promise<void>((r) => squatter.listen(port, '127.0.0.1', () => r()));
    const e = await startEmbedded(tb.buffer, { allow_anonymous: true, port });
    await waitFor(() => e.brokerSource.status().lastError !== null);
    expect(e.brokerSource.status().lastError).toMatchObject({ code: 'BROKER_LISTEN_FAILED', message: expect.stringContaining(`mqtt.broker.port: 127.0.0.1:${port} is already in use by another program`) });
    expect(e.brokerSource.status().state).toBe('disconnected');
    await new Promise<void>((r) => squatter.close(() => r()));
    await waitFor(() => e.brokerSource.status().state === 'connected', { timeoutMs: 15_000, what: 'listening after the port was freed' });
    const c = await connectClient(`mqtt://127.0.0.1:${port}`);
    await endClient(c);
  });
});
