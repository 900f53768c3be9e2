import { Backoff, DEFAULT_RECONNECT } from '../../core/backoff.js';
import { describeError } from '../../core/errors.js';
import type { Source, SourceStatus } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import type { MqttBrokerConfig } from './config.js';
import type { EmbeddedBroker } from './embedded-broker.js';

/**
 * The embedded broker as a source in the runtime's life cycle: `start()` begins listening in the
 * background (a port in use is retried with backoff and shown in status, it does not stop the
 * gateway), `close()` disconnects every client and closes the ports. It produces no samples itself;
 * the `url: embedded` connections read its messages.
 */
export class EmbeddedBrokerSource implements Source {
  readonly kind = 'mqtt' as const;
  readonly name: string;
  private stopped = true;
  private timer: NodeJS.Timeout | null = null;
  private starting: Promise<void> | null = null;
  private readonly backoff = new Backoff(DEFAULT_RECONNECT);

  constructor(private readonly cfg: MqttBrokerConfig, readonly broker: EmbeddedBroker, private readonly ctx: SourceContext) {
    this.name = cfg.name;
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    this.ctx.stats.setState('starting');
    this.attempt();
  }

  private attempt(): void {
    if (this.stopped) return;
    this.starting = this.broker
      .start()
      .then(() => {
        this.backoff.reset();
        if (this.stopped) return;
        this.ctx.stats.setState('connected');
      })
      .catch((err: unknown) => {
        if (this.stopped) return;
        this.ctx.stats.error(err, 'BROKER_LISTEN_FAILED');
        this.ctx.stats.setState('disconnected');
        const delay = this.backoff.next();
        this.ctx.logger.error({ source: this.name, err: describeError(err), retry_in_ms: delay }, 'embedded MQTT broker cannot listen; retrying');
        this.ctx.stats.reconnecting();
        this.timer = setTimeout(() => {
          this.timer = null;
          this.attempt();
        }, delay);
      })
      .finally(() => {
        this.starting = null;
      });
  }

  async close(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.starting?.catch(() => undefined);
    await this.broker.close();
    this.ctx.stats.setState('stopped');
  }

  status(): SourceStatus {
    return this.ctx.stats.snapshot(this.broker.detail());
  }
}
