import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import mqtt, { type IPublishPacket, type MqttClient } from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFERRED_ACK, encodePuback, holdPubrecs, PUBACK_BYTES, Qos2IncomingStore } from '../../../src/sources/mqtt/ack-after-commit.js';
import { connectClient, endClient, startAedes, startWireRecorder, waitFor, type WirePacket } from './helpers.js';

/**
 * Issue 23 §4: ack-after-commit.ts works through mqtt.js internals (the private `_sendPacket` and
 * what `handleMessage`'s callback does with an error), checked against one mqtt.js version. That
 * version is pinned exactly in package.json; this test fails when the installed mqtt.js is another
 * one, or when the internals the patch relies on changed, so an upgrade is a deliberate step:
 * re-read node_modules/mqtt/build/lib/handlers/{publish,pubrel}.js, adapt the patch, then the pin.
 */
const ROOT = join(import.meta.dirname, '..', '..', '..');
const PUBACK = 4;
const PUBREC = 5;

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

describe('mqtt.js: the version ack-after-commit.ts was written against', () => {
  it('is pinned exactly in package.json and package-lock.json, and is the one installed', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string; dependencies?: Record<string, string> }> };
    const installed = (createRequire(import.meta.url)('mqtt/package.json') as { version: string }).version;
    const pinned = pkg.dependencies.mqtt;
    expect(pinned, 'package.json must name one exact mqtt version (no ^ or ~): the patch depends on its internals').toMatch(/^\d+\.\d+\.\d+$/);
    expect(lock.packages[''].dependencies?.mqtt).toBe(pinned);
    expect(lock.packages['node_modules/mqtt'].version).toBe(pinned);
    expect(installed).toBe(pinned);
  });

  it('still has the private _sendPacket(packet, cb, cbStorePut, noStore) the patch replaces', () => {
    const proto = (mqtt.MqttClient as unknown as { prototype: Record<string, unknown> }).prototype;
    expect(typeof proto._sendPacket).toBe('function');
    expect((proto._sendPacket as (...a: unknown[]) => void).length).toBe(4);
  });

  it('against a real broker: no PUBACK or PUBREC leaves until the patch sends it, then the broker takes it', async () => {
    const broker = await startAedes();
    cleanup.push(() => broker.close());
    const wire = await startWireRecorder(broker.port);
    cleanup.push(() => wire.close());
    let acks = 0;
    broker.aedes.on('ack', (_packet, client) => {
      if (client?.id === 'pin-sub') acks += 1;
    });

    // The subscriber set up as remote-connection.ts does: QoS 1 held by handleMessage's error
    // argument, QoS 2 by the incoming store and the held PUBREC.
    const heldQos2 = new Set<number>();
    const qos1: number[] = [];
    const store = new Qos2IncomingStore((packet, proceed) => {
      heldQos2.add(packet.messageId as number);
      proceed();
    });
    const sub: MqttClient = mqtt.connect(wire.url, { clientId: 'pin-sub', clean: false, reconnectPeriod: 0, incomingStore: store, log: () => undefined });
    cleanup.push(() => endClient(sub));
    const sendPubrec = holdPubrecs(sub, (id) => heldQos2.has(id));
    sub.handleMessage = (packet: IPublishPacket, cb: (err?: Error) => void) => {
      if (packet.qos === 1) {
        qos1.push(packet.messageId as number);
        cb(DEFERRED_ACK);
      } else cb();
    };
    await new Promise<void>((resolve, reject) => {
      sub.once('connect', () => resolve());
      sub.once('error', reject);
    });
    await sub.subscribeAsync({ 'pin/1': { qos: 1 }, 'pin/2': { qos: 2 } });

    const pub = await connectClient(broker.url);
    cleanup.push(() => endClient(pub));
    await pub.publishAsync('pin/1', 'a', { qos: 1 });
    await pub.publishAsync('pin/2', 'b', { qos: 2 });
    const sent = (type: number) => wire.sent().filter((p: WirePacket) => p.type === type);
    // Both messages were handed over: mqtt.js read on without acknowledging either.
    await waitFor(() => qos1.length === 1 && heldQos2.size === 1, { what: 'both messages received and held' });
    // A ping round trip: anything mqtt.js would have written after handling the messages is on the wire before the PINGRESP comes back.
    await pingRoundTrip(sub);
    expect(sent(PUBACK)).toEqual([]);
    expect(sent(PUBREC)).toEqual([]);
    expect(acks).toBe(0);

    // The commit: the connection writes the PUBACK itself and sends the real PUBREC through mqtt.js.
    const puback = Buffer.alloc(PUBACK_BYTES);
    encodePuback(puback, 0, qos1[0]);
    sub.stream.write(puback);
    const [id2] = heldQos2;
    heldQos2.delete(id2);
    sendPubrec(id2);
    await waitFor(() => acks === 2, { what: 'the broker taking the PUBACK and completing the QoS 2 flow (PUBCOMP)' });
    expect(sent(PUBACK).map((p) => p.id)).toEqual([qos1[0]]);
    expect(sent(PUBREC).map((p) => p.id)).toEqual([id2]);
  });
});

/** Resolves when the broker answered a PINGREQ sent now (mqtt.js' own keep-alive ping). */
function pingRoundTrip(client: MqttClient): Promise<void> {
  return new Promise((resolve) => {
    client.once('packetreceive', function onPacket(packet) {
      if (packet.cmd === 'pingresp') resolve();
      else client.once('packetreceive', onPacket);
    });
    client.stream.write(Buffer.from([0xc0, 0x00])); // PINGREQ (MQTT §3.12)
  });
}
