import { describeError } from '../../core/errors.js';
import { LogThrottle } from '../../core/log-throttle.js';
import type { Source, SourceStatus } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import { lastWillTopics, type MqttConnectionConfig } from './config.js';
import type { InboundMessage } from './decoding.js';
import type { BrokerTap, EmbeddedBroker } from './embedded-broker.js';
import { MessagePipeline } from './message-pipeline.js';
import { TopicFilter } from './topic-filter.js';

/**
 * A connection with `url: embedded`: reads the embedded broker's messages inside the process.
 * The broker acknowledges a publisher's QoS 1/2 message only when `handle` resolved, i.e. after the
 * samples are committed (see embedded-broker.ts); QoS 0 messages only wait when too many are
 * pending (back-pressure on the publisher's connection).
 */
export class EmbeddedConnectionSource implements Source {
  readonly kind = 'mqtt' as const;
  readonly name: string;
  private readonly pipeline: MessagePipeline;
  private readonly filters: TopicFilter[];
  private readonly throttle: LogThrottle;
  private readonly tap: BrokerTap;
  private stopped = true;
  private unlisten: (() => void) | null = null;
  private readonly inflight = new Set<Promise<void>>();

  constructor(private readonly cfg: MqttConnectionConfig, private readonly broker: EmbeddedBroker, private readonly ctx: SourceContext) {
    this.name = cfg.name;
    this.filters = cfg.subscriptions.map((s) => new TopicFilter(s.topic));
    // Publishers' last wills (subscriptions[].last_will) go to the pipeline too.
    const wills = lastWillTopics(cfg).map((t) => new TopicFilter(t));
    this.throttle = new LogThrottle(ctx.logger, 60_000, () => ctx.clock.monotonic());
    this.pipeline = new MessagePipeline({
      sourceName: cfg.name,
      subscriptions: cfg.subscriptions,
      maxPayloadBytes: cfg.max_payload_bytes,
      maxPending: cfg.max_pending_messages,
      ctx,
      publish: (topic, payload) => broker.publish(topic, payload),
    });
    this.tap = {
      matches: (topic) => !this.stopped && (this.filters.some((f) => f.matches(topic)) || wills.some((f) => f.matches(topic))),
      handle: (msg) => this.handle(msg),
    };
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    this.broker.addTap(this.tap);
    this.unlisten = this.broker.onListeningChange((listening) => {
      if (!this.stopped) this.ctx.stats.setState(listening ? 'connected' : 'connecting');
    });
    this.ctx.stats.setState(this.broker.listening ? 'connected' : 'connecting');
  }

  private handle(msg: InboundMessage): Promise<void> {
    const subscription = this.cfg.subscriptions[this.filters.findIndex((f) => f.matches(msg.topic))];
    // The publisher's QoS counts up to the subscription's QoS, as a broker would deliver it (MQTT §3.8.4).
    const qos = Math.min(msg.qos, subscription?.qos ?? 0) as 0 | 1 | 2;
    const committed = this.pipeline.accept({ ...msg, qos });
    const settled = committed.then(
      () => undefined,
      (err: unknown) => {
        this.ctx.stats.error(err, 'BUFFER_REFUSED');
        this.throttle.error('buffer-refused', { source: this.name, err: describeError(err) }, qos > 0 ? 'buffer refused MQTT samples; the publisher is not acknowledged and will resend' : 'buffer refused QoS 0 MQTT samples; they are lost');
        if (qos > 0) throw err;
      },
    );
    this.inflight.add(settled);
    const forget = () => this.inflight.delete(settled);
    settled.then(forget, forget);
    if (qos > 0) return settled;
    return this.pipeline.hasRoom() ? Promise.resolve() : this.pipeline.waitForRoom();
  }

  async close(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.broker.removeTap(this.tap);
    this.unlisten?.();
    this.unlisten = null;
    // Let commits under way finish so publishers get their acknowledgements.
    await Promise.race([Promise.allSettled([...this.inflight]), new Promise((r) => setTimeout(r, 2_000).unref())]);
    this.ctx.stats.setState('stopped');
  }

  status(): SourceStatus {
    return this.ctx.stats.snapshot({ url: 'embedded', broker: this.broker.address, ...this.pipeline.detail() });
  }
}
