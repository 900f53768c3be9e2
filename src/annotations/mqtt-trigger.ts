import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import type { Logger } from 'pino';
import { mqttClientOptions } from '../config/mqtt-connection.js';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import type { TriggerConfig } from './config.js';
import { contentExternalId } from './external-id.js';
import { AnnotationError, type AnnotationService } from './service.js';
import { isObject, show } from './validate.js';

/**
 * The MQTT trigger: a PLC or an HMI publishes JSON to a configured topic.
 *
 *   {"action": "start",  "machine": "press1", "reason": "Tool change", "text": "...", "at": "..."}
 *   {"action": "stop",   "machine": "press1", "reason": "...", "text": "...", "at": "..."}
 *   {"action": "cancel", "machine": "press1"}
 *   {"type": "instant" | "range", ...}   a full annotation, as for POST /api/annotations
 *
 * Nothing a publisher sends can crash the gateway: every message is handled inside a try, bad ones
 * are counted (gateway_annotation_trigger_messages_total{outcome}) and logged at most once a minute
 * per kind of problem.
 *
 * Delivery: a QoS 1 message is acknowledged only after the annotation (or the downtime change) is
 * committed to the outbox: mqtt.js sends PUBACK when `handleMessage` calls back, and the outbox
 * write is synchronous inside it (MQTT §4.3.2). When the outbox cannot be written, no PUBACK goes
 * out and the connection is renewed, so the broker sends the message again (§4.4). When the outbox
 * is at its bound (store.annotations_max_bytes) the message is refused for good: acknowledged,
 * counted (outcome store_full) and logged at most once a minute. A message
 * redelivered after a lost PUBACK is harmless: a full annotation without external_id gets an id
 * derived from the payload (the same message maps to the same annotation), and a repeated
 * start/stop finds the downtime already open/closed and is counted as `duplicate`. QoS 2 is not
 * offered: mqtt.js sends PUBREC before handleMessage runs, so it would acknowledge earlier, not later.
 * Topic filters follow MQTT §4.7; the broker's own limits apply.
 */

export interface TriggerOptions {
  config: TriggerConfig;
  service: AnnotationService;
  gatewayName: string;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
}

type Outcome = 'ok' | 'duplicate' | 'invalid' | 'malformed' | 'oversize' | 'not_stored' | 'store_full';

export class MqttTrigger {
  private client: MqttClient | null = null;
  private readonly throttle: LogThrottle;
  private readonly counts: Record<Outcome, number> = { ok: 0, duplicate: 0, invalid: 0, malformed: 0, oversize: 0, not_stored: 0, store_full: 0 };
  private connected = false;
  private lastError: string | null = null;
  private lastProblem: { outcome: Outcome; message: string; at: number } | null = null;
  private subscribed = false;

  constructor(private readonly o: TriggerOptions) {
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
  }

  start(): void {
    if (this.client) return;
    const c = this.o.config;
    let shared: IClientOptions;
    try {
      shared = mqttClientOptions(c, c.client_id ?? `${this.o.gatewayName}-annotations`);
    } catch (err) {
      // A TLS file that vanished after validation: nothing to connect with until the next start.
      this.lastError = `cannot read the TLS files: ${describeError(err)}`;
      this.o.logger.error({ url: c.url, err: describeError(err) }, 'cannot read the TLS files of annotations.mqtt; the trigger stays off');
      return;
    }
    const options: IClientOptions = {
      ...shared,
      clean: c.clean,
      reconnectPeriod: c.reconnect,
      resubscribe: true,
      manualConnect: true,
    };
    const client = mqtt.connect(c.url, options);
    this.client = client;
    // Acknowledge QoS 1/2 only after the outbox write (see the class comment).
    client.handleMessage = (packet: IPublishPacket, callback: (error?: Error) => void) => {
      let outcome: Outcome = 'invalid';
      try {
        outcome = this.handle(packet.topic, packet.payload as Buffer);
      } catch (err) {
        // handle() catches everything it expects; this is a last line of defence.
        this.throttle.error('unexpected', { err: describeError(err) }, 'annotation trigger failed on a message');
      }
      if (outcome === 'not_stored' && packet.qos > 0) {
        // The outbox could not be written: no PUBACK, and a new connection, so that the broker
        // sends the message again (persistent session, MQTT §4.4) instead of it being lost.
        callback(new Error('annotation not stored; not acknowledged'));
        setTimeout(() => client.stream?.destroy(), 1_000).unref();
        return;
      }
      callback();
    };
    client.on('connect', (connack) => {
      this.connected = true;
      this.lastError = null;
      this.o.logger.info({ url: c.url, topic: c.topic, session_present: connack.sessionPresent }, 'annotation MQTT trigger connected');
      // Subscribe on every connect without a session (MQTT §3.2.2.1.1); mqtt.js resubscribes otherwise.
      if (!connack.sessionPresent || !this.subscribed) {
        client.subscribe(c.topic, { qos: c.qos as 0 | 1 }, (err, granted) => {
          if (err) {
            this.lastError = describeError(err);
            this.throttle.error('subscribe', { topic: c.topic, err: this.lastError }, 'annotation MQTT trigger could not subscribe');
            return;
          }
          const g = granted?.[0];
          if (g && g.qos === 128) {
            this.lastError = `the broker refused the subscription to ${c.topic}`;
            this.throttle.error('subscribe', { topic: c.topic }, 'the broker refused the annotation trigger subscription (check its ACL)');
            return;
          }
          this.subscribed = true;
        });
      }
    });
    client.on('close', () => {
      if (this.connected) this.o.logger.warn({ url: c.url }, 'annotation MQTT trigger disconnected; reconnecting');
      this.connected = false;
    });
    client.on('error', (err) => {
      this.lastError = describeError(err);
      this.throttle.warn(`error:${(err as { code?: unknown }).code ?? 'x'}`, { url: c.url, err: this.lastError }, 'annotation MQTT trigger connection problem');
    });
    client.connect();
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = null;
    if (!client) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        client.end(true, {}, () => resolve());
      }, 2_000);
      client.end(false, {}, () => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  /** Handles one message. Public for the tests of the parsing rules; never throws. */
  handle(topic: string, payload: Buffer): Outcome {
    const outcome = this.dispatch(topic, payload);
    this.counts[outcome] += 1;
    this.o.metrics.annotationTriggerMessages.inc({ outcome });
    return outcome;
  }

  private dispatch(topic: string, payload: Buffer): Outcome {
    if (payload.length > this.o.config.max_payload_bytes) {
      return this.problem('oversize', `message of ${payload.length} bytes on ${topic} is over max_payload_bytes (${this.o.config.max_payload_bytes})`);
    }
    let body: unknown;
    try {
      body = JSON.parse(payload.toString('utf8'));
    } catch (err) {
      return this.problem('malformed', `message on ${topic} is not JSON (${describeError(err)}): ${show(payload.toString('utf8', 0, 80))}`);
    }
    if (!isObject(body)) return this.problem('malformed', `message on ${topic} is ${show(body)}, not a JSON object`);
    try {
      if (body.action !== undefined) {
        const { action, machine, ...rest } = body;
        switch (action) {
          case 'start':
            this.o.service.startDowntime(machine, rest, 'mqtt');
            return 'ok';
          case 'stop':
            this.o.service.stopDowntime(machine, rest, 'mqtt');
            return 'ok';
          case 'cancel':
            this.o.service.cancelDowntime(machine, 'mqtt');
            return 'ok';
          default:
            return this.problem('malformed', `message on ${topic}: action ${show(action)} is not one of start, stop, cancel`);
        }
      }
      if (body.type === undefined) {
        return this.problem('malformed', `message on ${topic} has neither "action" (start, stop, cancel) nor "type" (instant, range)`);
      }
      // A redelivered message (QoS 1 is at-least-once) must not become a second annotation.
      const r = this.o.service.create(body, 'mqtt', { externalId: contentExternalId(this.o.gatewayName, payload) });
      return r.created ? 'ok' : 'duplicate';
    } catch (err) {
      if (err instanceof AnnotationError) {
        if (err.status === 503) return this.problem('not_stored', `message on ${topic} could not be stored: ${err.message}`, err.code);
        // The outbox at its bound (store.annotations_max_bytes): refused for good, so acknowledged
        // (a redelivery would only be refused again), counted and logged.
        if (err.status === 507) return this.problem('store_full', `message on ${topic} refused: ${err.message}`, err.code);
        if (err.code === 'downtime_open' || err.code === 'no_open_downtime') {
          this.o.logger.info({ topic, code: err.code, message: err.message }, 'annotation trigger message ignored');
          return 'duplicate';
        }
        return this.problem('invalid', `message on ${topic} refused: ${err.message}`, err.code);
      }
      return this.problem('invalid', `message on ${topic} failed: ${describeError(err)}`);
    }
  }

  private problem(outcome: Outcome, message: string, code: string = outcome): Outcome {
    this.lastProblem = { outcome, message, at: this.o.clock.now() };
    this.throttle.warn(`problem:${code}`, { outcome }, message);
    return outcome;
  }

  status(): Record<string, unknown> {
    return {
      url: this.o.config.url,
      topic: this.o.config.topic,
      connected: this.connected,
      last_error: this.lastError,
      messages: { ...this.counts },
      last_problem: this.lastProblem && { ...this.lastProblem, at: new Date(this.lastProblem.at).toISOString() },
    };
  }
}
