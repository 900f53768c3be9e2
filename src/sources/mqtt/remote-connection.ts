import { hostname } from 'node:os';
import mqtt, { type IClientOptions, type IConnackPacket, type IPublishPacket, type ISubscriptionGrant, type MqttClient } from 'mqtt';
import { mqttClientOptions } from '../../config/mqtt-connection.js';
import { Backoff } from '../../core/backoff.js';
import { describeError } from '../../core/errors.js';
import { LogThrottle } from '../../core/log-throttle.js';
import { BrokerDropWatch, DROPPED_TOPIC } from './broker-drop-watch.js';
import type { Source, SourceStatus } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import { DEFERRED_ACK, encodePuback, holdPubrecs, PUBACK_BYTES, Qos2IncomingStore } from './ack-after-commit.js';
import { lastWillTopics, type MqttConnectionConfig } from './config.js';
import type { InboundMessage } from './decoding.js';
import { describeMqttError, mqttErrorCode } from './errors.js';
import { MessagePipeline } from './message-pipeline.js';
import { PrimaryHostSession, statePayload } from './primary-host.js';

/**
 * Per network connection: acknowledgements are only ever sent on the connection that received
 * the message. QoS 1 and 2 messages are numbered in arrival order (their token); PUBACKs leave from the
 * head of that order only (MQTT 3.1.1 §4.6, MQTT 5 §4.6), once the head's samples are committed.
 * The acknowledgement is PUBACK for QoS 1 and PUBREC for QoS 2.
 */
interface Connection {
  client: MqttClient;
  /** Packet ids of QoS 1/2 messages from token `base` on, whether each is committed (0/1), and its QoS. */
  ackIds: number[];
  ackDone: number[];
  ackQos: number[];
  /** QoS 2 packet ids whose PUBREC waits for the commit. */
  heldPubrecs: Set<number>;
  sendPubrec: (messageId: number) => void;
  /** Token of ackIds[0]. */
  base: number;
  /** Index in ackIds of the first message not yet acknowledged. */
  head: number;
  flushScheduled: boolean;
  /** Called with (err, token) by the pipeline; one function per connection. */
  onCommitted: (err: unknown, token: number) => void;
  /** Resolvers waiting until every PUBACK queued so far has gone out. */
  drained: Array<() => void>;
  /** Set when a commit failed: nothing more is acknowledged here, the connection is dropped. */
  broken: boolean;
  /** primary_host_id set: this connection's Sparkplug STATE session (its Will and birth timestamp). */
  host: PrimaryHostSession | null;
}

/** Longest stretch of message handling without giving timers and I/O a turn. */
const YIELD_EVERY_MS = 5;
/** Messages handled between two looks at the clock for that yield. */
const CLOCK_READ_EVERY = 16;

export function defaultClientId(connectionName: string): string {
  const host = hostname().replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 40) || 'host';
  return `edge-gateway-${host}-${connectionName}`;
}

/**
 * One connection to a remote MQTT broker (mqtt://, mqtts://, ws://, wss://): one mqtt.js client
 * per network connection, our own capped backoff between attempts, subscriptions made on the
 * first connect and whenever the broker has no session for us, and QoS 1/2 acknowledgements sent
 * only after the samples are committed (ack-after-commit.ts).
 */
export class MqttConnectionSource implements Source {
  readonly kind = 'mqtt' as const;
  readonly name: string;
  private readonly pipeline: MessagePipeline;
  private readonly backoff: Backoff;
  private readonly throttle: LogThrottle;
  private readonly clientId: string;
  private conn: Connection | null = null;
  private stopped = true;
  private retryTimer: NodeJS.Timeout | null = null;
  private subscribedOnce = false;
  private sessionPresent: boolean | null = null;
  /** Mosquitto's drop count, to warn when the broker lost messages while we were away. */
  private readonly drops: BrokerDropWatch;
  private connectedAt: number | null = null;
  private connects = 0;
  private refusedSubscriptions: string[] = [];
  private lastYield = 0;
  private sinceClockRead = 0;
  /**
   * The buffer refused a message and nothing was committed since: the next connect keeps the
   * backoff growing, so a full buffer (refuse_new) means a reconnect (and a redelivery refused
   * again) every reconnect.max at most, not every reconnect.initial.
   */
  private refusedSinceCommit = false;

  constructor(private readonly cfg: MqttConnectionConfig, private readonly ctx: SourceContext) {
    this.name = cfg.name;
    this.clientId = cfg.client_id ?? defaultClientId(cfg.name);
    this.backoff = new Backoff({ initialMs: cfg.reconnect.initial, maxMs: Math.max(cfg.reconnect.initial, cfg.reconnect.max), factor: 2, jitterRatio: 0.2 });
    this.throttle = new LogThrottle(ctx.logger, 60_000, () => ctx.clock.monotonic());
    this.drops = new BrokerDropWatch(ctx.dataDir, ctx.logger, { source: cfg.name, url: cfg.url }, () => ctx.clock.monotonic());
    this.pipeline = new MessagePipeline({
      sourceName: cfg.name,
      subscriptions: cfg.subscriptions,
      maxPayloadBytes: cfg.max_payload_bytes,
      maxPending: cfg.max_pending_messages,
      ctx,
      publish: (topic, payload) => this.publish(topic, payload),
      // A refused QoS 1/2 message is not acknowledged and comes again after the reconnect only in a
      // persistent session; with clean: true the broker forgets it with the connection (MQTT §4.4).
      redelivers: (qos) => qos > 0 && !cfg.clean,
    });
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    this.ctx.stats.setState('connecting');
    this.connect();
  }

  private connect(): void {
    if (this.stopped) return;
    let options: IClientOptions;
    try {
      options = this.clientOptions();
    } catch (err) {
      // A certificate file that vanished or cannot be read after validation: retry, it may come back.
      this.ctx.stats.error(err, 'MQTT_TLS_FILES');
      this.throttle.error('tls-files', { source: this.name, err: describeError(err) }, 'MQTT TLS files cannot be read');
      this.scheduleReconnect();
      return;
    }
    // Sparkplug 3.0 Primary Host: a new timestamp for every CONNECT, in its Will and in its births
    // (tck-id-host-topic-phid-death-payload-timestamp-connect, -birth-payload-timestamp).
    const host = this.cfg.primary_host_id === undefined ? null : new PrimaryHostSession(this.cfg.primary_host_id, this.ctx.clock.now());
    if (host) options.will = host.will();
    // The store and the connection refer to each other; the store is needed to create the client.
    let conn!: Connection;
    const store = new Qos2IncomingStore((packet, proceed) => this.onPublishQos2(conn, packet, proceed));
    const client = mqtt.connect(this.cfg.url, { ...options, incomingStore: store });
    conn = {
      client,
      ackIds: [],
      ackDone: [],
      ackQos: [],
      heldPubrecs: new Set(),
      sendPubrec: () => undefined,
      base: 0,
      head: 0,
      flushScheduled: false,
      drained: [],
      broken: false,
      host,
      onCommitted: (err, token) => {
        if (err !== null) {
          this.onCommitFailed(conn, err);
          return;
        }
        conn.ackDone[token - conn.base] = 1;
        this.refusedSinceCommit = false;
        this.scheduleAckFlush(conn);
      },
    };
    conn.sendPubrec = holdPubrecs(client, (id) => conn.heldPubrecs.has(id));
    this.conn = conn;
    client.handleMessage = (packet, cb) => this.onPublish(conn, packet, cb);
    client.on('connect', (connack) => this.onConnect(conn, connack));
    client.on('error', (err) => this.onError(conn, err));
    client.on('close', () => this.onClose(conn));
  }

  private clientOptions(): IClientOptions {
    const c = this.cfg;
    const options: IClientOptions = {
      ...mqttClientOptions(c, this.clientId),
      clean: c.clean,
      protocolVersion: c.protocol_version,
      // Reconnection is ours (capped exponential backoff, DESIGN.md); one mqtt.js client per connection.
      reconnectPeriod: 0,
      resubscribe: false,
    };
    if (c.protocol_version === 5) {
      options.properties = {
        // MQTT 5 §3.1.2.11.3: the broker sends at most this many unacknowledged QoS 1/2 messages.
        receiveMaximum: c.max_pending_messages,
        // MQTT 5 §3.1.2.11.2: 0 would end the session at disconnect, defeating clean: false.
        ...(c.clean ? {} : { sessionExpiryInterval: Math.round(c.session_expiry / 1000) }),
      };
    }
    return options;
  }

  private onConnect(conn: Connection, connack: IConnackPacket): void {
    if (conn !== this.conn || this.stopped) return;
    if (!this.refusedSinceCommit) this.backoff.reset();
    this.connects += 1;
    this.connectedAt = this.ctx.clock.now();
    this.sessionPresent = connack.sessionPresent;
    // Subscribing again while the broker kept our session would make it resend retained messages
    // (MQTT 3.1.1 §3.8.4); subscribe on the first connect of this process (the configuration may
    // have changed) and whenever the session is gone.
    const mustSubscribe = !this.subscribedOnce || !connack.sessionPresent;
    this.ctx.logger.info({ source: this.name, url: this.cfg.url, client_id: this.clientId, session_present: connack.sessionPresent }, 'MQTT connected');
    this.drops.connected();
    // QoS 0, every connect (the broker sends its current, retained value); refused or unknown: nothing happens.
    conn.client.subscribe(DROPPED_TOPIC, { qos: 0 }, () => undefined);
    if (!mustSubscribe) {
      this.ctx.stats.setState(this.refusedSubscriptions.length > 0 ? 'degraded' : 'connected');
      // The session kept our subscriptions, the STATE one included; subscribing to it again costs
      // one retained message and keeps tck-id-host-topic-phid-birth-required's order (birth after SUBACK).
      const host = conn.host;
      if (host) conn.client.subscribe(host.topic, { qos: 1 }, () => this.publishBirth(conn));
      return;
    }
    const v5 = this.cfg.protocol_version === 5;
    const subs: Array<{ topic: string; options: { qos: 0 | 1 | 2; rh?: 0 | 1 } }> = this.cfg.subscriptions.map((s) => ({
      topic: s.topic,
      // MQTT 5 §3.8.3.1 Retain Handling 1: send retained messages only for a new subscription.
      options: { qos: s.qos as 0 | 1 | 2, ...(v5 ? { rh: 1 as const } : {}) },
    }));
    // tck-id-host-topic-phid-birth-sub-required: a Primary Host subscribes to its own STATE topic
    // and its spBv1.0 topics right after connecting (here in the same SUBSCRIBE); the retained
    // STATE it then receives is handled in onPublish, not by the subscriptions' decoders.
    if (conn.host) subs.push({ topic: conn.host.topic, options: { qos: 1 } });
    // Publishers' last wills (subscriptions[].last_will) on topics no filter above covers.
    for (const topic of lastWillTopics(this.cfg)) subs.push({ topic, options: { qos: 1 } });
    const map = Object.fromEntries(subs.map((s) => [s.topic, s.options]));
    conn.client.subscribe(map, (err, granted) => {
      if (conn !== this.conn || this.stopped) return;
      // tck-id-host-topic-phid-birth-required: the birth follows the SUBACK, whatever was granted.
      this.publishBirth(conn);
      if (err) {
        this.ctx.stats.error(err, 'MQTT_SUBSCRIBE_FAILED');
        this.throttle.error('subscribe', { source: this.name, err: describeError(err) }, 'MQTT subscribe failed');
        return;
      }
      this.subscribedOnce = true;
      this.refusedSubscriptions = (granted ?? []).filter((g: ISubscriptionGrant) => g.qos >= 128).map((g) => g.topic);
      if (this.refusedSubscriptions.length > 0) {
        const e = new Error(`broker refused the subscription to ${this.refusedSubscriptions.map((t) => JSON.stringify(t)).join(', ')} (not authorised for the topic?)`);
        this.ctx.stats.error(e, 'MQTT_SUBSCRIPTION_REFUSED');
        this.ctx.logger.error({ source: this.name, topics: this.refusedSubscriptions }, 'MQTT broker refused subscriptions; check the broker ACL for this user');
        this.ctx.stats.setState('degraded');
      } else {
        this.ctx.stats.setState('connected');
      }
    });
  }

  private onPublish(conn: Connection, packet: IPublishPacket, cb: (err?: Error) => void): void {
    // QoS 2: taken in the incoming store (onPublishQos2); this call is the PUBREL step.
    if (packet.qos === 2) {
      cb();
      return;
    }
    if (packet.topic === DROPPED_TOPIC) {
      this.drops.value(Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload));
      cb();
      return;
    }
    if (conn.host && packet.topic === conn.host.topic) {
      this.onOwnState(conn, conn.host, Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload));
      cb();
      return;
    }
    const msg = this.toInbound(packet);
    if (packet.qos === 1) this.pipeline.submit(msg, conn.onCommitted, this.track(conn, packet.messageId as number, 1));
    else this.pipeline.submit(msg, this.onQos0Committed, 0);
    // With an error argument mqtt.js reads on without sending its own PUBACK (ack-after-commit.ts).
    const ackArg = packet.qos === 1 ? DEFERRED_ACK : undefined;
    this.proceed(() => cb(ackArg));
  }

  /** A new QoS 2 message: its PUBREC is held until the commit (ack-after-commit.ts). */
  private onPublishQos2(conn: Connection, packet: IPublishPacket, proceed: () => void): void {
    const id = packet.messageId as number;
    conn.heldPubrecs.add(id);
    this.pipeline.submit(this.toInbound(packet), conn.onCommitted, this.track(conn, id, 2));
    this.proceed(proceed);
  }

  /** Numbers a QoS 1/2 message in arrival order; the number (token) comes back with its commit. */
  private track(conn: Connection, messageId: number, qos: 1 | 2): number {
    const token = conn.base + conn.ackIds.length;
    conn.ackIds.push(messageId);
    conn.ackDone.push(0);
    conn.ackQos.push(qos);
    return token;
  }

  /** Lets mqtt.js read the next packet: now, after a yield, or once there is room. */
  private proceed(next: () => void): void {
    // Back-pressure: at max_pending_messages mqtt.js stops reading the socket until commits catch up.
    if (!this.pipeline.hasRoom()) {
      void this.pipeline.waitForRoom().then(next);
      return;
    }
    // mqtt.js works through a received chunk with process.nextTick, which starves timers: the
    // buffer's group-commit timer (and so every acknowledgement) would wait until the whole
    // backlog is read. Yield to the event loop every few milliseconds of continuous work (the
    // clock is read every few messages only: at 100,000 messages/s reading it costs a few percent).
    if (++this.sinceClockRead < CLOCK_READ_EVERY) {
      next();
      return;
    }
    this.sinceClockRead = 0;
    const now = this.ctx.clock.monotonic();
    if (now - this.lastYield >= YIELD_EVERY_MS) {
      this.lastYield = now;
      setImmediate(next);
      return;
    }
    next();
  }

  /** QoS 0 has no acknowledgement and no redelivery: a refused append loses these samples. */
  private readonly onQos0Committed = (err: unknown): void => {
    if (err === null) return;
    this.ctx.stats.error(err, 'BUFFER_REFUSED');
    this.throttle.error('buffer-refused-qos0', { source: this.name, err: describeError(err) }, 'buffer refused QoS 0 MQTT samples; they are lost');
  };

  /** Sends the PUBACKs of committed messages, in one write per event-loop turn. */
  private scheduleAckFlush(conn: Connection): void {
    if (conn.flushScheduled) return;
    conn.flushScheduled = true;
    setImmediate(() => this.flushAcks(conn));
  }

  private flushAcks(conn: Connection): void {
    conn.flushScheduled = false;
    const stream = conn.client.stream;
    const canSend = !conn.broken && conn.client.connected && conn === this.conn && !!stream && !stream.destroyed && stream.writable;
    // The run of committed messages at the head of the arrival order is acknowledged now.
    let end = conn.head;
    while (end < conn.ackIds.length && conn.ackDone[end] === 1) end += 1;
    // PUBACKs are encoded into one buffer and written at once (encodePuback); a PUBREC (QoS 2)
    // goes through mqtt.js after the PUBACKs before it, so the arrival order holds.
    const pubacks = canSend && end > conn.head ? Buffer.allocUnsafe(PUBACK_BYTES * (end - conn.head)) : null;
    let written = 0;
    let filled = 0;
    const writePubacks = () => {
      if (pubacks && filled > written) stream.write(pubacks.subarray(written, filled));
      written = filled;
    };
    if (pubacks) stream.cork();
    try {
      for (; conn.head < end; conn.head += 1) {
        const id = conn.ackIds[conn.head];
        if (conn.ackQos[conn.head] === 2) {
          conn.heldPubrecs.delete(id);
          if (canSend) {
            writePubacks();
            conn.sendPubrec(id);
          }
        } else if (pubacks) {
          encodePuback(pubacks, filled, id);
          filled += PUBACK_BYTES;
        }
      }
      writePubacks();
    } finally {
      if (pubacks) stream.uncork();
    }
    if (conn.head > 4096 && conn.head * 2 > conn.ackIds.length) {
      conn.ackIds = conn.ackIds.slice(conn.head);
      conn.ackDone = conn.ackDone.slice(conn.head);
      conn.ackQos = conn.ackQos.slice(conn.head);
      conn.base += conn.head;
      conn.head = 0;
    }
    if (conn.head >= conn.ackIds.length) for (const r of conn.drained.splice(0)) r();
  }

  /** Resolves when every PUBACK queued so far has gone out (or cannot go out any more). */
  private ackDrained(conn: Connection): Promise<void> {
    if (conn.broken || conn.head >= conn.ackIds.length) return Promise.resolve();
    return new Promise((resolve) => conn.drained.push(resolve));
  }

  private onCommitFailed(conn: Connection, err: unknown): void {
    this.ctx.stats.error(err, 'BUFFER_REFUSED');
    this.refusedSinceCommit = true;
    if (conn.broken) return;
    conn.broken = true;
    for (const r of conn.drained.splice(0)) r();
    this.throttle.error('buffer-refused', { source: this.name, err: describeError(err) }, 'buffer refused MQTT samples; not acknowledging and reconnecting so the broker delivers them again');
    // Without a new connection the broker would not redeliver (MQTT 5 §4.4 forbids resending
    // within one connection).
    conn.client.end(true);
  }

  private onError(conn: Connection, err: Error): void {
    if (conn !== this.conn || this.stopped) return;
    const code = mqttErrorCode(err);
    this.ctx.stats.error(err, code);
    this.throttle.warn(`error|${code}`, { source: this.name, url: this.cfg.url, code, err: describeMqttError(err) }, 'MQTT connection problem');
  }

  private onClose(conn: Connection): void {
    if (conn !== this.conn) return;
    conn.broken = true;
    for (const r of conn.drained.splice(0)) r();
    // Drop mqtt.js timers and the socket; our own retry decides when to try again.
    conn.client.end(true);
    this.conn = null;
    this.connectedAt = null;
    if (this.stopped) return;
    this.ctx.stats.setState('disconnected');
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.retryTimer) return;
    const delay = this.backoff.next();
    this.ctx.stats.reconnecting();
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (this.stopped) return;
      this.ctx.stats.setState('connecting');
      this.connect();
    }, delay);
  }

  private toInbound(packet: IPublishPacket): InboundMessage {
    const p = packet.payload as Buffer | Uint8Array | string;
    const payload = Buffer.isBuffer(p) ? p : typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p.buffer, p.byteOffset, p.byteLength);
    return { topic: packet.topic, payload, qos: packet.qos, retain: packet.retain === true, receivedAt: this.ctx.clock.now() };
  }

  /**
   * The Primary Host birth STATE on this connection (QoS 1, retained, the Will's timestamp; see
   * primary-host.ts). The first message the host publishes (tck-id-host-topic-phid-birth-message):
   * until it is out, `publish` sends no command.
   */
  private publishBirth(conn: Connection, republished = false): void {
    const host = conn.host;
    if (!host || conn !== this.conn || this.stopped || !conn.client.connected) return;
    host.born = true;
    conn.client.publish(host.topic, host.birth(), { qos: 1, retain: true }, (err) => {
      if (err) this.throttle.warn(`state|birth`, { source: this.name, topic: host.topic, err: describeError(err) }, 'Sparkplug STATE birth could not be published; edge nodes waiting for this Primary Host stay quiet');
    });
    const event = republished ? 'state_republished' : 'state_birth';
    this.ctx.metrics.mqttSparkplugEvents.inc({ source: this.name, event });
    const fields = { source: this.name, event, topic: host.topic, timestamp: host.timestamp };
    if (republished) this.throttle.warn('state|republished', fields, 'Sparkplug STATE offline for this Primary Host while connected; birth published again');
    else this.ctx.logger.info(fields, 'Sparkplug Primary Host online (STATE birth published)');
  }

  /** A STATE message on our own host id: an offline one is answered with a new birth. */
  private onOwnState(conn: Connection, host: PrimaryHostSession, payload: Buffer): void {
    // Our own death before a clean stop comes back to us too: it must not be answered.
    if (conn !== this.conn || this.stopped) return;
    if (host.mustRepublish(payload)) this.publishBirth(conn, true);
  }

  /**
   * tck-id-host-topic-phid-death-payload-timestamp-disconnect-clean: before a clean DISCONNECT the
   * host publishes its death STATE itself, stamped with the time of the disconnect (the Will is
   * discarded on DISCONNECT, MQTT 3.1.1 §3.14.4). Waits for the PUBACK, 2 s at most.
   */
  private async publishDeath(conn: Connection): Promise<void> {
    const host = conn.host;
    if (!host || !host.born || !conn.client.connected) return;
    const timestamp = this.ctx.clock.now();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 2_000);
      conn.client.publish(host.topic, statePayload(false, timestamp), { qos: 1, retain: true }, (err) => {
        clearTimeout(timer);
        if (err) this.ctx.logger.warn({ source: this.name, topic: host.topic, err: describeError(err) }, 'Sparkplug STATE death could not be published before the disconnect');
        resolve();
      });
    });
    this.ctx.metrics.mqttSparkplugEvents.inc({ source: this.name, event: 'state_death' });
    this.ctx.logger.info({ source: this.name, event: 'state_death', topic: host.topic, timestamp }, 'Sparkplug Primary Host offline (STATE death published before disconnecting)');
  }

  /** Publishes a command (Sparkplug Rebirth request): QoS 0, not retained. */
  private publish(topic: string, payload: Buffer): boolean {
    const conn = this.conn;
    if (!conn || !conn.client.connected) return false;
    if (conn.host && !conn.host.born) return false;
    conn.client.publish(topic, payload, { qos: 0, retain: false }, (err) => {
      if (err) this.throttle.warn(`publish|${topic}`, { source: this.name, topic, err: describeError(err) }, 'MQTT publish failed');
    });
    return true;
  }

  async close(): Promise<void> {
    if (this.stopped && !this.conn) return;
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const conn = this.conn;
    if (conn) {
      // Let commits under way finish so their acknowledgements go out (else the broker redelivers
      // them next time: harmless, but avoidable), then disconnect cleanly; the session stays.
      await Promise.race([this.ackDrained(conn), new Promise((r) => setTimeout(r, 2_000).unref())]);
      await this.publishDeath(conn);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => conn.client.end(true, () => resolve()), 2_000);
        conn.client.end(false, () => {
          clearTimeout(timer);
          resolve();
        });
      });
      this.conn = null;
    }
    this.ctx.stats.setState('stopped');
  }

  status(): SourceStatus {
    return this.ctx.stats.snapshot({
      url: this.cfg.url,
      client_id: this.clientId,
      protocol_version: this.cfg.protocol_version,
      clean: this.cfg.clean,
      session_present: this.sessionPresent,
      broker_dropped_while_away: this.drops.droppedWhileAway,
      connected_since: this.connectedAt === null ? null : new Date(this.connectedAt).toISOString(),
      connects: this.connects,
      refused_subscriptions: this.refusedSubscriptions,
      ...(this.cfg.primary_host_id === undefined
        ? {}
        : { primary_host: { host_id: this.cfg.primary_host_id, online: !!this.conn?.host?.born && this.conn.client.connected, state_timestamp: this.conn?.host?.timestamp ?? null } }),
      ...this.pipeline.detail(),
    });
  }
}
