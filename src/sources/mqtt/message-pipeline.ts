import { describeError } from '../../core/errors.js';
import { LogThrottle } from '../../core/log-throttle.js';
import { Q_BAD, Q_GOOD, Q_UNCERTAIN, type QualityTable } from '../../core/quality.js';
import type { RefusalReason, Sample } from '../../core/sample.js';
import type { SourceContext } from '../context.js';
import { subscriptionVariables, type MqttSubscriptionConfig } from './config.js';
import type { Decoded, InboundMessage, PayloadDecoder, Refusal } from './decoding.js';
import { JsonDecoder } from './decoders/json.js';
import { MetricsDecoder } from './decoders/metrics.js';
import { NumberDecoder } from './decoders/number.js';
import { SparkplugDecoder, type SparkplugHost } from './decoders/sparkplug.js';
import { TopicFilter } from './topic-filter.js';
import { shorten } from './values.js';

interface CompiledSubscription {
  index: number;
  config: MqttSubscriptionConfig;
  filter: TopicFilter;
  decoder: PayloadDecoder;
  messages: number;
  samples: number;
  refused: Record<string, number>;
}

export interface PipelineOptions {
  sourceName: string;
  subscriptions: readonly MqttSubscriptionConfig[];
  maxPayloadBytes: number;
  maxPending: number;
  ctx: SourceContext;
  /** How Sparkplug Rebirth requests leave; returns false when not connected. */
  publish(topic: string, payload: Buffer): boolean;
  /**
   * True when a message of this QoS that is not acknowledged comes again (a persistent session at
   * the broker, a publisher that resends): its samples are then not lost when the buffer refuses
   * them (AppendOptions.keepsRefused). Default: QoS 1 and 2.
   */
  redelivers?(qos: 0 | 1 | 2): boolean;
}

interface PendingBatch {
  samples: Sample[];
  dones: Array<SubmitDone>;
  tokens: number[];
}

/** Called when a submitted message is committed (`err` null) or refused by the buffer. */
export type SubmitDone = (err: unknown, token: number) => void;

/** Per-topic refusal counts kept for status; bounded because wildcard topics are unbounded. */
const MAX_TOPICS_IN_STATUS = 100;
const OTHER_TOPICS = '(other topics)';

/**
 * Everything between "a message arrived" and "its samples are committed": pick the subscription,
 * guard size, decode, count and log refusals, stamp arrival times, and append to the buffer.
 * Transports (remote broker, embedded broker) call `accept()` and acknowledge the message when the
 * returned promise resolves (DESIGN.md: MQTT QoS >= 1 messages are acknowledged only after their
 * samples are committed). Refused messages resolve at once: they will never become valid, so they
 * are acknowledged and counted rather than redelivered forever.
 */
export class MessagePipeline {
  private readonly subs: CompiledSubscription[];
  private readonly throttle: LogThrottle;
  private readonly labels: { source: string };
  /** The last arrival stamp of each variable by its quality slot (see `stamp`). */
  private stamps = new Float64Array(64).fill(-Infinity);
  private readonly lastStamp = new Map<string, number>();
  private readonly topicRefusals = new Map<string, Record<string, number>>();
  private pendingCount = 0;
  private roomWaiters: Array<() => void> = [];
  private unmatched = 0;
  /**
   * Counter updates gathered during one event-loop turn and written to the shared metrics in one
   * go: at tens of thousands of messages per second, a labelled prom-client update per message
   * costs more than decoding the message.
   */
  private readonly outcomes = new Map<string, number>();
  private samplesCommitted = 0;
  private flushScheduled = false;
  /**
   * Messages of the current event-loop turn, by what a refusal means for them: [0] lost (QoS 0, or
   * a session the broker drops), [1] redelivered (see `redelivers`).
   */
  private readonly batches: [PendingBatch | null, PendingBatch | null] = [null, null];
  private readonly redelivers: (qos: 0 | 1 | 2) => boolean;
  /** The quality of every variable this connection delivers (core/quality.ts). */
  private readonly quality: QualityTable;
  /** Origins (QualityTable.setFrom): subscription i is i + 1, Sparkplug edge nodes and devices follow. */
  private nextOrigin: number;
  /** Last-will topics (config `last_will`) → the will's payload and the subscriptions whose variables it makes stale. */
  private readonly wills = new Map<string, { payload: string; origins: Set<number> }>();

  constructor(private readonly opts: PipelineOptions) {
    const ctx = opts.ctx;
    this.labels = { source: opts.sourceName };
    this.quality = ctx.stats.quality;
    this.nextOrigin = opts.subscriptions.length + 1;
    // Configured variables have a quality (no value yet) before their first message.
    for (const config of opts.subscriptions) for (const v of subscriptionVariables(config)) this.quality.slotFor(v);
    if (opts.subscriptions.some((c) => c.format === 'sparkplug')) this.staleAfterReconnect();
    opts.subscriptions.forEach((config, i) => {
      const will = config.format === 'sparkplug' ? undefined : config.last_will;
      if (!will) return;
      const w = this.wills.get(will.topic) ?? { payload: will.payload.trim(), origins: new Set<number>() };
      w.origins.add(i + 1);
      this.wills.set(will.topic, w);
    });
    this.throttle = new LogThrottle(ctx.logger, 60_000, () => ctx.clock.monotonic());
    const host: SparkplugHost = {
      publish: (topic, payload) => opts.publish(topic, payload),
      monotonic: () => ctx.clock.monotonic(),
      now: () => ctx.clock.now(),
      event: (event, fields) => {
        ctx.metrics.mqttSparkplugEvents.inc({ ...this.labels, event });
        const quiet = event === 'nbirth' || event === 'dbirth' || event === 'ddeath' || event === 'ndeath';
        if (quiet) ctx.logger.info({ source: opts.sourceName, event, ...fields }, `Sparkplug ${event.toUpperCase()}`);
        else this.throttle.warn(`sparkplug|${event}|${String(fields.group)}/${String(fields.edge_node)}`, { source: opts.sourceName, event, ...fields }, `Sparkplug ${event.replace(/_/g, ' ')}`);
      },
      newOrigin: () => this.nextOrigin++,
      stale: (origins, at) => void this.quality.staleFrom(origins, at),
    };
    this.subs = opts.subscriptions.map((config, index) => ({
      index,
      config,
      filter: new TopicFilter(config.topic),
      decoder: makeDecoder(config, host),
      messages: 0,
      samples: 0,
      refused: {},
    }));
    ctx.metrics.mqttPendingMessages.set(this.labels, 0);
    this.redelivers = opts.redelivers ?? ((qos) => qos > 0);
  }

  /** Decodes the message and appends its samples. Resolves once they are committed; rejects only when the buffer did not take them. */
  accept(msg: InboundMessage): Promise<void> {
    return new Promise((resolve, reject) => this.submit(msg, (err) => (err === null ? resolve() : reject(err)), 0));
  }

  /**
   * Same as `accept`, with a callback instead of a promise: `done(null, token)` once the samples
   * are committed, or at once when the message yields none; `done(err, token)` when the buffer
   * refused them. The remote transport passes one shared callback and a number per message, so a
   * message waiting for its commit (about 100 ms, tens of thousands at a time) costs no objects.
   */
  submit(msg: InboundMessage, done: SubmitDone, token: number): void {
    if (this.wills.size > 0 && this.lastWill(msg)) {
      done(null, token);
      return;
    }
    let sub: CompiledSubscription | undefined;
    for (const s of this.subs) {
      if (s.filter.matches(msg.topic)) {
        sub = s;
        break;
      }
    }
    if (!sub) {
      // A persistent session keeps subscriptions of an earlier configuration at the broker.
      this.unmatched += 1;
      this.count('unmatched');
      this.throttle.warn(`unmatched|${msg.topic}`, { source: this.opts.sourceName, topic: msg.topic }, 'MQTT message matches no configured subscription (a subscription left in the persistent session by an earlier configuration? connect once with clean: true to clear it); acknowledged and skipped');
      done(null, token);
      return;
    }
    sub.messages += 1;
    if (msg.retain && (sub.config.retained === 'ignore' || msg.payload.length === 0)) {
      // An empty retained message is how a retained value is deleted (MQTT §3.3.1.3), not data.
      this.count('ignored');
      done(null, token);
      return;
    }
    let decoded: Decoded;
    if (msg.payload.length > this.opts.maxPayloadBytes) {
      decoded = { samples: [], refusals: [{ reason: 'oversize', detail: `${msg.payload.length} bytes is more than max_payload_bytes ${this.opts.maxPayloadBytes}` }] };
    } else {
      try {
        decoded = sub.decoder.decode(msg);
      } catch (err) {
        // Decoders are written not to throw; a throw is a bug, still not allowed to stop the subscription.
        decoded = { samples: [], refusals: [{ reason: 'decode_error', detail: shorten(describeError(err), 120) }] };
      }
    }
    for (const r of decoded.refusals) this.refuse(sub, msg.topic, r);
    const origin = decoded.origin ?? sub.index + 1;
    if (decoded.refusals.length > 0) this.markRefused(decoded.refusals, origin, msg.receivedAt);

    const samples = decoded.samples;
    if (samples.length === 0) {
      this.count(decoded.ignored !== undefined ? 'ignored' : decoded.refusals.length > 0 ? 'refused' : 'ignored');
      done(null, token);
      return;
    }
    this.count(decoded.refusals.length > 0 ? 'partial' : 'ok');
    // Each value taken is a good reading of its variable (core/quality.ts). Its slot also keys the
    // arrival stamps: one lookup by name per sample. Decoders hand over fresh objects; stamping
    // them in place saves a copy per sample.
    const q = this.quality;
    for (const s of samples) {
      const slot = q.slotFor(s.variable);
      if (slot >= 0) q.setFrom(slot, Q_GOOD, msg.receivedAt, origin);
      if (s.ts === undefined) s.ts = this.stamp(s.variable, slot, msg.receivedAt);
    }
    sub.samples += samples.length;
    this.pendingCount += 1;
    this.scheduleFlush();
    // Messages handled in one event-loop turn go to the buffer in one append (two when QoS 0 and
    // QoS 1/2 mix, as a refusal loses the first and not the second): one promise and one pending
    // entry per batch instead of per message.
    const kind = this.redelivers(msg.qos) ? 1 : 0;
    let batch = this.batches[kind];
    if (!batch) {
      batch = this.batches[kind] = { samples: [], dones: [], tokens: [] };
      setImmediate(() => this.appendBatch(kind));
    }
    for (const s of samples) batch.samples.push(s as Sample);
    batch.dones.push(done);
    batch.tokens.push(token);
  }

  /**
   * A value refused with its variable known is a bad reading of it (a Quality property below 64,
   * null, not a number), or uncertain (Quality 64-191); a value missing from the payload is no
   * reading at all.
   */
  private markRefused(refusals: readonly Refusal[], origin: number, at: number): void {
    const q = this.quality;
    for (const r of refusals) {
      if (r.variable === undefined || r.reason === 'missing_value') continue;
      const slot = q.slotFor(r.variable);
      if (slot >= 0) q.setFrom(slot, r.reason === 'uncertain_status' ? Q_UNCERTAIN : Q_BAD, at, origin);
    }
  }

  /**
   * Sparkplug B 3.0 chapter 5: a host application that lost its connection to the broker marks
   * every metric stale, and they stay stale after it is back until the edge nodes send them again
   * (a BIRTH, DATA): the link overlay covers the time it is down; this keeps them stale after.
   */
  private staleAfterReconnect(): void {
    const up = (s: string) => s === 'connected' || s === 'degraded';
    let downAt: number | null = null;
    this.opts.ctx.stats.onStateChange((state, previous, at) => {
      if (up(previous) && !up(state)) downAt = at;
      else if (up(state) && downAt !== null) {
        const origins = new Set<number>();
        for (let o = this.opts.subscriptions.length + 1; o < this.nextOrigin; o++) origins.add(o);
        this.quality.staleFrom(origins, downAt);
        downAt = null;
      }
    });
  }

  /** A message on a last-will topic (config `last_will`): true when it was one, handled here. */
  private lastWill(msg: InboundMessage): boolean {
    const will = this.wills.get(msg.topic);
    if (!will) return false;
    this.count('ignored');
    if (msg.payload.toString().trim() === will.payload) {
      const n = this.quality.staleFrom(will.origins, msg.receivedAt);
      this.opts.ctx.logger.info({ source: this.opts.sourceName, topic: msg.topic, variables: n }, 'MQTT last will received: the publisher is gone, its variables are stale until they arrive again');
    }
    return true;
  }

  private appendBatch(kind: 0 | 1): void {
    const batch = this.batches[kind];
    this.batches[kind] = null;
    if (!batch) return;
    let committed: Promise<void>;
    try {
      // Not acknowledged when refused (the transports see the error): a redelivered message comes again.
      committed = this.opts.ctx.sink.append(batch.samples, { keepsRefused: kind === 1 });
    } catch (err) {
      committed = Promise.reject(err);
    }
    committed.then(
      () => {
        this.samplesCommitted += batch.samples.length;
        this.settle(batch.dones.length);
        for (let i = 0; i < batch.dones.length; i++) batch.dones[i](null, batch.tokens[i]);
      },
      (err: unknown) => {
        this.settle(batch.dones.length);
        const e = err ?? new Error('buffer refused the samples');
        for (let i = 0; i < batch.dones.length; i++) batch.dones[i](e, batch.tokens[i]);
      },
    );
  }

  /** True while fewer than max_pending_messages messages wait for their commit. */
  hasRoom(): boolean {
    return this.pendingCount < this.opts.maxPending;
  }

  /** Resolves when there is room for one more message (back-pressure for the transports). */
  waitForRoom(): Promise<void> {
    if (this.hasRoom()) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  get pending(): number {
    return this.pendingCount;
  }

  private settle(messages: number): void {
    this.pendingCount -= messages;
    this.scheduleFlush();
    while (this.roomWaiters.length > 0 && this.hasRoom()) this.roomWaiters.shift()?.();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flushCounters());
  }

  /** Writes the counts gathered since the last flush to SourceStats and the metrics. */
  flushCounters(): void {
    this.flushScheduled = false;
    const m = this.opts.ctx.metrics;
    for (const [outcome, n] of this.outcomes) m.mqttMessages.inc({ ...this.labels, outcome }, n);
    this.outcomes.clear();
    if (this.samplesCommitted > 0) {
      this.opts.ctx.stats.samplesRead(this.samplesCommitted);
      this.samplesCommitted = 0;
    }
    m.mqttPendingMessages.set(this.labels, this.pendingCount);
  }

  /**
   * Arrival time as timestamp, strictly increasing per variable: two messages for one variable in
   * the same millisecond must not share (variable, timestamp), which the service treats as the same
   * value (CONTRACT.md, replace on same pair). Kept by the variable's quality slot; by name only for
   * a variable beyond the table's capacity.
   */
  private stamp(variable: string, slot: number, receivedAt: number): number {
    let last: number | undefined;
    if (slot >= 0) {
      if (slot >= this.stamps.length) {
        const grown = new Float64Array(Math.max(slot + 1, this.stamps.length * 2)).fill(-Infinity);
        grown.set(this.stamps);
        this.stamps = grown;
      }
      last = this.stamps[slot];
    } else {
      last = this.lastStamp.get(variable);
    }
    const ts = last !== undefined && receivedAt <= last ? last + 1 : receivedAt;
    if (slot >= 0) this.stamps[slot] = ts;
    else this.lastStamp.set(variable, ts);
    return ts;
  }

  private count(outcome: 'ok' | 'partial' | 'refused' | 'ignored' | 'unmatched'): void {
    this.outcomes.set(outcome, (this.outcomes.get(outcome) ?? 0) + 1);
    this.scheduleFlush();
  }

  private refuse(sub: CompiledSubscription, topic: string, r: Refusal): void {
    const reason = r.reason as RefusalReason;
    this.opts.ctx.stats.refused(reason, 1, { detail: `${topic}: ${r.detail}`, ...(r.variable ? { variable: r.variable } : {}) });
    this.opts.ctx.metrics.mqttRefusals.inc({ ...this.labels, subscription: sub.config.topic, reason });
    sub.refused[reason] = (sub.refused[reason] ?? 0) + 1;
    let key = topic;
    if (!this.topicRefusals.has(key) && this.topicRefusals.size >= MAX_TOPICS_IN_STATUS) key = OTHER_TOPICS;
    const perTopic = this.topicRefusals.get(key) ?? {};
    perTopic[reason] = (perTopic[reason] ?? 0) + 1;
    this.topicRefusals.set(key, perTopic);
    this.throttle.warn(`${reason}|${topic}`, { source: this.opts.sourceName, topic, subscription: sub.config.topic, reason, detail: r.detail }, `MQTT value refused: ${reason.replace(/_/g, ' ')}`);
  }

  /** Status detail: per subscription counts, refusals per topic, Sparkplug edge nodes. */
  detail(): Record<string, unknown> {
    this.flushCounters();
    return {
      pending_messages: this.pendingCount,
      unmatched_messages: this.unmatched,
      subscriptions: this.subs.map((s) => ({
        topic: s.config.topic,
        format: s.config.format,
        qos: s.config.qos,
        messages: s.messages,
        samples: s.samples,
        refused: { ...s.refused },
        ...(s.decoder.detail ? s.decoder.detail() : {}),
      })),
      refused_by_topic: Object.fromEntries(this.topicRefusals),
    };
  }
}

function makeDecoder(config: MqttSubscriptionConfig, host: SparkplugHost): PayloadDecoder {
  switch (config.format) {
    case 'number':
      return new NumberDecoder(config);
    case 'json':
      return new JsonDecoder(config);
    case 'metrics':
      return new MetricsDecoder(config);
    case 'sparkplug':
      return new SparkplugDecoder(config, host);
  }
}
