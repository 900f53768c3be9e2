import { randomBytes } from 'node:crypto';
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import type { Logger } from 'pino';
import { mqttClientOptions } from '../config/mqtt-connection.js';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import type { Announcement, ShareChannel } from '../uplink/budget-sharing.js';
import type { FleetMqttConfig } from './config.js';
import { DuplicateNameWatch, RECONNECT_MS, SESSION_TAKEN_OVER } from './duplicate-name.js';
import { MAX_FLEET_DOC_BYTES, readAnnouncement, readStatusDoc } from './read-doc.js';
import { offlineWill, type FleetStatusDoc } from './status-doc.js';
import { fleetTopic, parseFleetTopic } from './topics.js';

/** After SUBACK, time given to the broker to deliver the retained announcements (sent right after it). */
const SETTLE_MS = 500;
/**
 * MQTT 5 Maximum Packet Size (§3.1.2.11.4) of the fleet connection: a fleet document plus its
 * topic and headers. The broker must not send anything larger: it discards it as if it had sent
 * it (same clause; mosquitto logs "Dropping too large outgoing PUBLISH"), so a stranger's 64 MB
 * retained message never reaches us.
 */
export const FLEET_MAX_PACKET_BYTES = MAX_FLEET_DOC_BYTES + 1_024;
/** CONNACK codes for "this broker does not speak the MQTT version asked for": 3.1.1 return code 1, MQTT 5 reason 0x84. */
const PROTOCOL_REFUSED = new Set([1, 0x84]);

/**
 * This gateway's connection to the plant broker (fleet.mqtt): one mqtt.js client, reconnecting by
 * itself, with a retained last will on `<prefix>/<name>/status` saying it is offline. It publishes
 * the status (status-publisher.ts) and, when budget sharing is on, carries the demand announcements
 * (it is the ShareChannel of src/uplink/budget-sharing.ts).
 *
 * Everything is published retained with QoS 1 (a late subscriber gets the newest at once), and
 * only while connected: a status queued during an outage would be stale when it arrives.
 *
 * It speaks MQTT 5 with a Maximum Packet Size (FLEET_MAX_PACKET_BYTES), and falls back to MQTT
 * 3.1.1 when the broker refuses version 5; on 3.1.1 a larger message still arrives, and is dropped
 * by its size before it is decoded (read-doc.ts). It watches for a second gateway using the same
 * name (duplicate-name.ts).
 */
export class FleetLink implements ShareChannel {
  private client: MqttClient | null = null;
  private readonly throttle: LogThrottle;
  private readonly listeners = new Set<(name: string, a: Announcement | null) => void>();
  /** Watchers of every gateway's status and last status (the console's fleet page), this one included. */
  private readonly statusWatchers = new Set<(topic: string, payload: Buffer) => void>();
  private statusSubscriptionState: 'pending' | 'ok' | 'refused' = 'pending';
  private syncedOnce = false;
  private settleTimer: NodeJS.Timeout | null = null;
  private lastAnnouncement: string | null = null;
  private wasConnected = false;
  private protocol: 4 | 5 = 5;
  private readonly duplicates: DuplicateNameWatch;
  readonly clientId: string;
  /** Random id of this process's link, in its status documents and will (duplicate-name.ts). */
  readonly instance = randomBytes(4).toString('hex');

  constructor(
    private readonly o: {
      config: FleetMqttConfig;
      gateway: string;
      /** Subscribe to the other gateways' announcements (budget sharing on). */
      sharing: boolean;
      logger: Logger;
      metrics: Metrics;
      clock: Clock;
    },
  ) {
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
    this.clientId = o.config.client_id ?? `edge-gateway-fleet-${o.gateway}`;
    this.duplicates = new DuplicateNameWatch({
      gateway: o.gateway,
      clientId: this.clientId,
      instance: this.instance,
      clock: o.clock,
      logger: o.logger,
      onReconnectPeriod: (ms) => {
        // mqtt.js reads it when it schedules the next attempt (after the coming close).
        if (this.client) this.client.options.reconnectPeriod = ms;
      },
    });
  }

  /** 'MQTT 5', or 'MQTT 3.1.1' after the broker refused version 5. */
  get protocolName(): string {
    return this.protocol === 5 ? 'MQTT 5' : 'MQTT 3.1.1';
  }

  /** What shows that another gateway uses this name, while that is suspected; else null. */
  get duplicateName(): string | null {
    return this.duplicates.detail;
  }

  get connected(): boolean {
    return this.client?.connected === true;
  }

  get synced(): boolean {
    return this.syncedOnce;
  }

  start(): void {
    if (this.client) return;
    const c = this.o.config;
    const prefix = c.prefix;
    let shared: IClientOptions;
    try {
      shared = mqttClientOptions(c, this.clientId);
    } catch (err) {
      // A TLS file that vanished after validation: nothing to connect with until the next start.
      this.o.logger.error({ url: c.url, err: describeError(err) }, 'cannot read the TLS files of fleet.mqtt; the fleet link stays off');
      return;
    }
    const options: IClientOptions = {
      ...shared,
      clean: true,
      protocolVersion: 5,
      properties: { maximumPacketSize: FLEET_MAX_PACKET_BYTES },
      reconnectPeriod: RECONNECT_MS,
      will: { topic: fleetTopic(prefix, this.o.gateway, 'status'), payload: Buffer.from(JSON.stringify(offlineWill(this.o.gateway, this.o.clock.now(), this.instance))), qos: 1, retain: true },
    };
    const client = mqtt.connect(c.url, options);
    this.client = client;
    client.on('connect', () => {
      this.wasConnected = true;
      this.duplicates.onConnected();
      this.o.metrics.fleetBrokerConnected.set(1);
      this.o.logger.info({ url: c.url, client_id: this.clientId, prefix, protocol: this.protocolName, instance: this.instance }, 'connected to the plant broker (fleet)');
      // Its own status topic, before anything of ours is published on this connection: another
      // instance's status there means a second gateway with this name (duplicate-name.ts).
      client.subscribe(fleetTopic(prefix, this.o.gateway, 'status'), { qos: 1 }, () => undefined);
      // The announcement is retained: publish it again in case the broker lost it (no persistence).
      if (this.lastAnnouncement !== null) this.publish(fleetTopic(prefix, this.o.gateway, 'budget'), this.lastAnnouncement);
      if (this.statusWatchers.size > 0) this.subscribeStatuses(client);
      if (!this.o.sharing) return;
      client.subscribe({ [`${prefix}/+/budget`]: { qos: 1 }, [`${prefix}/+/status`]: { qos: 1 } }, (err) => {
        if (err) {
          this.throttle.error('subscribe', { err: describeError(err) }, 'cannot subscribe to the fleet topics on the plant broker');
          return;
        }
        if (this.settleTimer) clearTimeout(this.settleTimer);
        this.settleTimer = setTimeout(() => {
          this.syncedOnce = true;
        }, SETTLE_MS);
        this.settleTimer.unref();
      });
    });
    client.on('message', (topic, payload, packet) => this.onMessage(topic, payload, packet));
    client.on('disconnect', (packet) => {
      // MQTT 5: the broker says why it closes the connection (§3.14.2.1).
      if (packet.reasonCode === SESSION_TAKEN_OVER) this.duplicates.onTakenOver();
      else this.throttle.warn(`disconnect|${packet.reasonCode ?? ''}`, { url: c.url, reason_code: packet.reasonCode, reason: packet.properties?.reasonString }, 'the plant broker (fleet) closed the connection');
    });
    client.on('close', () => {
      this.duplicates.onClosed();
      this.o.metrics.fleetBrokerConnected.set(0);
      if (this.wasConnected && this.client === client) this.o.logger.warn({ url: c.url }, 'connection to the plant broker (fleet) lost; reconnecting');
      this.wasConnected = false;
    });
    client.on('error', (err) => {
      const code = (err as { code?: unknown }).code;
      if (this.protocol === 5 && typeof code === 'number' && PROTOCOL_REFUSED.has(code)) {
        // The next attempt (mqtt.js builds its packets and parser from these options each time) speaks 3.1.1.
        this.protocol = 4;
        client.options.protocolVersion = 4;
        delete client.options.properties;
        this.o.logger.info(
          { url: c.url },
          `the plant broker refused MQTT 5 (${describeError(err)}): using MQTT 3.1.1, without a maximum packet size (an oversized message under the fleet prefix is received, then dropped unread: set max_packet_size on the broker, docs/scale-out.md)`,
        );
        // mqtt.js does not retry after a refusal in CONNACK (reconnectOnConnackError is off): ask it to, once the refusal is handled.
        setTimeout(() => {
          if (this.client === client) client.reconnect();
        }, 0).unref();
        return;
      }
      this.throttle.warn(`error|${code ?? ''}`, { url: c.url, err: describeError(err) }, 'plant broker (fleet) connection problem');
    });
  }

  announce(a: Announcement | null): void {
    const topic = fleetTopic(this.o.config.prefix, this.o.gateway, 'budget');
    this.lastAnnouncement = a === null ? null : JSON.stringify(a);
    // A zero-length retained message removes the retained one (MQTT 3.1.1 §3.3.1.3).
    this.publish(topic, this.lastAnnouncement ?? '');
  }

  onPeer(listener: (name: string, a: Announcement | null) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Whether the broker granted the status subscription of watchStatuses (pending until its SUBACK). */
  get statusSubscription(): 'pending' | 'ok' | 'refused' {
    return this.statusSubscriptionState;
  }

  /**
   * Feeds `listener` every message on `<prefix>/+/status` and `<prefix>/+/last` (this gateway's
   * own included), on this same connection: the retained ones at once after each (re)subscribe.
   * Returns the function that stops the feed; with the last watcher gone the topics are
   * unsubscribed (but `+/status` stays while budget sharing needs it).
   */
  watchStatuses(listener: (topic: string, payload: Buffer) => void): () => void {
    this.statusWatchers.add(listener);
    if (this.statusWatchers.size === 1 && this.client?.connected) this.subscribeStatuses(this.client);
    return () => {
      if (!this.statusWatchers.delete(listener) || this.statusWatchers.size > 0) return;
      this.statusSubscriptionState = 'pending';
      const prefix = this.o.config.prefix;
      if (this.client?.connected) this.client.unsubscribe(this.o.sharing ? [`${prefix}/+/last`] : [`${prefix}/+/status`, `${prefix}/+/last`]);
    };
  }

  private subscribeStatuses(client: MqttClient): void {
    const prefix = this.o.config.prefix;
    this.statusSubscriptionState = 'pending';
    client.subscribe({ [`${prefix}/+/status`]: { qos: 1 }, [`${prefix}/+/last`]: { qos: 1 } }, (err, granted) => {
      // A broker's ACL says no with return code 0x80 in the SUBACK (MQTT 3.1.1 §3.9.3), not an error.
      const refused = granted?.filter((g) => g.qos === 128).map((g) => g.topic) ?? [];
      if (this.statusWatchers.size === 0) return; // unwatched meanwhile
      if (err || refused.length > 0) {
        this.statusSubscriptionState = 'refused';
        this.throttle.error(
          'subscribe-status',
          { err: err ? describeError(err) : undefined, refused },
          `the plant broker refused the subscription to ${refused.join(' and ') || `${prefix}/+/status`}: the console's Fleet page stays empty until the broker's ACL lets this gateway read them`,
        );
      } else {
        this.statusSubscriptionState = 'ok';
      }
    });
  }

  /** Publishes the status retained on `status` and `last` (with this link's instance id and duplicate-name finding). False when not connected. */
  publishStatus(doc: FleetStatusDoc): boolean {
    const prefix = this.o.config.prefix;
    const text = JSON.stringify(this.stamp(doc));
    const ok = this.publish(fleetTopic(prefix, this.o.gateway, 'status'), text, () => this.duplicates.onOwnStatusAcked());
    if (ok && doc.state === 'online') this.publish(fleetTopic(prefix, this.o.gateway, 'last'), text);
    if (ok) this.o.metrics.fleetStatusPublished.inc();
    return ok;
  }

  /** Publishes `final` (the stopped status), then disconnects cleanly (no will). */
  async close(final?: FleetStatusDoc): Promise<void> {
    const client = this.client;
    if (!client) return;
    this.client = null;
    this.duplicates.stop();
    if (this.settleTimer) clearTimeout(this.settleTimer);
    if (final && client.connected) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 2_000);
        client.publish(fleetTopic(this.o.config.prefix, this.o.gateway, 'status'), JSON.stringify(this.stamp(final)), { qos: 1, retain: true }, () => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => client.end(true, () => resolve()), 2_000);
      client.end(false, () => {
        clearTimeout(t);
        resolve();
      });
    });
    this.o.metrics.fleetBrokerConnected.set(0);
  }

  private stamp(doc: FleetStatusDoc): FleetStatusDoc {
    return { ...doc, instance: this.instance, duplicate_name: this.duplicates.detail };
  }

  private publish(topic: string, payload: string, onAcked?: () => void): boolean {
    const client = this.client;
    if (!client?.connected) return false;
    client.publish(topic, payload, { qos: 1, retain: true }, (err) => {
      if (err) this.throttle.warn(`publish|${topic}`, { topic, err: describeError(err) }, 'publish to the plant broker failed');
      else onAcked?.();
    });
    return true;
  }

  private onMessage(topic: string, payload: Buffer, packet: IPublishPacket): void {
    try {
      this.readMessage(topic, payload, packet);
    } catch (err) {
      // Anything a stranger publishes under the prefix is ignored; it must not crash the gateway.
      this.throttle.warn(`bad|${topic}`, { topic, err: describeError(err) }, 'ignoring an unreadable message under the fleet prefix');
    }
  }

  private readMessage(topic: string, payload: Buffer, packet: IPublishPacket): void {
    const t = parseFleetTopic(this.o.config.prefix, topic);
    if (!t) return;
    if (payload.length > MAX_FLEET_DOC_BYTES) {
      // Dropped by its size, before a byte is decoded (MQTT 3.1.1 brokers, or a broker that ignores our maximum packet size).
      this.throttle.warn(`oversized|${topic}`, { topic, bytes: payload.length, limit: MAX_FLEET_DOC_BYTES }, `ignoring an oversized message (${payload.length.toLocaleString('en-US')} bytes, fleet documents are at most ${MAX_FLEET_DOC_BYTES.toLocaleString('en-US')}) under the fleet prefix: someone publishes there who should not (broker ACL, docs/scale-out.md)`);
      return;
    }
    if (t.kind !== 'budget') for (const w of this.statusWatchers) w(topic, payload);
    if (t.kind === 'budget') {
      if (t.gateway === this.o.gateway) return;
      if (payload.length === 0) {
        this.emit(t.gateway, null);
        return;
      }
      const a = readAnnouncement(payload);
      if (!a.ok) this.throttle.warn(`bad|${topic}`, { topic, problem: a.problem }, 'ignoring an unreadable budget announcement under the fleet prefix');
      // An unreadable announcement counts as a withdrawal: that member's share comes back.
      this.emit(t.gateway, a.ok ? a.doc : null);
    } else if (t.kind === 'status' && payload.length > 0) {
      const r = readStatusDoc(payload);
      if (!r.ok) {
        this.throttle.warn(`bad|${topic}`, { topic, problem: r.problem }, 'ignoring an unreadable status document under the fleet prefix');
        return;
      }
      if (t.gateway === this.o.gateway) {
        this.duplicates.onOwnStatus(r.doc, packet.retain);
        return;
      }
      // Its will or its stop message: the peer is gone, its share comes back now.
      if (r.doc.state === 'offline' || r.doc.state === 'stopped') this.emit(t.gateway, null);
    }
  }

  private emit(name: string, a: Announcement | null): void {
    for (const l of this.listeners) l(name, a);
  }
}
