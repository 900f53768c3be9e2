import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import type { Announcement, ShareChannel } from '../uplink/budget-sharing.js';
import type { FleetMqttConfig } from './config.js';
import { offlineWill, type FleetStatusDoc } from './status-doc.js';
import { fleetTopic, parseFleetTopic } from './topics.js';

/** After SUBACK, time given to the broker to deliver the retained announcements (sent right after it). */
const SETTLE_MS = 500;
const skipLog = (): void => undefined;

/**
 * This gateway's connection to the plant broker (fleet.mqtt): one mqtt.js client, reconnecting by
 * itself, with a retained last will on `<prefix>/<name>/status` saying it is offline. It publishes
 * the status (status-publisher.ts) and, when budget sharing is on, carries the demand announcements
 * (it is the ShareChannel of src/uplink/budget-sharing.ts).
 *
 * Everything is published retained with QoS 1 (a late subscriber gets the newest at once), and
 * only while connected: a status queued during an outage would be stale when it arrives.
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
  readonly clientId: string;

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
    const options: IClientOptions = {
      clientId: this.clientId,
      clean: true,
      keepalive: Math.max(1, Math.round(c.keepalive / 1000)),
      reconnectPeriod: 2_000,
      connectTimeout: 10_000,
      queueQoSZero: false,
      username: c.username,
      password: c.password?.reveal(),
      will: { topic: fleetTopic(prefix, this.o.gateway, 'status'), payload: Buffer.from(JSON.stringify(offlineWill(this.o.gateway, this.o.clock.now()))), qos: 1, retain: true },
    };
    if (!process.env.DEBUG) options.log = skipLog;
    const client = mqtt.connect(c.url, options);
    this.client = client;
    client.on('connect', () => {
      this.wasConnected = true;
      this.o.metrics.fleetBrokerConnected.set(1);
      this.o.logger.info({ url: c.url, client_id: this.clientId, prefix }, 'connected to the plant broker (fleet)');
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
    client.on('message', (topic, payload) => this.onMessage(topic, payload));
    client.on('close', () => {
      this.o.metrics.fleetBrokerConnected.set(0);
      if (this.wasConnected) this.o.logger.warn({ url: c.url }, 'connection to the plant broker (fleet) lost; reconnecting');
      this.wasConnected = false;
    });
    client.on('error', (err) => {
      this.throttle.warn(`error|${(err as { code?: unknown }).code ?? ''}`, { url: c.url, err: describeError(err) }, 'plant broker (fleet) connection problem');
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

  /** Publishes the status retained on `status` and `last`. False when not connected. */
  publishStatus(doc: FleetStatusDoc): boolean {
    const prefix = this.o.config.prefix;
    const text = JSON.stringify(doc);
    const ok = this.publish(fleetTopic(prefix, this.o.gateway, 'status'), text);
    if (ok && doc.state === 'online') this.publish(fleetTopic(prefix, this.o.gateway, 'last'), text);
    if (ok) this.o.metrics.fleetStatusPublished.inc();
    return ok;
  }

  /** Publishes `final` (the stopped status), then disconnects cleanly (no will). */
  async close(final?: FleetStatusDoc): Promise<void> {
    const client = this.client;
    if (!client) return;
    this.client = null;
    if (this.settleTimer) clearTimeout(this.settleTimer);
    if (final && client.connected) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 2_000);
        client.publish(fleetTopic(this.o.config.prefix, this.o.gateway, 'status'), JSON.stringify(final), { qos: 1, retain: true }, () => {
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

  private publish(topic: string, payload: string): boolean {
    const client = this.client;
    if (!client?.connected) return false;
    client.publish(topic, payload, { qos: 1, retain: true }, (err) => {
      if (err) this.throttle.warn(`publish|${topic}`, { topic, err: describeError(err) }, 'publish to the plant broker failed');
    });
    return true;
  }

  private onMessage(topic: string, payload: Buffer): void {
    try {
      const t = parseFleetTopic(this.o.config.prefix, topic);
      if (t && t.kind !== 'budget') for (const w of this.statusWatchers) w(topic, payload);
      if (!t || t.gateway === this.o.gateway) return;
      if (t.kind === 'budget') {
        this.emit(t.gateway, payload.length === 0 ? null : parseAnnouncement(payload));
      } else if (t.kind === 'status' && payload.length > 0) {
        const state = (JSON.parse(payload.toString('utf8')) as { state?: unknown }).state;
        // Its will or its stop message: the peer is gone, its share comes back now.
        if (state === 'offline' || state === 'stopped') this.emit(t.gateway, null);
      }
    } catch {
      // Anything a stranger publishes under the prefix is ignored; it must not crash the gateway.
      this.throttle.warn(`bad|${topic}`, { topic }, 'ignoring an unreadable message under the fleet prefix');
    }
  }

  private emit(name: string, a: Announcement | null): void {
    for (const l of this.listeners) l(name, a);
  }
}

function parseAnnouncement(payload: Buffer): Announcement | null {
  const v = JSON.parse(payload.toString('utf8')) as Partial<Announcement>;
  if (typeof v.group !== 'string' || typeof v.demand_per_min !== 'number' || !Number.isFinite(v.demand_per_min) || v.demand_per_min < 0) return null;
  const lease = typeof v.lease_ms === 'number' && Number.isFinite(v.lease_ms) && v.lease_ms > 0 ? Math.min(v.lease_ms, 600_000) : 15_000;
  return { group: v.group, demand_per_min: v.demand_per_min, lease_ms: lease };
}
