import type { IPublishPacket, IStore, MqttClient } from 'mqtt';
import { Readable } from 'node:stream';

/**
 * Acknowledging MQTT messages only after their samples are committed, with mqtt.js 5, without
 * handling them one commit at a time.
 *
 * How mqtt.js acknowledges (node_modules/mqtt/build/lib/handlers/publish.js and pubrel.js, checked
 * against mqtt 5.16.0, pinned exactly in package.json; test/sources/mqtt/mqtt-pin.test.ts); it handles one packet at a time and reads the next only when the previous
 * one is done:
 *
 * - QoS 1: it calls `client.handleMessage(packet, cb)`; `cb()` sends PUBACK and then reads on.
 *   Waiting for the commit there would allow one message per group commit (about 10 per second).
 *   We call `cb(DEFERRED_ACK)` instead: with an error argument mqtt.js skips its PUBACK and reads
 *   on; the connection sends the PUBACK itself once the commit resolved.
 * - QoS 2: it stores the packet with `incomingStore.put(packet, cb)`, then sends PUBREC through
 *   `client._sendPacket` and reads on; handleMessage runs only at PUBREL. `Qos2IncomingStore`
 *   starts the commit in `put`, and `holdPubrecs` keeps mqtt.js' PUBREC for a message whose commit
 *   is pending (telling mqtt.js it was sent, so it reads on); the connection sends the real PUBREC
 *   after the commit. After PUBREC the broker forgets the message (MQTT §4.3.3), so it must not
 *   leave earlier.
 *
 * Acknowledgements leave in the order the PUBLISH packets arrived (MQTT 3.1.1 §4.6, MQTT 5 §4.6) and
 * only on the connection the message came from: after a reconnect the broker redelivers what was
 * not acknowledged, from the persistent session (MQTT §4.4).
 */

/** Passed to mqtt.js' handleMessage callback so that it does not send its own PUBACK. */
export const DEFERRED_ACK = Object.freeze(Object.assign(new Error('PUBACK deferred until the samples are committed'), { code: 'MQTT_ACK_DEFERRED' }));

type SendPacket = (packet: Record<string, unknown>, cb?: (err?: Error) => void, cbStorePut?: unknown, noStore?: boolean) => void;

function sendPacketOf(client: MqttClient): SendPacket {
  return (client as unknown as { _sendPacket: SendPacket })._sendPacket;
}

/** Bytes of one PUBACK: fixed header 0x40, remaining length 2, packet id. */
export const PUBACK_BYTES = 4;

/**
 * Encodes a PUBACK for `messageId` at `offset` of `buf`. The same four bytes are a valid PUBACK in
 * MQTT 3.1.1 (§3.4) and MQTT 5 (§3.4.2.1: reason code 0 Success with no properties may be left
 * out, remaining length 2); mqtt-packet writes exactly these for both. The connection encodes a
 * whole run of PUBACKs into one buffer and writes it once: through mqtt.js each PUBACK costs three
 * stream writes and a dozen debug calls, a tenth of the CPU per message at high rates.
 */
export function encodePuback(buf: Buffer, offset: number, messageId: number): void {
  buf[offset] = 0x40;
  buf[offset + 1] = 0x02;
  buf[offset + 2] = messageId >>> 8;
  buf[offset + 3] = messageId & 0xff;
}

/**
 * Keeps mqtt.js from sending PUBREC for messages whose commit is pending (`isHeld(id)`), and
 * returns the function that sends the real PUBREC later.
 */
export function holdPubrecs(client: MqttClient, isHeld: (messageId: number) => boolean): (messageId: number) => void {
  const original = sendPacketOf(client);
  (client as unknown as { _sendPacket: SendPacket })._sendPacket = function (packet, cb, cbStorePut, noStore) {
    if (packet.cmd === 'pubrec' && typeof packet.messageId === 'number' && isHeld(packet.messageId)) {
      cb?.();
      return;
    }
    original.call(client, packet, cb, cbStorePut, noStore);
  };
  return (messageId) => original.call(client, { cmd: 'pubrec', messageId });
}

/**
 * mqtt.js incoming store for QoS 2. `onNew(packet, proceed)` is called for each new message: it
 * starts the commit and calls `proceed()` when mqtt.js may go on (at once, or later for
 * back-pressure). A packet id already held is a retransmission (DUP) of a message already being
 * committed: it is not committed twice.
 */
export class Qos2IncomingStore implements IStore {
  private readonly packets = new Map<number, IPublishPacket>();

  constructor(private readonly onNew: (packet: IPublishPacket, proceed: () => void) => void) {}

  put(packet: Parameters<IStore['put']>[0], cb: Parameters<IStore['put']>[1]): this {
    const p = packet as IPublishPacket;
    const id = p.messageId;
    if (p.cmd !== 'publish' || p.qos !== 2 || id === undefined || this.packets.has(id)) {
      cb();
      return this;
    }
    this.packets.set(id, p);
    this.onNew(p, () => cb());
    return this;
  }

  get(packet: Parameters<IStore['get']>[0], cb: Parameters<IStore['get']>[1]): this {
    const p = packet.messageId === undefined ? undefined : this.packets.get(packet.messageId);
    if (p) cb(undefined, p);
    else cb(new Error('missing packet'));
    return this;
  }

  del(packet: Parameters<IStore['del']>[0], cb: Parameters<IStore['del']>[1]): this {
    const p = packet.messageId === undefined ? undefined : this.packets.get(packet.messageId);
    if (p && packet.messageId !== undefined) this.packets.delete(packet.messageId);
    if (p) cb(undefined, p);
    else cb(new Error('missing packet'));
    return this;
  }

  createStream(): ReturnType<IStore['createStream']> {
    return Readable.from([]) as unknown as ReturnType<IStore['createStream']>;
  }

  close(cb: Parameters<IStore['close']>[0]): void {
    this.packets.clear();
    cb();
  }
}
